"""The Peer service: the receiving end of cluster channels."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, TypeAlias

import grpc

from qmgr.node.runtime import NodeRuntime
from qmgr.rpc.peer_convert import item_from_wire
from qmgr.wire import cluster_pb2 as cpb
from qmgr.wire import cluster_pb2_grpc as crpc

Ctx: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"


class PeerServicer(crpc.PeerServicer):
    def __init__(self, runtime: NodeRuntime) -> None:
        self.rt = runtime

    async def Channel(
        self, request_iterator: AsyncIterator[cpb.ChannelRequest], context: Ctx
    ) -> AsyncIterator[cpb.ChannelAck]:
        agent = self.rt.agent
        if agent is None:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "not a cluster member")
            return
        requests = request_iterator.__aiter__()
        first = await requests.__anext__()
        if first.WhichOneof("kind") != "hello":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a channel starts with a hello")
            return
        hello = first.hello
        if hello.cluster != agent.cluster:
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"{hello.sender} is in cluster {hello.cluster}, this node in {agent.cluster}",
            )
            return
        sender = hello.sender
        epoch, seq = agent.hello(sender, hello.address, list(hello.proxies))
        yield cpb.ChannelAck(epoch=epoch, seq=seq, receiver=agent.name)
        # (highest key applied, journal position to be committed first, or None)
        acks: asyncio.Queue[tuple[tuple[int, int], int | None] | None] = asyncio.Queue()
        rt = self.rt

        async def reader() -> None:
            try:
                async for request in requests:
                    if request.WhichOneof("kind") != "batch":
                        continue
                    items = [item_from_wire(w) for w in request.batch.items]
                    key, persistent = agent.receive(sender, items)
                    await acks.put((key, rt.position if persistent else None))
            finally:
                await acks.put(None)

        task = asyncio.get_running_loop().create_task(reader())
        try:
            ended = False
            while not ended:
                got = await acks.get()
                if got is None:
                    break
                # one acknowledgement for everything applied so far, after one commit
                key, target = got
                while not acks.empty():
                    more = acks.get_nowait()
                    if more is None:
                        ended = True
                        break
                    key = more[0]
                    if more[1] is not None:
                        target = more[1]
                if target is not None:
                    await rt.durable(target)
                yield cpb.ChannelAck(epoch=key[0], seq=key[1])
        finally:
            task.cancel()
            agent.disconnected(sender)
