"""Auto-forwarding: chains and the four-hop limit, failures to the source's dead-letter queue,
forwarding of dead-lettered messages with their source, and no receivers on a source."""

from __future__ import annotations

import pytest

from qmgr.servicebus.entities import (
    QueueProperties,
    Status,
    SubscriptionProperties,
    TopicProperties,
)
from qmgr.servicebus.errors import Code, ServiceBusError
from qmgr.servicebus.message import SbMessage, Stored
from qmgr.servicebus.namespace import Namespace, ReceiveMode

RD = ReceiveMode.RECEIVE_AND_DELETE
PL = ReceiveMode.PEEK_LOCK


def chain(ns: Namespace, length: int) -> list[str]:
    """q0 -> q1 -> ... -> q<length>; returns the names, first to last."""
    names = [f"q{i}" for i in range(length + 1)]
    ns.create_queue(names[-1])
    for i in range(length - 1, -1, -1):
        ns.create_queue(names[i], QueueProperties(forward_to=names[i + 1]))
    return names


def one(ns: Namespace, path: str) -> Stored:
    got = ns.receive(path, 10, RD)
    assert len(got) == 1, got
    return got[0]


def test_queue_forwards_to_queue(ns: Namespace) -> None:
    ns.create_queue("dest")
    ns.create_queue("src", QueueProperties(forward_to="dest"))
    [seq] = ns.send("src", [SbMessage(b"a", message_id="m1")])
    stored = one(ns, "dest")
    assert stored.message.message_id == "m1"
    assert stored.hop_count == 1
    assert stored.enqueued_sequence_number == seq
    assert ns.get_queue("src").total == 0


def test_four_hop_chain_delivers(ns: Namespace) -> None:
    names = chain(ns, 4)
    ns.send("q0", [SbMessage(b"x")])
    stored = one(ns, names[-1])
    assert stored.hop_count == 4
    assert all(ns.get_queue(n).total == 0 for n in names[:-1])


def test_fifth_hop_dead_letters_where_the_message_stands(ns: Namespace) -> None:
    names = chain(ns, 5)
    ns.send("q0", [SbMessage(b"x")])
    assert ns.get_queue("q5").total == 0
    dead = one(ns, "q4/$DeadLetterQueue")
    assert dead.message.properties["DeadLetterReason"] == "MaxTransferHopCountExceeded"
    assert "4" in dead.message.properties["DeadLetterErrorDescription"]
    assert [ns.get_queue(n).dead_lettered for n in names] == [0, 0, 0, 0, 0, 0]


def test_subscription_forwards_to_queue_and_queue_to_topic(ns: Namespace) -> None:
    ns.create_topic("in")
    ns.create_topic("out")
    ns.create_queue("final")
    ns.create_subscription("out", "s", SubscriptionProperties(forward_to="final"))
    ns.create_queue("relay", QueueProperties(forward_to="out"))
    ns.create_subscription("in", "s", SubscriptionProperties(forward_to="relay"))
    ns.send("in", [SbMessage(b"x")])
    stored = one(ns, "final")
    assert stored.hop_count == 3  # in/s -> relay -> out (fan-out) /s -> final


def test_destination_deleted_later_dead_letters_at_source(ns: Namespace) -> None:
    ns.create_queue("dest")
    ns.create_queue("src", QueueProperties(forward_to="dest"))
    ns.delete_queue("dest")
    ns.send("src", [SbMessage(b"x")])
    dead = one(ns, "src/$DeadLetterQueue")
    assert dead.message.properties["DeadLetterReason"] == "MessagingEntityNotFound"


@pytest.mark.parametrize("status", [Status.DISABLED, Status.SEND_DISABLED])
def test_destination_disabled_dead_letters_at_source(ns: Namespace, status: Status) -> None:
    ns.create_queue("dest")
    ns.create_queue("src", QueueProperties(forward_to="dest"))
    ns.update_queue("dest", QueueProperties(status=status))
    ns.send("src", [SbMessage(b"x")])
    dead = one(ns, "src/$DeadLetterQueue")
    assert dead.message.properties["DeadLetterReason"] == "MessagingEntityDisabled"
    # it stays there when the destination recovers
    ns.update_queue("dest", QueueProperties())
    assert ns.get_queue("dest").total == 0


def test_destination_full_dead_letters_at_source(ns: Namespace) -> None:
    ns.create_topic("dest", TopicProperties(max_size_mb=1))
    ns.create_subscription("dest", "s")
    ns.create_queue("src", QueueProperties(forward_to="dest"))
    big = b"x" * 200_000
    for _ in range(5):
        ns.send("dest", [SbMessage(big)])
    ns.send("src", [SbMessage(big)])
    dead = one(ns, "src/$DeadLetterQueue")
    assert dead.message.properties["DeadLetterReason"] == "QuotaExceeded"


def test_forward_dead_lettered_messages_records_source(ns: Namespace) -> None:
    ns.create_queue("errors")
    ns.create_queue("work", QueueProperties(forward_dead_lettered_to="errors"))
    ns.send("work", [SbMessage(b"x", message_id="m")])
    [msg] = ns.receive("work", 1, PL)
    assert msg.lock_token is not None
    ns.dead_letter("work", msg.lock_token, reason="Bad", description="no good")
    assert ns.get_queue("work").dead_lettered == 0
    stored = one(ns, "errors")
    assert stored.dead_letter_source == "work"
    assert stored.message.properties["DeadLetterReason"] == "Bad"
    assert stored.message.properties["DeadLetterErrorDescription"] == "no good"


def test_forward_dead_lettered_to_missing_destination_keeps_it_in_dlq(ns: Namespace) -> None:
    ns.create_queue("errors")
    ns.create_queue("work", QueueProperties(forward_dead_lettered_to="errors"))
    ns.delete_queue("errors")
    ns.send("work", [SbMessage(b"x")])
    [msg] = ns.receive("work", 1, PL)
    assert msg.lock_token is not None
    ns.dead_letter("work", msg.lock_token)
    assert ns.get_queue("work").dead_lettered == 1


def test_subscription_dead_letters_forwarded_to_a_topic(ns: Namespace) -> None:
    ns.create_topic("errors")
    ns.create_subscription("errors", "all")
    ns.create_topic("t")
    ns.create_subscription("t", "s", SubscriptionProperties(forward_dead_lettered_to="errors"))
    ns.send("t", [SbMessage(b"x")])
    [msg] = ns.receive("t/Subscriptions/s", 1, PL)
    assert msg.lock_token is not None
    ns.dead_letter("t/Subscriptions/s", msg.lock_token, reason="r")
    stored = one(ns, "errors/Subscriptions/all")
    assert stored.dead_letter_source == "t/Subscriptions/s"


def test_no_receive_or_browse_on_a_forwarding_source(ns: Namespace) -> None:
    ns.create_queue("dest")
    ns.create_queue("src", QueueProperties(forward_to="dest"))
    for call in (
        lambda: ns.receive("src", 1, PL),
        lambda: ns.peek("src", 0, 1),
    ):
        with pytest.raises(ServiceBusError) as info:
            call()
        assert info.value.code is Code.INVALID_OPERATION
    # its dead-letter queue can be received from
    assert ns.receive("src/$DeadLetterQueue", 1, PL) == []


def test_scheduled_message_on_a_forwarding_queue_forwards_when_due(ns: Namespace, clock) -> None:  # type: ignore[no-untyped-def]
    ns.create_queue("dest")
    ns.create_queue("src", QueueProperties(forward_to="dest"))
    ns.schedule("src", [SbMessage(b"x")], clock.now() + 30)
    assert ns.get_queue("dest").total == 0
    clock.advance(30)
    ns.tick()
    assert one(ns, "dest").message.body == b"x"


def test_enabling_forwarding_moves_the_messages_held(ns: Namespace) -> None:
    ns.create_queue("dest")
    ns.create_queue("src")
    ns.send("src", [SbMessage(b"1"), SbMessage(b"2")])
    ns.update_queue("src", QueueProperties(forward_to="dest"))
    assert ns.get_queue("src").total == 0
    assert [m.message.body for m in ns.receive("dest", 10, RD)] == [b"1", b"2"]


def test_a_forwarding_loop_through_a_topic_ends_at_the_hop_limit(ns: Namespace) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "again", SubscriptionProperties(forward_to="t"))
    ns.create_subscription("t", "seen")
    ns.send("t", [SbMessage(b"x")])
    # the original and the copies of hops 1-4 reach "seen"; the fifth hop is refused
    assert ns.get_subscription("t", "seen").active == 5
    dead = one(ns, "t/Subscriptions/again/$DeadLetterQueue")
    assert dead.message.properties["DeadLetterReason"] == "MaxTransferHopCountExceeded"
    assert dead.hop_count == 4
