"""Sending channels: one per peer, each a transmission queue of sequenced items sent in
batches on a long-lived stream, with a window of unacknowledged items.

- A persistent publication is journaled on the channel's transmission queue when it is queued
  (before the publisher is acknowledged) and removed when the receiver acknowledges it, that is
  after the receiver committed it.
- On a reconnect the receiver's hello answer says the highest key it applied; everything up to
  it is dropped, everything after it (the in-doubt batches first) is sent again.
- Status: INACTIVE until first started, RUNNING while the stream is up, RETRYING while
  reconnecting after a failure (every failure is reported, so routing can avoid the peer).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from cluster.records import ChannelStatus
from qmgr.core.journal import Journal
from qmgr.node.cluster.items import Forwarded, Item, Key, stored_copy, xmitq
from qmgr.rpc.peer_client import ChannelLost, PeerConnection, TransportError

log = logging.getLogger("qmgr.node.channels")

BATCH = 512  # items per channel batch
WINDOW = 8 * BATCH  # unacknowledged items allowed in flight
RETRY_DELAYS = (0.05, 0.1, 0.2, 0.5, 1.0)
HELLO_TIMEOUT = 5.0


@dataclass(frozen=True)
class Identity:
    """Who this node is on its channels."""

    name: str
    address: str
    cluster: str


class OutboundChannel:
    """The cluster-sender channel from this node to ``peer``."""

    def __init__(self, peer: str, manager: ChannelManager) -> None:
        self.peer = peer
        self.manager = manager
        self.status = ChannelStatus.INACTIVE
        self.pending: deque[Item] = deque()
        self.inflight: deque[Item] = deque()
        self.acked = 0  # items acknowledged (MSGS)
        self.batches = 0
        self.address = ""
        self.last_error = ""
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def xmitq(self) -> str:
        return xmitq(self.peer)

    @property
    def depth(self) -> int:
        return len(self.pending) + len(self.inflight)

    def enqueue(self, item: Item) -> None:
        self.pending.append(item)
        self._wake.set()
        self.start()

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    def take_unsent(self, wanted: Callable[[Item], bool]) -> list[Item]:
        """Remove and return the queued items never sent that ``wanted`` selects."""
        keep: deque[Item] = deque()
        taken: list[Item] = []
        for item in self.pending:
            (taken if not item.sent and wanted(item) else keep).append(item)
        self.pending = keep
        return taken

    def put_back(self, items: list[Item]) -> None:
        """Return items taken by ``take_unsent`` to their places (key order)."""
        self.pending = deque(sorted([*self.pending, *items], key=lambda i: i.key))
        self._wake.set()

    def _set_status(self, status: ChannelStatus) -> None:
        if status is not self.status:
            self.status = status
            self.manager.on_status(self.peer, status)

    def _acknowledged(self, upto: Key) -> None:
        journal = self.manager.journal
        n = 0
        for queue in (self.inflight, self.pending):
            while queue and queue[0].key <= upto:
                item = queue.popleft()
                if item.stored is not None:
                    journal.message_removed(self.xmitq, item.stored)
                n += 1
        self.acked += n

    async def _run(self) -> None:
        attempt = 0
        while not self.manager.stopping:
            address = self.manager.address_of(self.peer)
            if not address:
                self.last_error = "address unknown"
                self._set_status(ChannelStatus.RETRYING)
            else:
                self.address = address
                conn = PeerConnection(address)
                try:
                    me = self.manager.identity
                    proxies = sorted(self.manager.proxies_for(self.peer))
                    upto = await conn.open(me.name, me.address, me.cluster, proxies, HELLO_TIMEOUT)
                    self.pending.extendleft(reversed(self.inflight))
                    self.inflight.clear()
                    self._acknowledged(upto)
                    attempt = 0
                    self._set_status(ChannelStatus.RUNNING)
                    await self._pump(conn)
                except (ChannelLost, TransportError, OSError) as exc:
                    self.last_error = str(exc)
                finally:
                    with contextlib.suppress(Exception):
                        await conn.close()
                if self.manager.stopping:
                    return
                self._set_status(ChannelStatus.RETRYING)
            await asyncio.sleep(RETRY_DELAYS[min(attempt, len(RETRY_DELAYS) - 1)])
            attempt += 1

    async def _pump(self, conn: PeerConnection) -> None:
        reader = asyncio.get_running_loop().create_task(self._read_acks(conn))
        try:
            while True:
                if reader.done():
                    reader.result()
                    raise ChannelLost("acknowledgements ended")
                if not self.pending or len(self.inflight) >= WINDOW:
                    self._wake.clear()
                    waiter = asyncio.ensure_future(self._wake.wait())
                    await asyncio.wait({waiter, reader}, return_when=asyncio.FIRST_COMPLETED)
                    waiter.cancel()
                    continue
                batch: list[Item] = []
                while self.pending and len(batch) < BATCH:
                    item = self.pending.popleft()
                    item.sent = True
                    batch.append(item)
                self.inflight.extend(batch)
                if any(item.stored is not None for item in batch):
                    # store and forward: a persistent item leaves only once it is committed
                    # here (with whatever made this node accept it), so a crash can never
                    # make this node send it again under another key
                    await self.manager.durable()
                conn.send(batch)
                self.batches += 1
        finally:
            reader.cancel()
            with contextlib.suppress(BaseException):
                await reader

    async def _read_acks(self, conn: PeerConnection) -> None:
        while True:
            upto = await conn.next_ack()
            self._acknowledged(upto)
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
        on_status: Callable[[str, ChannelStatus], None],
        durable: Callable[[], Awaitable[None]],
    ) -> None:
        self.identity = identity
        self.durable = durable
        self.journal = journal
        self.epoch = epoch
        self._seq = 0
        self._next_sequence = next_sequence
        self.address_of = address_of
        self.proxies_for = proxies_for
        self.on_status = on_status
        self.channels: dict[str, OutboundChannel] = {}
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

    def restore(self, peer: str, items: list[Item]) -> None:
        """Queue items found on a transmission queue after a restart (sorted by key)."""
        ch = self.channel(peer)
        for item in sorted(items, key=lambda i: i.key):
            ch.pending.append(item)
        if items:
            ch.start()

    def start_channel(self, peer: str) -> None:
        self.channel(peer).start()

    async def stop(self) -> None:
        self.stopping = True
        for ch in list(self.channels.values()):
            await ch.stop()
