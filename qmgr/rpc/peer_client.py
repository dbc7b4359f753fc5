"""Outbound node-to-node calls: a cluster channel to a peer, and a full repository's
Repository service (propose, watch). The node's cluster code sees domain objects only."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import grpc

from cluster.records import RepoEvent
from cluster.repository import ApplyResult
from qmgr.node.cluster.items import Item, Key
from qmgr.rpc.peer_convert import item_to_wire, result_from_wire
from qmgr.wire import cluster_pb2 as cpb
from qmgr.wire import cluster_pb2_grpc as crpc

OPTIONS = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]
TransportError = grpc.RpcError


class ChannelLost(Exception):
    """The channel's stream ended or failed."""


def describe(exc: BaseException) -> str:
    """A one-line reason for a channel failure (DISPLAY CHSTATUS)."""
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "code"):
        return f"{exc.code().name}: {exc.details()}"
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, ChannelLost) else f"{type(exc).__name__}: {text}"


class PeerConnection:
    """One open channel stream to a peer: send batches, read acknowledgements."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._channel = grpc.aio.insecure_channel(address, options=OPTIONS)
        self._stub = crpc.PeerStub(self._channel)
        self._requests: asyncio.Queue[cpb.ChannelRequest | None] = asyncio.Queue()
        self._call: Any = None
        self.receiver = ""

    async def _iter(self) -> AsyncIterator[cpb.ChannelRequest]:
        while True:
            req = await self._requests.get()
            if req is None:
                return
            yield req

    async def open(
        self,
        sender: str,
        address: str,
        cluster: str,
        proxies: Sequence[str],
        timeout: float,
        *,
        qmid: str = "",
    ) -> Key:
        """Say hello; returns the highest key the receiver has committed from us."""
        hello = cpb.ChannelHello(sender=sender, address=address, cluster=cluster, qmid=qmid)
        hello.proxies.extend(sorted(proxies))
        self._requests.put_nowait(cpb.ChannelRequest(hello=hello))
        self._call = self._stub.Channel(self._iter())
        try:
            ack = await asyncio.wait_for(self._call.read(), timeout)
        except grpc.RpcError as exc:
            raise ChannelLost(describe(exc)) from None
        except TimeoutError:
            raise ChannelLost(f"no answer to the hello within {timeout} s") from None
        if ack is grpc.aio.EOF:
            raise ChannelLost("the receiver closed the channel")
        self.receiver = ack.receiver
        return (ack.epoch, ack.seq)

    def send(self, items: Sequence[Item]) -> list[tuple[Item, Exception]]:
        """Send one batch; returns the items left out because they cannot be encoded."""
        batch = cpb.ChannelBatch()
        add = batch.items.add
        bad: list[tuple[Item, Exception]] = []
        for item in items:
            try:
                item_to_wire(item, add())
            except (ValueError, OverflowError, TypeError) as exc:
                del batch.items[-1]
                bad.append((item, exc))
        if batch.items:
            self._requests.put_nowait(cpb.ChannelRequest(batch=batch))
        return bad

    async def next_ack(self) -> Key:
        try:
            ack = await self._call.read()
        except grpc.RpcError as exc:
            raise ChannelLost(describe(exc)) from None
        if ack is grpc.aio.EOF:
            raise ChannelLost("the receiver closed the channel")
        return (ack.epoch, ack.seq)

    async def close(self) -> None:
        self._requests.put_nowait(None)
        if self._call is not None:
            self._call.cancel()
        await self._channel.close()


class RepositoryClient:
    """Calls to one full repository's Repository service."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._channel = grpc.aio.insecure_channel(address, options=OPTIONS)
        self._stub = crpc.RepositoryStub(self._channel)

    async def propose(self, command: Mapping[str, Any], timeout: float) -> ApplyResult:
        req = cpb.ProposeRequest(command_json=json.dumps(dict(command), sort_keys=True))
        resp = await self._stub.Propose(req, timeout=timeout)
        return result_from_wire(resp)

    async def watch(
        self, join: Mapping[str, Any]
    ) -> AsyncIterator[tuple[dict[str, Any] | None, list[RepoEvent], str]]:
        """Join and watch: yields (snapshot or None, events, full repository name)."""
        call = self._stub.Watch(cpb.WatchRequest(join_command_json=json.dumps(dict(join))))
        try:
            async for update in call:
                snap = json.loads(update.snapshot_json) if update.snapshot_json else None
                events = [RepoEvent.from_dict(json.loads(e)) for e in update.events_json]
                yield snap, events, update.full_repository
        finally:
            call.cancel()

    async def close(self) -> None:
        await self._channel.close()
