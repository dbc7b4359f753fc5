"""A lock the restart took counts as an expired lock: delivery count + 1, dead-lettered with
MaxDeliveryCountExceeded at the limit; what was not locked at the restart keeps its count, and
what was completed or received-and-deleted stays gone."""

from __future__ import annotations

from qmgr.core.clock import ManualClock
from qmgr.servicebus.entities import QueueProperties
from qmgr.servicebus.message import MessageState, SbMessage
from qmgr.servicebus.namespace import Namespace, ReceiveMode
from tests.unit.servicebus.conftest import RecordingJournal, one_locked, restarted, token

PL = ReceiveMode.PEEK_LOCK
RD = ReceiveMode.RECEIVE_AND_DELETE
DLQ = "q/$DeadLetterQueue"


def test_a_lock_lost_to_a_restart_counts_once(
    ns: Namespace, journal: RecordingJournal, clock: ManualClock
) -> None:
    ns.create_queue("q")
    ns.send("q", [SbMessage(b"locked"), SbMessage(b"waiting")])
    [m] = ns.receive("q", 1, PL)
    assert journal.locked == {("q", m.sequence_number)}
    again, j2 = restarted(journal, clock)
    # the recount is journaled: the mark is gone and the saved count is the new one
    assert j2.locked == set()
    assert j2.messages["q"][m.sequence_number].delivery_count == 1
    got = again.receive("q", 10, PL)
    assert [(g.message.body, g.delivery_count) for g in got] == [(b"locked", 1), (b"waiting", 0)]


def test_the_count_reaches_max_delivery_count_over_restarts(
    ns: Namespace, journal: RecordingJournal, clock: ManualClock
) -> None:
    ns.create_queue("q", QueueProperties(max_delivery_count=2))
    ns.send("q", [SbMessage(b"poison")])
    ns.receive("q", 1, PL)
    again, j2 = restarted(journal, clock)
    [m] = again.receive("q", 1, PL)
    assert m.delivery_count == 1
    third, _ = restarted(j2, clock)
    assert third.get_queue("q").active == 0
    [dead] = third.receive(DLQ, 1, RD)
    assert dead.message.body == b"poison"
    assert dead.delivery_count == 2
    assert dead.message.properties["DeadLetterReason"] == "MaxDeliveryCountExceeded"
    assert "2 delivery attempts" in dead.message.properties["DeadLetterErrorDescription"]


def test_released_completed_and_received_and_deleted_are_not_counted_or_resurrected(
    ns: Namespace, journal: RecordingJournal, clock: ManualClock
) -> None:
    ns.create_queue("q")
    ns.send("q", [SbMessage(b"done"), SbMessage(b"taken"), SbMessage(b"released")])
    done, taken, released = ns.receive("q", 3, PL)
    ns.complete("q", token(done))
    ns.release("q", token(released))
    ns.release("q", token(taken))
    assert ns.receive("q", 1, RD)[0].message.body == b"taken"
    assert journal.locked == set()
    again, _ = restarted(journal, clock)
    got = again.receive("q", 10, PL)
    assert [(g.message.body, g.delivery_count) for g in got] == [(b"released", 0)]


def test_a_deferred_message_received_again_stays_deferred_and_counts(
    ns: Namespace, journal: RecordingJournal, clock: ManualClock
) -> None:
    m = one_locked(ns, SbMessage(b"d"))
    ns.defer("q", token(m))
    ns.receive_deferred("q", [m.sequence_number], PL)
    again, _ = restarted(journal, clock)
    [d] = again.peek("q", 0, 10)
    assert (d.state, d.delivery_count) == (MessageState.DEFERRED, 1)
    assert again.receive("q", 1, PL) == []


def test_a_dead_lettered_message_locked_at_the_restart_stays_in_the_dead_letter_queue(
    ns: Namespace, journal: RecordingJournal, clock: ManualClock
) -> None:
    m = one_locked(ns, SbMessage(b"x"), QueueProperties(max_delivery_count=1))
    ns.dead_letter("q", token(m), reason="bad")
    ns.receive(DLQ, 1, PL)
    again, _ = restarted(journal, clock)
    [d] = again.receive(DLQ, 1, PL)
    assert d.delivery_count == 1
    assert d.message.properties["DeadLetterReason"] == "bad"


def test_a_message_that_expired_while_locked_expires_at_the_restart(
    ns: Namespace, journal: RecordingJournal, clock: ManualClock
) -> None:
    ns.create_queue("q", QueueProperties(dead_lettering_on_expiration=True))
    ns.send("q", [SbMessage(b"x", time_to_live=10)])
    ns.receive("q", 1, PL)
    clock.advance(20)
    again, _ = restarted(journal, clock)
    assert again.receive("q", 1, PL) == []
    [d] = again.receive(DLQ, 1, RD)
    assert d.message.properties["DeadLetterReason"] == "TTLExpiredException"


def test_a_released_session_does_not_count(
    ns: Namespace, journal: RecordingJournal, clock: ManualClock
) -> None:
    ns.create_queue("s", QueueProperties(requires_session=True))
    ns.send("s", [SbMessage(b"1", session_id="a"), SbMessage(b"2", session_id="a")])
    ns.accept_session("s", "a")
    ns.receive("s", 2, PL, session="a")
    ns.release_session("s", "a")
    assert journal.locked == set()
    ns.accept_session("s", "a")
    ns.receive("s", 1, PL, session="a")
    again, _ = restarted(journal, clock)
    again.accept_session("s", "a")
    got = again.receive("s", 5, PL, session="a")
    assert [(g.message.body, g.delivery_count) for g in got] == [(b"1", 1), (b"2", 0)]
