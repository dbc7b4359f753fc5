"""Sending channels: one per peer, each a transmission queue of sequenced items sent in
batches on a long-lived stream, driven by the pure state machine ``cluster.channel``.

- A persistent publication is journaled on the channel's transmission queue when it is queued
  (before the publisher is acknowledged) and removed when the receiver acknowledges it, that is
  after the receiver committed it.
- Before a batch with a persistent item goes out, the channel's sent mark (the highest key sent)
  is stored and committed: after a crash, the stored items at or below it are in doubt and wait
  for their receiver; only items never sent may be re-driven to another host. The state machine
  also asks for it before the first such batch of every new connection (a wait on an earlier
  one may have failed) and before any batch after a re-drive took items off the queue (their
  removal must be durable before a higher key reaches the receiver). Batches leave in key
  order; while one waits for its mark's commit, the next ones are taken and their marks
  journaled (up to ``COMMITTING``), so they share the next commit instead of each waiting for
  a commit of its own.
- On a reconnect the receiver's hello answer says the highest key it committed; everything up
  to it is dropped, everything after it (the in-doubt batches first) is sent again.
- Status: INACTIVE until first started, RUNNING while the stream is up, RETRYING with the
  reason while reconnecting after a failure (every failure is logged once and reported, so
  routing can avoid the peer); the task never ends on an error, it retries with back-off.
- Back-pressure: a transmission queue holds at most MAXDEPTH publications (``full``).
- STOP CHANNEL ends the connection and shows STOPPED until START CHANNEL; while stopped nothing
  is sent and items wait on the transmission queue. The stop is stored (``STOPPED_KIND``), so a
  restarted node keeps the channel stopped, as MQ does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from cluster.channel import MAXDEPTH, ChannelSender, Key, Remove, StatusChange
from cluster.records import ChannelStatus
from qmgr.core.journal import Journal
from qmgr.node.cluster.items import Forwarded, Item, stored_copy, xmitq
from qmgr.rpc.peer_client import ChannelLost, Dialer, PeerConnection, TransportError, describe

log = logging.getLogger("qmgr.node.channels")

RETRY_DELAYS = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
HELLO_TIMEOUT = 5.0
SENT_KIND = "xmitsent"  # stored sent mark of each transmission queue
STOPPED_KIND = "chlstopped"  # cluster-sender channels stopped by STOP CHANNEL
STOP_REASON = "stopped by STOP CHANNEL"
COMMITTING = 4  # batches taken and not sent yet (waiting for their sent mark's commit)


@dataclass(frozen=True)
class Identity:
    """Who this node is on its channels."""

    name: str
    address: str
    cluster: str
    qmid: str = ""


@dataclass(frozen=True)
class _Taken:
    """A batch taken from the state machine and not sent yet, and the commit it waits for
    (None: none of its own; it still leaves only after the batches taken before it)."""

    items: tuple[Item, ...]
    committed: asyncio.Future[None] | None


class OutboundChannel:
    """The cluster-sender channel from this node to ``peer``."""

    def __init__(self, peer: str, manager: ChannelManager) -> None:
        self.peer = peer
        self.manager = manager
        self.sm: ChannelSender[Item] = ChannelSender(maxdepth=manager.maxdepth_of(peer))
        self.address = ""
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._logged = ""  # the last failure reason logged
        self.stopped = False  # by STOP CHANNEL, until START CHANNEL

    @property
    def status(self) -> ChannelStatus:
        return self.sm.status

    @property
    def last_error(self) -> str:
        return self.sm.reason

    @property
    def xmitq(self) -> str:
        return xmitq(self.peer)

    @property
    def depth(self) -> int:
        return self.sm.depth

    def enqueue(self, item: Item) -> None:
        self.sm.enqueue(item)
        self._wake.set()
        self.start()

    def start(self) -> None:
        if self.stopped:
            return
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop_channel(self) -> None:
        """STOP CHANNEL: end the connection; nothing is sent until ``start_channel``."""
        self.stopped = True
        await self.stop()
        self._task = None
        self._apply(self.sm.stopped(STOP_REASON))

    def start_channel(self) -> None:
        """START CHANNEL: resume sending what waits on the transmission queue."""
        self.stopped = False
        self._apply(self.sm.started())
        self.start()

    def take_unsent(self, wanted: Callable[[Item], bool]) -> list[Item]:
        return self.sm.take_unsent(wanted)

    def put_back(self, items: list[Item]) -> None:
        self.sm.put_back(items)
        self._wake.set()

    def _apply(self, action: Remove[Item] | StatusChange | None) -> None:
        if action is None:
            return
        if isinstance(action, Remove):
            removed = self.manager.journal.message_removed
            queue = self.xmitq
            for item in action.items:
                if item.stored is not None:
                    removed(queue, item.stored)
        else:
            self.manager.on_status(self.peer, action.status, action.reason)

    def _undeliverable(self, item: Item, exc: Exception) -> None:
        """An item that cannot be encoded (values out of range): dead-lettered here, never
        retried."""
        self._apply(self.sm.discard(item))
        if item.publication is not None:
            self.manager.undeliverable(self.peer, item, "MQRC_MD_ERROR", describe(exc))
        else:
            log.error("proxy item for %s dropped: %s", self.peer, describe(exc))

    def _failed(self, exc: BaseException) -> None:
        reason = describe(exc)
        change = self.sm.lost(reason)
        if reason != self._logged:  # logged once per distinct reason
            self._logged = reason
            if isinstance(exc, (ChannelLost, TransportError, OSError)):
                log.warning("channel to %s is RETRYING: %s", self.peer, reason)
            else:
                log.error("channel to %s failed, RETRYING: %s", self.peer, reason, exc_info=exc)
        self._apply(change)

    async def _run(self) -> None:
        attempt = 0
        while not self.manager.stopping:
            try:
                address = self.manager.address_of(self.peer)
                if not address:
                    raise ChannelLost(f"address of {self.peer} unknown")
                self.address = address
                conn = PeerConnection(address, self.manager.dialer)
                try:
                    me = self.manager.identity
                    proxies = sorted(self.manager.proxies_for(self.peer))
                    upto = await conn.open(
                        self.peer, me.address, proxies, HELLO_TIMEOUT, qmid=me.qmid
                    )
                    for action in self.sm.hello_answer(upto):
                        self._apply(action)
                    attempt = 0
                    await self._pump(conn)
                finally:
                    with contextlib.suppress(Exception):
                        await conn.close()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self.manager.stopping:
                    return
                self._failed(exc)
            await asyncio.sleep(RETRY_DELAYS[min(attempt, len(RETRY_DELAYS) - 1)])
            attempt += 1

    async def _pump(self, conn: PeerConnection) -> None:
        """Take batches as the window allows and send them in key order. A batch carrying a
        sent mark leaves only once the mark is committed, and every batch after it waits for
        it; meanwhile the next batches are taken and their marks journaled (up to
        ``COMMITTING`` batches taken and not sent), so they share the next commit and the
        channel does not stand idle for the length of a commit between two batches."""
        reader = asyncio.get_running_loop().create_task(self._read_acks(conn))
        taken: deque[_Taken] = deque()
        try:
            while True:
                if reader.done():
                    reader.result()
                    raise ChannelLost("acknowledgements ended")
                while taken and (taken[0].committed is None or taken[0].committed.done()):
                    batch = taken.popleft()
                    if batch.committed is not None:
                        batch.committed.result()  # a store failure ends the connection
                    for item, exc in conn.send(batch.items):
                        self._undeliverable(item, exc)
                send = self.sm.next_send() if len(taken) < COMMITTING else None
                if send is not None:
                    taken.append(_Taken(send.items, self._store_mark(send.sent_mark)))
                    continue
                self._wake.clear()
                waiter = asyncio.ensure_future(self._wake.wait())
                waits: set[asyncio.Future[Any]] = {waiter, reader}
                if taken and taken[0].committed is not None:
                    waits.add(taken[0].committed)
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
        finally:
            reader.cancel()
            for batch in taken:
                committed = batch.committed
                if committed is not None and not committed.cancel() and not committed.cancelled():
                    committed.exception()  # a store failure (the node reports it): retrieved
            with contextlib.suppress(BaseException):
                await reader

    def _store_mark(self, mark: Key | None) -> asyncio.Future[None] | None:
        """Journal the sent mark a batch carries; the commit its batch must wait for (None:
        no mark). Store and forward: the batch leaves only once its items and the sent mark
        (and everything journaled before, e.g. a re-drive's removals) are committed here, so
        after a crash an item is either known to be in doubt or was never sent."""
        if mark is None:
            return None
        epoch, seq = mark
        self.manager.journal.object_saved(SENT_KIND, self.peer, {"epoch": epoch, "seq": seq})
        return asyncio.ensure_future(self.manager.durable())

    async def _read_acks(self, conn: PeerConnection) -> None:
        while True:
            upto = await conn.next_ack()
            self._apply(self.sm.ack(upto))
            self._wake.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task


class ChannelManager:
    """Every sending channel of this node, and the item keys they use."""

    def __init__(
        self,
        identity: Identity,
        journal: Journal,
        epoch: int,
        next_sequence: Callable[[], int],
        address_of: Callable[[str], str | None],
        proxies_for: Callable[[str], Iterable[str]],
        on_status: Callable[[str, ChannelStatus, str], None],
        durable: Callable[[], Awaitable[None]],
        undeliverable: Callable[[str, Item, str, str], None],
        dialer: Dialer,
        maxdepth: int = MAXDEPTH,
    ) -> None:
        self.identity = identity
        self.dialer = dialer  # how the channels prove who this node is
        self.durable = durable
        self.journal = journal
        self.epoch = epoch
        self._seq = 0
        self._next_sequence = next_sequence
        self.address_of = address_of
        self.proxies_for = proxies_for
        self.on_status = on_status
        self.channels: dict[str, OutboundChannel] = {}
        self.maxdepth = maxdepth
        self.maxdepths: dict[str, int] = {}  # altered per transmission queue
        self.undeliverable = undeliverable
        self.stopping = False

    def next_key(self) -> Key:
        self._seq += 1
        return (self.epoch, self._seq)

    def channel(self, peer: str) -> OutboundChannel:
        ch = self.channels.get(peer)
        if ch is None:
            ch = self.channels[peer] = OutboundChannel(peer, self)
        return ch

    def statuses(self) -> dict[str, ChannelStatus]:
        return {peer: ch.status for peer, ch in self.channels.items()}

    def set_maxdepth(self, peer: str, maxdepth: int) -> None:
        self.maxdepths[peer] = maxdepth
        self.channel(peer).sm.maxdepth = maxdepth

    def maxdepth_of(self, peer: str) -> int:
        return self.maxdepths.get(peer, self.maxdepth)

    def full(self, peer: str) -> bool:
        """The transmission queue to ``peer`` holds MAXDEPTH publications."""
        ch = self.channels.get(peer)
        return ch is not None and ch.sm.full

    def room(self, peers: Iterable[str], count: int) -> bool:
        """Whether the transmission queue to each of ``peers`` takes ``count`` more
        publications before it is ``full``."""
        for peer in peers:
            ch = self.channels.get(peer)
            held, maxdepth = (
                (ch.sm.publications, ch.sm.maxdepth) if ch else (0, self.maxdepth_of(peer))
            )
            if maxdepth - held < count:
                return False
        return True

    def full_among(self, peers: Iterable[str]) -> list[str]:
        """The peers among ``peers`` whose transmission queue is full (``full``), in order."""
        return [peer for peer in peers if self.full(peer)]

    def send_publication(self, peer: str, pub: Forwarded) -> Item:
        item = Item(self.next_key(), publication=pub)
        if pub.persistent:
            item.stored = stored_copy(item, self._next_sequence())
            self.journal.message_added(xmitq(peer), item.stored)
        self.channel(peer).enqueue(item)
        return item

    def move(self, item: Item, source: str, target: str) -> None:
        """Re-queue a never-sent publication item for another peer (a new key)."""
        if item.stored is not None:
            self.journal.message_removed(xmitq(source), item.stored)
        assert item.publication is not None
        self.send_publication(target, item.publication)

    def send_proxy(self, peer: str, topic: str, add: bool) -> None:
        self.channel(peer).enqueue(Item(self.next_key(), proxy=(topic, add)))

    def restore(self, peer: str, items: list[Item], sent_mark: Key) -> None:
        """Queue items found on a transmission queue after a restart; those at or below the
        stored sent mark are in doubt."""
        ch = self.channel(peer)
        ch.sm.restore(items, sent_mark)
        if items:
            ch.start()

    def start_channel(self, peer: str) -> None:
        self.channel(peer).start()

    async def stop_operator(self, peer: str) -> None:
        """STOP CHANNEL for the channel to ``peer`` (stored until START CHANNEL)."""
        self.journal.object_saved(STOPPED_KIND, peer, {"status": "STOPPED"})
        await self.durable()
        await self.channel(peer).stop_channel()

    async def start_operator(self, peer: str) -> None:
        """START CHANNEL for the channel to ``peer``."""
        self.journal.object_deleted(STOPPED_KIND, peer)
        await self.durable()
        self.channel(peer).start_channel()

    def load_stopped(self, peers: Iterable[str]) -> None:
        """Channels stopped before a restart stay stopped (before anything starts them)."""
        for peer in peers:
            ch = self.channel(peer)
            ch.stopped = True
            ch.sm.stopped(STOP_REASON)

    async def stop(self) -> None:
        self.stopping = True
        for ch in list(self.channels.values()):
            await ch.stop()
