"""Restore: rebuilding a namespace from what its journal saved.

A node that restarts reads its store back through these calls: entities first (in any order;
they are applied topics and queues before subscriptions before rules), then messages, session
states and saved values (sequence counters, duplicate-detection history), then
``finish_restore``. Lock tokens are not kept, so a message that was locked when the namespace
went down has lost its lock as if it had expired; the timers are set only once everything is
back. This runs once per start and never on the message paths, so it is kept apart from them.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from typing import Any

from qmgr.servicebus.delivery import expire_lock, forward_held
from qmgr.servicebus.entities import QueueProperties, SubscriptionProperties, TopicProperties
from qmgr.servicebus.errors import bad
from qmgr.servicebus.management import add_rule, rule_from_data, sub_named, topic_named
from qmgr.servicebus.message import MessageState, Stored
from qmgr.servicebus.names import key
from qmgr.servicebus.rules import compile_rule
from qmgr.servicebus.state import (
    NamespaceState,
    QueueEntity,
    SubscriptionEntity,
    TopicEntity,
    changed,
    flush,
    grow,
    resolve,
    wake,
    watch_idle,
)
from qmgr.servicebus.store import MessageStore
from qmgr.servicebus.timers import store_deadline

_RESTORE_ORDER = {"queue": 0, "topic": 0, "subscription": 1, "rule": 2}


def restore_entity(ns: NamespaceState, path: str, data: dict[str, Any]) -> None:
    if not isinstance(data, dict) or data.get("kind") not in _RESTORE_ORDER:
        raise bad(f"cannot restore entity '{path}': unknown record {data!r}")
    ns.restoring.append((path, data))


def _apply_restored_entities(ns: NamespaceState) -> None:
    if not ns.restoring:
        return
    pending = sorted(ns.restoring, key=lambda item: _RESTORE_ORDER[item[1]["kind"]])
    ns.restoring = []
    for path, data in pending:
        kind = data["kind"]
        where = f"restored {kind} '{path}'"
        name = data["name"]
        created = float(data.get("created_at", ns.clock.now()))
        if kind == "queue":
            qprops = QueueProperties.from_dict(data.get("properties"), where)
            queue = QueueEntity(name, qprops, created, data.get("id"))
            queue.updated_at = float(data.get("updated_at", created))
            ns.queues[key(name)] = queue
        elif kind == "topic":
            tprops = TopicProperties.from_dict(data.get("properties"), where)
            topic = TopicEntity(name, tprops, created, data.get("id"))
            topic.updated_at = float(data.get("updated_at", created))
            ns.topics[key(name)] = topic
        elif kind == "subscription":
            t = topic_named(ns, data["topic"])
            sprops = SubscriptionProperties.from_dict(data.get("properties"), where)
            sub = SubscriptionEntity(t, name, sprops, created, data.get("id"))
            sub.updated_at = float(data.get("updated_at", created))
            t.subs[key(name)] = sub
            t.router.add_subscription(key(name), sub)
        else:
            sub = sub_named(ns, data["topic"], data["subscription"])
            compiled = compile_rule(name, rule_from_data(data["rule"]), created, where)
            compiled.updated_at = float(data.get("updated_at", created))
            add_rule(sub.topic, sub, compiled)
    changed(ns)


def restore_message(ns: NamespaceState, entity: str, stored: Stored, lock_lost: bool) -> None:
    _apply_restored_entities(ns)
    owner, store = resolve(ns, entity)
    stored.lock_token = None
    stored.locked_until = 0.0
    stored.session_lock = False
    if not stored.size:
        stored.size = stored.message.size
    store.counted_add(stored, stored.size)
    grow(owner, stored.size)
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
        ns.lost_locks.append((owner, store, stored))
    elif stored.state is MessageState.ACTIVE:
        store.make_available(stored, returned=True)
    if stored.state is MessageState.ACTIVE and stored.expires_at != math.inf:
        heapq.heappush(store.ttl_heap, (stored.expires_at, seq))


def restore_session_state(
    ns: NamespaceState, entity: str, session_id: str, state: bytes | None
) -> None:
    _apply_restored_entities(ns)
    _, store = resolve(ns, entity)
    if state is not None:
        store.session(session_id).state = bytes(state)


def restore_value(ns: NamespaceState, key_: str, value: str) -> None:
    _apply_restored_entities(ns)
    kind, _, rest = key_.partition(":")
    if kind == "seq":
        owner = _by_uid(ns).get(rest)
        if owner is not None and value:
            owner.store.next_sequence = max(owner.store.next_sequence, int(value))
    elif kind == "dup":
        uid, _, mid = rest.partition(":")
        owner = _by_uid(ns).get(uid)
        if owner is not None and value:
            seen = float(value)
            owner.dup_seen[mid] = seen
            if owner.dup_order is None:
                owner.dup_order = deque()
            owner.dup_order.append((seen, mid))


def finish_restore(ns: NamespaceState) -> None:
    _apply_restored_entities(ns)
    lost, ns.lost_locks = ns.lost_locks, []
    if lost:
        now = ns.clock.now()
        try:
            for owner, store, stored in lost:
                if not store.dead and store.messages.get(stored.sequence_number) is stored:
                    expire_lock(ns, owner, store, stored, now)
        finally:
            flush(ns)
    for entity in _by_uid(ns).values():
        if entity.dup_order:
            entity.dup_order = deque(sorted(entity.dup_order))
    for store in _all_stores(ns):
        when = store_deadline(store)
        if when != math.inf:
            wake(ns, store, when)
    for entity in _by_uid(ns).values():
        entity.accessed_at = ns.clock.now()  # a restart counts as use
        watch_idle(ns, entity)
        if not isinstance(entity, TopicEntity):
            forward_held(ns, entity)  # locked in a forwarding entity at the restart


def _by_uid(ns: NamespaceState) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for q in ns.queues.values():
        out[q.uid] = q
    for t in ns.topics.values():
        out[t.uid] = t
        for s in t.subs.values():
            out[s.uid] = s
    return out


def _all_stores(ns: NamespaceState) -> list[MessageStore]:
    stores: list[MessageStore] = []
    for q in ns.queues.values():
        stores += (q.store, q.dlq)
    for t in ns.topics.values():
        stores.append(t.store)
        for s in t.subs.values():
            stores += (s.store, s.dlq)
    return stores
