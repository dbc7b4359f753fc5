"""Review findings: auto-forwarding."""

from __future__ import annotations

import datetime as dt

from qmgr.core.clock import ManualClock
from qmgr.servicebus.entities import (
    FilterType,
    QueueProperties,
    RuleProperties,
    SubscriptionProperties,
)
from qmgr.servicebus.message import SbMessage, Stored
from qmgr.servicebus.namespace import Namespace, ReceiveMode
from tests.unit.servicebus.conftest import RecordingJournal, one_locked, replay, token

PL = ReceiveMode.PEEK_LOCK
RD = ReceiveMode.RECEIVE_AND_DELETE


def test_forwarding_to_a_topic_keeps_the_first_entitys_sequence_number(ns: Namespace) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "s")
    ns.create_queue("q", QueueProperties(forward_to="t"))
    ns.send("t", [SbMessage(b"direct"), SbMessage(b"direct")])  # the topic is ahead of q
    [seq] = ns.send("q", [SbMessage(b"x")])
    got = ns.receive("t/Subscriptions/s", 10, RD)
    assert [(m.message.body, m.enqueued_sequence_number) for m in got] == [
        (b"direct", 1),
        (b"direct", 2),
        (b"x", seq),
    ]


def test_dead_letters_forwarded_to_a_topic_keep_their_sequence_number(ns: Namespace) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "s")
    ns.create_queue("q", QueueProperties(forward_dead_lettered_to="t"))
    ns.send("t", [SbMessage(b"direct")] * 3)  # the topic is ahead of q
    _, seq = ns.send("q", [SbMessage(b"a"), SbMessage(b"b")])
    _, b = ns.receive("q", 2, PL)
    ns.dead_letter("q", token(b), reason="r")
    *_, m = ns.receive("t/Subscriptions/s", 10, RD)
    assert (m.message.body, m.enqueued_sequence_number, m.dead_letter_source) == (b"b", seq, "q")


def _locked_when_forwarding_begins(ns: Namespace) -> Stored:
    """Message b"a" of queue "q", held under a peek lock when "q" starts forwarding to "dest"."""
    ns.create_queue("dest")
    m = one_locked(ns, SbMessage(b"a"))
    ns.update_queue("q", QueueProperties(forward_to="dest"))
    return m


def test_a_message_abandoned_after_forwarding_was_enabled_moves_on(ns: Namespace) -> None:
    m = _locked_when_forwarding_begins(ns)
    ns.abandon("q", token(m))
    assert ns.get_queue("q").total == 0
    [got] = ns.receive("dest", 10, RD)
    assert (got.message.body, got.hop_count) == (b"a", 1)


def test_a_message_whose_lock_expires_after_forwarding_was_enabled_moves_on(
    ns: Namespace, clock: ManualClock
) -> None:
    _locked_when_forwarding_begins(ns)
    clock.advance(60)
    ns.tick()
    assert ns.get_queue("q").total == 0
    assert [m.message.body for m in ns.receive("dest", 10, RD)] == [b"a"]


def test_a_message_locked_at_a_restart_of_a_forwarding_queue_moves_on(
    ns: Namespace, journal: RecordingJournal, clock: ManualClock
) -> None:
    _locked_when_forwarding_begins(ns)
    again = replay(journal, Namespace(clock=clock, journal=RecordingJournal()))
    assert again.get_queue("q").total == 0
    assert [m.message.body for m in again.receive("dest", 10, RD)] == [b"a"]


def _forwarding_subscription(ns: Namespace, action: str, dest: QueueProperties) -> None:
    ns.create_queue("q", dest)
    ns.create_topic("t")
    rule = RuleProperties(FilterType.SQL, "1=1", action=action)
    ns.create_subscription("t", "s", SubscriptionProperties(forward_to="q"), rule=("r", rule))


def test_a_scheduled_time_set_by_an_action_holds_the_message_at_the_destination(
    ns: Namespace, clock: ManualClock
) -> None:
    # forwarding docs: rule actions that changed ScheduledEnqueueTimeUtc are re-evaluated at
    # the forwarded destination
    _forwarding_subscription(ns, "SET sys.ScheduledEnqueueTimeUtc = user.at", QueueProperties())
    at = dt.datetime.fromtimestamp(clock.now() + 30, dt.UTC)
    ns.send("t", [SbMessage(b"later", properties={"at": at})])
    assert ns.get_queue("q").scheduled == 1
    assert ns.receive("q", 10, RD) == []
    clock.advance(30)
    ns.tick()
    [m] = ns.receive("q", 10, RD)
    assert (m.message.body, m.hop_count, m.enqueued_sequence_number) == (b"later", 1, 1)


def test_a_message_id_set_by_an_action_is_checked_for_duplicates_at_the_destination(
    ns: Namespace,
) -> None:
    # forwarding docs: rule actions that changed MessageId are re-evaluated at the forwarded
    # destination
    dedup = QueueProperties(requires_duplicate_detection=True)
    _forwarding_subscription(ns, "SET sys.MessageId = user.key", dedup)
    ns.send(
        "t", [SbMessage(b"1", properties={"key": "k"}), SbMessage(b"2", properties={"key": "k"})]
    )
    assert [m.message.body for m in ns.receive("q", 10, RD)] == [b"1"]
