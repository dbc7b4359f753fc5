"""The asyncio client: the same operations as the blocking client, awaited."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from qmgr.client import convert
from qmgr.client.connect import PathLike, WithMetadata, call_metadata, open_channel
from qmgr.client.errors import (
    ConnectionFailed,
    MQClientError,
    MqscCommandError,
    UnitsOfWork,
    acknowledged_too_late,
    backed_out,
    from_rpc_error,
    publish_error,
)
from qmgr.client.flow import (
    DEFAULT_PENDING_BYTES,
    DEFAULT_PENDING_MESSAGES,
    MAX_RESPONSE_BYTES,
    BufferedConsumer,
    DeliveryBuffer,
    EncodedStreams,
    open_consumer,
    open_subscription,
)
from qmgr.client.sync import CHANNEL_OPTIONS
from qmgr.client.types import MqscRecord, OutgoingMessage, PublishResult, ReceivedMessage
from qmgr.core.values import PropertyValue
from qmgr.wire import admin_pb2, admin_pb2_grpc, messaging_pb2, messaging_pb2_grpc


class AsyncSubscription(BufferedConsumer):
    """The asyncio form of :class:`qmgr.client.sync.Subscription`: the same acknowledged,
    flow-controlled delivery, bounded buffer and slow-consumer signal."""

    def __init__(
        self,
        call: Any,
        control_type: Any,
        buffer: DeliveryBuffer,
        *,
        queue: str = "",
        on_slow_consumer: Callable[[Any], None] | None = None,
    ) -> None:
        self._call = call
        self._control_type = control_type
        self._buf = buffer
        self._on_slow = on_slow_consumer
        self._wakeup = asyncio.Event()
        self._ended = False
        self._error: BaseException | None = None
        self._closing: asyncio.Task[None] | None = None
        self._reader: asyncio.Task[None] | None = None
        self.name = self.sub_id = ""
        self.queue = queue

    async def _open(self, opening: Any, named: bool, timeout: float = 30.0) -> None:
        """Send the opening and, for a named stream, read the node's answer, both within
        ``timeout``: the write waits for the connection, which a node that accepts and never
        answers would otherwise hold for gRPC's own connect time-out."""
        try:
            try:
                first = await asyncio.wait_for(self._opening(opening, named), timeout)
            except TimeoutError:
                self._call.cancel()
                raise ConnectionFailed(
                    2009, "MQRC_CONNECTION_BROKEN", f"no answer in {timeout} s"
                ) from None
            if named:
                if first is grpc.aio.EOF:
                    raise MQClientError(2195, "MQRC_UNEXPECTED_ERROR", "the stream ended")
                self.name = first.subscription
                self.sub_id = first.sub_id
                self.queue = first.queue
        except grpc.RpcError as exc:
            self._call.cancel()
            raise from_rpc_error(exc) from None
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _opening(self, opening: Any, named: bool) -> Any:
        await self._call.write(opening)
        return await self._call.read() if named else None

    async def _read(self) -> None:
        try:
            while True:
                delivery = await self._call.read()
                if delivery is grpc.aio.EOF:
                    return
                slow = self._buf.add(delivery)
                self._wakeup.set()
                if slow and self._on_slow is not None:
                    self._on_slow(self)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                self._error = from_rpc_error(exc)
        finally:
            self._ended = True
            self._wakeup.set()

    async def _send_control(self, *, final: bool = False) -> None:
        ack = self._buf.control(final=final)
        if ack is not None and not self._ended:
            # a failed write means the stream has ended: the reader reports why
            with contextlib.suppress(grpc.RpcError, grpc.aio.UsageError):
                await self._call.write(self._control_type(ack=ack))

    async def _wait(self, timeout: float | None) -> bool:
        if self._closing is not None:  # what was not handed out goes back to the queue
            return False
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while not self._buf.ready() and not self._ended:
            self._wakeup.clear()
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                break
            try:
                await asyncio.wait_for(self._wakeup.wait(), remaining)
            except TimeoutError:
                break
        if self._buf.ready():
            return True
        error, self._error = self._error, None
        if error is not None:
            raise error
        return False

    async def receive_batch(self, timeout: float | None = None) -> list[ReceivedMessage]:
        if not await self._wait(timeout):
            return []
        out = self._buf.take_all()
        await self._send_control()
        return out

    async def receive(self, timeout: float | None = None) -> ReceivedMessage | None:
        if not await self._wait(timeout):
            return None
        msg = self._buf.take_one()
        if self._buf.news:  # a delivery was taken whole: its credit is owed
            await self._send_control()
        return msg

    async def ack(self) -> None:
        """Acknowledge every message handed to the application so far (raises once closed or
        ended, as the blocking client's does)."""
        if self._closing is not None or self._ended:
            raise acknowledged_too_late(self._closing is not None)
        self._buf.acknowledge()
        await self._send_control()

    async def batches(self) -> AsyncIterator[list[ReceivedMessage]]:
        while True:
            batch = await self.receive_batch()
            if not batch:
                return
            yield batch

    async def __aiter__(self) -> AsyncIterator[ReceivedMessage]:
        while True:
            msg = await self.receive()
            if msg is None:
                return
            yield msg

    async def aclose(self) -> None:
        """Acknowledge what was handed out (``ack="auto"``), end the stream and wait for the
        node to put everything else back on the queue."""
        self.close()
        assert self._closing is not None
        await self._closing

    def close(self) -> None:
        """Start closing (see :meth:`aclose`, which also waits for it)."""
        if self._closing is None:
            self._closing = asyncio.get_running_loop().create_task(self._shutdown())

    async def _shutdown(self, timeout: float = 10.0) -> None:
        if self._reader is None:
            return
        await self._send_control(final=True)
        try:
            await self._call.done_writing()
            await asyncio.wait_for(asyncio.shield(self._reader), timeout)
        except (grpc.RpcError, grpc.aio.UsageError, TimeoutError):
            pass
        finally:
            self._call.cancel()


class AsyncQueueManagerClient:
    def __init__(
        self,
        address: str,
        timeout: float = 30.0,
        *,
        tls_ca: PathLike | None = None,
        tls_cert: PathLike | None = None,
        tls_key: PathLike | None = None,
        user: str | None = None,
        password: str | None = None,
    ) -> None:
        """See :class:`qmgr.client.QueueManagerClient` for TLS and credentials."""
        self.address = address
        self.timeout = timeout
        metadata = call_metadata(user, password)
        self._channel = open_channel(grpc.aio, address, CHANNEL_OPTIONS, tls_ca, tls_cert, tls_key)
        self._msg: Any = WithMetadata(messaging_pb2_grpc.MessagingStub(self._channel), metadata)
        self._admin: Any = WithMetadata(admin_pb2_grpc.AdminStub(self._channel), metadata)
        self._streams: Any = WithMetadata(EncodedStreams(self._channel), metadata)
        self._connect_lock = asyncio.Lock()
        self._connection: Any = None
        self._connection_id = ""
        self._units = UnitsOfWork()

    async def _call(self, method: Any, request: Any, timeout: float | None = None) -> Any:
        try:
            return await method(request, timeout=timeout or self.timeout)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None

    async def put(
        self,
        queue: str,
        body: bytes | str | OutgoingMessage,
        *,
        properties: dict[str, PropertyValue] | None = None,
        persistent: bool | None = None,
        priority: int | None = None,
    ) -> str:
        request = messaging_pb2.PutRequest(queue=queue)
        convert.to_wire(
            convert.outgoing(body, properties, persistent, priority), request.messages.add()
        )
        resp = await self._call(self._msg.Put, request)
        return str(resp.message_ids[0])

    async def connection_id(self) -> str:
        """This client's connection on the node (see the blocking client)."""
        async with self._connect_lock:
            if self._connection is None or self._connection.done():
                call = self._msg.Connect(messaging_pb2.ConnectRequest())
                try:
                    event = await call.read()
                except grpc.RpcError as exc:
                    raise from_rpc_error(exc) from None
                if event is grpc.aio.EOF:
                    raise MQClientError(2009, "MQRC_CONNECTION_BROKEN", "connection refused")
                self._connection = call
                self._connection_id = event.connection_id
            return self._connection_id

    async def get_many(
        self, queue: str, max_messages: int = 1, *, wait_ms: int = 0, unit_of_work: str = ""
    ) -> list[ReceivedMessage]:
        connection_id = await self.connection_id() if unit_of_work else ""
        if unit_of_work:
            self._units.began(unit_of_work, connection_id)
        request = messaging_pb2.GetRequest(
            queue=queue,
            max_messages=max_messages,
            wait_ms=wait_ms,
            unit_of_work=unit_of_work,
            connection_id=connection_id,
            max_response_bytes=MAX_RESPONSE_BYTES,
        )
        resp = await self._call(self._msg.Get, request, self.timeout + wait_ms / 1000.0)
        return [convert.from_wire(m) for m in resp.messages]

    async def get(
        self, queue: str, *, wait_ms: int = 0, unit_of_work: str = ""
    ) -> ReceivedMessage | None:
        got = await self.get_many(queue, 1, wait_ms=wait_ms, unit_of_work=unit_of_work)
        return got[0] if got else None

    async def commit(self, unit_of_work: str) -> int:
        """Commit (see the blocking client: MQRC_BACKED_OUT when the connection ended)."""
        request = messaging_pb2.UnitOfWork(
            unit_of_work=unit_of_work, connection_id=await self.connection_id()
        )
        if not self._units.ending(unit_of_work, request.connection_id):
            await self._call(self._msg.Backout, request)
            raise backed_out(unit_of_work)
        return int((await self._call(self._msg.Commit, request)).messages)

    async def backout(self, unit_of_work: str) -> int:
        request = messaging_pb2.UnitOfWork(
            unit_of_work=unit_of_work, connection_id=await self.connection_id()
        )
        self._units.ending(unit_of_work, request.connection_id)
        return int((await self._call(self._msg.Backout, request)).messages)

    async def publish(
        self,
        topic: str,
        body: bytes | str | OutgoingMessage,
        *,
        properties: dict[str, PropertyValue] | None = None,
        persistent: bool | None = None,
        retain: bool = False,
    ) -> int:
        result = await self.publish_many(
            [(topic, convert.outgoing(body, properties, persistent))], retain=retain
        )
        return result.deliveries

    async def publish_many(
        self, publications: list[tuple[str, OutgoingMessage]], *, retain: bool = False
    ) -> PublishResult:
        request = messaging_pb2.PublishRequest()
        for topic, msg in publications:
            convert.publication(topic, msg, retain, False, request.publications.add())
        resp = await self._call(self._msg.Publish, request)
        if resp.HasField("error"):
            raise publish_error(resp, resp.accepted)
        return convert.publish_result(resp)

    async def subscribe(
        self,
        topic: str,
        *,
        name: str = "",
        durable: bool = False,
        max_batch: int = 256,
        ack: str = "auto",
        max_pending_messages: int = DEFAULT_PENDING_MESSAGES,
        max_pending_bytes: int = DEFAULT_PENDING_BYTES,
        on_slow_consumer: Callable[[Any], None] | None = None,
        wildcard_char: bool = False,
    ) -> AsyncSubscription:
        buffer = DeliveryBuffer(max_pending_messages, max_pending_bytes, ack)
        sub = AsyncSubscription(
            self._streams.Subscribe(),
            messaging_pb2.SubscribeControl,
            buffer,
            on_slow_consumer=on_slow_consumer,
        )
        opening = open_subscription(
            buffer,
            name=name,
            topic=topic,
            durable=durable,
            max_batch=max_batch,
            wildcard_char=wildcard_char,
        )
        await sub._open(opening, named=True, timeout=self.timeout)
        return sub

    async def consumer(
        self,
        queue: str,
        max_batch: int = 256,
        *,
        ack: str = "auto",
        max_pending_messages: int = DEFAULT_PENDING_MESSAGES,
        max_pending_bytes: int = DEFAULT_PENDING_BYTES,
        on_slow_consumer: Callable[[Any], None] | None = None,
    ) -> AsyncSubscription:
        """A streaming consumer of ``queue`` with the interface of an AsyncSubscription."""
        buffer = DeliveryBuffer(max_pending_messages, max_pending_bytes, ack)
        sub = AsyncSubscription(
            self._streams.Consume(),
            messaging_pb2.ConsumeControl,
            buffer,
            queue=queue,
            on_slow_consumer=on_slow_consumer,
        )
        await sub._open(open_consumer(queue, max_batch, buffer), named=False)
        return sub

    async def unsubscribe(self, name: str) -> None:
        await self._call(self._msg.Unsubscribe, messaging_pb2.UnsubscribeRequest(name=name))

    async def mqsc(self, command: str, *, check: bool = True) -> list[MqscRecord]:
        resp = await self._call(self._admin.Mqsc, admin_pb2.MqscRequest(command=command))
        recs = convert.records(resp)
        if check and not resp.ok:
            raise MqscCommandError(command, recs)
        return recs

    async def close(self) -> None:
        if self._connection is not None:
            self._connection.cancel()
        await self._channel.close()

    async def __aenter__(self) -> AsyncQueueManagerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
