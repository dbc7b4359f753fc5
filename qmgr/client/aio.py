"""The asyncio client: the same operations as the blocking client, awaited."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc

from qmgr.client import convert
from qmgr.client.errors import MqscCommandError, from_rpc_error
from qmgr.client.sync import CHANNEL_OPTIONS
from qmgr.client.types import MqscRecord, OutgoingMessage, PublishResult, ReceivedMessage
from qmgr.core.values import PropertyValue
from qmgr.wire import admin_pb2, admin_pb2_grpc, messaging_pb2, messaging_pb2_grpc


class AsyncSubscription:
    def __init__(self, call: Any, first: messaging_pb2.Delivery) -> None:
        self._call = call
        self.name: str = first.subscription
        self.sub_id: str = first.sub_id
        self.queue: str = first.queue

    async def batches(self) -> AsyncIterator[list[ReceivedMessage]]:
        try:
            while True:
                delivery = await self._call.read()
                if delivery is grpc.aio.EOF:
                    return
                yield [convert.from_wire(m) for m in delivery.messages]
        except asyncio.CancelledError:
            return
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                raise from_rpc_error(exc) from None

    async def __aiter__(self) -> AsyncIterator[ReceivedMessage]:
        async for batch in self.batches():
            for msg in batch:
                yield msg

    def close(self) -> None:
        self._call.cancel()


class AsyncQueueManagerClient:
    def __init__(self, address: str, timeout: float = 30.0) -> None:
        self.address = address
        self.timeout = timeout
        self._channel = grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)
        self._msg = messaging_pb2_grpc.MessagingStub(self._channel)
        self._admin = admin_pb2_grpc.AdminStub(self._channel)

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

    async def get_many(
        self, queue: str, max_messages: int = 1, *, wait_ms: int = 0, unit_of_work: str = ""
    ) -> list[ReceivedMessage]:
        request = messaging_pb2.GetRequest(
            queue=queue, max_messages=max_messages, wait_ms=wait_ms, unit_of_work=unit_of_work
        )
        resp = await self._call(self._msg.Get, request, self.timeout + wait_ms / 1000.0)
        return [convert.from_wire(m) for m in resp.messages]

    async def get(
        self, queue: str, *, wait_ms: int = 0, unit_of_work: str = ""
    ) -> ReceivedMessage | None:
        got = await self.get_many(queue, 1, wait_ms=wait_ms, unit_of_work=unit_of_work)
        return got[0] if got else None

    async def commit(self, unit_of_work: str) -> int:
        resp = await self._call(
            self._msg.Commit, messaging_pb2.UnitOfWork(unit_of_work=unit_of_work)
        )
        return int(resp.messages)

    async def backout(self, unit_of_work: str) -> int:
        resp = await self._call(
            self._msg.Backout, messaging_pb2.UnitOfWork(unit_of_work=unit_of_work)
        )
        return int(resp.messages)

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
        return PublishResult(resp.accepted, resp.deliveries)

    async def subscribe(
        self, topic: str, *, name: str = "", durable: bool = False, max_batch: int = 256
    ) -> AsyncSubscription:
        call = self._msg.Subscribe(
            messaging_pb2.SubscribeRequest(
                name=name, topic=topic, durable=durable, max_batch=max_batch
            )
        )
        try:
            first = await call.read()
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None
        return AsyncSubscription(call, first)

    async def unsubscribe(self, name: str) -> None:
        await self._call(self._msg.Unsubscribe, messaging_pb2.UnsubscribeRequest(name=name))

    async def mqsc(self, command: str, *, check: bool = True) -> list[MqscRecord]:
        resp = await self._call(self._admin.Mqsc, admin_pb2.MqscRequest(command=command))
        recs = convert.records(resp)
        if check and not resp.ok:
            raise MqscCommandError(command, recs)
        return recs

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> AsyncQueueManagerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
