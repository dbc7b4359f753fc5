"""Send, receive and settle: peek-lock and receive-and-delete, complete, abandon, defer,
dead-letter, locks (expiry, renewal, loss), delivery counts, peek, sizes, statuses, and
refused operations that change nothing."""

from __future__ import annotations

import uuid

import pytest

from qmgr.core.clock import ManualClock
from qmgr.servicebus.entities import QueueProperties, Status, SubscriptionProperties
from qmgr.servicebus.errors import Code
from qmgr.servicebus.message import MessageState, SbMessage, Stored
from qmgr.servicebus.namespace import Namespace, ReceiveMode
from tests.unit.servicebus.conftest import RecordingJournal, fails, one_locked, token

PL = ReceiveMode.PEEK_LOCK
RD = ReceiveMode.RECEIVE_AND_DELETE


def bodies(items: list[Stored]) -> list[bytes]:
    return [s.message.body for s in items]


# ---------------------------------------------------------------------- send


def test_sequence_numbers_are_gap_free_per_entity(ns: Namespace) -> None:
    ns.create_queue("a")
    ns.create_queue("b")
    assert ns.send("a", [SbMessage(), SbMessage()]) == [1, 2]
    assert ns.send("b", [SbMessage()]) == [1]
    assert ns.send("a", [SbMessage()]) == [3]


def test_send_stamps_message_id_and_enqueued_time(ns: Namespace, clock: ManualClock) -> None:
    ns.create_queue("q")
    ns.send("q", [SbMessage(b"x")])
    [s] = ns.peek("q", 0, 10)
    assert s.message.message_id
    assert s.enqueued_time == clock.now()
    assert s.state is MessageState.ACTIVE


def test_send_is_journaled(ns: Namespace, journal: RecordingJournal) -> None:
    ns.create_queue("q")
    ns.send("q", [SbMessage(b"x")])
    assert ("message_added", "q", 1) in journal.calls
    assert journal.values["seq:" + journal.entities["q"][1]["id"]] == "2"  # type: ignore[index]


def test_unknown_entity(ns: Namespace) -> None:
    fails(Code.ENTITY_NOT_FOUND, ns.send, "nope", [SbMessage()])
    fails(Code.ENTITY_NOT_FOUND, ns.receive, "nope", 1, PL)
    ns.create_topic("t")
    fails(Code.ENTITY_NOT_FOUND, ns.receive, "t/Subscriptions/x", 1, PL)
    fails(Code.ENTITY_NOT_FOUND, ns.receive, "t/$DeadLetterQueue", 1, PL)


def test_cannot_send_to_subscription_or_dlq_or_receive_from_topic(ns: Namespace) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "s")
    ns.create_queue("q")
    fails(Code.INVALID_OPERATION, ns.send, "t/Subscriptions/s", [SbMessage()])
    fails(Code.INVALID_OPERATION, ns.send, "q/$DeadLetterQueue", [SbMessage()])
    fails(Code.INVALID_OPERATION, ns.receive, "t", 1, PL)


def test_oversized_message_refuses_the_whole_batch(
    ns: Namespace, journal: RecordingJournal
) -> None:
    ns.create_queue("q", QueueProperties(max_message_size_kb=1))
    calls = len(journal.calls)
    err = fails(
        Code.MESSAGE_SIZE_EXCEEDED, ns.send, "q", [SbMessage(b"ok"), SbMessage(b"x" * 2000)]
    )
    assert "message 1" in err.text
    assert ns.get_queue("q").active == 0
    assert len(journal.calls) == calls
    assert ns.send("q", [SbMessage(b"ok")]) == [1]  # no sequence number was used


def test_bad_message_fields_refuse_the_batch(ns: Namespace) -> None:
    ns.create_queue("q")
    fails(Code.BAD_ARGUMENT, ns.send, "q", [SbMessage(message_id="x" * 129)])
    fails(Code.BAD_ARGUMENT, ns.send, "q", [SbMessage(time_to_live=0)])
    fails(Code.BAD_ARGUMENT, ns.send, "q", ["not a message"])
    assert ns.get_queue("q").active == 0


def test_full_entity_refuses_sends(ns: Namespace) -> None:
    ns.create_queue("q", QueueProperties(max_size_mb=1))
    for _ in range(4):
        ns.send("q", [SbMessage(b"x" * 250_000)])
    err = fails(Code.QUOTA_EXCEEDED, ns.send, "q", [SbMessage(b"x" * 250_000)])
    assert "full" in err.text
    assert ns.get_queue("q").active == 4


@pytest.mark.parametrize(
    ("status", "send_ok", "receive_ok"),
    [
        (Status.DISABLED, False, False),
        (Status.SEND_DISABLED, False, True),
        (Status.RECEIVE_DISABLED, True, False),
    ],
)
def test_queue_status(ns: Namespace, status: Status, send_ok: bool, receive_ok: bool) -> None:
    ns.create_queue("q")
    ns.send("q", [SbMessage()])
    ns.update_queue("q", QueueProperties(status=status))
    if send_ok:
        ns.send("q", [SbMessage()])
    else:
        fails(Code.ENTITY_DISABLED, ns.send, "q", [SbMessage()])
    if receive_ok:
        assert len(ns.receive("q", 10, RD)) >= 1
    else:
        fails(Code.ENTITY_DISABLED, ns.receive, "q", 10, RD)


def test_disabled_topic_still_lets_subscriptions_be_received(ns: Namespace) -> None:
    from qmgr.servicebus.entities import TopicProperties

    ns.create_topic("t")
    ns.create_subscription("t", "s")
    ns.send("t", [SbMessage()])
    ns.update_topic("t", TopicProperties(status=Status.DISABLED))
    fails(Code.ENTITY_DISABLED, ns.send, "t", [SbMessage()])
    assert len(ns.receive("t/Subscriptions/s", 10, RD)) == 1
    ns.update_subscription("t", "s", SubscriptionProperties(status=Status.RECEIVE_DISABLED))
    fails(Code.ENTITY_DISABLED, ns.receive, "t/Subscriptions/s", 10, RD)


# ---------------------------------------------------------------------- receive and settle


def test_peek_lock_then_complete(ns: Namespace, journal: RecordingJournal) -> None:
    ns.create_queue("q")
    ns.send("q", [SbMessage(b"a"), SbMessage(b"b")])
    got = ns.receive("q", 10, PL)
    assert bodies(got) == [b"a", b"b"]
    assert all(isinstance(s.lock_token, uuid.UUID) for s in got)
    assert got[0].lock_token != got[1].lock_token
    assert got[0].delivery_count == 0
    assert ns.receive("q", 10, PL) == []  # locked messages are skipped
    ns.complete("q", token(got[0]))
    # a completion, which a store may make durable against a crash of the process only
    assert ("message_settled", "q", 1) in journal.calls
    assert ("message_removed", "q", 1) not in journal.calls
    assert ns.get_queue("q").active == 1
    fails(Code.MESSAGE_LOCK_LOST, ns.complete, "q", token(got[0]))  # already settled


def test_receive_and_delete_removes_at_once(ns: Namespace, journal: RecordingJournal) -> None:
    ns.create_queue("q")
    ns.send("q", [SbMessage(b"a"), SbMessage(b"b"), SbMessage(b"c")])
    assert bodies(ns.receive("q", 2, RD)) == [b"a", b"b"]
    assert ns.get_queue("q").active == 1
    assert bodies(ns.receive("q", 2, RD)) == [b"c"]
    assert ns.receive("q", 2, RD) == []
    # at most once: a removal, never relaxed like a completion
    assert [c for c in journal.calls if c[0] in ("message_removed", "message_settled")] == [
        ("message_removed", "q", 1),
        ("message_removed", "q", 2),
        ("message_removed", "q", 3),
    ]


def test_abandon_counts_a_delivery_and_keeps_order(ns: Namespace) -> None:
    ns.create_queue("q")
    ns.send("q", [SbMessage(b"a"), SbMessage(b"b")])
    a, b = ns.receive("q", 2, PL)
    ns.abandon("q", token(a), {"reason": "retry"})
    ns.abandon("q", token(b))
    again = ns.receive("q", 2, PL)
    assert bodies(again) == [b"a", b"b"]  # sequence order again
    assert [s.delivery_count for s in again] == [1, 1]
    assert again[0].message.properties == {"reason": "retry"}


def test_abandon_property_change_does_not_touch_other_subscriptions(ns: Namespace) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "a")
    ns.create_subscription("t", "b")
    ns.send("t", [SbMessage(properties={"k": 1})])
    [m] = ns.receive("t/Subscriptions/a", 1, PL)
    ns.abandon("t/Subscriptions/a", token(m), {"k": 2})
    assert ns.peek("t/Subscriptions/a", 0, 1)[0].message.properties == {"k": 2}
    assert ns.peek("t/Subscriptions/b", 0, 1)[0].message.properties == {"k": 1}


def test_max_delivery_count_dead_letters(ns: Namespace, journal: RecordingJournal) -> None:
    ns.create_queue("q", QueueProperties(max_delivery_count=3))
    ns.send("q", [SbMessage(b"poison")])
    for _ in range(3):
        [m] = ns.receive("q", 1, PL)
        ns.abandon("q", token(m))
    assert ns.receive("q", 1, PL) == []
    info = ns.get_queue("q")
    assert (info.active, info.dead_lettered) == (0, 1)
    [dead] = ns.receive("q/$DeadLetterQueue", 1, PL)
    assert dead.message.properties["DeadLetterReason"] == "MaxDeliveryCountExceeded"
    assert dead.delivery_count == 3
    assert dead.sequence_number == 1
    assert ("message_added", "q/$DeadLetterQueue", 1) in journal.calls
    ns.complete("q/$DeadLetterQueue", token(dead))
    assert ns.get_queue("q").dead_lettered == 0


def test_dead_letter_with_reason_description_and_properties(ns: Namespace) -> None:
    m = one_locked(ns, SbMessage(b"x", properties={"a": 1}))
    ns.dead_letter("q", token(m), reason="Invalid", description="bad total", properties={"b": 2})
    [dead] = ns.peek("q/$DeadLetterQueue", 0, 10)
    assert dead.message.properties == {
        "a": 1,
        "b": 2,
        "DeadLetterReason": "Invalid",
        "DeadLetterErrorDescription": "bad total",
    }
    assert dead.dead_letter_source is None


def test_no_dead_lettering_from_a_dead_letter_queue(ns: Namespace) -> None:
    m = one_locked(ns)
    ns.dead_letter("q", token(m))
    [d] = ns.receive("q/$DeadLetterQueue", 1, PL)
    fails(Code.INVALID_OPERATION, ns.dead_letter, "q/$DeadLetterQueue", token(d))
    ns.abandon("q/$DeadLetterQueue", token(d))  # abandon in a DLQ never dead-letters
    [d] = ns.receive("q/$DeadLetterQueue", 1, PL)
    assert d.delivery_count == 1


def test_release_does_not_count_a_delivery(ns: Namespace) -> None:
    m = one_locked(ns)
    ns.release("q", token(m))
    [m] = ns.receive("q", 1, PL)
    assert m.delivery_count == 0


def test_lock_expiry_makes_message_available_with_count(
    ns: Namespace, clock: ManualClock, journal: RecordingJournal
) -> None:
    m = one_locked(ns, SbMessage(b"a"), QueueProperties(lock_duration=30.0))
    assert m.locked_until == clock.now() + 30
    assert ns.next_deadline() == clock.now() + 30
    clock.advance(29)
    ns.tick()
    assert ns.receive("q", 1, PL) == []
    clock.advance(1)
    ns.tick()
    assert ("message_updated", "q", 1) in journal.calls
    [again] = ns.receive("q", 1, PL)
    assert again.delivery_count == 1
    fails(Code.MESSAGE_LOCK_LOST, ns.complete, "q", token(m))
    ns.complete("q", token(again))


def test_expired_lock_is_lost_even_before_the_timer_runs(ns: Namespace, clock: ManualClock) -> None:
    m = one_locked(ns, props=QueueProperties(lock_duration=10.0))
    clock.advance(10)
    fails(Code.MESSAGE_LOCK_LOST, ns.complete, "q", token(m))
    fails(Code.MESSAGE_LOCK_LOST, ns.abandon, "q", token(m))  # counted once only
    ns.tick()
    [again] = ns.receive("q", 1, PL)
    assert again.delivery_count == 1


def test_lock_expiry_past_max_delivery_count_dead_letters(
    ns: Namespace, clock: ManualClock
) -> None:
    ns.create_queue("q", QueueProperties(lock_duration=5.0, max_delivery_count=1))
    ns.send("q", [SbMessage()])
    ns.receive("q", 1, PL)
    clock.advance(5)
    ns.tick()
    assert ns.get_queue("q").dead_lettered == 1


def test_renew_lock(ns: Namespace, clock: ManualClock) -> None:
    m = one_locked(ns, props=QueueProperties(lock_duration=10.0))
    clock.advance(8)
    until = ns.renew_lock("q", token(m))
    assert until == clock.now() + 10
    clock.advance(8)
    ns.tick()
    ns.complete("q", token(m))  # still locked: the renewal counted
    fails(Code.MESSAGE_LOCK_LOST, ns.renew_lock, "q", uuid.uuid4())


def test_unknown_lock_token(ns: Namespace) -> None:
    ns.create_queue("q")
    for call in (ns.complete, ns.abandon, ns.defer, ns.dead_letter, ns.release):
        fails(Code.MESSAGE_LOCK_LOST, call, "q", uuid.uuid4())


def test_lock_token_of_another_entity_is_lost(ns: Namespace) -> None:
    ns.create_queue("a")
    ns.create_queue("b")
    ns.send("a", [SbMessage()])
    [m] = ns.receive("a", 1, PL)
    fails(Code.MESSAGE_LOCK_LOST, ns.complete, "b", token(m))
    ns.complete("a", token(m))


def test_bad_receive_arguments(ns: Namespace) -> None:
    ns.create_queue("q")
    fails(Code.BAD_ARGUMENT, ns.receive, "q", 0, PL)
    fails(Code.BAD_ARGUMENT, ns.receive, "q", 1, "peek")
    fails(Code.INVALID_OPERATION, ns.receive, "q", 1, PL, session="s")


# ---------------------------------------------------------------------- defer and peek


def test_defer_and_receive_deferred(ns: Namespace) -> None:
    ns.create_queue("q")
    ns.send("q", [SbMessage(b"a"), SbMessage(b"b")])
    a, b = ns.receive("q", 2, PL)
    ns.defer("q", token(a), {"step": 2})
    ns.complete("q", token(b))
    assert ns.receive("q", 10, PL) == []  # deferred messages are hidden from receives
    info = ns.get_queue("q")
    assert (info.active, info.deferred) == (0, 1)
    [d] = ns.receive_deferred("q", [1], PL)
    assert d.state is MessageState.DEFERRED
    assert d.message.properties == {"step": 2}
    ns.abandon("q", token(d))  # stays deferred
    [d] = ns.receive_deferred("q", [1], PL)
    assert d.delivery_count == 1
    ns.complete("q", token(d))
    assert ns.get_queue("q").total == 0


def test_receive_deferred_unknown_or_not_deferred(ns: Namespace) -> None:
    ns.create_queue("q")
    ns.send("q", [SbMessage(), SbMessage()])
    [m] = ns.receive("q", 1, PL)
    ns.defer("q", token(m))
    err = fails(Code.MESSAGE_NOT_FOUND, ns.receive_deferred, "q", [1, 2], PL)
    assert "2" in err.text
    [d] = ns.receive_deferred("q", [1], RD)  # the failed call locked nothing
    assert d.sequence_number == 1
    assert ns.get_queue("q").deferred == 0


def test_peek_shows_every_state_without_locking(ns: Namespace, clock: ManualClock) -> None:
    ns.create_queue("q")
    ns.send("q", [SbMessage(b"a"), SbMessage(b"b"), SbMessage(b"c")])
    [a] = ns.receive("q", 1, PL)
    ns.defer("q", token(a))
    ns.schedule("q", [SbMessage(b"later")], clock.now() + 60)
    peeked = ns.peek("q", 0, 10)
    assert [(s.sequence_number, s.state) for s in peeked] == [
        (1, MessageState.DEFERRED),
        (2, MessageState.ACTIVE),
        (3, MessageState.ACTIVE),
        (4, MessageState.SCHEDULED),
    ]
    assert all(s.lock_token is None for s in peeked)
    assert [s.sequence_number for s in ns.peek("q", 3, 1)] == [3]
    assert len(ns.receive("q", 10, PL)) == 2


def test_peek_dead_letter_queue_in_sequence_order(ns: Namespace) -> None:
    ns.create_queue("q")
    ns.send("q", [SbMessage(b"1"), SbMessage(b"2"), SbMessage(b"3")])
    one, two, three = ns.receive("q", 3, PL)
    for m in (three, one, two):
        ns.dead_letter("q", token(m))
    assert [s.sequence_number for s in ns.peek("q/$DeadLetterQueue", 0, 10)] == [1, 2, 3]
    assert [s.sequence_number for s in ns.peek("q/$DeadLetterQueue", 2, 10)] == [2, 3]
    assert bodies(ns.receive("q/$DeadLetterQueue", 10, RD)) == [b"1", b"2", b"3"]


def test_delete_queue_loses_its_locks(ns: Namespace) -> None:
    m = one_locked(ns)
    ns.delete_queue("q")
    ns.create_queue("q")
    fails(Code.MESSAGE_LOCK_LOST, ns.complete, "q", token(m))
    assert ns.get_queue("q").active == 0
    assert ns.next_deadline() is None
