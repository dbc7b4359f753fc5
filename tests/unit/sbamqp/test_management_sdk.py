"""``$management`` driven by the real azure-servicebus 7.15.0 client objects: their public calls
build the requests, and the answers go back through the SDK's own decoder and handlers. Only the
management link itself is replaced: each request is encoded by the SDK, decoded by
``qmgr.amqp``, answered by ``respond`` and handed back as the link would hand it."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode
from azure.servicebus._pyamqp._decode import decode_payload
from azure.servicebus._pyamqp._encode import encode_payload
from azure.servicebus._pyamqp.utils import amqp_string_value
from azure.servicebus._servicebus_receiver import ServiceBusReceiver
from azure.servicebus._servicebus_sender import ServiceBusSender
from azure.servicebus._session_browser import _SessionBrowser
from azure.servicebus._transport._pyamqp_transport import PyamqpTransport
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.aio._servicebus_receiver_async import ServiceBusReceiver as AsyncReceiver
from azure.servicebus.aio._servicebus_sender_async import ServiceBusSender as AsyncSender
from azure.servicebus.aio._session_browser_async import _SessionBrowserAsync as AsyncSessionBrowser
from azure.servicebus.aio._transport._pyamqp_transport_async import PyamqpTransportAsync
from azure.servicebus.exceptions import (
    MessageLockLostError,
    MessageNotFoundError,
    MessagingEntityNotFoundError,
    SessionLockLostError,
)

from qmgr.amqp.message import decode_message, encode_message
from qmgr.core.clock import ManualClock
from qmgr.sbamqp.management import respond
from qmgr.servicebus.message import MessageState, SbMessage
from qmgr.servicebus.namespace import Namespace, ReceiveMode
from tests.unit.sbamqp.test_management import namespace

CONN = (
    "Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=RootManageSharedAccessKey;"
    "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"
)


@pytest.fixture
def clock() -> ManualClock:
    # the SDK compares lock times with the wall clock: start an hour ahead of it, whole seconds
    return ManualClock(float(int(time.time()) + 3600))


@pytest.fixture
def ns(clock: ManualClock) -> Namespace:
    return namespace(clock)


def _answering(ns: Namespace, seen: list[Any], transport: Any) -> Callable[..., Any]:
    """The transport's mgmt_client_request, answered by ``ns``: what it and
    ManagementLink.execute add to the request, then the wire both ways."""

    def mgmt_client_request(
        mgmt_client: Any,
        mgmt_msg: Any,
        *,
        operation: bytes,
        operation_type: bytes,
        node: bytes,
        timeout: Any,
        callback: Callable[..., Any],
    ) -> Any:
        return _exchange(ns, seen, transport, mgmt_msg, operation, operation_type, node, callback)

    return mgmt_client_request


def _exchange(
    ns: Namespace,
    seen: list[Any],
    transport: Any,
    mgmt_msg: Any,
    operation: bytes,
    operation_type: bytes,
    node: bytes,
    callback: Callable[..., Any],
) -> Any:
    app = mgmt_msg.application_properties
    app["operation"] = amqp_string_value(operation.decode("UTF-8"))
    app["type"] = amqp_string_value(operation_type)
    mgmt_msg = mgmt_msg._replace(properties=mgmt_msg.properties._replace(message_id=uuid.uuid4()))
    request = decode_message(bytes(encode_payload(bytearray(), mgmt_msg)))
    seen.append(request)
    path = node.decode()
    assert path.endswith("/$management")
    reply = respond(ns, path[: -len("/$management")], request)
    response = decode_payload(memoryview(encode_message(reply.message)))
    assert response.properties.correlation_id == mgmt_msg.properties.message_id
    app = response.application_properties
    return callback(
        app[b"statusCode"], response, app.get(b"statusDescription"), amqp_transport=transport
    )


@pytest.fixture
def client(ns: Namespace, monkeypatch: pytest.MonkeyPatch) -> Iterator[ServiceBusClient]:
    seen: list[Any] = []
    answer = _answering(ns, seen, PyamqpTransport)
    monkeypatch.setattr(PyamqpTransport, "mgmt_client_request", staticmethod(answer))
    for handler in (ServiceBusReceiver, ServiceBusSender, _SessionBrowser):
        monkeypatch.setattr(handler, "_open", _opened)
    c = ServiceBusClient.from_connection_string(CONN, retry_total=0)
    c.seen = seen  # type: ignore[attr-defined]
    yield c


@pytest.fixture
def async_client(ns: Namespace, monkeypatch: pytest.MonkeyPatch) -> AsyncServiceBusClient:
    answer = _answering(ns, [], PyamqpTransportAsync)

    async def mgmt_client_request_async(*args: Any, **kwargs: Any) -> Any:
        return answer(*args, **kwargs)

    async def opened(self: Any, timeout: float | None = None) -> None:
        self._running = True

    monkeypatch.setattr(
        PyamqpTransportAsync,
        "mgmt_client_request_async",
        staticmethod(mgmt_client_request_async),
    )
    for handler in (AsyncReceiver, AsyncSender, AsyncSessionBrowser):
        monkeypatch.setattr(handler, "_open", opened)
    return AsyncServiceBusClient.from_connection_string(CONN, retry_total=0)


def _opened(self: Any, timeout: float | None = None) -> None:
    self._running = True


def _send(ns: Namespace, path: str = "q", n: int = 3, session: str | None = None) -> list[int]:
    return ns.send(path, [SbMessage(body=b"m%d" % i, session_id=session) for i in range(n)])


def test_peek_messages(client: ServiceBusClient, ns: Namespace) -> None:
    seqs = _send(ns)
    rx = client.get_queue_receiver("q")
    got = rx.peek_messages(max_message_count=2)
    assert [m.sequence_number for m in got] == seqs[:2]
    assert [str(m) for m in got] == ["m0", "m1"]
    assert [m.sequence_number for m in rx.peek_messages(max_message_count=5)] == seqs[2:]
    assert rx.peek_messages(max_message_count=5) == []


def test_peek_an_unknown_queue(client: ServiceBusClient) -> None:
    with pytest.raises(MessagingEntityNotFoundError):
        client.get_queue_receiver("nope").peek_messages()


def test_deferred_receive_renew_and_settle(
    client: ServiceBusClient, ns: Namespace, clock: ManualClock
) -> None:
    seqs = _send(ns, n=3)
    for s in ns.receive("q", 3, ReceiveMode.PEEK_LOCK):
        assert s.lock_token is not None
        ns.defer("q", s.lock_token)
    rx = client.get_queue_receiver("q")
    got = rx.receive_deferred_messages(seqs)
    assert [m.sequence_number for m in got] == seqs
    clock.advance(10)
    until = rx.renew_message_lock(got[0])
    assert until == dt.datetime.fromtimestamp(clock.now() + 30, dt.UTC)
    rx.complete_message(got[0])
    rx.abandon_message(got[1])
    rx.dead_letter_message(got[2], reason="r", error_description="d")
    info = ns.get_queue("q")
    assert (info.active, info.deferred, info.dead_lettered) == (0, 1, 1)
    [dead] = ns.peek("q/$DeadLetterQueue", 1, 1)
    assert dead.message.properties["DeadLetterReason"] == "r"
    with pytest.raises(MessageNotFoundError):
        rx.receive_deferred_messages([99])


def test_settling_a_lost_lock(client: ServiceBusClient, ns: Namespace, clock: ManualClock) -> None:
    seqs = _send(ns, n=1)
    [s] = ns.receive("q", 1, ReceiveMode.PEEK_LOCK)
    assert s.lock_token is not None
    ns.defer("q", s.lock_token)
    rx = client.get_queue_receiver("q")
    [got] = rx.receive_deferred_messages(seqs)
    clock.advance(31)
    ns.tick()
    with pytest.raises(MessageLockLostError):
        rx.renew_message_lock(got)


def test_receive_deferred_and_delete(client: ServiceBusClient, ns: Namespace) -> None:
    seqs = _send(ns, n=1)
    [s] = ns.receive("q", 1, ReceiveMode.PEEK_LOCK)
    assert s.lock_token is not None
    ns.defer("q", s.lock_token)
    rx = client.get_queue_receiver("q", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE)
    [got] = rx.receive_deferred_messages(seqs)
    assert str(got) == "m0"
    assert ns.peek("q", 1, 10) == []


def test_schedule_and_cancel(client: ServiceBusClient, ns: Namespace, clock: ManualClock) -> None:
    tx = client.get_queue_sender("q")
    at = dt.datetime.fromtimestamp(clock.now() + 60, dt.UTC)
    seqs = tx.schedule_messages(
        [ServiceBusMessage("a", session_id=None), ServiceBusMessage("b")], at
    )
    assert len(seqs) == 2
    peeked = ns.peek("q", 1, 10)
    assert [p.state for p in peeked] == [MessageState.SCHEDULED] * 2
    assert [p.scheduled_enqueue_time for p in peeked] == [clock.now() + 60] * 2
    tx.cancel_scheduled_messages(seqs[0])
    assert [p.sequence_number for p in ns.peek("q", 1, 10)] == seqs[1:]
    with pytest.raises(MessageNotFoundError):
        tx.cancel_scheduled_messages(seqs[0])


def test_session_state_and_lock(
    client: ServiceBusClient, ns: Namespace, clock: ManualClock
) -> None:
    _send(ns, "s", 2, session="a")
    assert ns.accept_session("s", "a") is not None
    rx = client.get_queue_receiver("s", session_id="a")
    session = rx.session
    session.set_state("progress")
    assert session.get_state() == b"progress"
    clock.advance(5)
    assert session.renew_lock() == dt.datetime.fromtimestamp(clock.now() + 30, dt.UTC)
    assert [m.session_id for m in rx.peek_messages(max_message_count=5)] == ["a", "a"]
    clock.advance(31)
    ns.tick()
    with pytest.raises(SessionLockLostError):
        session.renew_lock()


def test_list_sessions(client: ServiceBusClient, ns: Namespace) -> None:
    assert list(client.list_queue_sessions("s")) == []
    _send(ns, "s", 1, session="a")
    _send(ns, "s", 1, session="b")
    assert sorted(client.list_queue_sessions("s")) == ["a", "b"]


def test_requests_carry_what_the_reference_says(client: ServiceBusClient, ns: Namespace) -> None:
    _send(ns)
    client.get_queue_receiver("q").peek_messages()
    [request] = client.seen  # type: ignore[attr-defined]
    app = request.application_properties
    assert app["operation"] == "com.microsoft:peek-message"
    assert app["type"] == "entity-mgmt"
    assert "com.microsoft:server-timeout" in app
    assert request.properties.reply_to == "q/$management"


def test_the_async_client(
    async_client: AsyncServiceBusClient, ns: Namespace, clock: ManualClock
) -> None:
    seqs = _send(ns, n=2)
    _send(ns, "s", 1, session="a")
    assert ns.accept_session("s", "a") is not None

    async def run() -> None:
        rx = async_client.get_queue_receiver("q")
        assert [m.sequence_number for m in await rx.peek_messages(max_message_count=5)] == seqs
        tx = async_client.get_queue_sender("q")
        at = dt.datetime.fromtimestamp(clock.now() + 60, dt.UTC)
        [scheduled] = await tx.schedule_messages(ServiceBusMessage("later"), at)
        await tx.cancel_scheduled_messages(scheduled)
        session_rx = async_client.get_queue_receiver("s", session_id="a")
        await session_rx.session.set_state(b"st")
        assert await session_rx.session.get_state() == b"st"
        assert sorted([sid async for sid in async_client.list_queue_sessions("s")]) == ["a"]

    asyncio.run(run())
    assert [p.sequence_number for p in ns.peek("q", 1, 10)] == seqs
