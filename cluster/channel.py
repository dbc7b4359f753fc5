"""The cluster channel protocol as a pure state machine (events in, actions out; no I/O).

A node has one ``ChannelSender`` per peer (its transmission queue) and one
``ChannelReceiver`` for everything it receives. The driver (the node's outbound channels and
Peer service) feeds them events and carries out the actions they return, in order.

Sender (one per peer):

- Every item has a key ``(epoch, seq)`` that only grows; items leave in key order, in batches,
  with a window of unacknowledged items.
- ``next_send`` returns a ``Send`` batch. When it carries a persistent item above the *stored
  mark*, it also carries the channel's *sent mark* (the highest key sent): the driver stores the
  mark and waits for it to be committed **before** the batch goes out (and sends the batches of
  one connection in order, so the batches after it wait too). After a crash, ``restore`` marks
  every stored item at or below the mark as sent (in doubt): such an item may already be at its
  receiver, so it is only ever sent again to that receiver (which drops duplicates by key),
  never re-driven to another one. Only items never sent may be moved (``take_unsent``).
- The stored mark is the mark known to be committed before anything more goes out: the one
  restored, or one handed out on the *current* connection. A mark handed out on an earlier
  connection may never have been committed (the driver's wait can fail, e.g. a store failure,
  after which the channel reconnects): a batch sent again after a reconnect carries the mark
  again, so a batch never leaves while the mark covering it (and the journaled items in it,
  e.g. publications re-driven from a dead host, which the same commit makes durable) can still
  be lost by a crash. Without it, the crash would bring back the re-driven items on the dead
  host's queue as never sent, and they would reach a second host.
- Taking persistent items off the queue (``take_unsent``, to re-drive them) leaves a gap below
  the keys still to be sent; the receiver only remembers its highest key, so the removal must
  be committed before a higher key leaves: the next batch carries the mark (and waits) even if
  it holds only non-persistent items, and so does the first batch of every later connection.
  Otherwise a crash would bring the items back on this queue as never sent, with keys below
  what the receiver announces in its hello answer, and they would be removed as acknowledged.
- ``restore`` (the items stored on the transmission queue, after a restart) comes before the
  first batch of the incarnation: items leave in key order, the restored keys are of an earlier
  epoch, and a receiver drops an item whose key is not above the highest it applied.
- ``hello_answer(key)`` (the receiver's last committed key from this sender) and ``ack(key)``
  remove every item up to ``key``: ``Remove`` tells the driver to delete their stored copies.
- ``lost(reason)`` puts the channel in RETRYING with the reason (kept as the last error, shown
  after a reconnect too, until an acknowledgement shows progress); in-flight items are resent
  after the next hello, from the first one the receiver has not committed.
- Back-pressure: ``full`` says the transmission queue holds ``maxdepth`` publications or more;
  the driver then refuses new publications (MQRC_Q_FULL) or drops them as the rules say.

Receiver (state per sending queue manager, keyed by its QMID, not its name, so a member
re-created under the same name with an empty store starts afresh instead of being taken for a
replay):

- ``hello(qmid, name, address)`` answers the last key *committed* from that QMID; a key applied
  in memory but not yet on disk is never announced (the sender would delete items a crash can
  still lose). A new QMID for a known name supersedes the old one's state.
- ``offer(qmid, key, problem)`` for each item of a batch, in order: ``DUPLICATE`` (already
  applied: skipped), ``DELIVER``, or ``DEAD_LETTER`` (an item that cannot be delivered, e.g. an
  invalid priority from a forged or old sender; the driver may also dead-letter a ``DELIVER``
  whose delivery fails). Then ``done(qmid, key)``: the channel advances per item, so a failure
  later in a batch never makes earlier items be delivered again. ``batch_end(qmid, position)``
  ties the keys applied so far to the journal position that holds their effects (and the
  stored channel state, saved in the same journal group).
- ``committed(position)``: the store committed everything up to journal ``position``; the keys
  applied up to it become the committed keys that hello answers and acks may announce.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Generic, Protocol, TypeVar

from cluster.records import ChannelStatus

Key = tuple[int, int]
NO_KEY: Key = (0, 0)

BATCH = 512  # items per batch
WINDOW = 8 * BATCH  # unacknowledged items in flight
MAXDEPTH = 100_000  # default MAXDEPTH of a transmission queue (publications)
LEGACY = "?"  # QMID under which state stored by name only (before QMIDs) is loaded


def legacy_qmid(name: str) -> str:
    return LEGACY + name


def qmid_of(qmid: str, name: str) -> bool:
    """Whether ``qmid`` can be queue manager ``name``'s: a QMID is the name, ``_`` and an id
    without ``_``, so a sender cannot speak for the position kept for another's QMID."""
    return qmid.rpartition("_")[0] == name


class ChannelItem(Protocol):
    """What the state machine needs of an item."""

    sent: bool  # handed to the transport at least once (in doubt until acknowledged)

    @property
    def key(self) -> Key: ...

    @property
    def persistent(self) -> bool:
        """Stored on the transmission queue (survives a restart)."""
        ...

    @property
    def counts(self) -> bool:
        """Counts towards MAXDEPTH (a publication; proxy changes do not)."""
        ...


T = TypeVar("T", bound=ChannelItem)


@dataclass(frozen=True)
class Send(Generic[T]):
    """Send ``items`` as one batch; if ``sent_mark`` is set, store it and wait until it (and
    everything journaled before it) is committed first."""

    items: tuple[T, ...]
    sent_mark: Key | None


@dataclass(frozen=True)
class Remove(Generic[T]):
    """``items`` were committed by the receiver: delete their stored copies."""

    items: tuple[T, ...]


@dataclass(frozen=True)
class StatusChange:
    status: ChannelStatus
    reason: str


class ChannelSender(Generic[T]):
    """The sending end of one channel (its transmission queue)."""

    def __init__(self, *, batch: int = BATCH, window: int = WINDOW, maxdepth: int = MAXDEPTH):
        self.batch = batch
        self.window = window
        self.maxdepth = maxdepth
        self.pending: deque[T] = deque()  # never sent, or sent and to be sent again
        self.inflight: deque[T] = deque()  # sent on the current connection, unacknowledged
        self.sent_mark: Key = NO_KEY  # highest key sent (as far as this incarnation knows)
        self.stored_mark: Key = NO_KEY  # sent mark known committed before the next batch
        self.restored_mark: Key = NO_KEY  # sent mark found in the store (committed)
        self.moved = False  # persistent items never sent were taken off (since the start)
        self.moved_unstored = False  # ... and no batch waited for a commit since
        self.status = ChannelStatus.INACTIVE
        self.reason = ""
        self.acked = 0
        self.batches = 0
        self.publications = 0  # items that count towards MAXDEPTH

    # -- queue ------------------------------------------------------------------------------

    @property
    def depth(self) -> int:
        return len(self.pending) + len(self.inflight)

    @property
    def full(self) -> bool:
        return self.publications >= self.maxdepth

    @property
    def in_doubt(self) -> bool:
        return bool(self.inflight) or any(i.sent for i in self.pending)

    def enqueue(self, item: T) -> None:
        """Queue a new item (its key is above every key queued before); the driver checks
        ``full`` first for publications."""
        self.pending.append(item)
        if item.counts:
            self.publications += 1

    def restore(self, items: Iterable[T], sent_mark: Key) -> None:
        """Queue items found stored after a restart; those at or below the stored sent mark
        were sent before the crash and stay in doubt. Only before the first batch: the
        restored keys (an earlier epoch) are below any key queued since, and the receiver
        drops an item whose key is not above the highest it applied as a duplicate."""
        if self.batches:
            raise RuntimeError("a transmission queue is restored before anything is sent")
        self.sent_mark = max(self.sent_mark, sent_mark)
        self.restored_mark = max(self.restored_mark, sent_mark)
        self.stored_mark = max(self.stored_mark, sent_mark)
        for item in items:
            item.sent = item.key <= sent_mark
            self.enqueue(item)
        self.pending = deque(sorted(self.pending, key=lambda i: i.key))

    def take_unsent(self, wanted: Callable[[T], bool]) -> list[T]:
        """Remove and return the queued items never sent that ``wanted`` selects."""
        keep: deque[T] = deque()
        taken: list[T] = []
        for item in self.pending:
            (taken if not item.sent and wanted(item) else keep).append(item)
        self.pending = keep
        self.publications -= sum(1 for i in taken if i.counts)
        if any(i.persistent for i in taken):
            self.moved = self.moved_unstored = True
        return taken

    def put_back(self, items: list[T]) -> None:
        """Return items taken by ``take_unsent`` to their places (key order)."""
        self.pending = deque(sorted([*self.pending, *items], key=lambda i: i.key))
        self.publications += sum(1 for i in items if i.counts)

    # -- connection -------------------------------------------------------------------------

    def _set(self, status: ChannelStatus, reason: str) -> StatusChange | None:
        changed = status is not self.status or reason != self.reason
        self.status = status
        self.reason = reason
        return StatusChange(status, reason) if changed else None

    def hello_answer(self, upto: Key) -> list[Remove[T] | StatusChange]:
        """The receiver answered the hello with the last key it committed from us."""
        self.pending.extendleft(reversed(self.inflight))
        self.inflight.clear()
        # a mark handed out on an earlier connection (and the commit it waited for, that of a
        # removal too) may never have been committed
        self.stored_mark = self.restored_mark
        self.moved_unstored = self.moved
        out: list[Remove[T] | StatusChange] = []
        removed = self._acknowledged(upto)
        if removed is not None:
            out.append(removed)
        # the last error stays shown until the channel makes progress again
        change = self._set(ChannelStatus.RUNNING, "" if removed is not None else self.reason)
        if change is not None:
            out.append(change)
        return out

    def next_send(self) -> Send[T] | None:
        """The next batch to send, if any and the window allows."""
        if self.status is not ChannelStatus.RUNNING:
            return None
        if not self.pending or len(self.inflight) >= self.window:
            return None
        batch: list[T] = []
        unstored = self.moved_unstored  # or a persistent item above the stored mark
        while self.pending and len(batch) < self.batch:
            item = self.pending.popleft()
            item.sent = True
            unstored = unstored or (item.persistent and item.key > self.stored_mark)
            batch.append(item)
        self.inflight.extend(batch)
        self.batches += 1
        self.sent_mark = max(self.sent_mark, batch[-1].key)
        mark = None
        if unstored:
            # never lower than a mark stored before: every item up to it may have been sent
            mark = self.stored_mark = self.sent_mark
            self.moved_unstored = False
        return Send(tuple(batch), mark)

    def discard(self, item: T) -> Remove[T]:
        """``item`` (sent or about to be) can never be sent: forget it."""
        for queue in (self.inflight, self.pending):
            if item in queue:
                queue.remove(item)
                if item.counts:
                    self.publications -= 1
        return Remove((item,))

    def ack(self, upto: Key) -> Remove[T] | None:
        return self._acknowledged(upto)

    def lost(self, reason: str) -> StatusChange | None:
        """The connection failed (or could not be made): retry later."""
        return self._set(ChannelStatus.RETRYING, reason)

    def stopped(self, reason: str) -> StatusChange | None:
        """Stopped by the operator (STOP CHANNEL): nothing is sent until ``started``. Batches
        sent and not acknowledged stay in doubt and are sent again after the restart."""
        self.pending.extendleft(reversed(self.inflight))
        self.inflight.clear()
        return self._set(ChannelStatus.STOPPED, reason)

    def started(self) -> StatusChange | None:
        """START CHANNEL after a stop: INACTIVE until the connection is made."""
        return self._set(ChannelStatus.INACTIVE, "")

    def _acknowledged(self, upto: Key) -> Remove[T] | None:
        gone: list[T] = []
        for queue in (self.inflight, self.pending):
            while queue and queue[0].key <= upto:
                gone.append(queue.popleft())
        if not gone:
            return None
        if self.status is ChannelStatus.RUNNING:
            self.reason = ""  # progress: the last error is over
        self.acked += len(gone)
        self.publications -= sum(1 for i in gone if i.counts)
        return Remove(tuple(gone))


# ------------------------------------------------------------------------------- receiver


class Verdict(Enum):
    DUPLICATE = "duplicate"
    DELIVER = "deliver"
    DEAD_LETTER = "dead-letter"


@dataclass
class InboundState:
    """What a receiver knows of one sending queue manager (one QMID)."""

    qmid: str
    name: str
    address: str = ""
    applied: Key = NO_KEY  # highest key applied (in memory)
    committed: Key = NO_KEY  # highest key whose effects are committed
    items: int = 0
    connected: int = 0
    uncommitted: list[tuple[int, Key]] = field(default_factory=list)  # (position, key)


class ChannelReceiver:
    """The receiving end of every channel to this node."""

    def __init__(self) -> None:
        self.peers: dict[str, InboundState] = {}  # by QMID

    def load(self, qmid: str, name: str, address: str, key: Key) -> None:
        """State found in the store after a restart (committed by definition)."""
        self.peers[qmid] = InboundState(qmid, name, address, key, key)

    def by_name(self, name: str) -> InboundState | None:
        found = [s for s in self.peers.values() if s.name == name]
        return max(found, key=lambda s: s.connected) if found else None

    def hello(self, qmid: str, name: str, address: str) -> tuple[Key, list[str]]:
        """A sender opened a channel. Returns the last committed key from that QMID and the
        QMIDs whose state is forgotten (older incarnations of the same name, whose stored
        state the driver deletes)."""
        state = self.peers.get(qmid)
        forgotten = [q for q, s in self.peers.items() if s.name == name and q != qmid]
        if state is None:
            # state stored before senders said their QMID is taken as this member's own
            legacy = self.peers.get(legacy_qmid(name))
            state = legacy if legacy is not None else InboundState(qmid, name)
            state.qmid = qmid
        for q in forgotten:
            del self.peers[q]
        self.peers[qmid] = state
        state.address = address
        state.connected += 1
        return state.committed, forgotten

    def disconnected(self, qmid: str) -> None:
        state = self.peers.get(qmid)
        if state is not None:
            state.connected = max(0, state.connected - 1)

    def offer(self, qmid: str, key: Key, problem: str | None) -> Verdict:
        """What to do with the next item of a batch from ``qmid``."""
        state = self.peers[qmid]
        if key <= state.applied:
            return Verdict.DUPLICATE
        return Verdict.DEAD_LETTER if problem else Verdict.DELIVER

    def done(self, qmid: str, key: Key, count: int = 1) -> None:
        """The item ``key`` was applied (delivered, dead-lettered, or nothing to do), with the
        ``count - 1`` items of the batch before it offered since."""
        state = self.peers[qmid]
        state.applied = key
        state.items += count

    def batch_end(self, qmid: str, position: int | None) -> Key:
        """The changes of the items applied so far reach journal ``position`` (None: the batch
        changed nothing durable, so it is committed as soon as what came before it); returns
        the highest key applied."""
        state = self.peers[qmid]
        if state.applied <= state.committed:
            return state.applied
        if position is None:
            if not state.uncommitted:
                state.committed = state.applied
                return state.applied
            position = state.uncommitted[-1][0]
        if state.uncommitted and state.uncommitted[-1][0] == position:
            state.uncommitted[-1] = (position, state.applied)
        else:
            state.uncommitted.append((position, state.applied))
        return state.applied

    def committed(self, position: int) -> None:
        """Everything up to journal ``position`` is committed."""
        for state in self.peers.values():
            while state.uncommitted and state.uncommitted[0][0] <= position:
                state.committed = max(state.committed, state.uncommitted.pop(0)[1])
