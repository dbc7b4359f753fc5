"""The Peer service: the receiving end of cluster channels (a thin driver of the receiver
state machine in ``cluster.channel``, applied through the cluster agent).

- A channel is opened by a member that proved who it is (``qmgr.rpc.peer_auth``): its hello
  carries a member proof for the sender it names (and, with TLS and a cluster CA, its
  certificate names that sender). A hello that does not check is refused with
  UNAUTHENTICATED/PERMISSION_DENIED before anything changes: no position moves, no proxy is
  taken. ``Challenge`` starts the proof. The hello's QMID must be the sender's own (its name,
  ``_``, an id): positions are kept per QMID.
- The first request must be a hello; its answer is the last key committed from the sender's
  QMID: everything applied so far is committed before it is announced.
- Each batch is applied item by item; its acknowledgement (coalesced with those waiting) is
  sent once the batch's changes are committed.
- Garbage, a missing hello (or none within ``HELLO_WAIT``: an unauthenticated caller cannot
  hold streams open), a second hello or an invalid item end the stream with
  INVALID_ARGUMENT; a batch that cannot be applied (the dead-letter queue is full ...) ends it
  with the MQ reason, never with OK. The queue of acknowledgements waiting is bounded: a sender
  that does not read them stops being read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any, TypeAlias

import grpc
from google.protobuf.message import DecodeError

from cluster.channel import qmid_of
from qmgr.core.errors import MQError
from qmgr.node.runtime import NodeRuntime
from qmgr.rpc.peer_auth import Refused, authenticate, challenge, refuse
from qmgr.rpc.peer_convert import ChannelInputError, items_from_wire
from qmgr.security.member import CHANNEL
from qmgr.wire import cluster_pb2 as cpb
from qmgr.wire import cluster_pb2_grpc as crpc

Ctx: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"
log = logging.getLogger("qmgr.node.channels")

HELLO_WAIT = 10.0  # seconds a caller may hold a channel open before its hello (a sender
# queues the hello before it opens the call, so it comes at once)
ACK_QUEUE = 1024  # batches applied and waiting for their acknowledgement (a sender has at
# most WINDOW items in flight, so only a sender of tiny batches meets the bound)


async def _decoded(
    requests: AsyncIterator[cpb.ChannelRequest],
) -> AsyncIterator[cpb.ChannelRequest]:
    """The requests of a channel; undecodable input raises ChannelInputError."""
    it = requests.__aiter__()
    while True:
        try:
            request = await it.__anext__()
        except StopAsyncIteration:
            return
        except DecodeError as exc:
            raise ChannelInputError(f"undecodable request: {exc}") from None
        yield request


class PeerServicer(crpc.PeerServicer):
    def __init__(self, runtime: NodeRuntime) -> None:
        self.rt = runtime

    async def Challenge(self, request: cpb.ChallengeRequest, context: Ctx) -> cpb.ChallengeResponse:
        agent = self.rt.agent
        if agent is None:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "not a cluster member")
            raise AssertionError("unreachable")
        try:
            return challenge(agent, request)
        except Refused as refused:
            await refuse(context, refused)
            raise AssertionError("unreachable") from None

    async def Channel(
        self, request_iterator: AsyncIterator[cpb.ChannelRequest], context: Ctx
    ) -> AsyncIterator[cpb.ChannelAck]:
        agent = self.rt.agent
        if agent is None:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "not a cluster member")
            return
        requests = _decoded(request_iterator)
        try:
            first = await asyncio.wait_for(requests.__anext__(), HELLO_WAIT)
        except TimeoutError:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"no hello within {HELLO_WAIT:g} s"
            )
            return
        except (StopAsyncIteration, ChannelInputError) as exc:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"a channel starts with a hello ({exc})"
            )
            return
        if first.WhichOneof("kind") != "hello" or not first.hello.sender:
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
        try:
            authenticate(agent, context, hello.proof, CHANNEL, sender)
        except Refused as refused:
            log.warning("channel from %s refused: %r", context.peer(), refused.text)
            await refuse(context, refused)
            return
        qmid = hello.qmid or f"{sender}_"  # a sender that does not say its QMID
        if not qmid_of(qmid, sender):
            log.warning("channel from %s refused: %r names QMID %r", context.peer(), sender, qmid)
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED, f"QMID {qmid} is not queue manager {sender}'s"
            )
            return
        rt = self.rt
        # announce only what is committed
        position = rt.position
        await rt.durable(position)
        agent.receiver.committed(position)
        epoch, seq = agent.hello(qmid, sender, hello.address, list(hello.proxies))
        yield cpb.ChannelAck(epoch=epoch, seq=seq, receiver=agent.name)
        # (highest key applied, journal position to be committed first, or None)
        acks: asyncio.Queue[tuple[tuple[int, int], int | None] | None] = asyncio.Queue(ACK_QUEUE)

        async def reader() -> None:
            async for request in requests:
                if request.WhichOneof("kind") != "batch":
                    raise ChannelInputError("only batches follow the hello")
                items = items_from_wire(request.batch)
                key, persistent = agent.receive(qmid, items)
                await acks.put((key, rt.position if persistent else None))
            await acks.put(None)

        task = asyncio.get_running_loop().create_task(reader())
        try:
            while True:
                got = await self._next(acks, task)
                if got is None:
                    break
                # one acknowledgement for everything applied so far, after one commit
                key, target = got
                ended = False
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
                    agent.receiver.committed(target)
                yield cpb.ChannelAck(epoch=key[0], seq=key[1])
                if ended:
                    break
            if task.done() and not task.cancelled() and task.exception() is not None:
                await self._failed(context, sender, task.exception())
        finally:
            task.cancel()
            agent.disconnected(qmid)

    @staticmethod
    async def _next(
        acks: asyncio.Queue[tuple[tuple[int, int], int | None] | None], task: asyncio.Task[None]
    ) -> tuple[tuple[int, int], int | None] | None:
        """The next acknowledgement waiting, or None when the reader ended (or failed)."""
        if not acks.empty() or not task.done():
            getter = asyncio.ensure_future(acks.get())
            await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                return getter.result()
            getter.cancel()
            if not acks.empty():
                return acks.get_nowait()
        return None

    @staticmethod
    async def _failed(context: Ctx, sender: str, exc: BaseException | None) -> None:
        if isinstance(exc, ChannelInputError):
            log.warning("channel from %s: invalid input: %s", sender, exc)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        if isinstance(exc, MQError):
            log.warning("channel from %s stopped: %s", sender, exc)
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        if exc is not None:
            log.error("channel from %s failed", sender, exc_info=exc)
            raise exc
