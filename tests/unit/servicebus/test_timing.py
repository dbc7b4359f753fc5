"""Time to live, scheduled messages and duplicate detection, driven by a manual clock."""

from __future__ import annotations

import pytest

from qmgr.core.clock import ManualClock
from qmgr.servicebus.entities import (
    FilterType,
    QueueProperties,
    RuleProperties,
    SubscriptionProperties,
    TopicProperties,
)
from qmgr.servicebus.errors import Code, ServiceBusError
from qmgr.servicebus.message import MessageState, SbMessage
from qmgr.servicebus.namespace import Namespace, ReceiveMode
from tests.unit.servicebus.conftest import RecordingJournal, one_locked, store_of, token

PL = ReceiveMode.PEEK_LOCK
RD = ReceiveMode.RECEIVE_AND_DELETE


# ---------------------------------------------------------------------- TTL


def test_expired_message_is_dropped(ns: Namespace, clock: ManualClock) -> None:
    ns.create_queue("q")
    ns.send("q", [SbMessage(b"short", time_to_live=10), SbMessage(b"long")])
    [s, _] = ns.peek("q", 0, 10)
    assert s.expires_at == clock.now() + 10
    assert ns.next_deadline() == clock.now() + 10
    clock.advance(10)
    ns.tick()
    info = ns.get_queue("q")
    assert (info.active, info.dead_lettered) == (1, 0)
    assert [m.message.body for m in ns.receive("q", 10, RD)] == [b"long"]


def test_expired_message_is_dead_lettered_when_configured(
    ns: Namespace, clock: ManualClock
) -> None:
    ns.create_queue("q", QueueProperties(dead_lettering_on_expiration=True))
    ns.send("q", [SbMessage(b"x", time_to_live=5)])
    clock.advance(6)
    ns.tick()
    [dead] = ns.receive("q/$DeadLetterQueue", 1, RD)
    assert dead.message.properties["DeadLetterReason"] == "TTLExpiredException"
    assert dead.expires_at == float("inf")  # no TTL in a dead-letter queue


def test_expired_message_is_never_received_even_before_the_timer(
    ns: Namespace, clock: ManualClock
) -> None:
    ns.create_queue("q", QueueProperties(dead_lettering_on_expiration=True))
    ns.send("q", [SbMessage(time_to_live=5)])
    clock.advance(5)
    assert ns.receive("q", 1, PL) == []
    assert ns.get_queue("q").dead_lettered == 1


def test_message_ttl_is_capped_by_the_entity_default(ns: Namespace, clock: ManualClock) -> None:
    ns.create_queue("q", QueueProperties(default_message_ttl=60))
    ns.send("q", [SbMessage(time_to_live=600), SbMessage(), SbMessage(time_to_live=30)])
    assert [s.expires_at - clock.now() for s in ns.peek("q", 0, 10)] == [60, 60, 30]


def test_subscription_ttl_is_the_smaller_of_topic_and_subscription(
    ns: Namespace, clock: ManualClock
) -> None:
    ns.create_topic("t", TopicProperties(default_message_ttl=100))
    ns.create_subscription("t", "short", SubscriptionProperties(default_message_ttl=20))
    ns.create_subscription("t", "long", SubscriptionProperties(default_message_ttl=1000))
    ns.send("t", [SbMessage()])
    assert ns.peek("t/Subscriptions/short", 0, 1)[0].expires_at == clock.now() + 20
    assert ns.peek("t/Subscriptions/long", 0, 1)[0].expires_at == clock.now() + 100


def test_locked_message_expires_only_when_its_lock_ends(ns: Namespace, clock: ManualClock) -> None:
    ns.create_queue("q", QueueProperties(dead_lettering_on_expiration=True, lock_duration=30))
    ns.send("q", [SbMessage(b"a", time_to_live=10), SbMessage(b"b", time_to_live=10)])
    a, b = ns.receive("q", 2, PL)
    clock.advance(15)
    ns.tick()
    assert ns.get_queue("q").dead_lettered == 0
    ns.complete("q", token(a))  # still locked: settling works after the TTL passed
    ns.abandon("q", token(b))  # the lock ends: expiry applies at once
    info = ns.get_queue("q")
    assert (info.active, info.dead_lettered) == (0, 1)


def test_deferred_messages_are_not_expired_to_the_dead_letter_queue(
    ns: Namespace, clock: ManualClock
) -> None:
    m = one_locked(
        ns, SbMessage(time_to_live=5), QueueProperties(dead_lettering_on_expiration=True)
    )
    ns.defer("q", token(m))
    clock.advance(10)
    ns.tick()
    info = ns.get_queue("q")
    assert (info.deferred, info.dead_lettered) == (1, 0)


def test_ttl_expiry_visits_only_due_messages(ns: Namespace, clock: ManualClock) -> None:
    ns.create_queue("q")
    ns.send("q", [SbMessage(time_to_live=float(i + 1)) for i in range(100)])
    clock.advance(50)
    ns.tick()
    assert ns.get_queue("q").active == 50
    assert ns.next_deadline() == clock.now() + 1


# ---------------------------------------------------------------------- scheduling


def test_scheduled_message_appears_when_due_with_a_new_sequence_number(
    ns: Namespace, clock: ManualClock, journal: RecordingJournal
) -> None:
    ns.create_queue("q")
    ns.send("q", [SbMessage(b"now")])
    [seq] = ns.schedule("q", [SbMessage(b"later")], clock.now() + 60)
    assert seq == 2
    info = ns.get_queue("q")
    assert (info.active, info.scheduled) == (1, 1)
    [peeked] = ns.peek("q", 2, 1)
    assert peeked.state is MessageState.SCHEDULED
    assert peeked.scheduled_enqueue_time == clock.now() + 60
    assert [m.message.body for m in ns.receive("q", 10, RD)] == [b"now"]
    assert ns.next_deadline() == clock.now() + 60
    clock.advance(60)
    ns.tick()
    [m] = ns.receive("q", 10, RD)
    assert m.message.body == b"later"
    assert m.sequence_number == 3
    assert m.enqueued_time == clock.now()
    assert ("message_removed", "q", 2) in journal.calls


def test_send_with_scheduled_enqueue_time_schedules(ns: Namespace, clock: ManualClock) -> None:
    ns.create_queue("q")
    ns.send("q", [SbMessage(scheduled_enqueue_time=clock.now() + 5)])
    ns.send("q", [SbMessage(scheduled_enqueue_time=clock.now() - 5)])  # past: now
    info = ns.get_queue("q")
    assert (info.active, info.scheduled) == (1, 1)


def test_cancel_scheduled(ns: Namespace, clock: ManualClock) -> None:
    ns.create_queue("q")
    seqs = ns.schedule("q", [SbMessage(), SbMessage()], clock.now() + 60)
    ns.cancel_scheduled("q", seqs[:1])
    assert ns.get_queue("q").scheduled == 1
    with pytest.raises(ServiceBusError) as info:
        ns.cancel_scheduled("q", [seqs[1], 99])
    assert info.value.code is Code.MESSAGE_NOT_FOUND
    assert ns.get_queue("q").scheduled == 1  # nothing was cancelled
    clock.advance(60)
    ns.tick()
    assert ns.get_queue("q").active == 1


def test_scheduled_message_to_a_topic_fans_out_when_due(ns: Namespace, clock: ManualClock) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "a")
    ns.create_subscription("t", "b", rule=("none", RuleProperties(FilterType.FALSE)))
    [seq] = ns.schedule("t", [SbMessage(b"x")], clock.now() + 10)
    assert ns.get_topic("t").scheduled == 1
    assert ns.get_subscription("t", "a").active == 0
    clock.advance(10)
    ns.tick()
    [m] = ns.receive("t/Subscriptions/a", 1, RD)
    assert m.enqueued_sequence_number == seq + 1
    assert ns.get_topic("t").scheduled == 0


def test_cancel_scheduled_on_topic(ns: Namespace, clock: ManualClock) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "a")
    [seq] = ns.schedule("t", [SbMessage()], clock.now() + 10)
    ns.cancel_scheduled("t", [seq])
    clock.advance(10)
    ns.tick()
    assert ns.get_subscription("t", "a").active == 0


def test_bad_schedule_time(ns: Namespace) -> None:
    ns.create_queue("q")
    with pytest.raises(ServiceBusError) as info:
        ns.schedule("q", [SbMessage()], "tomorrow")  # type: ignore[arg-type]
    assert info.value.code is Code.BAD_ARGUMENT


# ---------------------------------------------------------------------- duplicates


def test_duplicate_within_window_is_accepted_and_dropped(ns: Namespace, clock: ManualClock) -> None:
    ns.create_queue(
        "q", QueueProperties(requires_duplicate_detection=True, duplicate_detection_window=60)
    )
    assert ns.send("q", [SbMessage(b"1", message_id="a")]) == [1]
    assert ns.send("q", [SbMessage(b"2", message_id="a")]) == [0]
    clock.advance(59)
    assert ns.send("q", [SbMessage(b"3", message_id="a"), SbMessage(b"4", message_id="b")]) == [
        0,
        2,
    ]
    clock.advance(1)
    ns.tick()
    assert ns.send("q", [SbMessage(b"5", message_id="a")]) == [3]
    assert [m.message.body for m in ns.receive("q", 10, RD)] == [b"1", b"4", b"5"]


def test_duplicate_detection_only_when_required(ns: Namespace) -> None:
    ns.create_queue("q")
    ns.send("q", [SbMessage(message_id="a"), SbMessage(message_id="a")])
    assert ns.get_queue("q").active == 2


def test_scheduled_and_sent_messages_share_duplicate_history(
    ns: Namespace, clock: ManualClock
) -> None:
    ns.create_topic("t", TopicProperties(requires_duplicate_detection=True))
    ns.create_subscription("t", "s")
    ns.schedule("t", [SbMessage(message_id="a")], clock.now() + 10)
    assert ns.send("t", [SbMessage(message_id="a")]) == [0]
    clock.advance(10)
    ns.tick()
    assert ns.get_subscription("t", "s").active == 1


def test_duplicate_history_is_journaled_and_pruned(
    ns: Namespace, clock: ManualClock, journal: RecordingJournal
) -> None:
    ns.create_queue(
        "q", QueueProperties(requires_duplicate_detection=True, duplicate_detection_window=30)
    )
    ns.send("q", [SbMessage(message_id="a")])
    dup_keys = [k for k in journal.values if k.startswith("dup:")]
    assert len(dup_keys) == 1 and dup_keys[0].endswith(":a")
    clock.advance(30)
    ns.tick()
    assert [k for k in journal.values if k.startswith("dup:")] == []


def test_timers_idle_namespace(ns: Namespace) -> None:
    ns.create_queue("q")
    ns.send("q", [SbMessage()])
    assert ns.next_deadline() is None
    ns.tick()


# ---------------------------------------------------------------------- auto-delete on idle


def test_idle_queue_is_deleted(
    ns: Namespace, clock: ManualClock, journal: RecordingJournal
) -> None:
    ns.create_queue("q", QueueProperties(auto_delete_on_idle=300))
    ns.create_queue("keep")
    assert ns.next_deadline() == clock.now() + 300
    clock.advance(200)
    ns.send("q", [SbMessage()])  # use postpones the deletion
    clock.advance(200)
    ns.tick()
    assert ns.get_queue("q").active == 1
    clock.advance(100)
    ns.tick()
    assert [q.name for q in ns.list_queues()] == ["keep"]
    assert ("entity_deleted", "q") in journal.calls


def test_idle_subscription_is_deleted_and_topic_kept(ns: Namespace, clock: ManualClock) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "s", SubscriptionProperties(auto_delete_on_idle=300))
    clock.advance(300)
    ns.tick()
    assert ns.list_subscriptions("t") == []
    assert ns.next_deadline() is None


def test_forwarding_source_is_never_idle(ns: Namespace, clock: ManualClock) -> None:
    ns.create_queue("dest")
    ns.create_queue("src", QueueProperties(forward_to="dest", auto_delete_on_idle=300))
    clock.advance(1000)
    ns.tick()
    assert ns.get_queue("src").name == "src"


def test_expired_messages_leave_no_trace_behind(ns: Namespace, clock: ManualClock) -> None:
    ns.create_queue("q")
    ns.send("q", [SbMessage(time_to_live=1) for _ in range(1000)])
    clock.advance(1)
    ns.tick()
    store = store_of(ns, "q")
    assert (len(store.messages), len(store.fresh), len(store.ttl_heap)) == (0, 0, 0)
    assert ns.next_deadline() is None
