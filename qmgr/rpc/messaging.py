"""The Messaging service: put, get, publish, subscribe, consume.

Each call decodes its request, hands plain values to the node's messaging
(``qmgr.node.messaging``) and encodes what it answers; errors are translated at the
boundary (``qmgr.rpc.errors``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, TypeAlias

import grpc

from qmgr.core.errors import MQError
from qmgr.core.message import Message
from qmgr.node.messaging import (
    DEFAULT_BATCH,
    Ack,
    BadAcknowledgement,
    DeliveryLimits,
    GetOptions,
    Messaging,
)
from qmgr.node.runtime import NodeRuntime, Publication, PublishResult
from qmgr.rpc.convert import (
    add_delivery,
    check_request,
    message_from_wire,
)
from qmgr.rpc.delivery_wire import EncodedDelivery
from qmgr.rpc.errors import RequestError, abort, error_to_wire, translated
from qmgr.wire import messaging_pb2 as pb
from qmgr.wire import messaging_pb2_grpc as rpc

Ctx: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"


class _Deliveries:
    """A consumer's deliveries written to its call as ``Delivery`` bytes
    (``qmgr.rpc.delivery_wire``; the call's serializer passes bytes through)."""

    def __init__(self, context: Ctx) -> None:
        self.context = context

    def encode(self, queue: str, msgs: list[Message]) -> EncodedDelivery:
        return EncodedDelivery(queue, msgs)

    def size(self, delivery: EncodedDelivery) -> int:
        return delivery.size

    def drop_last(self, delivery: EncodedDelivery) -> int:
        return delivery.drop_last()

    async def write(self, delivery: EncodedDelivery, size: int) -> None:
        await self.context.write(delivery.to_bytes(size))


def serialize_delivery(delivery: pb.Delivery | bytes) -> bytes:
    """Subscribe's and Consume's response serializer: a delivery already encoded
    (``_Deliveries``) passes as it is."""
    if type(delivery) is bytes:
        return delivery
    return delivery.SerializeToString()  # type: ignore[union-attr]


class MessagingServicer(rpc.MessagingServicer):
    def __init__(self, runtime: NodeRuntime) -> None:
        self.node = Messaging(runtime)

    # -- queues -----------------------------------------------------------------------------

    @translated
    async def Put(self, request: pb.PutRequest, context: Ctx) -> pb.PutResponse:
        msgs = [message_from_wire(m) for m in request.messages]
        await self.node.put(request.queue, msgs)
        return pb.PutResponse(message_ids=[m.message_id for m in msgs])

    @translated
    async def Get(self, request: pb.GetRequest, context: Ctx) -> pb.GetResponse:
        msgs = await self.node.get(
            GetOptions(
                queue=request.queue,
                max_messages=request.max_messages,
                wait_ms=request.wait_ms,
                browse=request.browse,
                browse_after=request.browse_after,
                unit_of_work=request.unit_of_work,
                connection_id=request.connection_id,
                match_message_id=request.match_message_id,
                match_correl_id=request.match_correl_id,
                max_response_bytes=request.max_response_bytes,
            )
        )
        response = pb.GetResponse()
        out = response.messages
        for msg in msgs:
            add_delivery(out, msg)
        return response

    @translated
    async def Commit(self, request: pb.UnitOfWork, context: Ctx) -> pb.UnitOfWorkResult:
        n = await self.node.commit(request.unit_of_work, request.connection_id)
        return pb.UnitOfWorkResult(messages=n)

    @translated
    async def Backout(self, request: pb.UnitOfWork, context: Ctx) -> pb.UnitOfWorkResult:
        n = await self.node.backout(request.unit_of_work, request.connection_id)
        return pb.UnitOfWorkResult(messages=n)

    async def Connect(self, request: pb.ConnectRequest, context: Ctx) -> None:
        """A connection lives as long as this call; its units of work are backed out when it
        ends (closed by the client, or the client gone)."""

        async def opened(conn: str) -> None:
            await context.write(pb.ConnectEvent(connection_id=conn))

        await self.node.connection(opened)

    async def Consume(
        self, request_iterator: AsyncIterator[pb.ConsumeControl], context: Ctx
    ) -> None:
        requests = request_iterator.__aiter__()
        try:
            request = (await _opening(requests)).open
            self.node.check_consumable(request.queue)
            await self._deliver(request.queue, request.limits, request.max_batch, requests, context)
        except MQError as exc:
            await abort(context, exc)

    async def _deliver(
        self,
        queue: str,
        limits: pb.DeliveryLimits,
        max_batch: int,
        requests: AsyncIterator[Any],
        context: Ctx,
    ) -> None:
        try:
            await self.node.deliver(
                queue,
                DeliveryLimits(
                    limits.max_pending_messages,
                    limits.max_pending_bytes,
                    limits.max_response_bytes,
                    limits.reports_handed,
                ),
                max_batch or DEFAULT_BATCH,
                _acks(requests),
                _Deliveries(context),
            )
        except BadAcknowledgement as exc:
            raise RequestError(str(exc)) from None

    # -- publish/subscribe ------------------------------------------------------------------

    @translated
    async def Publish(self, request: pb.PublishRequest, context: Ctx) -> pb.PublishResponse:
        result = await self.node.publish_committed(_publications(request))
        return _publish_response(request.batch_id, result)

    async def PublishStream(
        self, request_iterator: AsyncIterator[pb.PublishRequest], context: Ctx
    ) -> AsyncIterator[pb.PublishResponse]:
        """Publish each batch as it arrives; acknowledge in order once it is durable."""
        node = self.node

        def publish(request: pb.PublishRequest) -> pb.PublishResponse:
            try:  # a unary request's messages are checked at the edge, a stream's here
                batch = _publications(request, check=True)
                return _publish_response(request.batch_id, node.publish(batch))
            except MQError as exc:
                return pb.PublishResponse(batch_id=request.batch_id, error=error_to_wire(exc))

        async for resp in node.in_order_once_durable(request_iterator, publish):
            yield resp

    async def Subscribe(
        self, request_iterator: AsyncIterator[pb.SubscribeControl], context: Ctx
    ) -> None:
        requests = request_iterator.__aiter__()
        try:
            request = (await _opening(requests)).open
            sub = await self.node.subscribe(
                request.topic,
                name=request.name,
                durable=request.durable,
                dest=request.destination,
                new_publications_only=request.new_publications_only,
                scope_qmgr=request.scope_qmgr,
                user_data=request.user_data,
                wildcard_char=request.wildcard_char,
            )
        except MQError as exc:
            await abort(context, exc)
            return
        with self.node.attached(sub):
            try:
                await context.write(
                    pb.Delivery(subscription=sub.name, sub_id=sub.sub_id, queue=sub.dest)
                )
                if request.no_receive:
                    return
                await self._deliver(sub.dest, request.limits, request.max_batch, requests, context)
            except MQError as exc:
                await abort(context, exc)

    @translated
    async def Unsubscribe(
        self, request: pb.UnsubscribeRequest, context: Ctx
    ) -> pb.UnsubscribeResponse:
        await self.node.unsubscribe(request.name)
        return pb.UnsubscribeResponse()


async def _opening(requests: AsyncIterator[Any]) -> Any:
    """The first message of a consumer stream, which must open it (checked as a unary
    request is: names, topic string, batch size)."""
    try:
        first = await requests.__anext__()
    except StopAsyncIteration:
        first = None
    if first is None or not first.HasField("open"):
        raise MQError("MQRC_OPTIONS_ERROR", "the first message of the stream must open it")
    check_request(first.open)
    return first


async def _acks(requests: AsyncIterator[Any]) -> AsyncIterator[Ack]:
    """A consumer's reports after its opening message, which are only acknowledgements."""
    async for control in requests:
        if control.HasField("open") or not control.HasField("ack"):
            raise RequestError("after the opening message a consumer sends only acknowledgements")
        a = control.ack
        yield Ack(a.acknowledged, a.handed, a.credit_messages, a.credit_bytes, a.closing)


def _publications(request: pb.PublishRequest, *, check: bool = False) -> list[Publication]:
    """The request's publications; with ``check``, each message's fields are checked first
    (a bad one raises before anything is published)."""
    return [
        Publication(p.topic, message_from_wire(p.message, check=check), p.retain, p.scope_qmgr)
        for p in request.publications
    ]


def _publish_response(batch_id: int, result: PublishResult) -> pb.PublishResponse:
    resp = pb.PublishResponse(
        batch_id=batch_id,
        accepted=result.accepted,
        deliveries=result.deliveries,
        forwards=result.forwards,
        forwarded_to=result.forwarded_to,
        cluster=result.cluster,
    )
    if result.error is not None:
        resp.error.CopyFrom(error_to_wire(result.error))
    return resp
