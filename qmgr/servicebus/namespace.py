"""A Service Bus namespace: queues, topics, subscriptions and rules, and their messages.

Pure: the clock is passed in, durable changes go to an ``SbJournal``. Every operation
validates everything first and then changes state, so a refused operation changes nothing.
Names are compared case-insensitively and kept as given for display.

How messages are numbered and kept:

- Every queue, subscription and topic numbers what it accepts, gap-free from 1. ``send`` to a
  topic returns the topic's numbers; each subscription numbers its own copies and keeps the
  topic's number as ``enqueued_sequence_number`` (so does a forwarding destination: the
  number at the first entity). A dead-lettered message keeps its number in the dead-letter
  queue. A scheduled message gets a number when scheduled (to cancel it) and a new one when
  it becomes active.
- ``send`` returns 0 for a message that duplicate detection dropped (the send succeeds).
- ``Stored.delivery_count`` counts failed deliveries (abandon, lock or session lock expiry),
  as AMQP's ``delivery-count`` header does; a receiver sees 0 the first time. A message whose
  count reaches MaxDeliveryCount is dead-lettered (``MaxDeliveryCountExceeded``).
- ``receive``, ``peek`` and ``receive_deferred`` return snapshots: later changes to the
  message do not show in them.
- Dead-letter reasons are the application properties ``DeadLetterReason`` and
  ``DeadLetterErrorDescription`` of the dead-lettered message: the system reasons are
  ``MaxDeliveryCountExceeded``, ``TTLExpiredException``, ``MaxTransferHopCountExceeded``,
  ``Session ID is null.``, ``FilterEvaluationException`` and, for a message that could not be
  auto-forwarded, the code of the failure (``MessagingEntityNotFound``,
  ``MessagingEntityDisabled``, ``QuotaExceeded``).
- The journal is told of a message when it is added, removed, or its state, properties or
  delivery count change, and when it is handed out under a lock (``message_locked``; a
  release ends the mark with ``message_unlocked``). Lock tokens are not kept: after a restart
  every message is unlocked, and one that was locked when the namespace went down has lost
  its lock as if it had expired (delivery count + 1, dead-lettered at MaxDeliveryCount).

Timers: ``next_deadline`` says when ``tick`` has something to do (lock and session lock
expiry, scheduled activation, TTL expiry, duplicate history, AutoDeleteOnIdle); each store
keeps its deadlines in heaps, so a tick visits only what is due.
"""

from __future__ import annotations

import heapq
import math
import uuid
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, TypeVar

from qmgr.core.clock import Clock
from qmgr.filters import FilterEvaluationError
from qmgr.servicebus.entities import (
    QueueProperties,
    RuleProperties,
    SubscriptionProperties,
    TopicProperties,
)
from qmgr.servicebus.errors import Code, ServiceBusError, bad, not_found
from qmgr.servicebus.message import MessageState, NullSbJournal, SbJournal, SbMessage, Stored
from qmgr.servicebus.names import (
    DEFAULT_RULE,
    DLQ_SUFFIX,
    SUBSCRIPTIONS,
    EntityPath,
    check_entity_name,
    check_rule_name,
    check_subscription_name,
    key,
)
from qmgr.servicebus.rules import CompiledRule, Router, compile_rule
from qmgr.servicebus.store import MessageStore, SessionQueue
from qmgr.servicebus.tokens import LockTokens

MAX_HOPS = 4  # auto-forwarding chain limit

_P = TypeVar("_P", QueueProperties, SubscriptionProperties)


class ReceiveMode(Enum):
    PEEK_LOCK = "PeekLock"
    RECEIVE_AND_DELETE = "ReceiveAndDelete"


@dataclass(frozen=True, slots=True)
class SessionLock:
    """A session held by one receiver until ``locked_until`` (renewable)."""

    session_id: str
    lock_token: uuid.UUID
    locked_until: float


@dataclass(frozen=True, slots=True)
class NamespaceLimits:
    """Per-namespace quotas (Service Bus's documented ones by default); no cap on entities."""

    max_subscriptions_per_topic: int = 2000
    max_sql_rules_per_topic: int = 2000
    max_correlation_rules_per_topic: int = 100_000


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


_E = TypeVar("_E")


def _find(table: dict[str, _E], kind: str, name: str) -> _E:
    found = table.get(key(name)) if isinstance(name, str) else None
    if found is None:
        raise not_found(kind, str(name))
    return found


def _counts(e: _Entity, store: MessageStore, dlq: MessageStore | None = None) -> dict[str, Any]:
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


def _with_properties(msg: SbMessage, changes: Mapping[str, Any]) -> SbMessage:
    """A copy of ``msg`` with application properties changed (the original may be shared by
    the copies of other subscriptions)."""
    props = dict(msg.properties)
    props.update(changes)
    return replace(msg, properties=props)


def _check_settle_args(
    properties: Mapping[str, Any] | None,
    reason: str | None = None,
    description: str | None = None,
) -> None:
    """What abandon, defer and dead-letter change, checked before the lock is taken back (a
    refused settlement must leave the message locked as it was)."""
    if properties is not None:
        if not isinstance(properties, Mapping):
            raise bad(f"properties must be a mapping, got {type(properties).__name__}")
        for name in properties:
            if not isinstance(name, str) or not name:
                raise bad(f"property names must be non-empty strings, got {name!r}")
    for what, value in (("reason", reason), ("description", description)):
        if value is not None and not isinstance(value, str):
            raise bad(f"the dead-letter {what} must be a string, got {type(value).__name__}")


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


_ID_ATTRS = ("message_id", "session_id", "partition_key", "reply_to_session_id")


def _short_id(value: object) -> bool:
    """An identifier a message may carry: absent, or a string of at most 128 characters."""
    return value is None or (isinstance(value, str) and len(value) <= 128)


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
        self._timers: list[tuple[float, int, MessageStore]] = []  # (deadline, n, store)
        self._timer_n = 0
        self._dirty: list[MessageStore] = []  # stores whose sequence counter must be journaled
        self._idle: list[tuple[float, int, Any]] = []  # (auto-delete deadline, n, entity)
        self._lost_locks: list[tuple[Any, MessageStore, Stored]] = []  # restored, were locked
        self._lock_token = LockTokens()  # message and session lock tokens

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
        self._watch_idle(queue)
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
        self._watch_idle(queue)
        self._forward_held(queue)
        return self._queue_info(queue)

    def delete_queue(self, name: str) -> None:
        queue = self._queue(name)
        self._delete(self._queues, queue, queue.store, queue.dlq)

    def get_queue(self, name: str) -> QueueInfo:
        return self._queue_info(self._queue(name))

    def list_queues(self) -> list[QueueInfo]:
        return [self._queue_info(q) for q in self._queues.values()]

    def _queue(self, name: str) -> _Queue:
        return _find(self._queues, "queue", name)

    def _check_queue_props(self, name: str, props: QueueProperties) -> QueueProperties:
        return self._check_receiver(name, props, QueueProperties)

    def _queue_info(self, q: _Queue) -> QueueInfo:
        return QueueInfo(name=q.name, properties=q.props, **_counts(q, q.store, q.dlq))

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
        self._watch_idle(topic)
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
        self._watch_idle(topic)
        return self._topic_info(topic)

    def delete_topic(self, name: str) -> None:
        topic = self._topic(name)
        self._delete(self._topics, topic, topic.store)

    def _delete(
        self, table: dict[str, Any], entity: _Queue | _Topic, *stores: MessageStore
    ) -> None:
        self._drop_store_locks(*stores)
        del table[key(entity.name)]
        self._changed()
        self.journal.entity_deleted(entity.name)

    def get_topic(self, name: str) -> TopicInfo:
        return self._topic_info(self._topic(name))

    def list_topics(self) -> list[TopicInfo]:
        return [self._topic_info(t) for t in self._topics.values()]

    def _topic(self, name: str) -> _Topic:
        return _find(self._topics, "topic", name)

    def _topic_info(self, t: _Topic) -> TopicInfo:
        return TopicInfo(
            name=t.name, properties=t.props, subscription_count=len(t.subs), **_counts(t, t.store)
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
        t.router.add_subscription(key(name), sub)
        self._add_rule(t, sub, compiled)
        self._changed()
        self._save_sub(sub)
        self._save_rule(sub, compiled)
        self._watch_idle(sub)
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
        self._watch_idle(sub)
        self._forward_held(sub)
        return self._sub_info(sub)

    def delete_subscription(self, topic: str, name: str) -> None:
        sub = self._sub(topic, name)
        t = sub.topic
        self._drop_store_locks(sub.store, sub.dlq)
        for rule in sub.rules.values():
            self._count_rule(t, rule, -1)
        del t.subs[key(name)]
        t.router.remove_subscription(key(name))
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
        return self._check_receiver(
            f"{t.name}/{SUBSCRIPTIONS}/{name}", props, SubscriptionProperties
        )

    def _check_receiver(self, path: str, props: _P, kind: type[_P]) -> _P:
        """Properties of a queue or subscription: forwarding rules (the destination exists,
        is not the entity itself, not from a session entity; a source never auto-deletes)."""
        if not isinstance(props, kind):
            raise bad(f"properties must be {kind.__name__}, got {type(props).__name__}")
        forward_to = props.forward_to
        self._check_forwarding(path, forward_to, props.forward_dead_lettered_to)
        if forward_to and props.requires_session:
            raise bad(
                "ForwardTo is not supported on a session-enabled entity (RequiresSession)",
                where="ForwardTo",
            )
        if forward_to and not math.isinf(props.auto_delete_on_idle):
            props = replace(props, auto_delete_on_idle=math.inf)
        return props

    def _sub_info(self, s: _Subscription) -> SubscriptionInfo:
        return SubscriptionInfo(
            topic=s.topic.name,
            name=s.name,
            properties=s.props,
            rule_count=len(s.rules),
            **_counts(s, s.store, s.dlq),
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
        sub.topic.router.add_rule(key(sub.name), key(name), compiled)
        self._save_rule(sub, compiled)
        return self._rule_info(sub, compiled)

    def delete_rule(self, topic: str, subscription: str, name: str) -> None:
        sub = self._sub(topic, subscription)
        rule = self._rule(sub, name)
        del sub.rules[key(name)]
        self._count_rule(sub.topic, rule, -1)
        sub.topic.router.remove_rule(key(sub.name), key(name))
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
        t.router.add_rule(key(sub.name), key(rule.name), rule)

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

    def _forward_held(self, entity: _Queue | _Subscription) -> None:
        """Forwarding was just enabled: the active messages the entity holds move on too."""
        if not entity.props.forward_to or not entity.store.active_count:
            return
        store = entity.store
        now = self.clock.now()
        waiting = [
            s
            for s in store.messages.values()
            if s.state is MessageState.ACTIVE and s.lock_token is None
        ]
        try:
            for stored in waiting:
                self._forward_stored(entity, store, stored, now)
        finally:
            self._flush()

    def _forward_stored(
        self, entity: _Queue | _Subscription, store: MessageStore, stored: Stored, now: float
    ) -> None:
        """A message held by a forwarding entity (unlocked) moves on to its ForwardTo."""
        self._remove(store, stored)
        self._forward(
            entity,
            stored.message,
            stored.size,
            now,
            stored.hop_count,
            stored.enqueued_sequence_number,
            stored.dead_letter_source,
            stored.sequence_number,
        )

    def _return(self, entity: Any, store: MessageStore, stored: Stored, now: float) -> None:
        """An active message handed back (abandon, lock expiry, release): available again, or
        forwarded if its entity has started forwarding since it was received (nobody may
        receive from a forwarding entity)."""
        if store is entity.store and entity.props.forward_to:
            self._forward_stored(entity, store, stored, now)
        else:
            store.make_available(stored, returned=True)

    def _drop_store_locks(self, *stores: MessageStore) -> None:
        """Forget what a deleted entity held (its locks and timers die with it)."""
        for store in stores:
            store.locks.clear()
            store.dead = True
        for store in stores:
            owner = store.owner
            if isinstance(owner, _Topic):
                for sub in owner.subs.values():
                    sub.store.dead = sub.dlq.dead = True

    # ================================================================== data plane: paths

    def _resolve(self, path: str) -> tuple[Any, MessageStore]:
        """(entity, store) for a queue, subscription or dead-letter path; for a topic, the
        topic and its store of scheduled messages."""
        hit = self._paths.get(path)
        if hit is not None:
            return hit
        if not isinstance(path, str) or not path.strip("/"):
            raise bad(f"invalid entity path {path!r}")
        parsed = EntityPath.parse(path)
        entity: Any
        if parsed.subscription is not None:
            topic = self._topics.get(key(parsed.entity))
            entity = topic.subs.get(key(parsed.subscription)) if topic else None
            if entity is None:
                raise not_found("subscription", parsed.base)
        else:
            entity = self._queues.get(key(parsed.entity)) or self._topics.get(key(parsed.entity))
            if entity is None:
                raise not_found("queue or topic", parsed.entity)
            if parsed.dlq and isinstance(entity, _Topic):
                raise not_found("dead-letter queue", str(parsed))
        store = entity.dlq if parsed.dlq else entity.store
        hit = (entity, store)
        self._paths[path] = hit
        return hit

    def check_sender(self, path: str) -> None:
        """Raise the error a send to ``path`` would meet (unknown entity, a subscription or
        dead-letter queue, sending disabled); a protocol edge checks a link with it."""
        self._send_target(path)

    def check_receiver(self, path: str) -> bool:
        """Raise the error a receive from ``path`` would meet; returns whether the entity
        requires sessions."""
        return self._receive_source(path)[1].sessions_enabled

    def _send_target(self, path: str) -> _Queue | _Topic:
        entity, store = self._resolve(path)
        if isinstance(entity, _Subscription) or store.dead_letter:
            raise ServiceBusError(
                Code.INVALID_OPERATION,
                f"cannot send to '{path}': send to a queue or a topic",
            )
        if not entity.props.status.can_send:
            raise ServiceBusError(
                Code.ENTITY_DISABLED,
                f"{entity.kind} '{entity.name}' is {entity.props.status.value}: sending is disabled",
            )
        return entity

    def _receive_source(self, path: str) -> tuple[Any, MessageStore]:
        entity, store = self._resolve(path)
        if isinstance(entity, _Topic):
            raise ServiceBusError(
                Code.INVALID_OPERATION,
                f"cannot receive from topic '{entity.name}': receive from a subscription",
            )
        if not entity.props.status.can_receive:
            raise ServiceBusError(
                Code.ENTITY_DISABLED,
                f"{entity.kind} '{entity.path}' is {entity.props.status.value}: "
                "receiving is disabled",
            )
        if not store.dead_letter and entity.props.forward_to:
            raise ServiceBusError(
                Code.INVALID_OPERATION,
                f"cannot receive from or browse '{entity.path}': it auto-forwards to "
                f"'{entity.props.forward_to}'",
            )
        return entity, store

    # ================================================================== send

    def send(self, path: str, messages: Sequence[SbMessage]) -> list[int]:
        """Send a batch (validated whole first: nothing is stored if one message is refused).
        Returns the sequence number each message got at ``path`` (0 for a duplicate that
        duplicate detection dropped)."""
        target = self._send_target(path)
        now = self.clock.now()
        sizes = self._check_batch(target, messages, now)
        target.accessed_at = now
        out: list[int] = []
        try:
            for msg, size in zip(messages, sizes, strict=True):
                out.append(self._accept(target, msg, size, now))
        finally:
            self._flush()
        return out

    def schedule(self, path: str, messages: Sequence[SbMessage], at: float) -> list[int]:
        """Schedule messages for ``at`` (epoch seconds); returns the sequence numbers to cancel
        them with. A time not in the future sends them now."""
        if isinstance(at, bool) or not isinstance(at, int | float) or math.isnan(at):
            raise bad(f"a scheduled enqueue time must be a number of seconds, got {at!r}")
        target = self._send_target(path)
        now = self.clock.now()
        sizes = self._check_batch(target, messages, now)
        target.accessed_at = now
        out: list[int] = []
        try:
            for msg, size in zip(messages, sizes, strict=True):
                out.append(self._accept(target, msg, size, now, float(at)))
        finally:
            self._flush()
        return out

    def cancel_scheduled(self, path: str, sequence_numbers: Sequence[int]) -> None:
        target = self._send_target(path)
        store = target.store
        found: list[Stored] = []
        for seq in dict.fromkeys(sequence_numbers):  # a number given twice is cancelled once
            stored = store.messages.get(seq)
            if stored is None or stored.state is not MessageState.SCHEDULED:
                raise ServiceBusError(
                    Code.MESSAGE_NOT_FOUND,
                    f"no scheduled message with sequence number {seq} in '{target.name}'",
                )
            found.append(stored)
        for stored in found:
            self._remove(store, stored)

    def _check_batch(self, target: Any, messages: Sequence[SbMessage], now: float) -> list[int]:
        if isinstance(messages, SbMessage) or not isinstance(messages, Sequence):
            raise bad("messages must be a sequence of SbMessage")
        props = target.props
        limit = props.max_message_size_kb * 1024
        session_queue = isinstance(target, _Queue) and props.requires_session
        sizes: list[int] = []
        total = 0
        for index, msg in enumerate(messages):
            if not isinstance(msg, SbMessage):
                raise bad(f"message {index} is not an SbMessage: {type(msg).__name__}")
            size = msg.size
            if size > limit:
                raise ServiceBusError(
                    Code.MESSAGE_SIZE_EXCEEDED,
                    f"message {index} is {size} bytes; '{target.name}' accepts at most "
                    f"{props.max_message_size_kb} KB",
                )
            if not (
                _short_id(msg.message_id)
                and _short_id(msg.session_id)
                and _short_id(msg.partition_key)
                and _short_id(msg.reply_to_session_id)
            ):
                for attr in _ID_ATTRS:
                    if not _short_id(getattr(msg, attr)):
                        raise bad(
                            f"message {index}: {attr} must be a string of at most 128 characters"
                        )
            if msg.time_to_live is not None and not msg.time_to_live > 0:
                raise bad(f"message {index}: time_to_live must be positive")
            if session_queue and msg.session_id is None:
                raise ServiceBusError(
                    Code.INVALID_OPERATION,
                    f"message {index} has no SessionId; queue '{target.name}' requires sessions",
                )
            sizes.append(size)
            total += size
        if target.size_bytes + total > props.max_size_mb * 1048576:
            raise ServiceBusError(
                Code.QUOTA_EXCEEDED,
                f"{target.kind} '{target.name}' is full (MaxSizeInMegabytes {props.max_size_mb})",
            )
        return sizes

    def _accept(
        self,
        target: _Queue | _Topic,
        msg: SbMessage,
        size: int,
        now: float,
        at: float | None = None,
    ) -> int:
        """One message of a checked batch: duplicate detection, scheduling (``at``, else the
        message's own ScheduledEnqueueTime), delivery. The namespace keeps its own copy: the
        sender's object is not changed (it is kept as is unless something must be set)."""
        if at is not None or msg.message_id is None:
            msg = msg.copy()
            if at is not None:
                msg.scheduled_enqueue_time = at
            if msg.message_id is None:
                msg.message_id = uuid.uuid4().hex
        if target.props.requires_duplicate_detection and self._duplicate(target, msg, now):
            return 0
        when = msg.scheduled_enqueue_time
        if when is not None and when > now:
            return self._hold_scheduled(target, msg, size, now, when, 0, 0, None)
        if isinstance(target, _Queue):
            return self._enqueue(target, msg, size, now, 0, 0, None)
        return self._publish(target, msg, size, now, 0)

    def _hold_scheduled(
        self,
        target: _Queue | _Topic,
        msg: SbMessage,
        size: int,
        now: float,
        when: float,
        hop: int,
        enq_seq: int,
        dl_source: str | None,
    ) -> int:
        """Keep a message until ``when`` (it gets a new number when it becomes active; one
        that was forwarded here keeps its hops, first number and dead-letter source)."""
        store = target.store
        seq = self._next_seq(store)
        stored = Stored(
            msg,
            seq,
            now,
            state=MessageState.SCHEDULED,
            enqueued_sequence_number=enq_seq or seq,
            hop_count=hop,
            dead_letter_source=dl_source,
            scheduled_enqueue_time=when,
            size=size,
        )
        self._add(store, stored)
        heapq.heappush(store.scheduled_heap, (when, seq))
        self._wake(store, when)
        return seq

    def _duplicate(self, target: _Queue | _Topic, msg: SbMessage, now: float) -> bool:
        mid = msg.message_id
        assert mid is not None
        seen = target.dup_seen.get(mid)
        window = target.props.duplicate_detection_window
        if seen is not None and now - seen < window:
            return True
        target.dup_seen[mid] = now
        if target.dup_order is None:
            target.dup_order = deque()
        target.dup_order.append((now, mid))
        self.journal.value_saved(f"dup:{target.uid}:{mid}", repr(now))
        self._wake(target.store, now + window)
        return False

    def _next_seq(self, store: MessageStore) -> int:
        seq = store.next_sequence
        store.next_sequence = seq + 1
        if not store.seq_dirty:
            store.seq_dirty = True
            self._dirty.append(store)
        return seq

    def _flush(self) -> None:
        """Journal the sequence counters that moved (once per operation, not per message)."""
        dirty = self._dirty
        if dirty:
            save = self.journal.value_saved
            for store in dirty:
                store.seq_dirty = False
                if not store.dead:
                    save(f"seq:{store.owner.uid}", str(store.next_sequence))
            dirty.clear()

    def _publish(
        self,
        topic: _Topic,
        msg: SbMessage,
        size: int,
        now: float,
        hop: int,
        dl_source: str | None = None,
        enq_seq: int = 0,
    ) -> int:
        """Fan a message out to the subscriptions of ``topic``; returns the topic's sequence
        number for it. The copies keep ``enq_seq`` (the number at the first entity, for a
        message forwarded here) or the topic's number."""
        seq = self._next_seq(topic.store)
        first = enq_seq or seq
        topic.accessed_at = now
        for sub, copy in topic.router.route(msg, seq, now):
            if isinstance(copy, FilterEvaluationError):
                if sub.props.dead_lettering_on_filter_exceptions:
                    self._dead_letter_new(
                        sub, msg, size, now, hop, first, "FilterEvaluationException", str(copy)
                    )
                continue
            copy_size = size if copy is msg else copy.size
            self._enqueue(sub, copy, copy_size, now, hop, first, dl_source)
        return seq

    def _enqueue(
        self,
        entity: _Queue | _Subscription,
        msg: SbMessage,
        size: int,
        now: float,
        hop: int,
        enq_seq: int,
        dl_source: str | None,
    ) -> int:
        """Store a message in a queue or subscription (or forward it on); returns its
        sequence number there (0 if it went elsewhere)."""
        props = entity.props
        if props.forward_to:
            seq = self._next_seq(entity.store)
            self._forward(entity, msg, size, now, hop, enq_seq or seq, dl_source, seq)
            return seq
        store = entity.store
        if store.sessions_enabled and msg.session_id is None:
            self._dead_letter_new(entity, msg, size, now, hop, enq_seq, "Session ID is null.", "")
            return 0
        ttl = props.default_message_ttl
        if isinstance(entity, _Subscription):
            ttl = min(ttl, entity.topic.props.default_message_ttl)
        if msg.time_to_live is not None and msg.time_to_live < ttl:
            ttl = msg.time_to_live
        seq = self._next_seq(store)
        stored = Stored(
            msg,
            seq,
            now,
            now + ttl,
            enqueued_sequence_number=enq_seq or seq,
            hop_count=hop,
            dead_letter_source=dl_source,
            size=size,
        )
        self._add(store, stored)
        store.make_available(stored, returned=False)
        if ttl != math.inf:
            heapq.heappush(store.ttl_heap, (stored.expires_at, seq))
            self._wake(store, stored.expires_at)
        return seq

    def _forward(
        self,
        source: _Queue | _Subscription,
        msg: SbMessage,
        size: int,
        now: float,
        hop: int,
        enq_seq: int,
        dl_source: str | None,
        seq: int,
    ) -> None:
        """Move a message accepted by ``source`` as ``seq`` on to its ForwardTo."""
        dest_name = source.props.forward_to
        assert dest_name is not None
        if hop >= MAX_HOPS:
            self._dead_letter_new(
                source,
                msg,
                size,
                now,
                hop,
                enq_seq,
                "MaxTransferHopCountExceeded",
                f"the maximum number of allowed hops when forwarding between entities has "
                f"been exceeded; value is {MAX_HOPS}",
                seq,
            )
            return
        dest, failure = self._forward_destination(dest_name, size)
        if failure is not None:
            reason, text = failure
            self._dead_letter_new(source, msg, size, now, hop, enq_seq, reason, text, seq)
            return
        self._deliver(dest, msg, size, now, hop + 1, enq_seq, dl_source)

    def _forward_destination(self, name: str, size: int) -> tuple[Any, tuple[str, str] | None]:
        dest: Any = self._queues.get(key(name)) or self._topics.get(key(name))
        if dest is None:
            return None, (
                Code.ENTITY_NOT_FOUND.reason,
                f"the auto forwarding destination '{name}' does not exist",
            )
        if not dest.props.status.can_send:
            return dest, (
                Code.ENTITY_DISABLED.reason,
                f"the auto forwarding destination '{dest.name}' is {dest.props.status.value}",
            )
        if dest.size_bytes + size > dest.props.max_size_mb * 1048576:
            return dest, (
                Code.QUOTA_EXCEEDED.reason,
                f"the auto forwarding destination '{dest.name}' is full",
            )
        return dest, None

    def _deliver(
        self,
        dest: _Queue | _Topic,
        msg: SbMessage,
        size: int,
        now: float,
        hop: int,
        enq_seq: int,
        dl_source: str | None,
    ) -> None:
        """A forwarded message arrives at ``dest``: as for a send, the destination's duplicate
        detection and a scheduled time in the future apply (a rule action may have set
        MessageId or ScheduledEnqueueTimeUtc on the way)."""
        dest.accessed_at = now
        if (
            dest.props.requires_duplicate_detection
            and msg.message_id is not None
            and self._duplicate(dest, msg, now)
        ):
            return
        when = msg.scheduled_enqueue_time
        if when is not None and when > now:
            self._hold_scheduled(dest, msg, size, now, when, hop, enq_seq, dl_source)
            return
        if isinstance(dest, _Topic):
            self._publish(dest, msg, size, now, hop, dl_source, enq_seq)
        else:
            self._enqueue(dest, msg, size, now, hop, enq_seq, dl_source)

    # ================================================================== dead-lettering

    def _dead_letter_new(
        self,
        entity: _Queue | _Subscription,
        msg: SbMessage,
        size: int,
        now: float,
        hop: int,
        enq_seq: int,
        reason: str,
        description: str,
        seq: int = 0,
    ) -> None:
        """Dead-letter a message that never became part of ``entity`` (session id missing,
        filter failure, forwarding failure): it keeps the sequence number ``seq`` it was
        accepted under, or gets one of the entity."""
        seq = seq or self._next_seq(entity.store)
        stored = Stored(
            msg, seq, now, enqueued_sequence_number=enq_seq or seq, hop_count=hop, size=size
        )
        self._place_dead_letter(entity, stored, reason, description, None, now)

    def _place_dead_letter(
        self,
        entity: _Queue | _Subscription,
        stored: Stored,
        reason: str | None,
        description: str | None,
        properties: Mapping[str, Any] | None,
        now: float,
    ) -> None:
        """Put ``stored`` (already out of its store) in the entity's dead-letter queue, or
        auto-forward it to ForwardDeadLetteredMessagesTo."""
        changes: dict[str, Any] = dict(properties or {})
        if reason is not None:
            changes["DeadLetterReason"] = reason
        if description is not None:
            changes["DeadLetterErrorDescription"] = description
        if changes:
            stored.message = _with_properties(stored.message, changes)
            stored.size = stored.message.size
        stored.lock_token = None
        stored.locked_until = 0.0
        stored.session_lock = False
        stored.state = MessageState.ACTIVE
        stored.expires_at = math.inf
        stored.scheduled_enqueue_time = None
        dest_name = entity.props.forward_dead_lettered_to
        if dest_name and stored.hop_count < MAX_HOPS:
            dest, failure = self._forward_destination(dest_name, stored.size)
            if failure is None:
                self._deliver(
                    dest,
                    stored.message,
                    stored.size,
                    now,
                    stored.hop_count + 1,
                    stored.enqueued_sequence_number,
                    entity.path,
                )
                return
        dlq = entity.dlq
        if stored.sequence_number in dlq.messages:  # cannot happen: numbers are unique
            stored.sequence_number = self._next_seq(entity.store)
        self._add(dlq, stored)
        dlq.make_available(stored, returned=True)

    # ================================================================== receive

    def receive(
        self,
        path: str,
        max_count: int,
        mode: ReceiveMode,
        *,
        session: str | None = None,
        holder: uuid.UUID | None = None,
    ) -> list[Stored]:
        """Up to ``max_count`` messages in sequence order (fewer, or none, if fewer are
        available). Peek-lock locks each under a new lock token for the entity's
        LockDuration; receive-and-delete removes them. ``holder``: see ``_session_for``."""
        entity, store = self._receive_source(path)
        if isinstance(max_count, bool) or not isinstance(max_count, int) or max_count < 1:
            raise bad(f"max_count must be a positive integer, got {max_count!r}")
        if not isinstance(mode, ReceiveMode):
            raise bad(f"mode must be a ReceiveMode, got {mode!r}")
        now = self.clock.now()
        sq = self._session_for(store, session, now, holder)
        entity.accessed_at = now
        src = sq if sq is not None else store
        fresh = src.fresh
        returned = src.returned
        msgs = store.messages
        out: list[Stored] = []
        peek_lock = mode is ReceiveMode.PEEK_LOCK
        if peek_lock:
            until = sq.locked_until if sq is not None else now + entity.props.lock_duration
        active = MessageState.ACTIVE
        locked = self.journal.message_locked
        new_token = self._lock_token
        try:
            while len(out) < max_count:
                if returned and (not fresh or returned[0] < fresh[0]):
                    seq = heapq.heappop(returned)
                elif fresh:
                    seq = fresh.popleft()
                else:
                    break
                stored = msgs.get(seq)
                if stored is None or stored.state is not active or stored.lock_token is not None:
                    continue
                if stored.expires_at <= now:
                    self._expire(entity, store, stored, now)
                    continue
                if peek_lock:
                    token = new_token()
                    stored.lock_token = token
                    stored.locked_until = until
                    store.locks[token] = stored
                    locked(store.path, seq)
                    if sq is not None:
                        stored.session_lock = True
                        sq.locked[token] = stored
                    else:
                        heapq.heappush(store.lock_heap, (until, seq, token))
                        if until < store.wake_at:
                            self._wake(store, until)
                else:
                    self._remove(store, stored)
                out.append(stored.snapshot())
        finally:
            self._flush()
        if len(store.lock_heap) > 4096:
            store.compact_heaps()
        return out

    def _session_for(
        self,
        store: MessageStore,
        session: str | None,
        now: float,
        holder: uuid.UUID | None = None,
    ) -> SessionQueue | None:
        """The locked session ``session`` of ``store`` (None when it is not session-enabled);
        lock lost when it is not locked. ``holder``, when given, is the session lock the
        caller was granted (``SessionLock.lock_token``): a receiver whose lock ran out, the
        session since taken by another, has lost it, whatever the session's lock now is.
        Without it, two receivers would act on one session at once, each overwriting what
        the other recorded in its state."""
        if not store.sessions_enabled:
            if session is not None:
                raise ServiceBusError(
                    Code.INVALID_OPERATION,
                    f"'{store.path}' is not session-enabled; receive without a session",
                )
            return None
        if session is None:
            raise ServiceBusError(
                Code.INVALID_OPERATION,
                f"'{store.path}' requires sessions: accept a session first",
            )
        sq = store.sessions.get(session)
        if sq is None or sq.lock_token is None or sq.locked_until <= now:
            if sq is not None and sq.lock_token is not None:
                self._expire_session(store, sq, now)
            raise ServiceBusError(
                Code.SESSION_LOCK_LOST, f"the lock on session '{session}' is not held"
            )
        if holder is not None and holder != sq.lock_token:
            raise ServiceBusError(
                Code.SESSION_LOCK_LOST,
                f"the lock on session '{session}' was lost: another receiver holds it now",
            )
        return sq

    # ================================================================== settlement

    def _locked(self, path: str, lock_token: uuid.UUID) -> tuple[Any, MessageStore, Stored]:
        """The message ``lock_token`` locks, taken out of the lock table; or lock lost."""
        entity, store = self._resolve(path)
        stored = store.locks.pop(lock_token, None) if isinstance(lock_token, uuid.UUID) else None
        if stored is None:
            if store.sessions_enabled:  # its session lock ended (or it was settled already)
                raise ServiceBusError(
                    Code.SESSION_LOCK_LOST,
                    f"the lock {lock_token} on '{path}' is not held by a session receiver",
                )
            raise ServiceBusError(
                Code.MESSAGE_LOCK_LOST,
                f"the lock {lock_token} on '{path}' is unknown, expired or already settled",
            )
        now = self.clock.now()
        if stored.session_lock:
            sq = store.sessions.get(stored.message.session_id or "")
            if sq is None or sq.lock_token is None or sq.locked_until <= now:
                if sq is not None:  # its session's expiry takes the lock back
                    store.locks[lock_token] = stored
                    self._expire_session(store, sq, now)
                    self._flush()
                raise ServiceBusError(
                    Code.SESSION_LOCK_LOST,
                    f"the lock on session '{stored.message.session_id}' has expired",
                )
            sq.locked.pop(lock_token, None)
        elif stored.locked_until <= now:
            self._expire_lock(entity, store, stored, now)
            self._flush()
            raise ServiceBusError(
                Code.MESSAGE_LOCK_LOST, f"the lock {lock_token} on '{path}' has expired"
            )
        stored.lock_token = None
        stored.locked_until = 0.0
        stored.session_lock = False
        return entity, store, stored

    def complete(self, path: str, lock_token: uuid.UUID) -> None:
        _, store, stored = self._locked(path, lock_token)
        self._remove(store, stored, settled=True)

    def abandon(
        self, path: str, lock_token: uuid.UUID, properties: Mapping[str, Any] | None = None
    ) -> None:
        """Unlock now (delivery count + 1; dead-lettered past MaxDeliveryCount)."""
        _check_settle_args(properties)
        entity, store, stored = self._locked(path, lock_token)
        if properties:
            stored.message = _with_properties(stored.message, properties)
        try:
            self._failed_delivery(entity, store, stored, self.clock.now())
        finally:
            self._flush()

    def release(self, path: str, lock_token: uuid.UUID) -> None:
        """A message handed back unseen: available again, delivery count unchanged."""
        entity, store, stored = self._locked(path, lock_token)
        now = self.clock.now()
        try:
            if stored.state is MessageState.ACTIVE and stored.expires_at <= now:
                self._expire(entity, store, stored, now)
                return
            self.journal.message_unlocked(store.path, stored.sequence_number)
            if stored.state is MessageState.ACTIVE:
                self._return(entity, store, stored, now)
        finally:
            self._flush()

    def defer(
        self, path: str, lock_token: uuid.UUID, properties: Mapping[str, Any] | None = None
    ) -> None:
        """Set aside: only ``receive_deferred`` by sequence number gets it again."""
        _check_settle_args(properties)
        _, store, stored = self._locked(path, lock_token)
        if properties:
            stored.message = _with_properties(stored.message, properties)
        store.set_state(stored, MessageState.DEFERRED)
        self.journal.message_updated(store.path, stored)

    def dead_letter(
        self,
        path: str,
        lock_token: uuid.UUID,
        reason: str | None = None,
        description: str | None = None,
        properties: Mapping[str, Any] | None = None,
    ) -> None:
        entity, store = self._resolve(path)
        if store.dead_letter:
            raise ServiceBusError(
                Code.INVALID_OPERATION,
                f"cannot dead-letter a message of a dead-letter queue ('{path}')",
            )
        _check_settle_args(properties, reason, description)
        _, store, stored = self._locked(path, lock_token)
        self._remove(store, stored)
        try:
            self._place_dead_letter(
                entity, stored, reason, description, properties, self.clock.now()
            )
        finally:
            self._flush()

    def renew_lock(self, path: str, lock_token: uuid.UUID) -> float:
        """Extend a message lock by the entity's LockDuration from now; returns the new
        locked-until time (for a session's message, the session lock is renewed)."""
        entity, store = self._resolve(path)
        stored = store.locks.get(lock_token) if isinstance(lock_token, uuid.UUID) else None
        now = self.clock.now()
        if stored is not None and stored.session_lock:
            return self.renew_session_lock(path, stored.message.session_id or "")
        if stored is None or stored.locked_until <= now:
            if stored is not None:
                store.locks.pop(lock_token)
                self._expire_lock(entity, store, stored, now)
                self._flush()
            raise ServiceBusError(
                Code.MESSAGE_LOCK_LOST,
                f"the lock {lock_token} on '{path}' is unknown, expired or already settled",
            )
        until = now + entity.props.lock_duration
        stored.locked_until = until
        heapq.heappush(store.lock_heap, (until, stored.sequence_number, lock_token))
        return until

    def _failed_delivery(
        self, entity: Any, store: MessageStore, stored: Stored, now: float
    ) -> None:
        """An abandoned or expired lock: count the delivery, dead-letter past the limit."""
        stored.delivery_count += 1
        if stored.delivery_count >= entity.props.max_delivery_count and not store.dead_letter:
            self._remove(store, stored)
            self._place_dead_letter(
                entity,
                stored,
                "MaxDeliveryCountExceeded",
                f"Message could not be consumed after {entity.props.max_delivery_count} "
                "delivery attempts.",
                None,
                now,
            )
            return
        if stored.state is MessageState.ACTIVE and stored.expires_at <= now:
            self._expire(entity, store, stored, now)
            return
        self.journal.message_updated(store.path, stored)
        if stored.state is MessageState.ACTIVE:
            self._return(entity, store, stored, now)

    def _expire_lock(self, entity: Any, store: MessageStore, stored: Stored, now: float) -> None:
        """``stored`` (out of the lock table) lost its lock by time."""
        stored.lock_token = None
        stored.locked_until = 0.0
        stored.session_lock = False
        self._failed_delivery(entity, store, stored, now)

    def _expire(self, entity: Any, store: MessageStore, stored: Stored, now: float) -> None:
        """``stored`` (active, unlocked) has outlived its time to live."""
        self._remove(store, stored)
        if entity.props.dead_lettering_on_expiration and not store.dead_letter:
            self._place_dead_letter(
                entity,
                stored,
                "TTLExpiredException",
                "The message expired and was dead lettered.",
                None,
                now,
            )

    # ================================================================== browse, deferred

    def peek(
        self, path: str, from_sequence: int, max_count: int, session: str | None = None
    ) -> list[Stored]:
        """Messages from ``from_sequence`` on, in sequence order, whatever their state
        (active, deferred, scheduled; ``Stored.state``); nothing is locked."""
        entity, store = self._resolve(path)
        if isinstance(entity, _Topic):
            raise ServiceBusError(
                Code.INVALID_OPERATION,
                f"cannot browse topic '{entity.name}': browse a subscription",
            )
        if not store.dead_letter and entity.props.forward_to:
            self._receive_source(path)  # raises: a forwarding source cannot be browsed
        if isinstance(max_count, bool) or not isinstance(max_count, int) or max_count < 1:
            raise bad(f"max_count must be a positive integer, got {max_count!r}")
        now = self.clock.now()
        out: list[Stored] = []
        for stored in store.from_sequence(from_sequence):
            if stored.state is MessageState.ACTIVE and stored.expires_at <= now:
                continue
            if session is not None and stored.message.session_id != session:
                continue
            out.append(stored.snapshot())
            if len(out) >= max_count:
                break
        return out

    def receive_deferred(
        self,
        path: str,
        sequence_numbers: Sequence[int],
        mode: ReceiveMode,
        session: str | None = None,
        holder: uuid.UUID | None = None,
    ) -> list[Stored]:
        """Deferred messages by sequence number (all must exist and be deferred).
        ``holder``: see ``_session_for``."""
        entity, store = self._receive_source(path)
        if not isinstance(mode, ReceiveMode):
            raise bad(f"mode must be a ReceiveMode, got {mode!r}")
        now = self.clock.now()
        sq = self._session_for(store, session, now, holder) if store.sessions_enabled else None
        if session is not None and sq is None:
            raise ServiceBusError(Code.INVALID_OPERATION, f"'{path}' is not session-enabled")
        found: list[Stored] = []
        for seq in dict.fromkeys(sequence_numbers):  # a number given twice is received once
            if isinstance(seq, bool) or not isinstance(seq, int):
                raise bad(f"a sequence number must be an integer, got {seq!r}")
            stored = store.messages.get(seq)
            if (
                stored is None
                or stored.state is not MessageState.DEFERRED
                or stored.lock_token is not None
                or (sq is not None and stored.message.session_id != sq.session_id)
            ):
                raise ServiceBusError(
                    Code.MESSAGE_NOT_FOUND,
                    f"no deferred message with sequence number {seq} in '{path}'",
                )
            found.append(stored)
        for stored in found:
            if mode is ReceiveMode.PEEK_LOCK:
                token = self._lock_token()
                stored.lock_token = token
                store.locks[token] = stored
                self.journal.message_locked(store.path, stored.sequence_number)
                if sq is not None:
                    stored.locked_until = sq.locked_until
                    stored.session_lock = True
                    sq.locked[token] = stored
                else:
                    stored.locked_until = now + entity.props.lock_duration
                    heapq.heappush(
                        store.lock_heap, (stored.locked_until, stored.sequence_number, token)
                    )
                    self._wake(store, stored.locked_until)
            else:
                self._remove(store, stored)
        return [stored.snapshot() for stored in found]

    # ================================================================== bookkeeping

    def _add(self, store: MessageStore, stored: Stored) -> None:
        store.counted_add(stored, stored.size)
        self._grow(store.owner, stored.size)
        if store.sessions_enabled and stored.state is not MessageState.SCHEDULED:
            store.session(stored.message.session_id or "").count += 1
        self.journal.message_added(store.path, stored)

    def _remove(self, store: MessageStore, stored: Stored, *, settled: bool = False) -> None:
        """``settled``: a peek-locked message completed (see ``SbJournal.message_settled``)."""
        store.counted_remove(stored, stored.size)
        self._grow(store.owner, -stored.size)
        if store.sessions_enabled and stored.state is not MessageState.SCHEDULED:
            sid = stored.message.session_id or ""
            sq = store.sessions.get(sid)
            if sq is not None:
                sq.count -= 1
                if sq.count <= 0 and sq.lock_token is None and sq.state is None:
                    del store.sessions[sid]
        if settled:
            self.journal.message_settled(store.path, stored.sequence_number)
        else:
            self.journal.message_removed(store.path, stored.sequence_number)

    @staticmethod
    def _grow(owner: Any, size: int) -> None:
        owner.size_bytes += size
        if isinstance(owner, _Subscription):
            owner.topic.size_bytes += size

    def _wake(self, store: MessageStore, when: float) -> None:
        """Make sure ``tick`` runs for ``store`` by ``when``."""
        if when < store.wake_at:
            store.wake_at = when
            self._timer_n += 1
            heapq.heappush(self._timers, (when, self._timer_n, store))

    # ================================================================== sessions

    def accept_session(self, path: str, session_id: str | None) -> SessionLock | None:
        """Lock a named session (it need not have messages yet), or the next session with
        available messages (``None`` when there is none now)."""
        entity, store = self._receive_source(path)
        if not store.sessions_enabled:
            raise ServiceBusError(
                Code.INVALID_OPERATION, f"'{path}' is not session-enabled (RequiresSession)"
            )
        now = self.clock.now()
        sq: SessionQueue | None = None
        try:
            if session_id is not None:
                if not isinstance(session_id, str) or len(session_id) > 128:
                    raise bad(
                        f"invalid session id {session_id!r}: a string of at most 128 characters"
                    )
                sq = store.session(session_id)
                if sq.lock_token is not None:
                    if sq.locked_until > now:
                        raise ServiceBusError(
                            Code.SESSION_CANNOT_BE_LOCKED,
                            f"session '{session_id}' of '{path}' is locked by another receiver",
                        )
                    self._expire_session(store, sq, now)
                    sq = store.session(session_id)
            else:
                for candidate in list(store.sessions.values()):
                    if candidate.lock_token is not None:
                        if candidate.locked_until > now:
                            continue
                        self._expire_session(store, candidate, now)
                    if self._has_available(store, candidate):
                        sq = candidate
                        break
                if sq is None:
                    return None
        finally:
            self._flush()
        token = self._lock_token()
        until = now + entity.props.lock_duration
        sq.lock_token = token
        sq.locked_until = until
        store.sessions[sq.session_id] = sq
        heapq.heappush(store.session_heap, (until, sq.session_id))
        self._wake(store, until)
        entity.accessed_at = now
        return SessionLock(sq.session_id, token, until)

    @staticmethod
    def _has_available(store: MessageStore, sq: SessionQueue) -> bool:
        msgs = store.messages
        active = MessageState.ACTIVE

        def live(seq: int) -> bool:
            s = msgs.get(seq)
            return s is not None and s.state is active and s.lock_token is None

        while sq.fresh and not live(sq.fresh[0]):
            sq.fresh.popleft()
        while sq.returned and not live(sq.returned[0]):
            heapq.heappop(sq.returned)
        return bool(sq.fresh or sq.returned)

    def renew_session_lock(
        self, path: str, session_id: str, holder: uuid.UUID | None = None
    ) -> float:
        """Extends the session's lock; ``holder``: see ``_session_for`` (a late renewal from a
        receiver that lost the session must not extend the lock of the one that took it)."""
        entity, store = self._receive_source(path)
        now = self.clock.now()
        sq = self._session_for(store, session_id, now, holder)
        assert sq is not None
        until = now + entity.props.lock_duration
        sq.locked_until = until
        for stored in sq.locked.values():
            stored.locked_until = until
        heapq.heappush(store.session_heap, (until, sq.session_id))
        return until

    def release_session(self, path: str, session_id: str, holder: uuid.UUID | None = None) -> None:
        """Close a session: its unsettled messages are available again, their delivery count
        unchanged. Releasing a session that is not locked does nothing; nor does a receiver
        that closes after its lock ran out (``holder``, the lock it was granted, is not the
        session's lock): the session may be held by another receiver by then."""
        entity, store = self._resolve(path)
        sq = store.sessions.get(session_id) if store.sessions_enabled else None
        if sq is None or sq.lock_token is None or (holder is not None and holder != sq.lock_token):
            return
        now = self.clock.now()
        locked = list(sq.locked.items())
        sq.locked.clear()
        sq.lock_token = None
        sq.locked_until = 0.0
        try:
            for token, stored in locked:
                store.locks.pop(token, None)
                stored.lock_token = None
                stored.locked_until = 0.0
                stored.session_lock = False
                if stored.state is MessageState.ACTIVE and stored.expires_at <= now:
                    self._expire(entity, store, stored, now)  # it expired while locked
                    continue
                self.journal.message_unlocked(store.path, stored.sequence_number)
                if stored.state is MessageState.ACTIVE:
                    store.make_available(stored, returned=True)
        finally:
            self._flush()
        self._forget_session_if_empty(store, sq)

    def _expire_session(self, store: MessageStore, sq: SessionQueue, now: float) -> None:
        """A session lock ran out: its unsettled messages count a failed delivery."""
        locked = list(sq.locked.items())
        sq.locked.clear()
        sq.lock_token = None
        sq.locked_until = 0.0
        for token, stored in locked:
            store.locks.pop(token, None)
            self._expire_lock(store.owner, store, stored, now)
        self._forget_session_if_empty(store, sq)

    @staticmethod
    def _forget_session_if_empty(store: MessageStore, sq: SessionQueue) -> None:
        if sq.count <= 0 and sq.lock_token is None and sq.state is None:
            store.sessions.pop(sq.session_id, None)

    def get_session_state(
        self, path: str, session_id: str, holder: uuid.UUID | None = None
    ) -> bytes | None:
        """The state of a session this receiver holds (``holder``: see ``_session_for``)."""
        _, store = self._receive_source(path)
        sq = self._session_for(store, session_id, self.clock.now(), holder)
        assert sq is not None
        return sq.state

    def set_session_state(
        self, path: str, session_id: str, state: bytes | None, holder: uuid.UUID | None = None
    ) -> None:
        """Set (``None`` clears) the state of a session this receiver holds (``holder``: see
        ``_session_for``)."""
        entity, store = self._receive_source(path)
        if state is not None and not isinstance(state, bytes | bytearray):
            raise bad(f"session state must be bytes or None, got {type(state).__name__}")
        limit = (
            entity.topic.props.max_message_size_kb
            if isinstance(entity, _Subscription)
            else entity.props.max_message_size_kb
        ) * 1024
        if state is not None and len(state) > limit:
            raise ServiceBusError(
                Code.MESSAGE_SIZE_EXCEEDED,
                f"session state is {len(state)} bytes; at most {limit // 1024} KB",
            )
        sq = self._session_for(store, session_id, self.clock.now(), holder)
        assert sq is not None
        sq.state = None if state is None else bytes(state)
        self.journal.session_state_saved(store.path, session_id, sq.state)

    def list_sessions(self, path: str) -> list[str]:
        """The sessions that have messages or a state."""
        _, store = self._receive_source(path)
        if not store.sessions_enabled:
            raise ServiceBusError(Code.INVALID_OPERATION, f"'{path}' is not session-enabled")
        return [sid for sid, sq in store.sessions.items() if sq.count > 0 or sq.state is not None]

    # ================================================================== timers

    def next_deadline(self) -> float | None:
        """When ``tick`` has something to do next (None: nothing pending)."""
        timers = self._timers
        while timers:
            when, _, store = timers[0]
            if store.dead or store.wake_at != when:
                heapq.heappop(timers)
                continue
            break
        best = timers[0][0] if timers else math.inf
        if self._idle and self._idle[0][0] < best:
            best = self._idle[0][0]
        return None if best == math.inf else best

    def _watch_idle(self, entity: Any) -> None:
        """Remember when ``entity`` is deleted if nothing uses it (AutoDeleteOnIdle)."""
        wait = entity.props.auto_delete_on_idle
        if wait != math.inf:
            self._timer_n += 1
            heapq.heappush(self._idle, (entity.accessed_at + wait, self._timer_n, entity))

    def _alive(self, entity: Any) -> bool:
        if isinstance(entity, _Subscription):
            topic = entity.topic
            return self._topics.get(key(topic.name)) is topic and (
                topic.subs.get(key(entity.name)) is entity
            )
        table: dict[str, Any] = self._queues if isinstance(entity, _Queue) else self._topics
        return table.get(key(entity.name)) is entity

    def _delete_idle(self, now: float) -> None:
        idle = self._idle
        while idle and idle[0][0] <= now:
            _, _, entity = heapq.heappop(idle)
            wait = entity.props.auto_delete_on_idle
            if not self._alive(entity) or wait == math.inf:
                continue
            if entity.accessed_at + wait > now:
                self._watch_idle(entity)  # used since: a later deadline
            elif isinstance(entity, _Queue):
                self.delete_queue(entity.name)
            elif isinstance(entity, _Topic):
                self.delete_topic(entity.name)
            else:
                self.delete_subscription(entity.topic.name, entity.name)

    def tick(self) -> None:
        """Expire locks and session locks, activate scheduled messages, expire messages past
        their time to live and forget old duplicate-detection history, as far as the clock
        has come. Only the stores with something due are visited."""
        now = self.clock.now()
        timers = self._timers
        try:
            while timers and timers[0][0] <= now:
                when, _, store = heapq.heappop(timers)
                if store.dead or store.wake_at != when:
                    continue
                store.wake_at = math.inf
                self._process(store, now)
                nxt = self._store_deadline(store)
                if nxt != math.inf:
                    self._wake(store, nxt)
            self._delete_idle(now)
        finally:
            self._flush()

    def _process(self, store: MessageStore, now: float) -> None:
        entity = store.owner
        msgs = store.messages
        heap = store.lock_heap
        while heap and heap[0][0] <= now:
            until, _, token = heapq.heappop(heap)
            stored = store.locks.get(token)
            if stored is None or stored.locked_until != until or stored.session_lock:
                continue
            del store.locks[token]
            self._expire_lock(entity, store, stored, now)
        sheap = store.session_heap
        while sheap and sheap[0][0] <= now:
            until, sid = heapq.heappop(sheap)
            sq = store.sessions.get(sid)
            if sq is not None and sq.lock_token is not None and sq.locked_until == until:
                self._expire_session(store, sq, now)
        sched = store.scheduled_heap
        while sched and sched[0][0] <= now:
            _, seq = heapq.heappop(sched)
            stored = msgs.get(seq)
            if stored is None or stored.state is not MessageState.SCHEDULED:
                continue
            self._remove(store, stored)
            hop = stored.hop_count  # not 0: it was forwarded here, and keeps its first number
            first = stored.enqueued_sequence_number if hop else 0
            dl_source = stored.dead_letter_source
            if isinstance(entity, _Topic):
                self._publish(entity, stored.message, stored.size, now, hop, dl_source, first)
            else:
                self._enqueue(entity, stored.message, stored.size, now, hop, first, dl_source)
        theap = store.ttl_heap
        while theap and theap[0][0] <= now:
            expires, seq = heapq.heappop(theap)
            stored = msgs.get(seq)
            if (
                stored is None
                or stored.expires_at != expires
                or stored.state is not MessageState.ACTIVE
                or stored.lock_token is not None
            ):
                continue
            self._expire(entity, store, stored, now)
        order = entity.dup_order
        if order and store is entity.store:
            window = entity.props.duplicate_detection_window
            seen = entity.dup_seen
            while order and order[0][0] + window <= now:
                at, mid = order.popleft()
                if seen.get(mid) == at:
                    del seen[mid]
                    self.journal.value_saved(f"dup:{entity.uid}:{mid}", "")
        store.compact_heaps()

    @staticmethod
    def _store_deadline(store: MessageStore) -> float:
        best = math.inf
        for heap in (store.lock_heap, store.session_heap, store.scheduled_heap, store.ttl_heap):
            if heap and heap[0][0] < best:
                best = heap[0][0]
        entity = store.owner
        order = entity.dup_order
        if order and store is entity.store:
            best = min(best, order[0][0] + entity.props.duplicate_detection_window)
        return best

    # ================================================================== restore (data)

    def restore_message(self, entity: str, stored: Stored, *, lock_lost: bool = False) -> None:
        """A message as the journal saved it under ``entity`` (its lock is not restored).
        ``lock_lost``: it was still marked locked (``SbJournal.message_locked``): the restart
        took its lock, which ``finish_restore`` counts as an expired lock."""
        self._apply_restored_entities()
        owner, store = self._resolve(entity)
        stored.lock_token = None
        stored.locked_until = 0.0
        stored.session_lock = False
        if not stored.size:
            stored.size = stored.message.size
        store.counted_add(stored, stored.size)
        self._grow(owner, stored.size)
        seq = stored.sequence_number
        main = owner.store
        if seq >= main.next_sequence:
            main.next_sequence = seq + 1
        if stored.state is MessageState.SCHEDULED:
            when = stored.scheduled_enqueue_time or 0.0
            heapq.heappush(store.scheduled_heap, (when, seq))
            return
        if store.sessions_enabled:
            store.session(stored.message.session_id or "").count += 1
        if lock_lost:
            self._lost_locks.append((owner, store, stored))
        elif stored.state is MessageState.ACTIVE:
            store.make_available(stored, returned=True)
        if stored.state is MessageState.ACTIVE and stored.expires_at != math.inf:
            heapq.heappush(store.ttl_heap, (stored.expires_at, seq))

    def restore_session_state(self, entity: str, session_id: str, state: bytes | None) -> None:
        self._apply_restored_entities()
        _, store = self._resolve(entity)
        if state is not None:
            store.session(session_id).state = bytes(state)

    def restore_value(self, key_: str, value: str) -> None:
        """A value saved with ``value_saved`` (sequence counters, duplicate history)."""
        self._apply_restored_entities()
        kind, _, rest = key_.partition(":")
        if kind == "seq":
            owner = self._by_uid().get(rest)
            if owner is not None and value:
                owner.store.next_sequence = max(owner.store.next_sequence, int(value))
        elif kind == "dup":
            uid, _, mid = rest.partition(":")
            owner = self._by_uid().get(uid)
            if owner is not None and value:
                seen = float(value)
                owner.dup_seen[mid] = seen
                if owner.dup_order is None:
                    owner.dup_order = deque()
                owner.dup_order.append((seen, mid))

    def _by_uid(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for q in self._queues.values():
            out[q.uid] = q
        for t in self._topics.values():
            out[t.uid] = t
            for s in t.subs.values():
                out[s.uid] = s
        return out

    def _all_stores(self) -> list[MessageStore]:
        stores: list[MessageStore] = []
        for q in self._queues.values():
            stores += (q.store, q.dlq)
        for t in self._topics.values():
            stores.append(t.store)
            for s in t.subs.values():
                stores += (s.store, s.dlq)
        return stores

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
                t.router.add_subscription(key(name), sub)
            else:
                sub = self._sub(data["topic"], data["subscription"])
                compiled = compile_rule(name, rule_from_data(data["rule"]), created, where)
                compiled.updated_at = float(data.get("updated_at", created))
                self._add_rule(sub.topic, sub, compiled)
        self._changed()

    def finish_restore(self) -> None:
        """Everything saved has been restored: the messages whose lock the restart took count
        a failed delivery, as an expired lock does (dead-lettered at MaxDeliveryCount); then
        set the timers. Every other message keeps its delivery count."""
        self._apply_restored_entities()
        lost, self._lost_locks = self._lost_locks, []
        if lost:
            now = self.clock.now()
            try:
                for owner, store, stored in lost:
                    if not store.dead and store.messages.get(stored.sequence_number) is stored:
                        self._expire_lock(owner, store, stored, now)
            finally:
                self._flush()
        for entity in self._by_uid().values():
            if entity.dup_order:
                entity.dup_order = deque(sorted(entity.dup_order))
        for store in self._all_stores():
            when = self._store_deadline(store)
            if when != math.inf:
                self._wake(store, when)
        for entity in self._by_uid().values():
            entity.accessed_at = self.clock.now()  # a restart counts as use
            self._watch_idle(entity)
            if not isinstance(entity, _Topic):
                self._forward_held(entity)  # locked in a forwarding entity at the restart


_RESTORE_ORDER = {"queue": 0, "topic": 0, "subscription": 1, "rule": 2}
