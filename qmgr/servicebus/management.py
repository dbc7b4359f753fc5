"""Entities: creating, changing, deleting and listing queues, topics, subscriptions and rules.

The management side of the namespace: every operation validates everything first (names,
properties, quotas, forwarding destinations) and then changes state, so a refused one changes
nothing; each change is journaled as the record ``restore`` reads back. It is kept apart from
the message operations because it changes what they work on (entities, rules, the routing
index) and never touches a message itself, except that enabling ForwardTo moves the messages
an entity holds on (``delivery.forward_held``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from qmgr.servicebus.delivery import forward_held
from qmgr.servicebus.entities import (
    FilterType,
    QueueProperties,
    RuleProperties,
    SubscriptionProperties,
    TopicProperties,
)
from qmgr.servicebus.errors import Code, ServiceBusError, bad, not_found
from qmgr.servicebus.names import (
    DEFAULT_RULE,
    SUBSCRIPTIONS,
    check_entity_name,
    check_rule_name,
    check_subscription_name,
    key,
)
from qmgr.servicebus.rules import CompiledRule, compile_rule
from qmgr.servicebus.state import (
    Entity,
    NamespaceState,
    QueueEntity,
    SubscriptionEntity,
    TopicEntity,
    changed,
    find,
    watch_idle,
)
from qmgr.servicebus.store import MessageStore

_P = TypeVar("_P", QueueProperties, SubscriptionProperties)


# ---------------------------------------------------------------------- what callers see


@dataclass(frozen=True, slots=True, kw_only=True)
class _EntityInfo:
    """What every entity reports: size, scheduled and transfer counts, times of creation,
    last update and last use."""

    scheduled: int
    transfer: int
    size_bytes: int
    created_at: float
    updated_at: float
    accessed_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class _ReceiverInfo(_EntityInfo):
    """A queue's or subscription's message counts by state (dead-lettered: in its DLQ)."""

    active: int
    deferred: int
    dead_lettered: int

    @property
    def total(self) -> int:
        return self.active + self.deferred + self.dead_lettered + self.scheduled


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueInfo(_ReceiverInfo):
    name: str
    properties: QueueProperties


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicInfo(_EntityInfo):
    name: str
    properties: TopicProperties
    subscription_count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriptionInfo(_ReceiverInfo):
    topic: str
    name: str
    properties: SubscriptionProperties
    rule_count: int


@dataclass(frozen=True, slots=True)
class RuleInfo:
    topic: str
    subscription: str
    name: str
    properties: RuleProperties
    created_at: float
    updated_at: float


def _counts(e: Entity, store: MessageStore, dlq: MessageStore | None = None) -> dict[str, Any]:
    """The runtime figures of an entity, for its Info."""
    out: dict[str, Any] = {
        "scheduled": store.scheduled_count,
        "transfer": 0,
        "size_bytes": e.size_bytes,
        "created_at": e.created_at,
        "updated_at": e.updated_at,
        "accessed_at": e.accessed_at,
    }
    if dlq is not None:
        out.update(
            active=store.active_count, deferred=store.deferred_count, dead_lettered=dlq.count
        )
    return out


def queue_info(q: QueueEntity) -> QueueInfo:
    return QueueInfo(name=q.name, properties=q.props, **_counts(q, q.store, q.dlq))


def topic_info(t: TopicEntity) -> TopicInfo:
    return TopicInfo(
        name=t.name, properties=t.props, subscription_count=len(t.subs), **_counts(t, t.store)
    )


def sub_info(s: SubscriptionEntity) -> SubscriptionInfo:
    return SubscriptionInfo(
        topic=s.topic.name,
        name=s.name,
        properties=s.props,
        rule_count=len(s.rules),
        **_counts(s, s.store, s.dlq),
    )


def rule_info(sub: SubscriptionEntity, r: CompiledRule) -> RuleInfo:
    return RuleInfo(sub.topic.name, sub.name, r.name, r.properties, r.created_at, r.updated_at)


# ---------------------------------------------------------------------- journal records


def rule_to_data(rule: RuleProperties) -> dict[str, Any]:
    """A rule definition as the journal keeps it (exact, including true/false filters)."""
    return {
        "filter_type": rule.filter_type.value,
        "sql": rule.sql,
        "correlation": dict(rule.correlation),
        "properties": dict(rule.properties),
        "action": rule.action,
        "parameters": dict(rule.parameters),
    }


def rule_from_data(data: dict[str, Any]) -> RuleProperties:
    return RuleProperties(
        filter_type=FilterType(data["filter_type"]),
        sql=data.get("sql"),
        correlation=dict(data.get("correlation") or {}),
        properties=dict(data.get("properties") or {}),
        action=data.get("action"),
        parameters=dict(data.get("parameters") or {}),
    )


def _rule_path(sub_path: str, rule: str) -> str:
    return f"{sub_path}/Rules/{rule}"


def _entity_data(e: Entity, kind: str, props: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": kind,
        "name": e.name,
        "id": e.uid,
        "properties": props,
        "created_at": e.created_at,
        "updated_at": e.updated_at,
    }


def _store_entity(ns: NamespaceState, e: QueueEntity | TopicEntity | SubscriptionEntity) -> None:
    """An entity was created or changed: resolved paths are looked up again, the entity is
    journaled, and its AutoDeleteOnIdle deadline is (re)armed."""
    changed(ns)
    data = _entity_data(e, e.kind, e.props.to_dict())
    if isinstance(e, SubscriptionEntity):
        data["topic"] = e.topic.name
    ns.journal.entity_saved(e.path, data)
    watch_idle(ns, e)


def _save_rule(ns: NamespaceState, sub: SubscriptionEntity, rule: CompiledRule) -> None:
    ns.journal.entity_saved(
        _rule_path(sub.path, rule.name),
        {
            "kind": "rule",
            "topic": sub.topic.name,
            "subscription": sub.name,
            "name": rule.name,
            "rule": rule_to_data(rule.properties),
            "created_at": rule.created_at,
            "updated_at": rule.updated_at,
        },
    )


def _add(ns: NamespaceState, table: dict[str, Any], e: QueueEntity | TopicEntity) -> None:
    """A new queue or topic: listed under its key in ``table`` and journaled."""
    table[key(e.name)] = e
    _store_entity(ns, e)


def _set_props(
    ns: NamespaceState, e: QueueEntity | TopicEntity | SubscriptionEntity, props: Any
) -> None:
    """An update checked: ``e`` takes ``props`` now, journaled."""
    e.props = props
    e.updated_at = ns.clock.now()
    _store_entity(ns, e)


# ---------------------------------------------------------------------- queues


def create_queue(ns: NamespaceState, name: str, props: QueueProperties | None) -> QueueInfo:
    check_entity_name(name, "queue")
    props = _check_receiver_props(ns, name, props or QueueProperties(), QueueProperties)
    _check_free(ns, name)
    queue = QueueEntity(name, props, ns.clock.now())
    _add(ns, ns.queues, queue)
    return queue_info(queue)


def update_queue(ns: NamespaceState, name: str, props: QueueProperties) -> QueueInfo:
    queue = find(ns.queues, "queue", name)
    props = _check_receiver_props(ns, queue.name, props, QueueProperties)
    _check_create_only(queue.props, props, ("requires_session", "requires_duplicate_detection"))
    _check_create_only(queue.props, props, ("enable_partitioning",))
    _set_props(ns, queue, props)
    forward_held(ns, queue)
    return queue_info(queue)


def delete_queue(ns: NamespaceState, name: str) -> None:
    queue = find(ns.queues, "queue", name)
    _delete(ns, ns.queues, queue, queue.store, queue.dlq)


def get_queue(ns: NamespaceState, name: str) -> QueueInfo:
    return queue_info(find(ns.queues, "queue", name))


def list_queues(ns: NamespaceState) -> list[QueueInfo]:
    return [queue_info(q) for q in ns.queues.values()]


# ---------------------------------------------------------------------- topics


def _check_topic_props(props: Any) -> None:
    if not isinstance(props, TopicProperties):
        raise bad(f"topic properties must be TopicProperties, got {type(props).__name__}")


def create_topic(ns: NamespaceState, name: str, props: TopicProperties | None) -> TopicInfo:
    check_entity_name(name, "topic")
    props = props or TopicProperties()
    _check_topic_props(props)
    _check_free(ns, name)
    topic = TopicEntity(name, props, ns.clock.now())
    _add(ns, ns.topics, topic)
    return topic_info(topic)


def update_topic(ns: NamespaceState, name: str, props: TopicProperties) -> TopicInfo:
    topic = topic_named(ns, name)
    _check_topic_props(props)
    _check_create_only(topic.props, props, ("requires_duplicate_detection", "enable_partitioning"))
    _set_props(ns, topic, props)
    return topic_info(topic)


def delete_topic(ns: NamespaceState, name: str) -> None:
    topic = topic_named(ns, name)
    _delete(ns, ns.topics, topic, topic.store)


def get_topic(ns: NamespaceState, name: str) -> TopicInfo:
    return topic_info(topic_named(ns, name))


def list_topics(ns: NamespaceState) -> list[TopicInfo]:
    return [topic_info(t) for t in ns.topics.values()]


def topic_named(ns: NamespaceState, name: str) -> TopicEntity:
    return find(ns.topics, "topic", name)


def _delete(
    ns: NamespaceState,
    table: dict[str, Any],
    entity: QueueEntity | TopicEntity,
    *stores: MessageStore,
) -> None:
    _drop_store_locks(*stores)
    del table[key(entity.name)]
    changed(ns)
    ns.journal.entity_deleted(entity.name)


def _drop_store_locks(*stores: MessageStore) -> None:
    """Forget what a deleted entity held (its locks and timers die with it)."""
    for store in stores:
        store.locks.clear()
        store.dead = True
    for store in stores:
        owner = store.owner
        if isinstance(owner, TopicEntity):
            for sub in owner.subs.values():
                sub.store.dead = sub.dlq.dead = True


# ---------------------------------------------------------------------- subscriptions


def create_subscription(
    ns: NamespaceState,
    topic: str,
    name: str,
    props: SubscriptionProperties | None,
    rule: tuple[str, RuleProperties] | None,
) -> SubscriptionInfo:
    t = topic_named(ns, topic)
    check_subscription_name(name)
    props = _check_sub_props(ns, t, name, props or SubscriptionProperties())
    if key(name) in t.subs:
        raise ServiceBusError(
            Code.ENTITY_ALREADY_EXISTS,
            f"subscription '{name}' already exists on topic '{t.name}'",
        )
    if len(t.subs) >= ns.limits.max_subscriptions_per_topic:
        raise ServiceBusError(
            Code.QUOTA_EXCEEDED,
            f"topic '{t.name}' already has the maximum of "
            f"{ns.limits.max_subscriptions_per_topic} subscriptions",
        )
    now = ns.clock.now()
    rule_name, rule_props = rule if rule is not None else (DEFAULT_RULE, RuleProperties())
    check_rule_name(rule_name)
    compiled = compile_rule(rule_name, rule_props, now, where=f"rule '{rule_name}'")
    _check_rule_quota(ns, t, [compiled])
    sub = SubscriptionEntity(t, name, props, now)
    t.subs[key(name)] = sub
    t.router.add_subscription(key(name), sub)
    add_rule(t, sub, compiled)
    _store_entity(ns, sub)
    _save_rule(ns, sub, compiled)
    return sub_info(sub)


def update_subscription(
    ns: NamespaceState, topic: str, name: str, props: SubscriptionProperties
) -> SubscriptionInfo:
    sub = sub_named(ns, topic, name)
    props = _check_sub_props(ns, sub.topic, sub.name, props)
    _check_create_only(sub.props, props, ("requires_session",))
    _set_props(ns, sub, props)
    forward_held(ns, sub)
    return sub_info(sub)


def delete_subscription(ns: NamespaceState, topic: str, name: str) -> None:
    sub = sub_named(ns, topic, name)
    t = sub.topic
    _drop_store_locks(sub.store, sub.dlq)
    for rule in sub.rules.values():
        _count_rule(t, rule, -1)
    del t.subs[key(name)]
    t.router.remove_subscription(key(name))
    t.size_bytes -= sub.size_bytes
    changed(ns)
    ns.journal.entity_deleted(sub.path)


def get_subscription(ns: NamespaceState, topic: str, name: str) -> SubscriptionInfo:
    return sub_info(sub_named(ns, topic, name))


def list_subscriptions(ns: NamespaceState, topic: str) -> list[SubscriptionInfo]:
    return [sub_info(s) for s in topic_named(ns, topic).subs.values()]


def sub_named(ns: NamespaceState, topic: str, name: str) -> SubscriptionEntity:
    t = topic_named(ns, topic)
    sub = t.subs.get(key(name)) if isinstance(name, str) else None
    if sub is None:
        raise not_found("subscription", f"{t.name}/{SUBSCRIPTIONS}/{name}")
    return sub


def _check_sub_props(
    ns: NamespaceState, t: TopicEntity, name: str, props: SubscriptionProperties
) -> SubscriptionProperties:
    return _check_receiver_props(
        ns, f"{t.name}/{SUBSCRIPTIONS}/{name}", props, SubscriptionProperties
    )


def _check_receiver_props(ns: NamespaceState, path: str, props: _P, kind: type[_P]) -> _P:
    """Properties of a queue or subscription: forwarding rules (the destination exists,
    is not the entity itself, not from a session entity; a source never auto-deletes)."""
    if not isinstance(props, kind):
        raise bad(f"properties must be {kind.__name__}, got {type(props).__name__}")
    forward_to = props.forward_to
    _check_forwarding(ns, path, forward_to, props.forward_dead_lettered_to)
    if forward_to and props.requires_session:
        raise bad(
            "ForwardTo is not supported on a session-enabled entity (RequiresSession)",
            where="ForwardTo",
        )
    if forward_to and not math.isinf(props.auto_delete_on_idle):
        props = replace(props, auto_delete_on_idle=math.inf)
    return props


# ---------------------------------------------------------------------- rules


def create_rule(
    ns: NamespaceState, topic: str, subscription: str, name: str, rule: RuleProperties
) -> RuleInfo:
    sub = sub_named(ns, topic, subscription)
    check_rule_name(name)
    if key(name) in sub.rules:
        raise ServiceBusError(
            Code.ENTITY_ALREADY_EXISTS,
            f"rule '{name}' already exists on subscription '{sub.path}'",
        )
    compiled = compile_rule(name, rule, ns.clock.now(), where=f"rule '{name}'")
    _check_rule_quota(ns, sub.topic, [compiled])
    add_rule(sub.topic, sub, compiled)
    _save_rule(ns, sub, compiled)
    return rule_info(sub, compiled)


def update_rule(
    ns: NamespaceState, topic: str, subscription: str, name: str, rule: RuleProperties
) -> RuleInfo:
    sub = sub_named(ns, topic, subscription)
    old = rule_named(sub, name)
    compiled = compile_rule(old.name, rule, old.created_at, where=f"rule '{old.name}'")
    compiled.updated_at = ns.clock.now()
    _check_rule_quota(ns, sub.topic, [compiled], replacing=old)
    _count_rule(sub.topic, old, -1)
    sub.rules[key(name)] = compiled
    _count_rule(sub.topic, compiled, +1)
    sub.topic.router.add_rule(key(sub.name), key(name), compiled)
    _save_rule(ns, sub, compiled)
    return rule_info(sub, compiled)


def delete_rule(ns: NamespaceState, topic: str, subscription: str, name: str) -> None:
    sub = sub_named(ns, topic, subscription)
    rule = rule_named(sub, name)
    del sub.rules[key(name)]
    _count_rule(sub.topic, rule, -1)
    sub.topic.router.remove_rule(key(sub.name), key(name))
    ns.journal.entity_deleted(_rule_path(sub.path, rule.name))


def get_rule(ns: NamespaceState, topic: str, subscription: str, name: str) -> RuleInfo:
    sub = sub_named(ns, topic, subscription)
    return rule_info(sub, rule_named(sub, name))


def list_rules(ns: NamespaceState, topic: str, subscription: str) -> list[RuleInfo]:
    sub = sub_named(ns, topic, subscription)
    return [rule_info(sub, r) for r in sub.rules.values()]


def rule_named(sub: SubscriptionEntity, name: str) -> CompiledRule:
    rule = sub.rules.get(key(name)) if isinstance(name, str) else None
    if rule is None:
        raise not_found("rule", _rule_path(sub.path, str(name)))
    return rule


def _check_rule_quota(
    ns: NamespaceState,
    t: TopicEntity,
    new: list[CompiledRule],
    replacing: CompiledRule | None = None,
) -> None:
    sql = t.sql_rules + sum(1 for r in new if r.counts_as_sql)
    corr = t.correlation_rules + sum(1 for r in new if not r.counts_as_sql)
    if replacing is not None:
        if replacing.counts_as_sql:
            sql -= 1
        else:
            corr -= 1
    if sql > ns.limits.max_sql_rules_per_topic:
        raise ServiceBusError(
            Code.QUOTA_EXCEEDED,
            f"topic '{t.name}' already has the maximum of "
            f"{ns.limits.max_sql_rules_per_topic} SQL filter rules",
        )
    if corr > ns.limits.max_correlation_rules_per_topic:
        raise ServiceBusError(
            Code.QUOTA_EXCEEDED,
            f"topic '{t.name}' already has the maximum of "
            f"{ns.limits.max_correlation_rules_per_topic} correlation filter rules",
        )


def add_rule(t: TopicEntity, sub: SubscriptionEntity, rule: CompiledRule) -> None:
    sub.rules[key(rule.name)] = rule
    _count_rule(t, rule, +1)
    t.router.add_rule(key(sub.name), key(rule.name), rule)


def _count_rule(t: TopicEntity, rule: CompiledRule, delta: int) -> None:
    if rule.counts_as_sql:
        t.sql_rules += delta
    else:
        t.correlation_rules += delta


# ---------------------------------------------------------------------- shared checks


def _check_free(ns: NamespaceState, name: str) -> None:
    k = key(name)
    if k in ns.queues or k in ns.topics:
        kind = "queue" if k in ns.queues else "topic"
        raise ServiceBusError(
            Code.ENTITY_ALREADY_EXISTS, f"an entity named '{name}' already exists (a {kind})"
        )


def _check_forwarding(
    ns: NamespaceState, source: str, forward_to: str | None, dlq_to: str | None
) -> None:
    for prop, dest in (("ForwardTo", forward_to), ("ForwardDeadLetteredMessagesTo", dlq_to)):
        if not dest:
            continue
        if key(dest) == key(source):
            raise bad(f"'{source}' has an auto-forwarding policy to itself", where=prop)
        if key(dest) not in ns.queues and key(dest) not in ns.topics:
            raise bad(
                f"the auto forwarding destination entity '{dest}' does not exist "
                "(a queue or topic of this namespace)",
                where=prop,
            )


def _check_create_only(old: Any, new: Any, attrs: tuple[str, ...]) -> None:
    for attr in attrs:
        if getattr(old, attr) != getattr(new, attr):
            name = "".join(part.capitalize() for part in attr.split("_"))
            raise bad(f"{name} can only be set when the entity is created", where=name)
