"""Scheduling and time: scheduled messages, and what ``tick`` does as the clock moves on.

The namespace reads no clock of its own; its owner calls ``tick`` by ``next_deadline``. Each
store keeps its deadlines in heaps (lock expiry, session lock expiry, scheduled activation,
TTL expiry, duplicate-detection history) and is registered once in the namespace's timer heap
under its earliest one, so a tick visits only the stores with something due; idle entities
(AutoDeleteOnIdle) have a heap of their own. This module holds the sweep and the scheduling
calls that feed it, apart from the per-message operations, which only arm a store's timer.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from typing import Any

from qmgr.servicebus.dataplane import send
from qmgr.servicebus.delivery import enqueue, expire, expire_lock, publish
from qmgr.servicebus.errors import Code, ServiceBusError, bad
from qmgr.servicebus.management import delete_queue, delete_subscription, delete_topic
from qmgr.servicebus.message import MessageState, SbMessage, Stored
from qmgr.servicebus.names import key
from qmgr.servicebus.sessions import expire_session
from qmgr.servicebus.state import (
    NamespaceState,
    QueueEntity,
    SubscriptionEntity,
    TopicEntity,
    flush,
    remove,
    send_target,
    wake,
    watch_idle,
)
from qmgr.servicebus.store import MessageStore

# ---------------------------------------------------------------------- scheduled messages


def schedule(ns: NamespaceState, path: str, messages: Sequence[SbMessage], at: float) -> list[int]:
    if isinstance(at, bool) or not isinstance(at, int | float) or math.isnan(at):
        raise bad(f"a scheduled enqueue time must be a number of seconds, got {at!r}")
    return send(ns, path, messages, float(at))


def cancel_scheduled(ns: NamespaceState, path: str, sequence_numbers: Sequence[int]) -> None:
    target = send_target(ns, path)
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
        remove(ns, store, stored)


# ---------------------------------------------------------------------- the sweep


def next_deadline(ns: NamespaceState) -> float | None:
    timers = ns.timers
    while timers:
        when, _, store = timers[0]
        if store.dead or store.wake_at != when:
            heapq.heappop(timers)
            continue
        break
    best = timers[0][0] if timers else math.inf
    if ns.idle and ns.idle[0][0] < best:
        best = ns.idle[0][0]
    return None if best == math.inf else best


def tick(ns: NamespaceState) -> None:
    now = ns.clock.now()
    timers = ns.timers
    try:
        while timers and timers[0][0] <= now:
            when, _, store = heapq.heappop(timers)
            if store.dead or store.wake_at != when:
                continue
            store.wake_at = math.inf
            _process(ns, store, now)
            nxt = store_deadline(store)
            if nxt != math.inf:
                wake(ns, store, nxt)
        _delete_idle(ns, now)
    finally:
        flush(ns)


def _process(ns: NamespaceState, store: MessageStore, now: float) -> None:
    entity = store.owner
    msgs = store.messages
    heap = store.lock_heap
    while heap and heap[0][0] <= now:
        until, _, token = heapq.heappop(heap)
        stored = store.locks.get(token)
        if stored is None or stored.locked_until != until or stored.session_lock:
            continue
        del store.locks[token]
        expire_lock(ns, entity, store, stored, now)
    sheap = store.session_heap
    while sheap and sheap[0][0] <= now:
        until, sid = heapq.heappop(sheap)
        sq = store.sessions.get(sid)
        if sq is not None and sq.lock_token is not None and sq.locked_until == until:
            expire_session(ns, store, sq, now)
    sched = store.scheduled_heap
    while sched and sched[0][0] <= now:
        _, seq = heapq.heappop(sched)
        stored = msgs.get(seq)
        if stored is None or stored.state is not MessageState.SCHEDULED:
            continue
        remove(ns, store, stored)
        hop = stored.hop_count  # not 0: it was forwarded here, and keeps its first number
        first = stored.enqueued_sequence_number if hop else 0
        dl_source = stored.dead_letter_source
        if isinstance(entity, TopicEntity):
            publish(ns, entity, stored.message, stored.size, now, hop, dl_source, first)
        else:
            enqueue(ns, entity, stored.message, stored.size, now, hop, first, dl_source)
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
        expire(ns, entity, store, stored, now)
    order = entity.dup_order
    if order and store is entity.store:
        window = entity.props.duplicate_detection_window
        seen = entity.dup_seen
        while order and order[0][0] + window <= now:
            at, mid = order.popleft()
            if seen.get(mid) == at:
                del seen[mid]
                ns.journal.value_saved(f"dup:{entity.uid}:{mid}", "")
    store.compact_heaps()


def store_deadline(store: MessageStore) -> float:
    """The earliest thing ``store`` has due (``math.inf``: nothing)."""
    best = math.inf
    for heap in (store.lock_heap, store.session_heap, store.scheduled_heap, store.ttl_heap):
        if heap and heap[0][0] < best:
            best = heap[0][0]
    entity = store.owner
    order = entity.dup_order
    if order and store is entity.store:
        best = min(best, order[0][0] + entity.props.duplicate_detection_window)
    return best


# ---------------------------------------------------------------------- idle entities


def _alive(ns: NamespaceState, entity: Any) -> bool:
    if isinstance(entity, SubscriptionEntity):
        topic = entity.topic
        return ns.topics.get(key(topic.name)) is topic and (
            topic.subs.get(key(entity.name)) is entity
        )
    table: dict[str, Any] = ns.queues if isinstance(entity, QueueEntity) else ns.topics
    return table.get(key(entity.name)) is entity


def _delete_idle(ns: NamespaceState, now: float) -> None:
    idle = ns.idle
    while idle and idle[0][0] <= now:
        _, _, entity = heapq.heappop(idle)
        wait = entity.props.auto_delete_on_idle
        if not _alive(ns, entity) or wait == math.inf:
            continue
        if entity.accessed_at + wait > now:
            watch_idle(ns, entity)  # used since: a later deadline
        elif isinstance(entity, QueueEntity):
            delete_queue(ns, entity.name)
        elif isinstance(entity, TopicEntity):
            delete_topic(ns, entity.name)
        else:
            delete_subscription(ns, entity.topic.name, entity.name)
