"""Entity and rule management: documented names, defaults, quotas, forwarding checks, and that a
refused operation changes nothing (state and journal)."""

from __future__ import annotations

import math

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
from qmgr.servicebus.namespace import Namespace, NamespaceLimits
from tests.unit.servicebus.conftest import RecordingJournal


def sql(text: str, action: str | None = None) -> RuleProperties:
    return RuleProperties(FilterType.SQL, sql=text, action=action)


def corr(**fields: str) -> RuleProperties:
    return RuleProperties(FilterType.CORRELATION, correlation=fields)


def snapshot(ns: Namespace) -> tuple[object, ...]:
    topics = ns.list_topics()
    subs = [s for t in topics for s in ns.list_subscriptions(t.name)]
    rules = [r for s in subs for r in ns.list_rules(s.topic, s.name)]
    by_name = lambda info: info.name  # noqa: E731
    return tuple(sorted(x, key=by_name) for x in (ns.list_queues(), topics, subs, rules))


def refused(ns: Namespace, journal: RecordingJournal, code: Code, call, *args, **kw):  # type: ignore[no-untyped-def]
    before = snapshot(ns)
    calls = len(journal.calls)
    with pytest.raises(ServiceBusError) as info:
        call(*args, **kw)
    assert info.value.code is code, info.value
    assert snapshot(ns) == before
    assert len(journal.calls) == calls
    return info.value


# ---------------------------------------------------------------------- queues


def test_queue_created_with_documented_defaults(ns: Namespace, journal: RecordingJournal) -> None:
    info = ns.create_queue("Orders")
    assert info.name == "Orders"
    assert info.properties.lock_duration == 60.0
    assert info.properties.max_delivery_count == 10
    assert math.isinf(info.properties.default_message_ttl)
    assert (info.active, info.dead_lettered, info.scheduled, info.transfer) == (0, 0, 0, 0)
    assert ("entity_saved", "Orders") in journal.calls
    path, data = journal.entities["orders"]  # type: ignore[misc]
    assert data["kind"] == "queue" and data["properties"]["LockDuration"] == "PT1M"


def test_names_compare_case_insensitively_and_keep_their_case(
    ns: Namespace, journal: RecordingJournal
) -> None:
    ns.create_queue("Orders")
    assert ns.get_queue("ORDERS").name == "Orders"
    refused(ns, journal, Code.ENTITY_ALREADY_EXISTS, ns.create_queue, "orders")
    refused(ns, journal, Code.ENTITY_ALREADY_EXISTS, ns.create_topic, "ORDERS")


@pytest.mark.parametrize("name", ["", "-a", "a-", "a//b", "a b", "x" * 261, "a/Subscriptions/b"])
def test_invalid_queue_names_are_refused(
    ns: Namespace, journal: RecordingJournal, name: str
) -> None:
    err = refused(ns, journal, Code.BAD_ARGUMENT, ns.create_queue, name)
    assert "name" in err.text


def test_unknown_entities_are_not_found(ns: Namespace, journal: RecordingJournal) -> None:
    refused(ns, journal, Code.ENTITY_NOT_FOUND, ns.get_queue, "nope")
    refused(ns, journal, Code.ENTITY_NOT_FOUND, ns.delete_queue, "nope")
    refused(ns, journal, Code.ENTITY_NOT_FOUND, ns.update_queue, "nope", QueueProperties())
    refused(ns, journal, Code.ENTITY_NOT_FOUND, ns.create_subscription, "nope", "s")
    ns.create_topic("t")
    refused(ns, journal, Code.ENTITY_NOT_FOUND, ns.get_subscription, "t", "s")
    ns.create_subscription("t", "s")
    refused(ns, journal, Code.ENTITY_NOT_FOUND, ns.delete_rule, "t", "s", "r")


def test_update_queue_changes_properties_but_not_create_only_ones(
    ns: Namespace, journal: RecordingJournal, clock: ManualClock
) -> None:
    ns.create_queue("q")
    clock.advance(5)
    info = ns.update_queue("q", QueueProperties(max_delivery_count=3, lock_duration=30.0))
    assert info.properties.max_delivery_count == 3
    assert info.updated_at == info.created_at + 5
    err = refused(
        ns, journal, Code.BAD_ARGUMENT, ns.update_queue, "q", QueueProperties(requires_session=True)
    )
    assert "RequiresSession" in str(err)


def test_delete_queue(ns: Namespace, journal: RecordingJournal) -> None:
    ns.create_queue("q")
    ns.delete_queue("Q")
    assert ns.list_queues() == []
    assert journal.calls[-1] == ("entity_deleted", "q")


# ---------------------------------------------------------------------- forwarding checks


def test_forwarding_destination_must_exist(ns: Namespace, journal: RecordingJournal) -> None:
    err = refused(
        ns, journal, Code.BAD_ARGUMENT, ns.create_queue, "src", QueueProperties(forward_to="dest")
    )
    assert err.where == "ForwardTo" and "does not exist" in err.text
    err = refused(
        ns,
        journal,
        Code.BAD_ARGUMENT,
        ns.create_queue,
        "src",
        QueueProperties(forward_dead_lettered_to="dest"),
    )
    assert err.where == "ForwardDeadLetteredMessagesTo"


def test_forwarding_to_itself_is_refused(ns: Namespace, journal: RecordingJournal) -> None:
    err = refused(
        ns, journal, Code.BAD_ARGUMENT, ns.create_queue, "src", QueueProperties(forward_to="SRC")
    )
    assert "itself" in err.text
    ns.create_queue("q")
    refused(ns, journal, Code.BAD_ARGUMENT, ns.update_queue, "q", QueueProperties(forward_to="q"))


def test_forwarding_from_a_session_entity_is_refused(
    ns: Namespace, journal: RecordingJournal
) -> None:
    ns.create_queue("dest")
    props = QueueProperties(forward_to="dest", requires_session=True)
    refused(ns, journal, Code.BAD_ARGUMENT, ns.create_queue, "src", props)
    ns.create_topic("t")
    sprops = SubscriptionProperties(forward_to="dest", requires_session=True)
    refused(ns, journal, Code.BAD_ARGUMENT, ns.create_subscription, "t", "s", sprops)


def test_forwarding_source_never_auto_deletes(ns: Namespace) -> None:
    ns.create_queue("dest")
    info = ns.create_queue("src", QueueProperties(forward_to="dest", auto_delete_on_idle=600.0))
    assert math.isinf(info.properties.auto_delete_on_idle)
    ns.create_topic("t")
    sub = ns.create_subscription(
        "t", "s", SubscriptionProperties(forward_to="dest", auto_delete_on_idle=600.0)
    )
    assert math.isinf(sub.properties.auto_delete_on_idle)


# ---------------------------------------------------------------------- topics, subscriptions


def test_new_subscription_gets_default_true_rule(ns: Namespace) -> None:
    ns.create_topic("t", TopicProperties(default_message_ttl=60.0))
    info = ns.create_subscription("t", "s")
    assert info.rule_count == 1
    [rule] = ns.list_rules("t", "s")
    assert rule.name == "$Default" and rule.properties.filter_type is FilterType.TRUE
    assert ns.get_topic("t").subscription_count == 1


def test_subscription_created_with_a_rule_replaces_default(ns: Namespace) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "s", rule=("red", sql("color = 'red'")))
    assert [r.name for r in ns.list_rules("t", "s")] == ["red"]


def test_subscription_with_a_bad_rule_is_not_created(
    ns: Namespace, journal: RecordingJournal
) -> None:
    ns.create_topic("t")
    err = refused(
        ns,
        journal,
        Code.BAD_ARGUMENT,
        ns.create_subscription,
        "t",
        "s",
        rule=("bad", sql("color = = 'red'")),
    )
    assert err.position is not None and err.position > 0
    assert ns.list_subscriptions("t") == []


@pytest.mark.parametrize("name", ["", "a/b", "-x", "x" * 51])
def test_invalid_subscription_names(ns: Namespace, journal: RecordingJournal, name: str) -> None:
    ns.create_topic("t")
    refused(ns, journal, Code.BAD_ARGUMENT, ns.create_subscription, "t", name)


def test_subscription_quota(clock: ManualClock, journal: RecordingJournal) -> None:
    ns = Namespace(
        clock=clock, journal=journal, limits=NamespaceLimits(max_subscriptions_per_topic=2)
    )
    ns.create_topic("t")
    ns.create_subscription("t", "a")
    ns.create_subscription("t", "b")
    err = refused(ns, journal, Code.QUOTA_EXCEEDED, ns.create_subscription, "t", "c")
    assert "2 subscriptions" in err.text


def test_default_subscription_quota_is_2000(ns: Namespace) -> None:
    assert ns.limits.max_subscriptions_per_topic == 2000
    assert ns.limits.max_sql_rules_per_topic == 2000
    assert ns.limits.max_correlation_rules_per_topic == 100_000


def test_delete_topic_removes_subscriptions(ns: Namespace, journal: RecordingJournal) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "s")
    ns.delete_topic("t")
    assert ns.list_topics() == []
    assert journal.calls[-1] == ("entity_deleted", "t")
    assert journal.entities == {}


def test_update_subscription_refuses_requires_session_change(
    ns: Namespace, journal: RecordingJournal
) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "s")
    info = ns.update_subscription("t", "s", SubscriptionProperties(max_delivery_count=2))
    assert info.properties.max_delivery_count == 2
    refused(
        ns,
        journal,
        Code.BAD_ARGUMENT,
        ns.update_subscription,
        "t",
        "s",
        SubscriptionProperties(requires_session=True),
    )


# ---------------------------------------------------------------------- rules


def test_rule_lifecycle(ns: Namespace, journal: RecordingJournal) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "s")
    ns.create_rule("t", "s", "red", sql("color = 'red'", action="SET x = 1"))
    assert {r.name for r in ns.list_rules("t", "s")} == {"$Default", "red"}
    ns.update_rule("t", "s", "RED", corr(CorrelationId="abc"))
    assert ns.get_rule("t", "s", "red").properties.filter_type is FilterType.CORRELATION
    ns.delete_rule("t", "s", "$default")
    assert [r.name for r in ns.list_rules("t", "s")] == ["red"]
    assert journal.calls[-1] == ("entity_deleted", "t/Subscriptions/s/Rules/$Default")


def test_duplicate_rule_is_refused(ns: Namespace, journal: RecordingJournal) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "s")
    refused(
        ns, journal, Code.ENTITY_ALREADY_EXISTS, ns.create_rule, "t", "s", "$DEFAULT", sql("1=1")
    )


@pytest.mark.parametrize(
    ("rule", "where"),
    [
        (sql("color = 'red' AND"), "filter"),
        (sql("color IN ()"), "filter"),
        (sql("1=1", action="SET = 2"), "action"),
        (sql("1=1", action="SET sys.SequenceNumber = 2"), "action"),
    ],
)
def test_bad_filter_or_action_names_its_position(
    ns: Namespace, journal: RecordingJournal, rule: RuleProperties, where: str
) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "s")
    err = refused(ns, journal, Code.BAD_ARGUMENT, ns.create_rule, "t", "s", "r", rule)
    assert err.where.endswith(where)
    assert err.position is not None


def test_bad_update_rule_keeps_old_rule(ns: Namespace, journal: RecordingJournal) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "s")
    refused(ns, journal, Code.BAD_ARGUMENT, ns.update_rule, "t", "s", "$Default", sql("a = "))
    assert ns.get_rule("t", "s", "$Default").properties.filter_type is FilterType.TRUE


def test_invalid_rule_name(ns: Namespace, journal: RecordingJournal) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "s")
    refused(ns, journal, Code.BAD_ARGUMENT, ns.create_rule, "t", "s", "a/b", sql("1=1"))


def test_sql_and_correlation_rule_quotas(clock: ManualClock, journal: RecordingJournal) -> None:
    limits = NamespaceLimits(max_sql_rules_per_topic=3, max_correlation_rules_per_topic=2)
    ns = Namespace(clock=clock, journal=journal, limits=limits)
    ns.create_topic("t")
    ns.create_subscription("t", "a")  # $Default counts as a SQL rule
    ns.create_subscription("t", "b")
    ns.create_rule("t", "a", "x", sql("x = 1"))
    err = refused(ns, journal, Code.QUOTA_EXCEEDED, ns.create_rule, "t", "b", "y", sql("y = 1"))
    assert "3 SQL" in err.text
    ns.create_rule("t", "a", "c1", corr(CorrelationId="1"))
    ns.create_rule("t", "b", "c2", corr(CorrelationId="2"))
    refused(ns, journal, Code.QUOTA_EXCEEDED, ns.create_rule, "t", "b", "c3", corr(To="3"))
    # replacing a SQL rule by a correlation one is refused by the correlation quota ...
    refused(ns, journal, Code.QUOTA_EXCEEDED, ns.update_rule, "t", "a", "x", corr(To="z"))
    # ... and deleting frees a slot
    ns.delete_rule("t", "a", "c1")
    ns.create_rule("t", "b", "c3", corr(To="3"))


def test_deleting_subscription_frees_its_rules_quota(clock: ManualClock) -> None:
    ns = Namespace(clock=clock, limits=NamespaceLimits(max_sql_rules_per_topic=1))
    ns.create_topic("t")
    ns.create_subscription("t", "a")
    with pytest.raises(ServiceBusError):
        ns.create_subscription("t", "b")
    ns.delete_subscription("t", "a")
    ns.create_subscription("t", "b")


# ---------------------------------------------------------------------- restore


def test_entities_restore_from_the_journal(
    ns: Namespace, journal: RecordingJournal, clock: ManualClock
) -> None:
    ns.create_queue("dest")
    ns.create_queue("Src", QueueProperties(forward_to="dest", max_delivery_count=4))
    ns.create_topic("T", TopicProperties(requires_duplicate_detection=True))
    ns.create_subscription("T", "S", SubscriptionProperties(lock_duration=30.0))
    ns.create_rule("T", "S", "c", corr(CorrelationId="x", Label="y"))
    ns.create_rule("T", "S", "q", sql("a > 1", action="SET b = 2"))
    ns.delete_rule("T", "S", "$Default")
    ns.update_rule("T", "S", "q", sql("a > 2", action="SET b = 3"))

    again = Namespace(clock=clock)
    for path, data in reversed(list(journal.entities.values())):  # any order
        again.restore_entity(path, data)
    again.finish_restore()
    assert snapshot(again) == snapshot(ns)


def test_restore_rejects_an_unknown_record(ns: Namespace) -> None:
    with pytest.raises(ServiceBusError) as info:
        ns.restore_entity("x", {"kind": "widget"})
    assert info.value.code is Code.BAD_ARGUMENT
