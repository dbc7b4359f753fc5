"""Where a message goes: delivery, auto-forwarding, dead-lettering, and failed deliveries.

An accepted message is stored in a queue or subscription, fanned out by a topic, held until
its scheduled time, forwarded on to ForwardTo, or dead-lettered; a message whose lock or time
to live ran out goes back to the available ones, on to its ForwardTo, to the dead-letter
queue, or away. These steps are one module because they call one another in a cycle: a
forwarded message is delivered again at its destination (which may forward it further, or
fan it out), a forward that fails dead-letters the message, and a dead-lettered message may
itself be forwarded to ForwardDeadLetteredMessagesTo. Sending, receiving, settling, sessions
and timers all end here; this module needs none of them.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from qmgr.filters import FilterEvaluationError
from qmgr.servicebus.errors import Code
from qmgr.servicebus.message import MessageState, SbMessage, Stored
from qmgr.servicebus.names import key
from qmgr.servicebus.state import (
    NamespaceState,
    QueueEntity,
    SubscriptionEntity,
    TopicEntity,
    add,
    flush,
    next_seq,
    remove,
    wake,
)
from qmgr.servicebus.store import MessageStore

MAX_HOPS = 4  # auto-forwarding chain limit


def with_properties(msg: SbMessage, changes: Mapping[str, Any]) -> SbMessage:
    """A copy of ``msg`` with application properties changed (the original may be shared by
    the copies of other subscriptions)."""
    props = dict(msg.properties)
    props.update(changes)
    return replace(msg, properties=props)


# ---------------------------------------------------------------------- arrival


def hold_scheduled(
    ns: NamespaceState,
    target: QueueEntity | TopicEntity,
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
    seq = next_seq(ns, store)
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
    add(ns, store, stored)
    heapq.heappush(store.scheduled_heap, (when, seq))
    wake(ns, store, when)
    return seq


def duplicate(
    ns: NamespaceState, target: QueueEntity | TopicEntity, msg: SbMessage, now: float
) -> bool:
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
    ns.journal.value_saved(f"dup:{target.uid}:{mid}", repr(now))
    wake(ns, target.store, now + window)
    return False


def publish(
    ns: NamespaceState,
    topic: TopicEntity,
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
    seq = next_seq(ns, topic.store)
    first = enq_seq or seq
    topic.accessed_at = now
    for sub, copy in topic.router.route(msg, seq, now):
        if isinstance(copy, FilterEvaluationError):
            if sub.props.dead_lettering_on_filter_exceptions:
                dead_letter_new(
                    ns, sub, msg, size, now, hop, first, "FilterEvaluationException", str(copy)
                )
            continue
        copy_size = size if copy is msg else copy.size
        enqueue(ns, sub, copy, copy_size, now, hop, first, dl_source)
    return seq


def enqueue(
    ns: NamespaceState,
    entity: QueueEntity | SubscriptionEntity,
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
        seq = next_seq(ns, entity.store)
        forward(ns, entity, msg, size, now, hop, enq_seq or seq, dl_source, seq)
        return seq
    store = entity.store
    if store.sessions_enabled and msg.session_id is None:
        dead_letter_new(ns, entity, msg, size, now, hop, enq_seq, "Session ID is null.", "")
        return 0
    ttl = props.default_message_ttl
    if isinstance(entity, SubscriptionEntity):
        ttl = min(ttl, entity.topic.props.default_message_ttl)
    if msg.time_to_live is not None and msg.time_to_live < ttl:
        ttl = msg.time_to_live
    seq = next_seq(ns, store)
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
    add(ns, store, stored)
    store.make_available(stored, returned=False)
    if ttl != math.inf:
        heapq.heappush(store.ttl_heap, (stored.expires_at, seq))
        wake(ns, store, stored.expires_at)
    return seq


# ---------------------------------------------------------------------- forwarding


def forward(
    ns: NamespaceState,
    source: QueueEntity | SubscriptionEntity,
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
        dead_letter_new(
            ns,
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
    dest, failure = forward_destination(ns, dest_name, size)
    if failure is not None:
        reason, text = failure
        dead_letter_new(ns, source, msg, size, now, hop, enq_seq, reason, text, seq)
        return
    deliver(ns, dest, msg, size, now, hop + 1, enq_seq, dl_source)


def forward_destination(
    ns: NamespaceState, name: str, size: int
) -> tuple[Any, tuple[str, str] | None]:
    dest: Any = ns.queues.get(key(name)) or ns.topics.get(key(name))
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


def deliver(
    ns: NamespaceState,
    dest: QueueEntity | TopicEntity,
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
        and duplicate(ns, dest, msg, now)
    ):
        return
    when = msg.scheduled_enqueue_time
    if when is not None and when > now:
        hold_scheduled(ns, dest, msg, size, now, when, hop, enq_seq, dl_source)
        return
    if isinstance(dest, TopicEntity):
        publish(ns, dest, msg, size, now, hop, dl_source, enq_seq)
    else:
        enqueue(ns, dest, msg, size, now, hop, enq_seq, dl_source)


def forward_held(ns: NamespaceState, entity: QueueEntity | SubscriptionEntity) -> None:
    """Forwarding was just enabled: the active messages the entity holds move on too."""
    if not entity.props.forward_to or not entity.store.active_count:
        return
    store = entity.store
    now = ns.clock.now()
    waiting = [
        s
        for s in store.messages.values()
        if s.state is MessageState.ACTIVE and s.lock_token is None
    ]
    try:
        for stored in waiting:
            forward_stored(ns, entity, store, stored, now)
    finally:
        flush(ns)


def forward_stored(
    ns: NamespaceState,
    entity: QueueEntity | SubscriptionEntity,
    store: MessageStore,
    stored: Stored,
    now: float,
) -> None:
    """A message held by a forwarding entity (unlocked) moves on to its ForwardTo."""
    remove(ns, store, stored)
    forward(
        ns,
        entity,
        stored.message,
        stored.size,
        now,
        stored.hop_count,
        stored.enqueued_sequence_number,
        stored.dead_letter_source,
        stored.sequence_number,
    )


def hand_back(
    ns: NamespaceState, entity: Any, store: MessageStore, stored: Stored, now: float
) -> None:
    """An active message handed back (abandon, lock expiry, release): available again, or
    forwarded if its entity has started forwarding since it was received (nobody may
    receive from a forwarding entity)."""
    if store is entity.store and entity.props.forward_to:
        forward_stored(ns, entity, store, stored, now)
    else:
        store.make_available(stored, returned=True)


# ---------------------------------------------------------------------- dead-lettering


def dead_letter_new(
    ns: NamespaceState,
    entity: QueueEntity | SubscriptionEntity,
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
    seq = seq or next_seq(ns, entity.store)
    stored = Stored(
        msg, seq, now, enqueued_sequence_number=enq_seq or seq, hop_count=hop, size=size
    )
    place_dead_letter(ns, entity, stored, reason, description, None, now)


def place_dead_letter(
    ns: NamespaceState,
    entity: QueueEntity | SubscriptionEntity,
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
        stored.message = with_properties(stored.message, changes)
        stored.size = stored.message.size
    stored.lock_token = None
    stored.locked_until = 0.0
    stored.session_lock = False
    stored.state = MessageState.ACTIVE
    stored.expires_at = math.inf
    stored.scheduled_enqueue_time = None
    dest_name = entity.props.forward_dead_lettered_to
    if dest_name and stored.hop_count < MAX_HOPS:
        dest, failure = forward_destination(ns, dest_name, stored.size)
        if failure is None:
            deliver(
                ns,
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
        stored.sequence_number = next_seq(ns, entity.store)
    add(ns, dlq, stored)
    dlq.make_available(stored, returned=True)


# ---------------------------------------------------------------------- failed deliveries


def failed_delivery(
    ns: NamespaceState, entity: Any, store: MessageStore, stored: Stored, now: float
) -> None:
    """An abandoned or expired lock: count the delivery, dead-letter past the limit."""
    stored.delivery_count += 1
    if stored.delivery_count >= entity.props.max_delivery_count and not store.dead_letter:
        remove(ns, store, stored)
        place_dead_letter(
            ns,
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
        expire(ns, entity, store, stored, now)
        return
    ns.journal.message_updated(store.path, stored)
    if stored.state is MessageState.ACTIVE:
        hand_back(ns, entity, store, stored, now)


def expire_lock(
    ns: NamespaceState, entity: Any, store: MessageStore, stored: Stored, now: float
) -> None:
    """``stored`` (out of the lock table) lost its lock by time."""
    stored.lock_token = None
    stored.locked_until = 0.0
    stored.session_lock = False
    failed_delivery(ns, entity, store, stored, now)


def expire(
    ns: NamespaceState, entity: Any, store: MessageStore, stored: Stored, now: float
) -> None:
    """``stored`` (active, unlocked) has outlived its time to live."""
    remove(ns, store, stored)
    if entity.props.dead_lettering_on_expiration and not store.dead_letter:
        place_dead_letter(
            ns,
            entity,
            stored,
            "TTLExpiredException",
            "The message expired and was dead lettered.",
            None,
            now,
        )
