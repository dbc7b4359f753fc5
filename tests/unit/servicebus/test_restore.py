"""Restart: what the journal kept comes back; locks are released (a lock the restart took
counts a delivery, as an expired lock does; every other delivery count is kept), sequence
numbers continue, duplicate history, scheduled messages and session state survive."""

from __future__ import annotations

from qmgr.core.clock import ManualClock
from qmgr.servicebus.entities import QueueProperties, SubscriptionProperties, TopicProperties
from qmgr.servicebus.message import MessageState, SbMessage
from qmgr.servicebus.namespace import Namespace, ReceiveMode
from tests.unit.servicebus.conftest import RecordingJournal, restarted, token

PL = ReceiveMode.PEEK_LOCK
RD = ReceiveMode.RECEIVE_AND_DELETE


def test_messages_survive_with_locks_released_and_lost_locks_counted(
    ns: Namespace, journal: RecordingJournal, clock: ManualClock
) -> None:
    ns.create_queue("q", QueueProperties(dead_lettering_on_expiration=True))
    ns.send("q", [SbMessage(b"a"), SbMessage(b"b"), SbMessage(b"c"), SbMessage(b"d")])
    a, b, c, d = ns.receive("q", 4, PL)
    ns.abandon("q", token(a))
    ns.defer("q", token(c))
    ns.dead_letter("q", token(d), reason="why")
    [a] = ns.receive("q", 1, PL)  # a and b are locked at the "crash"
    ns.schedule("q", [SbMessage(b"later")], clock.now() + 100)
    before = ns.get_queue("q")

    again, _ = restarted(journal, clock)
    info = again.get_queue("q")
    assert (info.active, info.deferred, info.dead_lettered, info.scheduled) == (
        before.active,
        before.deferred,
        before.dead_lettered,
        before.scheduled,
    )
    assert info.size_bytes == before.size_bytes
    got = again.receive("q", 10, PL)
    # a (abandoned once) and b were locked at the restart: each lost lock counts
    assert [(m.message.body, m.delivery_count) for m in got] == [(b"a", 2), (b"b", 1)]
    for m in got:
        again.complete("q", token(m))
    [deferred] = again.receive_deferred("q", [c.sequence_number], RD)
    assert deferred.message.body == b"c"
    [dead] = again.receive("q/$DeadLetterQueue", 1, RD)
    assert dead.message.properties["DeadLetterReason"] == "why"
    assert again.send("q", [SbMessage()]) == [6]  # after the scheduled message's 5
    clock.advance(100)
    again.tick()
    # activation gives the scheduled message a new sequence number, after 6
    assert [m.message.body for m in again.receive("q", 10, RD)] == [b"", b"later"]


def test_sequence_numbers_continue_after_everything_was_consumed(
    ns: Namespace, journal: RecordingJournal, clock: ManualClock
) -> None:
    ns.create_queue("q")
    ns.create_topic("t")
    ns.create_subscription("t", "s")
    ns.send("q", [SbMessage(), SbMessage()])
    ns.send("t", [SbMessage()])
    ns.receive("q", 10, RD)
    ns.receive("t/Subscriptions/s", 10, RD)
    again, _ = restarted(journal, clock)
    assert again.send("q", [SbMessage()]) == [3]
    assert again.send("t", [SbMessage()]) == [2]
    assert again.receive("t/Subscriptions/s", 1, RD)[0].sequence_number == 2


def test_duplicate_history_survives(
    ns: Namespace, journal: RecordingJournal, clock: ManualClock
) -> None:
    ns.create_topic(
        "t", TopicProperties(requires_duplicate_detection=True, duplicate_detection_window=60)
    )
    ns.create_subscription("t", "s")
    ns.send("t", [SbMessage(message_id="m1")])
    clock.advance(30)
    again, fresh = restarted(journal, clock)
    assert again.send("t", [SbMessage(message_id="m1")]) == [0]
    clock.advance(30)
    again.tick()
    assert not any(k.startswith("dup:") for k in fresh.values)
    assert again.send("t", [SbMessage(message_id="m1")]) == [2]


def test_ttl_and_lock_timers_resume(
    ns: Namespace, journal: RecordingJournal, clock: ManualClock
) -> None:
    ns.create_queue("q", QueueProperties(dead_lettering_on_expiration=True))
    ns.send("q", [SbMessage(time_to_live=50)])
    again, _ = restarted(journal, clock)
    assert again.next_deadline() == clock.now() + 50
    clock.advance(50)
    again.tick()
    assert again.get_queue("q").dead_lettered == 1


def test_session_state_and_messages_survive(
    ns: Namespace, journal: RecordingJournal, clock: ManualClock
) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "s", SubscriptionProperties(requires_session=True))
    ns.send("t", [SbMessage(b"1", session_id="a"), SbMessage(b"2", session_id="b")])
    ns.accept_session("t/Subscriptions/s", "a")
    ns.set_session_state("t/Subscriptions/s", "a", b"state")
    ns.receive("t/Subscriptions/s", 1, PL, session="a")
    again, _ = restarted(journal, clock)
    assert sorted(again.list_sessions("t/Subscriptions/s")) == ["a", "b"]
    assert again.accept_session("t/Subscriptions/s", "a") is not None  # the lock was released
    assert again.get_session_state("t/Subscriptions/s", "a") == b"state"
    [m] = again.receive("t/Subscriptions/s", 5, PL, session="a")
    # received under the session lock the restart took: a failed delivery
    assert (m.message.body, m.delivery_count, m.state) == (b"1", 1, MessageState.ACTIVE)
    assert again.accept_session("t/Subscriptions/s", "b") is not None
    [other] = again.receive("t/Subscriptions/s", 5, PL, session="b")
    assert other.delivery_count == 0  # never locked


def test_deleted_entities_stay_deleted(
    ns: Namespace, journal: RecordingJournal, clock: ManualClock
) -> None:
    ns.create_queue("gone")
    ns.send("gone", [SbMessage()])
    ns.delete_queue("gone")
    ns.create_topic("t")
    ns.create_subscription("t", "s")
    ns.delete_subscription("t", "s")
    again, _ = restarted(journal, clock)
    assert again.list_queues() == []
    assert again.list_subscriptions("t") == []
