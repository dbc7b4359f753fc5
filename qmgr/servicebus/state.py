"""The data of one Service Bus namespace, and the bookkeeping every operation on it shares.

Every concern of the namespace (entity management, delivery and forwarding, sending and
receiving, sessions, timers, restore) is a module of functions over one ``NamespaceState``;
this module holds that state, the entities it keeps, and the few steps they all take: finding
an entity by name or path, adding and removing a message (sizes, session counts, the
journal), numbering messages, arming a store's timer, and journaling the sequence counters
that moved. It imports none of the other concerns, so each of them can build on it.
"""

from __future__ import annotations

import heapq
import math
import uuid
from dataclasses import dataclass, field
from typing import Any, TypeVar

from qmgr.core.clock import Clock
from qmgr.servicebus.entities import QueueProperties, SubscriptionProperties, TopicProperties
from qmgr.servicebus.errors import Code, ServiceBusError, bad, not_found
from qmgr.servicebus.message import MessageState, SbJournal, Stored
from qmgr.servicebus.names import DLQ_SUFFIX, SUBSCRIPTIONS, EntityPath, key
from qmgr.servicebus.rules import CompiledRule, Router
from qmgr.servicebus.store import MessageStore
from qmgr.servicebus.tokens import LockTokens


@dataclass(frozen=True, slots=True)
class NamespaceLimits:
    """Per-namespace quotas (Service Bus's documented ones by default); no cap on entities."""

    max_subscriptions_per_topic: int = 2000
    max_sql_rules_per_topic: int = 2000
    max_correlation_rules_per_topic: int = 100_000


# ---------------------------------------------------------------------- entities


class Entity:
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


class QueueEntity(Entity):
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


class TopicEntity(Entity):
    __slots__ = ("props", "subs", "router", "store", "sql_rules", "correlation_rules")
    kind = "topic"

    def __init__(self, name: str, props: TopicProperties, now: float, uid: str | None = None):
        super().__init__(name, now, uid)
        self.props = props
        self.subs: dict[str, SubscriptionEntity] = {}
        self.router = Router()
        self.store = MessageStore(name, self)  # scheduled messages, fanned out when due
        self.sql_rules = 0
        self.correlation_rules = 0

    @property
    def path(self) -> str:
        return self.name


class SubscriptionEntity(Entity):
    __slots__ = ("topic", "props", "rules", "store", "dlq")
    kind = "subscription"

    def __init__(
        self,
        topic: TopicEntity,
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


# ---------------------------------------------------------------------- the state


@dataclass(slots=True, eq=False)
class NamespaceState:
    """Everything one namespace holds; the operation modules read and change it."""

    name: str
    clock: Clock
    journal: SbJournal
    limits: NamespaceLimits
    queues: dict[str, QueueEntity] = field(default_factory=dict)
    topics: dict[str, TopicEntity] = field(default_factory=dict)
    # raw path -> resolved (entity, store); cleared whenever entities change
    paths: dict[str, tuple[Any, MessageStore]] = field(default_factory=dict)
    restoring: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    timers: list[tuple[float, int, MessageStore]] = field(default_factory=list)
    timer_n: int = 0  # tie-breaker of the timer and idle heaps
    dirty: list[MessageStore] = field(default_factory=list)  # sequence counters to journal
    idle: list[tuple[float, int, Any]] = field(default_factory=list)  # auto-delete deadlines
    lost_locks: list[tuple[Any, MessageStore, Stored]] = field(default_factory=list)
    new_lock_token: LockTokens = field(default_factory=LockTokens)  # message and session


_E = TypeVar("_E")


def find(table: dict[str, _E], kind: str, name: str) -> _E:
    found = table.get(key(name)) if isinstance(name, str) else None
    if found is None:
        raise not_found(kind, str(name))
    return found


def changed(ns: NamespaceState) -> None:
    """Entities were added, removed or changed: resolved paths must be looked up again."""
    ns.paths.clear()


# ---------------------------------------------------------------------- paths


def resolve(ns: NamespaceState, path: str) -> tuple[Any, MessageStore]:
    """(entity, store) for a queue, subscription or dead-letter path; for a topic, the
    topic and its store of scheduled messages."""
    hit = ns.paths.get(path)
    if hit is not None:
        return hit
    if not isinstance(path, str) or not path.strip("/"):
        raise bad(f"invalid entity path {path!r}")
    parsed = EntityPath.parse(path)
    entity: Any
    if parsed.subscription is not None:
        topic = ns.topics.get(key(parsed.entity))
        entity = topic.subs.get(key(parsed.subscription)) if topic else None
        if entity is None:
            raise not_found("subscription", parsed.base)
    else:
        entity = ns.queues.get(key(parsed.entity)) or ns.topics.get(key(parsed.entity))
        if entity is None:
            raise not_found("queue or topic", parsed.entity)
        if parsed.dlq and isinstance(entity, TopicEntity):
            raise not_found("dead-letter queue", str(parsed))
    store = entity.dlq if parsed.dlq else entity.store
    hit = (entity, store)
    ns.paths[path] = hit
    return hit


def _disabled(entity: Any, shown_as: str, doing: str) -> ServiceBusError:
    """ENTITY_DISABLED: ``entity``'s status does not allow ``doing``."""
    return ServiceBusError(
        Code.ENTITY_DISABLED,
        f"{entity.kind} '{shown_as}' is {entity.props.status.value}: {doing} is disabled",
    )


def send_target(ns: NamespaceState, path: str) -> QueueEntity | TopicEntity:
    entity, store = resolve(ns, path)
    if isinstance(entity, SubscriptionEntity) or store.dead_letter:
        raise ServiceBusError(
            Code.INVALID_OPERATION,
            f"cannot send to '{path}': send to a queue or a topic",
        )
    if not entity.props.status.can_send:
        raise _disabled(entity, entity.name, "sending")
    return entity


def receive_source(ns: NamespaceState, path: str) -> tuple[Any, MessageStore]:
    entity, store = resolve(ns, path)
    if isinstance(entity, TopicEntity):
        raise ServiceBusError(
            Code.INVALID_OPERATION,
            f"cannot receive from topic '{entity.name}': receive from a subscription",
        )
    if not entity.props.status.can_receive:
        raise _disabled(entity, entity.path, "receiving")
    if not store.dead_letter and entity.props.forward_to:
        raise ServiceBusError(
            Code.INVALID_OPERATION,
            f"cannot receive from or browse '{entity.path}': it auto-forwards to "
            f"'{entity.props.forward_to}'",
        )
    return entity, store


# ---------------------------------------------------------------------- bookkeeping


def add(ns: NamespaceState, store: MessageStore, stored: Stored) -> None:
    store.counted_add(stored, stored.size)
    grow(store.owner, stored.size)
    if store.sessions_enabled and stored.state is not MessageState.SCHEDULED:
        store.session(stored.message.session_id or "").count += 1
    ns.journal.message_added(store.path, stored)


def remove(
    ns: NamespaceState, store: MessageStore, stored: Stored, *, settled: bool = False
) -> None:
    """``settled``: a peek-locked message completed (see ``SbJournal.message_settled``)."""
    store.counted_remove(stored, stored.size)
    grow(store.owner, -stored.size)
    if store.sessions_enabled and stored.state is not MessageState.SCHEDULED:
        sid = stored.message.session_id or ""
        sq = store.sessions.get(sid)
        if sq is not None:
            sq.count -= 1
            if sq.count <= 0 and sq.lock_token is None and sq.state is None:
                del store.sessions[sid]
    if settled:
        ns.journal.message_settled(store.path, stored.sequence_number)
    else:
        ns.journal.message_removed(store.path, stored.sequence_number)


def grow(owner: Any, size: int) -> None:
    owner.size_bytes += size
    if isinstance(owner, SubscriptionEntity):
        owner.topic.size_bytes += size


def wake(ns: NamespaceState, store: MessageStore, when: float) -> None:
    """Make sure ``tick`` runs for ``store`` by ``when``."""
    if when < store.wake_at:
        store.wake_at = when
        ns.timer_n += 1
        heapq.heappush(ns.timers, (when, ns.timer_n, store))


def watch_idle(ns: NamespaceState, entity: Any) -> None:
    """Remember when ``entity`` is deleted if nothing uses it (AutoDeleteOnIdle)."""
    wait = entity.props.auto_delete_on_idle
    if wait != math.inf:
        ns.timer_n += 1
        heapq.heappush(ns.idle, (entity.accessed_at + wait, ns.timer_n, entity))


def next_seq(ns: NamespaceState, store: MessageStore) -> int:
    seq = store.next_sequence
    store.next_sequence = seq + 1
    if not store.seq_dirty:
        store.seq_dirty = True
        ns.dirty.append(store)
    return seq


def flush(ns: NamespaceState) -> None:
    """Journal the sequence counters that moved (once per operation, not per message)."""
    dirty = ns.dirty
    if dirty:
        save = ns.journal.value_saved
        for store in dirty:
            store.seq_dirty = False
            if not store.dead:
                save(f"seq:{store.owner.uid}", str(store.next_sequence))
        dirty.clear()
