"""Review findings: settlement by sequence number (deferred, scheduled) with repeated or
malformed arguments."""

from __future__ import annotations

from typing import Any

import pytest

from qmgr.core.clock import ManualClock
from qmgr.servicebus.entities import QueueProperties
from qmgr.servicebus.errors import Code
from qmgr.servicebus.message import SbMessage
from qmgr.servicebus.namespace import Namespace, ReceiveMode
from tests.unit.servicebus.conftest import RecordingJournal, fails, one_locked, token

PL = ReceiveMode.PEEK_LOCK
RD = ReceiveMode.RECEIVE_AND_DELETE


def deferred(ns: Namespace) -> int:
    ns.create_queue("q")
    [seq] = ns.send("q", [SbMessage(b"a")])
    [m] = ns.receive("q", 1, PL)
    ns.defer("q", token(m))
    return seq


def test_receive_deferred_twice_the_same_number_delivers_it_once(ns: Namespace) -> None:
    seq = deferred(ns)
    got = ns.receive_deferred("q", [seq, seq], RD)
    assert [m.message.body for m in got] == [b"a"]
    info = ns.get_queue("q")
    assert (info.deferred, info.size_bytes) == (0, 0)


def test_receive_deferred_twice_the_same_number_locks_it_once(ns: Namespace) -> None:
    seq = deferred(ns)
    [m] = ns.receive_deferred("q", [seq, seq], PL)
    ns.complete("q", token(m))
    assert ns.get_queue("q").deferred == 0


def test_receive_deferred_with_a_bad_mode_changes_nothing(
    ns: Namespace, journal: RecordingJournal
) -> None:
    seq = deferred(ns)
    calls = len(journal.calls)
    fails(Code.BAD_ARGUMENT, ns.receive_deferred, "q", [seq], "PeekLock")
    assert ns.get_queue("q").deferred == 1
    assert len(journal.calls) == calls


def test_cancel_scheduled_twice_the_same_number(
    ns: Namespace, clock: ManualClock, journal: RecordingJournal
) -> None:
    ns.create_queue("q")
    [seq] = ns.schedule("q", [SbMessage(b"a")], clock.now() + 100)
    ns.cancel_scheduled("q", [seq, seq])
    info = ns.get_queue("q")
    assert (info.scheduled, info.size_bytes) == (0, 0)
    assert journal.calls.count(("message_removed", "q", seq)) == 1


@pytest.mark.parametrize(
    ("op", "kw"),
    [
        ("abandon", {"properties": [1]}),
        ("defer", {"properties": "x"}),
        ("dead_letter", {"properties": 5}),  # was removed, then the error: lost
        ("dead_letter", {"properties": [("a", 1)]}),
        ("dead_letter", {"properties": {1: "a"}}),
        ("dead_letter", {"reason": 5}),
        ("dead_letter", {"description": b"why"}),
    ],
)
def test_a_refused_settlement_leaves_the_message_locked(
    ns: Namespace, journal: RecordingJournal, op: str, kw: dict[str, Any]
) -> None:
    m = one_locked(ns, SbMessage(b"a"))
    calls = len(journal.calls)
    fails(Code.BAD_ARGUMENT, getattr(ns, op), "q", token(m), **kw)
    assert len(journal.calls) == calls
    ns.complete("q", token(m))  # still locked by the receiver, and settles normally
    info = ns.get_queue("q")
    assert (info.active, info.deferred, info.dead_lettered) == (0, 0, 0)


def test_the_senders_message_is_not_changed(ns: Namespace, clock: ManualClock) -> None:
    ns.create_queue("q", QueueProperties(requires_duplicate_detection=True))
    m = SbMessage(b"x")
    ns.send("q", [m])
    ns.send("q", [m])  # the same object sent again: a new message, not a duplicate
    ns.send("q", [m, m])  # twice in one batch: two messages
    assert m.message_id is None
    got = ns.receive("q", 10, RD)
    assert len({r.message.message_id for r in got}) == 4


def test_scheduling_a_message_again_does_not_move_the_first(
    ns: Namespace, clock: ManualClock
) -> None:
    ns.create_queue("q")
    m = SbMessage(b"x", message_id="m")
    ns.schedule("q", [m], clock.now() + 10)
    ns.schedule("q", [m], clock.now() + 20)
    assert m.scheduled_enqueue_time is None
    peeked = ns.peek("q", 0, 10)
    assert [p.message.scheduled_enqueue_time for p in peeked] == [
        clock.now() + 10,
        clock.now() + 20,
    ]
