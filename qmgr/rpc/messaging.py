"""The Messaging service: put, get, publish, subscribe, consume."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any, TypeAlias

import grpc

from qmgr.core.errors import MQError
from qmgr.core.message import Message
from qmgr.node.runtime import NodeRuntime
from qmgr.rpc.convert import message_from_wire, message_to_wire
from qmgr.rpc.errors import abort, error_to_wire, translated
from qmgr.wire import messaging_pb2 as pb
from qmgr.wire import messaging_pb2_grpc as rpc

Ctx: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"
DEFAULT_BATCH = 256


def _encode(msgs: list[Message], delivery: pb.Delivery) -> pb.Delivery:
    out = delivery.messages
    for msg in msgs:
        message_to_wire(msg, out.add())
    return delivery


class MessagingServicer(rpc.MessagingServicer):
    def __init__(self, runtime: NodeRuntime) -> None:
        self.rt = runtime
        self.qm = runtime.qm

    # -- queues -----------------------------------------------------------------------------

    @translated
    async def Put(self, request: pb.PutRequest, context: Ctx) -> pb.PutResponse:
        msgs = [message_from_wire(m) for m in request.messages]
        self.qm.put(request.queue, msgs)
        if any(m.persistent for m in msgs):
            await self.rt.durable()
        return pb.PutResponse(message_ids=[m.message_id for m in msgs])

    @translated
    async def Get(self, request: pb.GetRequest, context: Ctx) -> pb.GetResponse:
        limit = max(1, request.max_messages)
        deadline = time.monotonic() + request.wait_ms / 1000.0
        correl = request.match_correl_id
        while True:
            if request.browse:
                msgs = self.qm.browse(request.queue, after=request.browse_after, limit=limit)
            else:
                msgs = self.qm.get(
                    request.queue,
                    unit_of_work=request.unit_of_work,
                    message_id=request.match_message_id,
                    correl_id=correl,
                    limit=limit,
                )
            remaining = deadline - time.monotonic()
            if msgs or remaining <= 0:
                break
            await self.rt.signals.wait(request.queue, remaining)
        response = pb.GetResponse()
        for msg in msgs:
            message_to_wire(msg, response.messages.add())
        return response

    @translated
    async def Commit(self, request: pb.UnitOfWork, context: Ctx) -> pb.UnitOfWorkResult:
        n = self.qm.commit(request.unit_of_work)
        await self.rt.durable()
        return pb.UnitOfWorkResult(messages=n)

    @translated
    async def Backout(self, request: pb.UnitOfWork, context: Ctx) -> pb.UnitOfWorkResult:
        n = self.qm.backout(request.unit_of_work)
        await self.rt.durable()
        return pb.UnitOfWorkResult(messages=n)

    async def Consume(self, request: pb.ConsumeRequest, context: Ctx) -> AsyncIterator[pb.Delivery]:
        try:
            self.qm.queue(request.queue).check_get()
        except MQError as exc:
            await abort(context, exc)
            return
        async for delivery in self._drain(request.queue, request.max_batch or DEFAULT_BATCH):
            yield delivery

    async def _drain(self, queue: str, batch: int) -> AsyncIterator[pb.Delivery]:
        qm = self.qm
        while True:
            if queue not in qm.queues:
                return
            msgs = qm.get(queue, limit=batch)
            if msgs:
                yield _encode(msgs, pb.Delivery(queue=queue))
            else:
                await self.rt.signals.wait(queue, 1.0)

    # -- publish/subscribe ------------------------------------------------------------------

    def _publish_batch(self, request: pb.PublishRequest) -> tuple[int, int, bool]:
        """Publish in order; returns (accepted, deliveries, any persistent). Publications before
        a failing one stay published."""
        deliveries = 0
        persistent = False
        publish = self.rt.publish
        for i, p in enumerate(request.publications):
            msg = message_from_wire(p.message)
            try:
                deliveries += publish(p.topic, msg, retain=p.retain, scope_qmgr=p.scope_qmgr)
            except MQError as exc:
                exc.accepted = i  # type: ignore[attr-defined]
                raise
            persistent = persistent or bool(msg.persistent)
        return len(request.publications), deliveries, persistent

    @translated
    async def Publish(self, request: pb.PublishRequest, context: Ctx) -> pb.PublishResponse:
        accepted, deliveries, persistent = self._publish_batch(request)
        if persistent:
            await self.rt.durable()
        return pb.PublishResponse(
            batch_id=request.batch_id, accepted=accepted, deliveries=deliveries
        )

    async def PublishStream(
        self, request_iterator: AsyncIterator[pb.PublishRequest], context: Ctx
    ) -> AsyncIterator[pb.PublishResponse]:
        """Publish each batch as it arrives; acknowledge in order once it is durable. Commits
        overlap with the next batches, so persistent throughput is not one fsync per batch."""
        # each response with the journal position that must be committed before it is sent
        acks: asyncio.Queue[tuple[pb.PublishResponse, int | None] | None] = asyncio.Queue()

        async def reader() -> None:
            try:
                async for request in request_iterator:
                    try:
                        accepted, deliveries, persistent = self._publish_batch(request)
                        resp = pb.PublishResponse(
                            batch_id=request.batch_id, accepted=accepted, deliveries=deliveries
                        )
                    except MQError as exc:
                        resp = pb.PublishResponse(
                            batch_id=request.batch_id,
                            accepted=getattr(exc, "accepted", 0),
                            error=error_to_wire(exc),
                        )
                        persistent = True
                    await acks.put((resp, self.rt.position if persistent else None))
            finally:
                await acks.put(None)

        task = asyncio.get_running_loop().create_task(reader())
        try:
            while True:
                item = await acks.get()
                if item is None:
                    break
                resp, target = item
                if target is not None:
                    await self.rt.durable(target)
                yield resp
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]  # the request stream failed
        finally:
            task.cancel()

    async def Subscribe(
        self, request: pb.SubscribeRequest, context: Ctx
    ) -> AsyncIterator[pb.Delivery]:
        qm = self.qm
        try:
            sub, _ = qm.subscribe(
                request.topic,
                name=request.name,
                durable=request.durable,
                dest=request.destination,
                new_publications_only=request.new_publications_only,
                subscope="QMGR" if request.scope_qmgr else "ALL",
                userdata=request.user_data,
            )
        except MQError as exc:
            await abort(context, exc)
            return
        if sub.durable:
            await self.rt.durable()
        stats = qm.pubsub.stats.get(sub.name)
        if stats is not None:
            stats.active_connections += 1
        try:
            yield pb.Delivery(subscription=sub.name, sub_id=sub.sub_id, queue=sub.dest)
            if request.no_receive:
                return
            async for delivery in self._drain(sub.dest, request.max_batch or DEFAULT_BATCH):
                yield delivery
        finally:
            if stats is not None:
                stats.active_connections -= 1
            if not sub.durable and qm.pubsub.subs.get(sub.name) is sub:
                qm.unsubscribe(sub.name)

    @translated
    async def Unsubscribe(
        self, request: pb.UnsubscribeRequest, context: Ctx
    ) -> pb.UnsubscribeResponse:
        self.qm.unsubscribe(request.name)
        await self.rt.durable()
        return pb.UnsubscribeResponse()
