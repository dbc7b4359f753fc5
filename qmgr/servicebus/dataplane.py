"""Messages and locks: send, receive, browse and settle.

The operations a sender or receiver calls, and the per-message peek-lock they share: a
received message is locked under a token until it is settled (completed, abandoned, released,
deferred or dead-lettered) or its lock runs out. These are the hot paths of the namespace
(send, receive under a lock, complete), kept together and apart from entity management,
timers and restore so that what they do on every message is in one place. Where a message
goes once accepted or handed back is ``delivery``'s; the session lock is ``sessions``'.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

from qmgr.servicebus.delivery import (
    duplicate,
    enqueue,
    expire,
    expire_lock,
    failed_delivery,
    hand_back,
    hold_scheduled,
    place_dead_letter,
    publish,
    with_properties,
)
from qmgr.servicebus.errors import Code, ServiceBusError, bad
from qmgr.servicebus.message import MessageState, SbMessage, Stored
from qmgr.servicebus.sessions import expire_session, renew_session_lock, session_for
from qmgr.servicebus.state import (
    NamespaceState,
    QueueEntity,
    TopicEntity,
    flush,
    receive_source,
    remove,
    resolve,
    send_target,
    wake,
)
from qmgr.servicebus.store import MessageStore


class ReceiveMode(Enum):
    PEEK_LOCK = "PeekLock"
    RECEIVE_AND_DELETE = "ReceiveAndDelete"


_ID_ATTRS = ("message_id", "session_id", "partition_key", "reply_to_session_id")


def _short_id(value: object) -> bool:
    """An identifier a message may carry: absent, or a string of at most 128 characters."""
    return value is None or (isinstance(value, str) and len(value) <= 128)


# ---------------------------------------------------------------------- send


def send(
    ns: NamespaceState, path: str, messages: Sequence[SbMessage], at: float | None = None
) -> list[int]:
    """``at``: a scheduled enqueue time for all of them (see ``accept``)."""
    target = send_target(ns, path)
    now = ns.clock.now()
    sizes = check_batch(target, messages)
    target.accessed_at = now
    out: list[int] = []
    try:
        for msg, size in zip(messages, sizes, strict=True):
            out.append(accept(ns, target, msg, size, now, at))
    finally:
        flush(ns)
    return out


def check_batch(target: Any, messages: Sequence[SbMessage]) -> list[int]:
    """The size of each message of a batch, once the whole batch is known to be acceptable
    (nothing is stored if one message is refused)."""
    if isinstance(messages, SbMessage) or not isinstance(messages, Sequence):
        raise bad("messages must be a sequence of SbMessage")
    props = target.props
    limit = props.max_message_size_kb * 1024
    session_queue = isinstance(target, QueueEntity) and props.requires_session
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
                    raise bad(f"message {index}: {attr} must be a string of at most 128 characters")
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


def accept(
    ns: NamespaceState,
    target: QueueEntity | TopicEntity,
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
    if target.props.requires_duplicate_detection and duplicate(ns, target, msg, now):
        return 0
    when = msg.scheduled_enqueue_time
    if when is not None and when > now:
        return hold_scheduled(ns, target, msg, size, now, when, 0, 0, None)
    if isinstance(target, QueueEntity):
        return enqueue(ns, target, msg, size, now, 0, 0, None)
    return publish(ns, target, msg, size, now, 0)


# ---------------------------------------------------------------------- receive


def receive(
    ns: NamespaceState,
    path: str,
    max_count: int,
    mode: ReceiveMode,
    session: str | None = None,
    holder: uuid.UUID | None = None,
) -> list[Stored]:
    entity, store = receive_source(ns, path)
    if isinstance(max_count, bool) or not isinstance(max_count, int) or max_count < 1:
        raise bad(f"max_count must be a positive integer, got {max_count!r}")
    if not isinstance(mode, ReceiveMode):
        raise bad(f"mode must be a ReceiveMode, got {mode!r}")
    now = ns.clock.now()
    sq = session_for(ns, store, session, now, holder)
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
    locked = ns.journal.message_locked
    new_token = ns.new_lock_token
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
                expire(ns, entity, store, stored, now)
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
                        wake(ns, store, until)
            else:
                remove(ns, store, stored)
            out.append(stored.snapshot())
    finally:
        flush(ns)
    if len(store.lock_heap) > 4096:
        store.compact_heaps()
    return out


def peek(
    ns: NamespaceState, path: str, from_sequence: int, max_count: int, session: str | None
) -> list[Stored]:
    entity, store = resolve(ns, path)
    if isinstance(entity, TopicEntity):
        raise ServiceBusError(
            Code.INVALID_OPERATION,
            f"cannot browse topic '{entity.name}': browse a subscription",
        )
    if not store.dead_letter and entity.props.forward_to:
        receive_source(ns, path)  # raises: a forwarding source cannot be browsed
    if isinstance(max_count, bool) or not isinstance(max_count, int) or max_count < 1:
        raise bad(f"max_count must be a positive integer, got {max_count!r}")
    now = ns.clock.now()
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
    ns: NamespaceState,
    path: str,
    sequence_numbers: Sequence[int],
    mode: ReceiveMode,
    session: str | None = None,
    holder: uuid.UUID | None = None,
) -> list[Stored]:
    entity, store = receive_source(ns, path)
    if not isinstance(mode, ReceiveMode):
        raise bad(f"mode must be a ReceiveMode, got {mode!r}")
    now = ns.clock.now()
    sq = session_for(ns, store, session, now, holder) if store.sessions_enabled else None
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
            token = ns.new_lock_token()
            stored.lock_token = token
            store.locks[token] = stored
            ns.journal.message_locked(store.path, stored.sequence_number)
            if sq is not None:
                stored.locked_until = sq.locked_until
                stored.session_lock = True
                sq.locked[token] = stored
            else:
                stored.locked_until = now + entity.props.lock_duration
                heapq.heappush(
                    store.lock_heap, (stored.locked_until, stored.sequence_number, token)
                )
                wake(ns, store, stored.locked_until)
        else:
            remove(ns, store, stored)
    return [stored.snapshot() for stored in found]


# ---------------------------------------------------------------------- settlement


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


def take_locked(
    ns: NamespaceState, path: str, lock_token: uuid.UUID
) -> tuple[Any, MessageStore, Stored]:
    """The message ``lock_token`` locks, taken out of the lock table; or lock lost."""
    entity, store = resolve(ns, path)
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
    now = ns.clock.now()
    if stored.session_lock:
        sq = store.sessions.get(stored.message.session_id or "")
        if sq is None or sq.lock_token is None or sq.locked_until <= now:
            if sq is not None:  # its session's expiry takes the lock back
                store.locks[lock_token] = stored
                expire_session(ns, store, sq, now)
                flush(ns)
            raise ServiceBusError(
                Code.SESSION_LOCK_LOST,
                f"the lock on session '{stored.message.session_id}' has expired",
            )
        sq.locked.pop(lock_token, None)
    elif stored.locked_until <= now:
        expire_lock(ns, entity, store, stored, now)
        flush(ns)
        raise ServiceBusError(
            Code.MESSAGE_LOCK_LOST, f"the lock {lock_token} on '{path}' has expired"
        )
    stored.lock_token = None
    stored.locked_until = 0.0
    stored.session_lock = False
    return entity, store, stored


def complete(ns: NamespaceState, path: str, lock_token: uuid.UUID) -> None:
    _, store, stored = take_locked(ns, path, lock_token)
    remove(ns, store, stored, settled=True)


def _take_changed(
    ns: NamespaceState, path: str, lock_token: uuid.UUID, properties: Mapping[str, Any] | None
) -> tuple[Any, MessageStore, Stored]:
    """``take_locked`` for abandon and defer, which may change the message's properties."""
    _check_settle_args(properties)
    entity, store, stored = take_locked(ns, path, lock_token)
    if properties:
        stored.message = with_properties(stored.message, properties)
    return entity, store, stored


def abandon(
    ns: NamespaceState,
    path: str,
    lock_token: uuid.UUID,
    properties: Mapping[str, Any] | None,
) -> None:
    entity, store, stored = _take_changed(ns, path, lock_token, properties)
    try:
        failed_delivery(ns, entity, store, stored, ns.clock.now())
    finally:
        flush(ns)


def release(ns: NamespaceState, path: str, lock_token: uuid.UUID) -> None:
    entity, store, stored = take_locked(ns, path, lock_token)
    now = ns.clock.now()
    try:
        if stored.state is MessageState.ACTIVE and stored.expires_at <= now:
            expire(ns, entity, store, stored, now)
            return
        ns.journal.message_unlocked(store.path, stored.sequence_number)
        if stored.state is MessageState.ACTIVE:
            hand_back(ns, entity, store, stored, now)
    finally:
        flush(ns)


def defer(
    ns: NamespaceState,
    path: str,
    lock_token: uuid.UUID,
    properties: Mapping[str, Any] | None,
) -> None:
    _, store, stored = _take_changed(ns, path, lock_token, properties)
    store.set_state(stored, MessageState.DEFERRED)
    ns.journal.message_updated(store.path, stored)


def dead_letter(
    ns: NamespaceState,
    path: str,
    lock_token: uuid.UUID,
    reason: str | None,
    description: str | None,
    properties: Mapping[str, Any] | None,
) -> None:
    entity, store = resolve(ns, path)
    if store.dead_letter:
        raise ServiceBusError(
            Code.INVALID_OPERATION,
            f"cannot dead-letter a message of a dead-letter queue ('{path}')",
        )
    _check_settle_args(properties, reason, description)
    _, store, stored = take_locked(ns, path, lock_token)
    remove(ns, store, stored)
    try:
        place_dead_letter(ns, entity, stored, reason, description, properties, ns.clock.now())
    finally:
        flush(ns)


def renew_lock(ns: NamespaceState, path: str, lock_token: uuid.UUID) -> float:
    entity, store = resolve(ns, path)
    stored = store.locks.get(lock_token) if isinstance(lock_token, uuid.UUID) else None
    now = ns.clock.now()
    if stored is not None and stored.session_lock:
        return renew_session_lock(ns, path, stored.message.session_id or "")
    if stored is None or stored.locked_until <= now:
        if stored is not None:
            store.locks.pop(lock_token)
            expire_lock(ns, entity, store, stored, now)
            flush(ns)
        raise ServiceBusError(
            Code.MESSAGE_LOCK_LOST,
            f"the lock {lock_token} on '{path}' is unknown, expired or already settled",
        )
    until = now + entity.props.lock_duration
    stored.locked_until = until
    heapq.heappush(store.lock_heap, (until, stored.sequence_number, lock_token))
    return until
