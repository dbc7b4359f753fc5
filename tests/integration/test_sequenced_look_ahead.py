"""The sequenced-delivery helper's look-ahead (``look_ahead``: on by default in
``drain_sessions``, asked for in ``take_sessions``) with the real azure-servicebus SDK against a real node: while a session is worked, the next
session's receiver is opened, its lock renewed while it waits, used by the next take, and
released when the drain stops before taking it."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

pytest.importorskip("azure.servicebus")

from azure.servicebus import ServiceBusClient  # noqa: E402

from qmgr.client.sequenced import SessionStats, take_sessions  # noqa: E402
from tests.integration import sb_nodes  # noqa: E402
from tests.integration import test_sb_admin_http as admin_http  # noqa: E402
from tests.integration.conftest import NodeProcess  # noqa: E402
from tests.integration.test_sb_admin_http import _conn  # noqa: E402
from tests.integration.test_sb_sequenced import (  # noqa: E402
    Topology,
    _drain,
    _left,
    _number,
    _send_shuffled,
    _session_receivers,
    _topology,
)

# each test makes topics of its own; nothing here moves the node's clock, which the SDK's lock
# renewal needs (it compares the lock's end with the client's clock)
shared_sb_node = sb_nodes.shared_sb_node
_quiet_insecure_warning = admin_http._quiet_insecure_warning


def _take(top: Topology, work: Any, **options: Any) -> list[SessionStats]:
    """``take_sessions`` on next-available receivers of the session-enabled subscription."""
    with ServiceBusClient.from_connection_string(_conn(top.node)) as client:
        return take_sessions(
            _session_receivers(client, top), work, max_lock_renewal=60, look_ahead=True, **options
        )


def test_each_session_after_the_first_is_taken_from_a_receiver_opened_ahead(
    shared_sb_node: NodeProcess,
) -> None:
    top = _topology(shared_sb_node)
    _send_shuffled(top, {"A": 30, "B": 30, "C": 30, "D": 30}, seed=5)
    seen: dict[str, list[int]] = {}

    def handle(message: Any) -> None:
        seen.setdefault(str(message.session_id), []).append(_number(message))

    stats = _drain(top, handle)
    assert seen == {f"{s}_T1": list(range(1, 31)) for s in "ABCD"}  # in order, once
    assert [t.opened_ahead for t in stats.sessions] == [False, True, True, True]
    assert _left(top) == 0

    _send_shuffled(top, {"E": 10, "F": 10}, seed=6)
    seen.clear()
    stats = _drain(top, handle, look_ahead=False)  # each opened when its turn comes
    assert seen == {f"{s}_T1": list(range(1, 11)) for s in "EF"}
    assert not any(t.opened_ahead for t in stats.sessions)


def test_a_session_opened_ahead_keeps_its_lock_while_another_is_worked(
    shared_sb_node: NodeProcess,
) -> None:
    """The session granted ahead waits for longer than its 5-second LockDuration while the
    first is worked; its lock is renewed meanwhile, so it is then read and settled whole."""
    top = _topology(shared_sb_node)
    _send_shuffled(top, {"A": 10, "B": 10}, seed=7)
    seen: dict[str, list[int]] = {}

    def work(receiver: Any, again: bool) -> SessionStats:
        stats = SessionStats(session_id=str(receiver.session.session_id))
        first = not seen
        while batch := receiver.receive_messages(max_message_count=10, max_wait_time=1):
            for msg in batch:
                receiver.complete_message(msg)
                seen.setdefault(stats.session_id, []).append(_number(msg))
            stats.processed += len(batch)
        if first:
            time.sleep(7)  # the other session waits, granted ahead, beyond its lock duration
        return stats

    results = _take(top, work)
    assert [r.opened_ahead for r in results] == [False, True]
    assert not any(r.lock_lost for r in results)
    assert {s: sorted(n) for s, n in seen.items()} == {
        "A_T1": list(range(1, 11)),
        "B_T1": list(range(1, 11)),
    }
    assert _left(top) == 0


def test_a_session_opened_ahead_and_never_taken_is_released(shared_sb_node: NodeProcess) -> None:
    """A drain stopped after one session releases the one it opened ahead: another consumer
    takes it by id at once instead of finding it locked (SessionCannotBeLockedError)."""
    top = _topology(shared_sb_node)
    _send_shuffled(top, {"A": 5, "B": 5}, seed=8)
    stop = threading.Event()
    worked: list[str] = []

    def work(receiver: Any, again: bool) -> SessionStats:
        stats = SessionStats(session_id=str(receiver.session.session_id))
        worked.append(stats.session_id)
        time.sleep(1.5)  # the receiver opened ahead is granted the other session meanwhile
        stop.set()
        return stats

    results = _take(top, work, stop=stop)
    assert len(results) == 1
    other = ({"A_T1", "B_T1"} - set(worked)).pop()
    with (
        ServiceBusClient.from_connection_string(_conn(top.node)) as client,
        client.get_subscription_receiver(
            top.topic, top.subscription, session_id=other, max_wait_time=2
        ) as receiver,
    ):
        assert len(receiver.receive_messages(max_message_count=10, max_wait_time=2)) == 5
