"""Receiving everything an entity holds without waiting out a quiet period when the test knows
how much is to come.

A drain that waits until a receive brings nothing spends its whole wait after the last message,
every time. One that knows how many messages were sent stops receiving once that many came,
then receives once more for :data:`LATE` seconds: a duplicate, or a message that should not
have come, arrives within it and the test's count or list shows it."""

from __future__ import annotations

from typing import Any

# the extra receive after the count was reached: long enough for anything the node already had
LATE = 1.0


def receive_all(
    receiver: Any,
    expect: int | None = None,
    *,
    wait: float = 3.0,
    batch: int = 100,
    late: float = LATE,
) -> list[Any]:
    """What ``receiver`` (an azure-servicebus receiver, in either receive mode; peek-lock ones
    are left unsettled) gets: with ``expect``, until that many came (or a receive of ``wait``
    seconds brought nothing) and then what one receive of ``late`` seconds brings; without it,
    until a receive of ``wait`` seconds brings nothing."""
    if expect is not None and expect < 0:
        raise ValueError(f"expect is a number of messages, not {expect}")
    got: list[Any] = []
    while expect is None or len(got) < expect:
        more = receiver.receive_messages(max_message_count=batch, max_wait_time=wait)
        if not more:
            return got
        got += more
    got += receiver.receive_messages(max_message_count=batch, max_wait_time=late)
    return got
