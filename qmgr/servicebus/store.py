"""The messages of one queue, subscription, dead-letter sub-queue or (scheduled only) topic.

Every operation is O(1) or O(log n) in the number of messages held; nothing scans them:

- ``messages``: sequence number -> ``Stored`` (all states).
- ``order``: the sequence numbers in ascending order, for a browse from a sequence number (a
  binary search, then a walk); a removed message's number stays in it until removed ones
  outnumber the messages held, when it is rebuilt (amortized O(1) per removal). Numbers are
  given in ascending order, so an add is an append; one that comes lower (a restore) is
  inserted in place.
- the available messages: ``fresh`` (a deque of sequence numbers in arrival order, which is
  ascending) and ``returned`` (a heap of the sequence numbers handed back by abandon or lock
  expiry); the next message is the smaller head of the two, so order is by sequence number.
  Entries are checked when taken (the message may have expired or been removed meanwhile).
- sessions (session-enabled entities): the same two structures per session id.
- ``locks``: lock token -> message; ``lock_heap``, ``ttl_heap``, ``scheduled_heap``: deadlines,
  checked lazily and compacted when stale entries outnumber live ones.
"""

from __future__ import annotations

import bisect
import heapq
import math
import uuid
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from qmgr.servicebus.message import MessageState, Stored


@dataclass(slots=True, eq=False)
class SessionQueue:
    """The messages of one session, and who holds it."""

    session_id: str
    fresh: deque[int] = field(default_factory=deque)
    returned: list[int] = field(default_factory=list)
    lock_token: uuid.UUID | None = None
    locked_until: float = 0.0
    state: bytes | None = None
    count: int = 0  # active messages (available or locked) of this session
    locked: dict[uuid.UUID, Stored] = field(default_factory=dict)  # messages it holds now


@dataclass(slots=True, eq=False)
class MessageStore:
    """Messages of one entity path (``path`` is the display path the journal uses)."""

    path: str
    owner: Any  # the queue, subscription or topic this store belongs to
    dead_letter: bool = False
    sessions_enabled: bool = False
    messages: dict[int, Stored] = field(default_factory=dict)
    fresh: deque[int] = field(default_factory=deque)
    returned: list[int] = field(default_factory=list)
    sessions: dict[str, SessionQueue] = field(default_factory=dict)
    locks: dict[uuid.UUID, Stored] = field(default_factory=dict)
    lock_heap: list[tuple[float, int, uuid.UUID]] = field(default_factory=list)
    ttl_heap: list[tuple[float, int]] = field(default_factory=list)
    scheduled_heap: list[tuple[float, int]] = field(default_factory=list)
    session_heap: list[tuple[float, str]] = field(default_factory=list)
    next_sequence: int = 1
    active_count: int = 0
    deferred_count: int = 0
    scheduled_count: int = 0
    size_bytes: int = 0
    wake_at: float = math.inf  # the deadline this store is registered under in the namespace
    dead: bool = False  # its entity was deleted
    seq_dirty: bool = False  # next_sequence changed since it was last journaled
    order: list[int] = field(default_factory=list)  # ascending; may hold removed numbers
    removed_in_order: int = 0  # numbers in ``order`` whose message is gone
    max_sequence: int = 0

    # ------------------------------------------------------------------ counts

    @property
    def count(self) -> int:
        return len(self.messages)

    def _count(self, state: MessageState, delta: int) -> None:
        if state is MessageState.ACTIVE:
            self.active_count += delta
        elif state is MessageState.DEFERRED:
            self.deferred_count += delta
        else:
            self.scheduled_count += delta

    def counted_add(self, stored: Stored, size: int) -> None:
        """Account for a message being added in its current state."""
        seq = stored.sequence_number
        known = seq in self.messages
        self.messages[seq] = stored
        if seq > self.max_sequence:
            self.max_sequence = seq
            self.order.append(seq)
        elif not known:
            at = bisect.bisect_left(self.order, seq)
            if at < len(self.order) and self.order[at] == seq:  # removed, now back
                self.removed_in_order -= 1
            else:
                self.order.insert(at, seq)
        self.size_bytes += size
        self._count(stored.state, 1)

    def counted_remove(self, stored: Stored, size: int) -> None:
        del self.messages[stored.sequence_number]
        if not self.messages:
            self.max_sequence = 0
            self.order.clear()
            self.removed_in_order = 0
        else:
            self.removed_in_order += 1
            if self.removed_in_order > len(self.messages) + 256:
                msgs = self.messages
                self.order = [seq for seq in self.order if seq in msgs]
                self.removed_in_order = 0
        self.size_bytes -= size
        self._count(stored.state, -1)

    def set_state(self, stored: Stored, state: MessageState) -> None:
        if stored.state is not state:
            self._count(stored.state, -1)
            self._count(state, 1)
            stored.state = state

    def from_sequence(self, first: int) -> Iterator[Stored]:
        """The messages held from sequence number ``first`` on, in ascending order (a binary
        search for the start: a browse costs what it returns, not what lies before it)."""
        msgs = self.messages
        order = self.order
        i = bisect.bisect_left(order, first)
        while i < len(order):
            stored = msgs.get(order[i])
            i += 1
            if stored is not None:
                yield stored

    # ------------------------------------------------------------------ availability

    def session(self, session_id: str) -> SessionQueue:
        sq = self.sessions.get(session_id)
        if sq is None:
            sq = self.sessions[session_id] = SessionQueue(session_id)
        return sq

    def make_available(self, stored: Stored, *, returned: bool) -> None:
        """Queue ``stored`` (active, unlocked) for receivers."""
        seq = stored.sequence_number
        if self.sessions_enabled:
            sq = self.session(stored.message.session_id or "")
            if returned:
                heapq.heappush(sq.returned, seq)
            else:
                sq.fresh.append(seq)
        elif returned:
            heapq.heappush(self.returned, seq)
        else:
            self.fresh.append(seq)

    def compact_heaps(self) -> None:
        """Drop stale entries (of deadlines, of available messages) once they outnumber the
        live ones."""
        live = len(self.messages)
        if len(self.fresh) + len(self.returned) > 2 * self.active_count + 256:
            msgs = self.messages

            def waiting(seq: int) -> bool:
                s = msgs.get(seq)
                return s is not None and s.state is MessageState.ACTIVE and s.lock_token is None

            self.fresh = deque(seq for seq in self.fresh if waiting(seq))
            self.returned = [seq for seq in self.returned if waiting(seq)]
            heapq.heapify(self.returned)
        if len(self.ttl_heap) > 2 * live + 256:
            msgs = self.messages
            self.ttl_heap = [
                e
                for e in self.ttl_heap
                if (s := msgs.get(e[1])) is not None and s.expires_at == e[0]
            ]
            heapq.heapify(self.ttl_heap)
        if len(self.lock_heap) > 2 * len(self.locks) + 256:
            locks = self.locks
            self.lock_heap = [
                e
                for e in self.lock_heap
                if (s := locks.get(e[2])) is not None and s.locked_until == e[0]
            ]
            heapq.heapify(self.lock_heap)
