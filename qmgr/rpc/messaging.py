"""The Messaging service: put, get, publish, subscribe, consume."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, NoReturn, TypeAlias

import grpc

from qmgr.core.errors import MQError
from qmgr.core.message import Message
from qmgr.core.queue import LocalQueue
from qmgr.node.runtime import NodeRuntime, Publication
from qmgr.rpc.convert import (
    check_message,
    check_request,
    delivery_to_wire,
    message_from_wire,
)
from qmgr.rpc.errors import RequestError, abort, error_to_wire, translated
from qmgr.wire import messaging_pb2 as pb
from qmgr.wire import messaging_pb2_grpc as rpc

Ctx: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"
DEFAULT_BATCH = 256
TRANSPORT_LIMIT = 64 * 1024 * 1024  # the node's gRPC message size limit
DEFAULT_RESPONSE_LIMIT = 4 * 1024 * 1024  # gRPC's default receive limit, for clients that
# do not declare theirs
ENVELOPE = 64 * 1024  # room in a response for its own fields
DEFAULT_PENDING_MESSAGES = 65_536
DEFAULT_PENDING_BYTES = 64 * 1024 * 1024
ACK_QUEUE = 64  # PublishStream responses waiting for their commit before reading pauses


def response_budget(declared: int) -> int:
    """The bytes of messages one response may carry for a client that accepts ``declared``."""
    return min(declared or DEFAULT_RESPONSE_LIMIT, TRANSPORT_LIMIT) - ENVELOPE


def wire_size(msg: Message) -> int:
    """An upper bound of the encoded size of ``msg`` in a response (4 bytes a character for
    text, which UTF-8 never exceeds; 256 for the fixed fields)."""
    n = (
        256
        + len(msg.body)
        + len(msg.correl_id)
        + 4 * (len(msg.message_id) + len(msg.reply_to_queue) + len(msg.sub_user_data))
        + 8 * len(msg.topic)  # the topic field and the MQTopicString property
    )
    props = msg.properties
    if props:
        for k, v in props.items():
            n += 32 + 4 * len(k)
            if isinstance(v, str):
                n += 4 * len(v)
            elif isinstance(v, bytes):
                n += len(v)
            else:
                n += 10
    return n


def _check_fits(
    q: LocalQueue, now: float, budget: int, message_id: str = "", correl_id: bytes = b""
) -> None:
    """Raise if the next (matching) message can never fit in a response of ``budget`` bytes."""
    nxt = q.peek(now, message_id, correl_id)
    if nxt is not None and wire_size(nxt) > budget:
        _too_big(q.name, nxt, budget)


def _too_big(queue: str, msg: Message, budget: int) -> NoReturn:
    raise MQError(
        "MQRC_MSG_TOO_BIG_FOR_CHANNEL",
        f"the next message on {queue} ({msg.size} bytes of body) does not fit in one response "
        f"of {budget} bytes; declare a larger max_response_bytes",
    )


class _Flow:
    """One streaming consumer: its credit, what was sent and acknowledged, its unit of work."""

    def __init__(self, limits: pb.DeliveryLimits) -> None:
        self.messages = self.max_messages = limits.max_pending_messages or DEFAULT_PENDING_MESSAGES
        self.bytes = self.max_bytes = limits.max_pending_bytes or DEFAULT_PENDING_BYTES
        self.budget = response_budget(limits.max_response_bytes)
        self.uow = f"STREAM.{uuid.uuid4().hex}"
        self.reports_handed = limits.reports_handed
        self.sent = 0
        self.acknowledged = 0
        self.handed = 0  # as the client last reported
        self.ended = False
        self.closed = False  # the client said it closes (its last report is exact)
        self.error: BaseException | None = None

    def check(self, control: Any) -> pb.Ack:
        """The acknowledgement ``control`` carries, if it is one this stream can take: after
        the opening message only acknowledgements, cumulative (never fewer than before, never
        more than were sent), returning no more credit than was used. Raises RequestError."""
        if control.HasField("open") or not control.HasField("ack"):
            raise RequestError("after the opening message a consumer sends only acknowledgements")
        ack: pb.Ack = control.ack
        if not self.acknowledged <= ack.acknowledged <= self.sent:
            raise RequestError(
                f"acknowledged {ack.acknowledged}: {self.acknowledged} were acknowledged and "
                f"{self.sent} sent on this stream"
            )
        if self.reports_handed and not (
            max(self.handed, ack.acknowledged) <= ack.handed <= self.sent
        ):
            raise RequestError(
                f"handed {ack.handed}: {self.handed} were handed out, {ack.acknowledged} "
                f"acknowledged and {self.sent} sent on this stream"
            )
        if (
            self.messages + ack.credit_messages > self.max_messages
            or self.bytes + ack.credit_bytes > self.max_bytes
        ):
            raise RequestError(
                f"credit of {ack.credit_messages} messages and {ack.credit_bytes} bytes is more "
                f"than the deliveries not yet credited back used"
            )
        return ack


class MessagingServicer(rpc.MessagingServicer):
    def __init__(self, runtime: NodeRuntime) -> None:
        self.rt = runtime
        self.qm = runtime.qm
        self.connections: set[str] = set()

    # -- queues -----------------------------------------------------------------------------

    @translated
    async def Put(self, request: pb.PutRequest, context: Ctx) -> pb.PutResponse:
        msgs = [message_from_wire(m) for m in request.messages]
        self.qm.put(request.queue, msgs)
        if any(m.persistent for m in msgs):
            await self.rt.durable()
        return pb.PutResponse(message_ids=[m.message_id for m in msgs])

    def _connection(self, connection_id: str) -> str:
        if connection_id and connection_id not in self.connections:
            raise MQError("MQRC_HCONN_ERROR", f"connection {connection_id} is not open")
        return connection_id

    @translated
    async def Get(self, request: pb.GetRequest, context: Ctx) -> pb.GetResponse:
        limit = max(1, request.max_messages)
        budget = response_budget(request.max_response_bytes)
        deadline = time.monotonic() + request.wait_ms / 1000.0
        owner = ""
        if request.unit_of_work and not request.connection_id:
            raise MQError("MQRC_HCONN_ERROR", "a get under syncpoint needs a connection")
        qm = self.qm
        while True:
            if request.unit_of_work:  # it belongs to a connection (still open after a wait)
                owner = self._connection(request.connection_id)
            if request.browse:
                msgs = qm.browse(request.queue, after=request.browse_after, limit=limit)
                fitting = _fitting(msgs, budget)
                if msgs and not fitting:
                    _too_big(request.queue, msgs[0], budget)
                msgs = fitting
            else:
                msgs = qm.get(
                    request.queue,
                    unit_of_work=request.unit_of_work,
                    owner=owner,
                    message_id=request.match_message_id,
                    correl_id=request.match_correl_id,
                    limit=limit,
                    size=wire_size,
                    max_bytes=budget,
                )
                if not msgs:
                    _check_fits(
                        qm.queue(request.queue),
                        qm.clock.now(),
                        budget,
                        request.match_message_id,
                        request.match_correl_id,
                    )
            remaining = deadline - time.monotonic()
            if msgs or remaining <= 0:
                break
            await self.rt.signals.wait(request.queue, remaining)
        if not request.browse and not request.unit_of_work and any(m.persistent for m in msgs):
            await self.rt.durable()  # answer a destructive get once the removal is committed
        response = pb.GetResponse()
        for msg in msgs:
            delivery_to_wire(msg, response.messages.add())
        return response

    @translated
    async def Commit(self, request: pb.UnitOfWork, context: Ctx) -> pb.UnitOfWorkResult:
        owner = self._connection(request.connection_id)
        n = self.qm.commit(request.unit_of_work, owner=owner)
        await self.rt.durable()
        return pb.UnitOfWorkResult(messages=n)

    @translated
    async def Backout(self, request: pb.UnitOfWork, context: Ctx) -> pb.UnitOfWorkResult:
        owner = self._connection(request.connection_id)
        n = self.qm.backout(request.unit_of_work, owner=owner)
        await self.rt.durable()
        return pb.UnitOfWorkResult(messages=n)

    async def Connect(self, request: pb.ConnectRequest, context: Ctx) -> None:
        """A connection lives as long as this call; its units of work are backed out when it
        ends (closed by the client, or the client gone)."""
        conn = f"CONN.{uuid.uuid4().hex}"
        self.connections.add(conn)
        try:
            await context.write(pb.ConnectEvent(connection_id=conn))
            await asyncio.Event().wait()
        finally:
            self.connections.discard(conn)
            self.qm.backout_owned(conn)

    async def Consume(
        self, request_iterator: AsyncIterator[pb.ConsumeControl], context: Ctx
    ) -> None:
        requests = request_iterator.__aiter__()
        try:
            request = (await _opening(requests)).open
            self.qm.queue(request.queue).check_get()
            await self._deliver(
                request.queue,
                request.limits,
                request.max_batch or DEFAULT_BATCH,
                requests,
                context,
            )
        except MQError as exc:
            await abort(context, exc)

    def _trim(self, delivery: pb.Delivery, flow: _Flow) -> int:
        """Drop the last messages of ``delivery`` (back on the queue, as if never taken) until
        it fits the client's response limit; returns its size."""
        out = delivery.messages
        size = delivery.ByteSize()
        while size > flow.budget:
            if len(out) == 1:
                (msg,) = self.qm.untake(flow.uow, 1, owner=flow.uow)
                _too_big(delivery.queue, msg, flow.budget)
            size -= out[-1].ByteSize() + 6  # the message, its tag and length
            del out[-1]
            self.qm.untake(flow.uow, 1, owner=flow.uow)
        return delivery.ByteSize()

    async def _deliver(
        self,
        queue: str,
        limits: pb.DeliveryLimits,
        batch: int,
        requests: AsyncIterator[Any],
        context: Ctx,
    ) -> None:
        """Send ``queue``'s messages within the credit the client grants, inside a unit of
        work of this stream: acknowledged ones are committed, the rest backed out at the end."""
        qm = self.qm
        signals = self.rt.signals
        flow = _Flow(limits)

        async def read_acks() -> None:
            try:
                async for control in requests:
                    ack = flow.check(control)
                    done = ack.acknowledged - flow.acknowledged
                    flow.handed = ack.handed
                    flow.closed = ack.closing
                    if done > 0:
                        qm.commit(flow.uow, owner=flow.uow, count=done)
                        flow.acknowledged += done
                    waiting = flow.messages <= 0 or flow.bytes <= 0
                    flow.messages += ack.credit_messages
                    flow.bytes += ack.credit_bytes
                    if waiting:  # the sender waits for credit
                        signals.notify(queue)
            except Exception as exc:  # the handler re-raises it
                flow.error = exc
            finally:
                flow.ended = True
                signals.notify(queue)

        reader = asyncio.get_running_loop().create_task(read_acks())
        try:
            while not flow.ended:
                q = qm.queues.get(queue)
                if q is None:  # deleted (or its subscription removed) under the consumer
                    raise MQError("MQRC_Q_DELETED", f"queue {queue} has been deleted")
                if flow.messages <= 0 or flow.bytes <= 0:
                    await signals.wait(queue, 1.0)
                    continue
                # taken by body size, then trimmed to the exact encoded size (before sending)
                msgs = qm.get(
                    queue,
                    unit_of_work=flow.uow,
                    owner=flow.uow,
                    limit=min(batch, flow.messages),
                    max_bytes=min(flow.budget, flow.bytes),
                    first_max_bytes=flow.budget,
                )
                if not msgs:
                    _check_fits(q, qm.clock.now(), flow.budget)
                    await signals.wait(queue, 1.0)
                    continue
                delivery = pb.Delivery(queue=queue)
                out = delivery.messages
                for msg in msgs:  # copies of one publication share its encoding
                    delivery_to_wire(msg, out.add())
                size = delivery.ByteSize()
                if size > flow.budget:
                    size = self._trim(delivery, flow)
                    msgs = msgs[: len(out)]
                delivery.size = size
                flow.messages -= len(msgs)
                flow.bytes -= size
                flow.sent += len(msgs)
                await context.write(delivery)
            if flow.error is not None:
                raise flow.error
        finally:
            reader.cancel()
            # what the client never handed to the application goes back with its backout
            # count as it was; if the client is gone, its last report may be late, so the
            # first message not acknowledged counts (a poison message moves on)
            counted = None
            if flow.reports_handed:
                counted = flow.handed - flow.acknowledged
                if not flow.closed:
                    counted = max(counted, 1)
            qm.backout(flow.uow, owner=flow.uow, counted=counted)

    # -- publish/subscribe ------------------------------------------------------------------

    def _publish_batch(self, request: pb.PublishRequest) -> pb.PublishResponse:
        """Decode a batch, publish it on the node's one publish path, encode the result."""
        result = self.rt.publish_batch(
            [
                Publication(p.topic, message_from_wire(p.message), p.retain, p.scope_qmgr)
                for p in request.publications
            ]
        )
        resp = pb.PublishResponse(
            batch_id=request.batch_id,
            accepted=result.accepted,
            deliveries=result.deliveries,
            forwards=result.forwards,
            forwarded_to=result.forwarded_to,
            cluster=result.cluster,
        )
        if result.error is not None:
            resp.error.CopyFrom(error_to_wire(result.error))
        return resp

    @translated
    async def Publish(self, request: pb.PublishRequest, context: Ctx) -> pb.PublishResponse:
        position = self.rt.position
        resp = self._publish_batch(request)
        if self.rt.position != position:
            await self.rt.durable()
        return resp

    async def PublishStream(
        self, request_iterator: AsyncIterator[pb.PublishRequest], context: Ctx
    ) -> AsyncIterator[pb.PublishResponse]:
        """Publish each batch as it arrives; acknowledge in order once it is durable. Commits
        overlap with the next batches, so persistent throughput is not one fsync per batch."""
        # each response with the journal position that must be committed before it is sent;
        # bounded, so a client that does not read its acknowledgements stops being read
        acks: asyncio.Queue[tuple[pb.PublishResponse, int | None] | None] = asyncio.Queue(ACK_QUEUE)
        failure: list[BaseException] = []

        async def reader() -> None:
            try:
                async for request in request_iterator:
                    position = self.rt.position
                    try:
                        for p in request.publications:  # a unary request's are checked at the edge
                            check_message(p.message)
                        resp = self._publish_batch(request)
                    except MQError as exc:
                        resp = pb.PublishResponse(
                            batch_id=request.batch_id, error=error_to_wire(exc)
                        )
                    target = self.rt.position
                    await acks.put((resp, target if target != position else None))
            except Exception as exc:  # the handler re-raises it
                failure.append(exc)
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
            if failure:
                raise failure[0]
        finally:
            task.cancel()

    async def Subscribe(
        self, request_iterator: AsyncIterator[pb.SubscribeControl], context: Ctx
    ) -> None:
        qm = self.qm
        requests = request_iterator.__aiter__()
        try:
            request = (await _opening(requests)).open
            sub, _ = qm.subscribe(
                request.topic,
                name=request.name,
                durable=request.durable,
                dest=request.destination,
                new_publications_only=request.new_publications_only,
                subscope="QMGR" if request.scope_qmgr else "ALL",
                userdata=request.user_data,
                wschema="CHAR" if request.wildcard_char else "TOPIC",
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
            await context.write(
                pb.Delivery(subscription=sub.name, sub_id=sub.sub_id, queue=sub.dest)
            )
            if request.no_receive:
                return
            await self._deliver(
                sub.dest, request.limits, request.max_batch or DEFAULT_BATCH, requests, context
            )
        except MQError as exc:
            await abort(context, exc)
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


def _fitting(msgs: list[Message], budget: int) -> list[Message]:
    """The leading messages of ``msgs`` that fit in one response of ``budget`` bytes."""
    total = 0
    for i, msg in enumerate(msgs):
        total += wire_size(msg)
        if total > budget:
            return msgs[:i]
    return msgs
