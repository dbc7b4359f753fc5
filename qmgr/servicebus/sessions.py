"""Sessions: accepting, renewing and releasing a session lock, and a session's state.

A session-enabled queue or subscription hands its messages out by session: one receiver at a
time holds a session under a lock, and the messages it receives are locked under the
session's lock rather than their own. This module keeps the rules of that lock (who holds
it, when it runs out, what its expiry does to the messages it held) apart from the plain
per-message locks of ``dataplane``, which consults ``session_for`` on every session receive.
"""

from __future__ import annotations

import heapq
import uuid
from dataclasses import dataclass

from qmgr.servicebus.delivery import expire, expire_lock
from qmgr.servicebus.errors import Code, ServiceBusError, bad
from qmgr.servicebus.message import MessageState
from qmgr.servicebus.state import (
    NamespaceState,
    SubscriptionEntity,
    flush,
    receive_source,
    resolve,
    wake,
)
from qmgr.servicebus.store import MessageStore, SessionQueue


@dataclass(frozen=True, slots=True)
class SessionLock:
    """A session held by one receiver until ``locked_until`` (renewable)."""

    session_id: str
    lock_token: uuid.UUID
    locked_until: float


def session_for(
    ns: NamespaceState,
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
            expire_session(ns, store, sq, now)
        raise ServiceBusError(
            Code.SESSION_LOCK_LOST, f"the lock on session '{session}' is not held"
        )
    if holder is not None and holder != sq.lock_token:
        raise ServiceBusError(
            Code.SESSION_LOCK_LOST,
            f"the lock on session '{session}' was lost: another receiver holds it now",
        )
    return sq


def accept_session(ns: NamespaceState, path: str, session_id: str | None) -> SessionLock | None:
    entity, store = receive_source(ns, path)
    if not store.sessions_enabled:
        raise ServiceBusError(
            Code.INVALID_OPERATION, f"'{path}' is not session-enabled (RequiresSession)"
        )
    now = ns.clock.now()
    sq: SessionQueue | None = None
    try:
        if session_id is not None:
            if not isinstance(session_id, str) or len(session_id) > 128:
                raise bad(f"invalid session id {session_id!r}: a string of at most 128 characters")
            sq = store.session(session_id)
            if sq.lock_token is not None:
                if sq.locked_until > now:
                    raise ServiceBusError(
                        Code.SESSION_CANNOT_BE_LOCKED,
                        f"session '{session_id}' of '{path}' is locked by another receiver",
                    )
                expire_session(ns, store, sq, now)
                sq = store.session(session_id)
        else:
            for candidate in list(store.sessions.values()):
                if candidate.lock_token is not None:
                    if candidate.locked_until > now:
                        continue
                    expire_session(ns, store, candidate, now)
                if has_available(store, candidate):
                    sq = candidate
                    break
            if sq is None:
                return None
    finally:
        flush(ns)
    token = ns.new_lock_token()
    until = now + entity.props.lock_duration
    sq.lock_token = token
    sq.locked_until = until
    store.sessions[sq.session_id] = sq
    heapq.heappush(store.session_heap, (until, sq.session_id))
    wake(ns, store, until)
    entity.accessed_at = now
    return SessionLock(sq.session_id, token, until)


def has_available(store: MessageStore, sq: SessionQueue) -> bool:
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
    ns: NamespaceState, path: str, session_id: str, holder: uuid.UUID | None = None
) -> float:
    entity, store = receive_source(ns, path)
    now = ns.clock.now()
    sq = session_for(ns, store, session_id, now, holder)
    assert sq is not None
    until = now + entity.props.lock_duration
    sq.locked_until = until
    for stored in sq.locked.values():
        stored.locked_until = until
    heapq.heappush(store.session_heap, (until, sq.session_id))
    return until


def release_session(
    ns: NamespaceState, path: str, session_id: str, holder: uuid.UUID | None = None
) -> None:
    entity, store = resolve(ns, path)
    sq = store.sessions.get(session_id) if store.sessions_enabled else None
    if sq is None or sq.lock_token is None or (holder is not None and holder != sq.lock_token):
        return
    now = ns.clock.now()
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
                expire(ns, entity, store, stored, now)  # it expired while locked
                continue
            ns.journal.message_unlocked(store.path, stored.sequence_number)
            if stored.state is MessageState.ACTIVE:
                store.make_available(stored, returned=True)
    finally:
        flush(ns)
    forget_session_if_empty(store, sq)


def expire_session(ns: NamespaceState, store: MessageStore, sq: SessionQueue, now: float) -> None:
    """A session lock ran out: its unsettled messages count a failed delivery."""
    locked = list(sq.locked.items())
    sq.locked.clear()
    sq.lock_token = None
    sq.locked_until = 0.0
    for token, stored in locked:
        store.locks.pop(token, None)
        expire_lock(ns, store.owner, store, stored, now)
    forget_session_if_empty(store, sq)


def forget_session_if_empty(store: MessageStore, sq: SessionQueue) -> None:
    if sq.count <= 0 and sq.lock_token is None and sq.state is None:
        store.sessions.pop(sq.session_id, None)


def get_session_state(
    ns: NamespaceState, path: str, session_id: str, holder: uuid.UUID | None = None
) -> bytes | None:
    _, store = receive_source(ns, path)
    sq = session_for(ns, store, session_id, ns.clock.now(), holder)
    assert sq is not None
    return sq.state


def set_session_state(
    ns: NamespaceState,
    path: str,
    session_id: str,
    state: bytes | None,
    holder: uuid.UUID | None = None,
) -> None:
    entity, store = receive_source(ns, path)
    if state is not None and not isinstance(state, bytes | bytearray):
        raise bad(f"session state must be bytes or None, got {type(state).__name__}")
    limit = (
        entity.topic.props.max_message_size_kb
        if isinstance(entity, SubscriptionEntity)
        else entity.props.max_message_size_kb
    ) * 1024
    if state is not None and len(state) > limit:
        raise ServiceBusError(
            Code.MESSAGE_SIZE_EXCEEDED,
            f"session state is {len(state)} bytes; at most {limit // 1024} KB",
        )
    sq = session_for(ns, store, session_id, ns.clock.now(), holder)
    assert sq is not None
    sq.state = None if state is None else bytes(state)
    ns.journal.session_state_saved(store.path, session_id, sq.state)


def list_sessions(ns: NamespaceState, path: str) -> list[str]:
    _, store = receive_source(ns, path)
    if not store.sessions_enabled:
        raise ServiceBusError(Code.INVALID_OPERATION, f"'{path}' is not session-enabled")
    return [sid for sid, sq in store.sessions.items() if sq.count > 0 or sq.state is not None]
