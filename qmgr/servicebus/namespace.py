"""A Service Bus namespace: queues, topics, subscriptions and rules, and their messages.

Pure: the clock is passed in, durable changes go to an ``SbJournal``. Every management
operation validates everything first and then changes state, so a refused operation changes
nothing. Names are compared case-insensitively and kept as given for display.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from qmgr.core.clock import Clock
from qmgr.servicebus.entities import (
    QueueProperties,
    RuleProperties,
    SubscriptionProperties,
    TopicProperties,
)
from qmgr.servicebus.errors import Code, ServiceBusError, bad, not_found
from qmgr.servicebus.message import NullSbJournal, SbJournal
from qmgr.servicebus.names import (
    DEFAULT_RULE,
    DLQ_SUFFIX,
    SUBSCRIPTIONS,
    check_entity_name,
    check_rule_name,
    check_subscription_name,
    key,
)
from qmgr.servicebus.rules import CompiledRule, Router, compile_rule
from qmgr.servicebus.store import MessageStore

MAX_HOPS = 4  # auto-forwarding chain limit


class ReceiveMode(Enum):
    PEEK_LOCK = "PeekLock"
    RECEIVE_AND_DELETE = "ReceiveAndDelete"


@dataclass(frozen=True, slots=True)
class NamespaceLimits:
    """Per-namespace quotas (Service Bus's documented ones by default); no cap on entities."""

    max_subscriptions_per_topic: int = 2000
    max_sql_rules_per_topic: int = 2000
    max_correlation_rules_per_topic: int = 100_000


# ---------------------------------------------------------------------- what callers see


@dataclass(frozen=True, slots=True)
class QueueInfo:
    name: str
    properties: QueueProperties
    active: int
    deferred: int
    dead_lettered: int
    scheduled: int
    transfer: int
    size_bytes: int
    created_at: float
    updated_at: float
    accessed_at: float

    @property
    def total(self) -> int:
        return self.active + self.deferred + self.dead_lettered + self.scheduled


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    properties: TopicProperties
    subscription_count: int
    scheduled: int
    transfer: int
    size_bytes: int
    created_at: float
    updated_at: float
    accessed_at: float


@dataclass(frozen=True, slots=True)
class SubscriptionInfo:
    topic: str
    name: str
    properties: SubscriptionProperties
    rule_count: int
    active: int
    deferred: int
    dead_lettered: int
    scheduled: int
    transfer: int
    size_bytes: int
    created_at: float
    updated_at: float
    accessed_at: float

    @property
    def total(self) -> int:
        return self.active + self.deferred + self.dead_lettered + self.scheduled


@dataclass(frozen=True, slots=True)
class RuleInfo:
    topic: str
    subscription: str
    name: str
    properties: RuleProperties
    created_at: float
    updated_at: float


# ---------------------------------------------------------------------- entities inside


class _Entity:
    __slots__ = (
        "name",
        "uid",
        "created_at",
        "updated_at",
        "accessed_at",
        "size_bytes",
        "dup_seen",
        "dup_order",
    )

    def __init__(self, name: str, now: float, uid: str | None = None) -> None:
        self.name = name
        self.uid = uid or uuid.uuid4().hex
        self.created_at = now
        self.updated_at = now
        self.accessed_at = now
        self.size_bytes = (
            0  # everything it holds (topics: all subscriptions), for MaxSizeInMegabytes
        )
        self.dup_seen: dict[str, float] = {}  # MessageId -> when first seen
        self.dup_order: Any = None  # deque of (seen_at, MessageId), created when needed


class _Queue(_Entity):
    __slots__ = ("props", "store", "dlq")
    kind = "queue"

    def __init__(self, name: str, props: QueueProperties, now: float, uid: str | None = None):
        super().__init__(name, now, uid)
        self.props = props
        self.store = MessageStore(name, self, sessions_enabled=props.requires_session)
        self.dlq = MessageStore(f"{name}/{DLQ_SUFFIX}", self, dead_letter=True)

    @property
    def path(self) -> str:
        return self.name


class _Topic(_Entity):
    __slots__ = ("props", "subs", "router", "store", "sql_rules", "correlation_rules")
    kind = "topic"

    def __init__(self, name: str, props: TopicProperties, now: float, uid: str | None = None):
        super().__init__(name, now, uid)
        self.props = props
        self.subs: dict[str, _Subscription] = {}
        self.router = Router()
        self.store = MessageStore(name, self)  # scheduled messages, fanned out when due
        self.sql_rules = 0
        self.correlation_rules = 0

    @property
    def path(self) -> str:
        return self.name


class _Subscription(_Entity):
    __slots__ = ("topic", "props", "rules", "store", "dlq")
    kind = "subscription"

    def __init__(
        self,
        topic: _Topic,
        name: str,
        props: SubscriptionProperties,
        now: float,
        uid: str | None = None,
    ):
        super().__init__(name, now, uid)
        self.topic = topic
        self.props = props
        self.rules: dict[str, CompiledRule] = {}
        path = f"{topic.name}/{SUBSCRIPTIONS}/{name}"
        self.store = MessageStore(path, self, sessions_enabled=props.requires_session)
        self.dlq = MessageStore(f"{path}/{DLQ_SUFFIX}", self, dead_letter=True)

    @property
    def path(self) -> str:
        return f"{self.topic.name}/{SUBSCRIPTIONS}/{self.name}"


def _rule_path(sub_path: str, rule: str) -> str:
    return f"{sub_path}/Rules/{rule}"


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
    from qmgr.servicebus.entities import FilterType

    return RuleProperties(
        filter_type=FilterType(data["filter_type"]),
        sql=data.get("sql"),
        correlation=dict(data.get("correlation") or {}),
        properties=dict(data.get("properties") or {}),
        action=data.get("action"),
        parameters=dict(data.get("parameters") or {}),
    )


class Namespace:
    """One Service Bus namespace (see the module docstring)."""

    def __init__(
        self,
        name: str = "sbemulatorns",
        *,
        clock: Clock,
        journal: SbJournal | None = None,
        limits: NamespaceLimits | None = None,
    ) -> None:
        self.name = name
        self.clock = clock
        self.journal: SbJournal = journal or NullSbJournal()
        self.limits = limits or NamespaceLimits()
        self._queues: dict[str, _Queue] = {}
        self._topics: dict[str, _Topic] = {}
        self._init_data_plane()

    def _init_data_plane(self) -> None:
        self._paths: dict[str, Any] = {}  # raw path -> resolved target (cleared on changes)
        self._restoring: list[tuple[str, dict[str, Any]]] = []

    def _changed(self) -> None:
        self._paths.clear()

    # ================================================================== queues

    def create_queue(self, name: str, props: QueueProperties | None = None) -> QueueInfo:
        check_entity_name(name, "queue")
        props = self._check_queue_props(name, props or QueueProperties())
        self._check_free(name)
        queue = _Queue(name, props, self.clock.now())
        self._queues[key(name)] = queue
        self._changed()
        self._save_queue(queue)
        return self._queue_info(queue)

    def update_queue(self, name: str, props: QueueProperties) -> QueueInfo:
        queue = self._queue(name)
        props = self._check_queue_props(queue.name, props)
        self._check_create_only(
            queue.props, props, ("requires_session", "requires_duplicate_detection")
        )
        self._check_create_only(queue.props, props, ("enable_partitioning",))
        queue.props = props
        queue.updated_at = self.clock.now()
        self._changed()
        self._save_queue(queue)
        return self._queue_info(queue)

    def delete_queue(self, name: str) -> None:
        queue = self._queue(name)
        self._drop_store_locks(queue.store, queue.dlq)
        del self._queues[key(name)]
        self._changed()
        self.journal.entity_deleted(queue.name)

    def get_queue(self, name: str) -> QueueInfo:
        return self._queue_info(self._queue(name))

    def list_queues(self) -> list[QueueInfo]:
        return [self._queue_info(q) for q in self._queues.values()]

    def _queue(self, name: str) -> _Queue:
        queue = self._queues.get(key(name)) if isinstance(name, str) else None
        if queue is None:
            raise not_found("queue", str(name))
        return queue

    def _check_queue_props(self, name: str, props: QueueProperties) -> QueueProperties:
        if not isinstance(props, QueueProperties):
            raise bad(f"queue properties must be QueueProperties, got {type(props).__name__}")
        self._check_forwarding(name, props.forward_to, props.forward_dead_lettered_to)
        if props.forward_to and props.requires_session:
            raise bad(
                "ForwardTo is not supported on a session-enabled entity (RequiresSession)",
                where="ForwardTo",
            )
        if props.forward_to and not math.isinf(props.auto_delete_on_idle):
            props = replace(props, auto_delete_on_idle=math.inf)
        return props

    def _queue_info(self, q: _Queue) -> QueueInfo:
        s = q.store
        return QueueInfo(
            q.name,
            q.props,
            s.active_count,
            s.deferred_count,
            q.dlq.count,
            s.scheduled_count,
            0,
            q.size_bytes,
            q.created_at,
            q.updated_at,
            q.accessed_at,
        )

    def _save_queue(self, q: _Queue) -> None:
        self.journal.entity_saved(q.name, self._entity_data(q, "queue", q.props.to_dict()))

    @staticmethod
    def _entity_data(e: _Entity, kind: str, props: dict[str, Any]) -> dict[str, Any]:
        return {
            "kind": kind,
            "name": e.name,
            "id": e.uid,
            "properties": props,
            "created_at": e.created_at,
            "updated_at": e.updated_at,
        }

    # ================================================================== topics

    def create_topic(self, name: str, props: TopicProperties | None = None) -> TopicInfo:
        check_entity_name(name, "topic")
        props = props or TopicProperties()
        if not isinstance(props, TopicProperties):
            raise bad(f"topic properties must be TopicProperties, got {type(props).__name__}")
        self._check_free(name)
        topic = _Topic(name, props, self.clock.now())
        self._topics[key(name)] = topic
        self._changed()
        self._save_topic(topic)
        return self._topic_info(topic)

    def update_topic(self, name: str, props: TopicProperties) -> TopicInfo:
        topic = self._topic(name)
        if not isinstance(props, TopicProperties):
            raise bad(f"topic properties must be TopicProperties, got {type(props).__name__}")
        self._check_create_only(
            topic.props, props, ("requires_duplicate_detection", "enable_partitioning")
        )
        topic.props = props
        topic.updated_at = self.clock.now()
        self._changed()
        self._save_topic(topic)
        return self._topic_info(topic)

    def delete_topic(self, name: str) -> None:
        topic = self._topic(name)
        for sub in topic.subs.values():
            self._drop_store_locks(sub.store, sub.dlq)
        del self._topics[key(name)]
        self._changed()
        self.journal.entity_deleted(topic.name)

    def get_topic(self, name: str) -> TopicInfo:
        return self._topic_info(self._topic(name))

    def list_topics(self) -> list[TopicInfo]:
        return [self._topic_info(t) for t in self._topics.values()]

    def _topic(self, name: str) -> _Topic:
        topic = self._topics.get(key(name)) if isinstance(name, str) else None
        if topic is None:
            raise not_found("topic", str(name))
        return topic

    def _topic_info(self, t: _Topic) -> TopicInfo:
        return TopicInfo(
            t.name,
            t.props,
            len(t.subs),
            t.store.scheduled_count,
            0,
            t.size_bytes,
            t.created_at,
            t.updated_at,
            t.accessed_at,
        )

    def _save_topic(self, t: _Topic) -> None:
        self.journal.entity_saved(t.name, self._entity_data(t, "topic", t.props.to_dict()))

    # ================================================================== subscriptions

    def create_subscription(
        self,
        topic: str,
        name: str,
        props: SubscriptionProperties | None = None,
        rule: tuple[str, RuleProperties] | None = None,
    ) -> SubscriptionInfo:
        """A new subscription with ``rule`` (name, definition), or ``$Default`` (a true filter)."""
        t = self._topic(topic)
        check_subscription_name(name)
        props = self._check_sub_props(t, name, props or SubscriptionProperties())
        if key(name) in t.subs:
            raise ServiceBusError(
                Code.ENTITY_ALREADY_EXISTS,
                f"subscription '{name}' already exists on topic '{t.name}'",
            )
        if len(t.subs) >= self.limits.max_subscriptions_per_topic:
            raise ServiceBusError(
                Code.QUOTA_EXCEEDED,
                f"topic '{t.name}' already has the maximum of "
                f"{self.limits.max_subscriptions_per_topic} subscriptions",
            )
        now = self.clock.now()
        rule_name, rule_props = rule if rule is not None else (DEFAULT_RULE, RuleProperties())
        check_rule_name(rule_name)
        compiled = compile_rule(rule_name, rule_props, now, where=f"rule '{rule_name}'")
        self._check_rule_quota(t, [compiled])
        sub = _Subscription(t, name, props, now)
        t.subs[key(name)] = sub
        self._add_rule(t, sub, compiled)
        self._changed()
        self._save_sub(sub)
        self._save_rule(sub, compiled)
        return self._sub_info(sub)

    def update_subscription(
        self, topic: str, name: str, props: SubscriptionProperties
    ) -> SubscriptionInfo:
        sub = self._sub(topic, name)
        props = self._check_sub_props(sub.topic, sub.name, props)
        self._check_create_only(sub.props, props, ("requires_session",))
        sub.props = props
        sub.updated_at = self.clock.now()
        self._changed()
        self._save_sub(sub)
        return self._sub_info(sub)

    def delete_subscription(self, topic: str, name: str) -> None:
        sub = self._sub(topic, name)
        t = sub.topic
        self._drop_store_locks(sub.store, sub.dlq)
        for rule in sub.rules.values():
            self._count_rule(t, rule, -1)
        del t.subs[key(name)]
        t.router.remove(key(name))
        t.size_bytes -= sub.size_bytes
        self._changed()
        self.journal.entity_deleted(sub.path)

    def get_subscription(self, topic: str, name: str) -> SubscriptionInfo:
        return self._sub_info(self._sub(topic, name))

    def list_subscriptions(self, topic: str) -> list[SubscriptionInfo]:
        return [self._sub_info(s) for s in self._topic(topic).subs.values()]

    def _sub(self, topic: str, name: str) -> _Subscription:
        t = self._topic(topic)
        sub = t.subs.get(key(name)) if isinstance(name, str) else None
        if sub is None:
            raise not_found("subscription", f"{t.name}/{SUBSCRIPTIONS}/{name}")
        return sub

    def _check_sub_props(
        self, t: _Topic, name: str, props: SubscriptionProperties
    ) -> SubscriptionProperties:
        if not isinstance(props, SubscriptionProperties):
            raise bad(
                f"subscription properties must be SubscriptionProperties, "
                f"got {type(props).__name__}"
            )
        self._check_forwarding(
            f"{t.name}/{SUBSCRIPTIONS}/{name}", props.forward_to, props.forward_dead_lettered_to
        )
        if props.forward_to and props.requires_session:
            raise bad(
                "ForwardTo is not supported on a session-enabled entity (RequiresSession)",
                where="ForwardTo",
            )
        if props.forward_to and not math.isinf(props.auto_delete_on_idle):
            props = replace(props, auto_delete_on_idle=math.inf)
        return props

    def _sub_info(self, s: _Subscription) -> SubscriptionInfo:
        st = s.store
        return SubscriptionInfo(
            s.topic.name,
            s.name,
            s.props,
            len(s.rules),
            st.active_count,
            st.deferred_count,
            s.dlq.count,
            st.scheduled_count,
            0,
            s.size_bytes,
            s.created_at,
            s.updated_at,
            s.accessed_at,
        )

    def _save_sub(self, s: _Subscription) -> None:
        data = self._entity_data(s, "subscription", s.props.to_dict())
        data["topic"] = s.topic.name
        self.journal.entity_saved(s.path, data)

    # ================================================================== rules

    def create_rule(
        self, topic: str, subscription: str, name: str, rule: RuleProperties
    ) -> RuleInfo:
        sub = self._sub(topic, subscription)
        check_rule_name(name)
        if key(name) in sub.rules:
            raise ServiceBusError(
                Code.ENTITY_ALREADY_EXISTS,
                f"rule '{name}' already exists on subscription '{sub.path}'",
            )
        compiled = compile_rule(name, rule, self.clock.now(), where=f"rule '{name}'")
        self._check_rule_quota(sub.topic, [compiled])
        self._add_rule(sub.topic, sub, compiled)
        self._save_rule(sub, compiled)
        return self._rule_info(sub, compiled)

    def update_rule(
        self, topic: str, subscription: str, name: str, rule: RuleProperties
    ) -> RuleInfo:
        sub = self._sub(topic, subscription)
        old = self._rule(sub, name)
        compiled = compile_rule(old.name, rule, old.created_at, where=f"rule '{old.name}'")
        compiled.updated_at = self.clock.now()
        self._check_rule_quota(sub.topic, [compiled], replacing=old)
        self._count_rule(sub.topic, old, -1)
        sub.rules[key(name)] = compiled
        self._count_rule(sub.topic, compiled, +1)
        sub.topic.router.set_rules(key(sub.name), sub, sub.rules.values())
        self._save_rule(sub, compiled)
        return self._rule_info(sub, compiled)

    def delete_rule(self, topic: str, subscription: str, name: str) -> None:
        sub = self._sub(topic, subscription)
        rule = self._rule(sub, name)
        del sub.rules[key(name)]
        self._count_rule(sub.topic, rule, -1)
        sub.topic.router.set_rules(key(sub.name), sub, sub.rules.values())
        self.journal.entity_deleted(_rule_path(sub.path, rule.name))

    def get_rule(self, topic: str, subscription: str, name: str) -> RuleInfo:
        sub = self._sub(topic, subscription)
        return self._rule_info(sub, self._rule(sub, name))

    def list_rules(self, topic: str, subscription: str) -> list[RuleInfo]:
        sub = self._sub(topic, subscription)
        return [self._rule_info(sub, r) for r in sub.rules.values()]

    def _rule(self, sub: _Subscription, name: str) -> CompiledRule:
        rule = sub.rules.get(key(name)) if isinstance(name, str) else None
        if rule is None:
            raise not_found("rule", _rule_path(sub.path, str(name)))
        return rule

    def _rule_info(self, sub: _Subscription, r: CompiledRule) -> RuleInfo:
        return RuleInfo(sub.topic.name, sub.name, r.name, r.properties, r.created_at, r.updated_at)

    def _check_rule_quota(
        self, t: _Topic, new: list[CompiledRule], replacing: CompiledRule | None = None
    ) -> None:
        sql = t.sql_rules + sum(1 for r in new if r.counts_as_sql)
        corr = t.correlation_rules + sum(1 for r in new if not r.counts_as_sql)
        if replacing is not None:
            if replacing.counts_as_sql:
                sql -= 1
            else:
                corr -= 1
        if sql > self.limits.max_sql_rules_per_topic:
            raise ServiceBusError(
                Code.QUOTA_EXCEEDED,
                f"topic '{t.name}' already has the maximum of "
                f"{self.limits.max_sql_rules_per_topic} SQL filter rules",
            )
        if corr > self.limits.max_correlation_rules_per_topic:
            raise ServiceBusError(
                Code.QUOTA_EXCEEDED,
                f"topic '{t.name}' already has the maximum of "
                f"{self.limits.max_correlation_rules_per_topic} correlation filter rules",
            )

    def _add_rule(self, t: _Topic, sub: _Subscription, rule: CompiledRule) -> None:
        sub.rules[key(rule.name)] = rule
        self._count_rule(t, rule, +1)
        t.router.set_rules(key(sub.name), sub, sub.rules.values())

    @staticmethod
    def _count_rule(t: _Topic, rule: CompiledRule, delta: int) -> None:
        if rule.counts_as_sql:
            t.sql_rules += delta
        else:
            t.correlation_rules += delta

    def _save_rule(self, sub: _Subscription, rule: CompiledRule) -> None:
        self.journal.entity_saved(
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

    # ================================================================== shared checks

    def _check_free(self, name: str) -> None:
        k = key(name)
        if k in self._queues or k in self._topics:
            kind = "queue" if k in self._queues else "topic"
            raise ServiceBusError(
                Code.ENTITY_ALREADY_EXISTS, f"an entity named '{name}' already exists (a {kind})"
            )

    def _check_forwarding(self, source: str, forward_to: str | None, dlq_to: str | None) -> None:
        for prop, dest in (("ForwardTo", forward_to), ("ForwardDeadLetteredMessagesTo", dlq_to)):
            if not dest:
                continue
            if key(dest) == key(source):
                raise bad(f"'{source}' has an auto-forwarding policy to itself", where=prop)
            if key(dest) not in self._queues and key(dest) not in self._topics:
                raise bad(
                    f"the auto forwarding destination entity '{dest}' does not exist "
                    "(a queue or topic of this namespace)",
                    where=prop,
                )

    @staticmethod
    def _check_create_only(old: Any, new: Any, attrs: tuple[str, ...]) -> None:
        for attr in attrs:
            if getattr(old, attr) != getattr(new, attr):
                name = "".join(part.capitalize() for part in attr.split("_"))
                raise bad(f"{name} can only be set when the entity is created", where=name)

    def _drop_store_locks(self, *stores: MessageStore) -> None:
        """Forget what a deleted entity held (its locks die with it)."""
        for store in stores:
            store.locks.clear()

    # ================================================================== restore

    def restore_entity(self, path: str, data: dict[str, Any]) -> None:
        """An entity (queue, topic, subscription or rule) as ``entity_saved`` journaled it.
        Entities may come in any order; all of them must come before the messages, session
        states and values."""
        if not isinstance(data, dict) or data.get("kind") not in _RESTORE_ORDER:
            raise bad(f"cannot restore entity '{path}': unknown record {data!r}")
        self._restoring.append((path, data))

    def _apply_restored_entities(self) -> None:
        if not self._restoring:
            return
        pending = sorted(self._restoring, key=lambda item: _RESTORE_ORDER[item[1]["kind"]])
        self._restoring = []
        for path, data in pending:
            kind = data["kind"]
            where = f"restored {kind} '{path}'"
            name = data["name"]
            created = float(data.get("created_at", self.clock.now()))
            if kind == "queue":
                qprops = QueueProperties.from_dict(data.get("properties"), where)
                queue = _Queue(name, qprops, created, data.get("id"))
                queue.updated_at = float(data.get("updated_at", created))
                self._queues[key(name)] = queue
            elif kind == "topic":
                tprops = TopicProperties.from_dict(data.get("properties"), where)
                topic = _Topic(name, tprops, created, data.get("id"))
                topic.updated_at = float(data.get("updated_at", created))
                self._topics[key(name)] = topic
            elif kind == "subscription":
                t = self._topic(data["topic"])
                sprops = SubscriptionProperties.from_dict(data.get("properties"), where)
                sub = _Subscription(t, name, sprops, created, data.get("id"))
                sub.updated_at = float(data.get("updated_at", created))
                t.subs[key(name)] = sub
                t.router.set_rules(key(name), sub, ())
            else:
                sub = self._sub(data["topic"], data["subscription"])
                compiled = compile_rule(name, rule_from_data(data["rule"]), created, where)
                compiled.updated_at = float(data.get("updated_at", created))
                self._add_rule(sub.topic, sub, compiled)
        self._changed()

    def finish_restore(self) -> None:
        """Everything saved has been restored: build what the journal does not keep."""
        self._apply_restored_entities()


_RESTORE_ORDER = {"queue": 0, "topic": 0, "subscription": 1, "rule": 2}
