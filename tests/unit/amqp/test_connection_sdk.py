"""The real azure-servicebus client against the connection machine, over loopback.

A small server in this test (a thread per connection, blocking sockets) drives
``qmgr.amqp.connection.Connection``: it answers CBS put-token with 202, accepts what senders
transfer and delivers a few messages to receivers with lock tokens as delivery tags. Messages are
encoded and decoded with the SDK's own ``_pyamqp`` (an independent oracle here). What this
checks is the machine: SASL, open, begin, the attach pairs, credit, batches, settlement and the
close, exactly as 7.15.0 speaks them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

pytest.importorskip("azure.servicebus")

from azure.servicebus import (  # noqa: E402
    NEXT_AVAILABLE_SESSION,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
)
from azure.servicebus._pyamqp import _decode, _encode  # noqa: E402
from azure.servicebus._pyamqp.message import Header, Message, Properties  # noqa: E402
from azure.servicebus.exceptions import OperationTimeoutError  # noqa: E402

from qmgr.amqp import performatives as p  # noqa: E402
from qmgr.amqp.connection import (  # noqa: E402
    SND_SETTLED,
    Connection,
    CreditChanged,
    DispositionReceived,
    Event,
    Link,
    LinkAttached,
    SaslInit,
    TransferReceived,
)
from qmgr.amqp.types import Long, Symbol  # noqa: E402


def _address(terminus: Any) -> str:
    return str(getattr(terminus, "address", "") or "")


def _encode_message(msg: Message) -> bytes:
    out = bytearray()
    _encode.encode_payload(out, msg)
    return bytes(out)


SESSION_FILTER = "com.microsoft:session-filter"
LOCKED_UNTIL = "com.microsoft:locked-until-utc"


def delivery(lock: uuid.UUID, data: bytes, sequence_number: int) -> bytes:
    """A message as a queue delivers it (the annotations the SDK reads)."""
    return _encode_message(
        Message(
            header=Header(delivery_count=0),
            data=[data],
            message_annotations={
                b"x-opt-sequence-number": sequence_number,
                b"x-opt-locked-until": datetime.now(UTC) + timedelta(minutes=1),
            },
            properties=Properties(message_id=str(lock)),
        )
    )


class MiniServer:
    """Just enough of a Service Bus to exercise the machine with the real client."""

    def __init__(self, to_deliver: int = 0, body: bytes | None = None) -> None:
        self.body = body
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.received: list[tuple[int, bytes]] = []  # (message-format, payload)
        self.settled: list[tuple[bytes, str]] = []  # (lock token, outcome)
        self.to_deliver = to_deliver
        self.states: dict[str, Any] = {}  # outcome by lock token
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accept = threading.Thread(target=self._serve, daemon=True)
        self._accept.start()

    @property
    def conn_str(self) -> str:
        return (
            f"Endpoint=sb://127.0.0.1:{self.port};SharedAccessKeyName=RootManageSharedAccessKey;"
            "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"
        )

    def stop(self) -> None:
        self._stop.set()
        self._accept.join()
        for t in self._threads:
            t.join(5)
        self.sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.sock.accept()
            except TimeoutError:
                continue
            t = threading.Thread(target=self._handle, args=(client,), daemon=True)
            self._threads.append(t)
            t.start()

    def _handle(self, s: socket.socket) -> None:
        conn = Connection("mini", idle_timeout=60.0, now=time.monotonic())
        pending: dict[Link, list[bytes]] = {}
        s.settimeout(0.2)
        try:
            while not self._stop.is_set() and not conn.closed:
                try:
                    data = s.recv(65536)
                except TimeoutError:
                    conn.tick(time.monotonic())
                    data = None
                if data is not None:
                    if data:
                        events = conn.receive_data(data, now=time.monotonic())
                    else:
                        events = conn.receive_eof()
                    while events:
                        more: list[Event] = []
                        for event in events:
                            more += self._on_event(conn, event, pending)
                        events = more
                out = conn.data_to_send()
                if out:
                    s.sendall(out)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client may drop the socket right after its close
        except BaseException as e:  # reported by the test
            self.errors.append(e)
        finally:
            s.close()

    def _on_event(
        self, conn: Connection, event: Event, pending: dict[Link, list[bytes]]
    ) -> list[Event]:
        if isinstance(event, SaslInit):
            conn.accept_sasl()
            return conn.receive_data(b"")
        if isinstance(event, LinkAttached):
            link = event.link
            filters = getattr(link.source, "filter", None) or {}
            if SESSION_FILTER in filters:
                if filters[SESSION_FILTER] is None:  # next available: none here, so time out
                    timeout = p.Error(condition="com.microsoft:timeout", description="no session")
                    conn.refuse_attach(link, timeout)
                    return []
                # grant the session asked for; the lock in .NET ticks
                ticks = 621355968000000000 + (int(time.time() * 1000) + 60000) * 10000
                source = dataclasses.replace(
                    link.source, filter={Symbol(SESSION_FILTER): filters[SESSION_FILTER]}
                )
                conn.attach_reply(link, source=source, properties={LOCKED_UNTIL: Long(ticks)})
                return []
            conn.attach_reply(link, properties={"com.microsoft:tracking-id": "t"})
            if not link.is_sender:
                conn.flow(link, 100)
            return []
        if isinstance(event, CreditChanged):
            self._flush(conn, event.link, pending)
            if event.drain:
                conn.flow(event.link)
            return []
        if isinstance(event, TransferReceived):
            link = event.link
            if not event.settled:
                conn.settle(link, event.delivery_id, p.Accepted())
            if link.credit < 50:
                conn.flow(link, 100)
            if _address(link.target) == "$cbs":
                request = _decode.decode_payload(memoryview(event.payload))
                response = Message(
                    value=None,
                    properties=Properties(correlation_id=request.properties.message_id),
                    application_properties={"status-code": 202, "status-description": "Accepted"},
                )
                for other in link.session.links.values():
                    if other.is_sender and _address(other.source) == "$cbs":
                        pending.setdefault(other, []).append(_encode_message(response))
                        self._flush(conn, other, pending)
            else:
                self.received.append((event.message_format, event.payload))
            return []
        if isinstance(event, DispositionReceived):
            for d in event.deliveries:
                self.settled.append((d.tag, type(event.state).__name__))
                self.states[str(uuid.UUID(bytes_le=d.tag))] = event.state
                if not event.settled:  # 7.15.0 waits for the echo of its outcome
                    # a dead-letter is echoed as a plain rejected: one with an error is a failure
                    echo = p.Rejected() if isinstance(event.state, p.Rejected) else event.state
                    conn.settle(d.link, d.delivery_id, echo)
            return []
        return []

    def _flush(self, conn: Connection, link: Link, pending: dict[Link, list[bytes]]) -> None:
        queue = pending.setdefault(link, [])
        if _address(link.source) != "$cbs" and link.is_sender:
            while self.to_deliver and link.can_send:
                self.to_deliver -= 1
                lock = uuid.uuid4()
                data = self.body or b"delivered %d" % self.to_deliver
                body = delivery(lock, data, 1 + self.to_deliver)
                conn.send_transfer(
                    link, lock.bytes_le, body, settled=link.snd_settle_mode == SND_SETTLED
                )
        while queue and link.can_send:
            conn.send_transfer(link, b"\x00", queue.pop(0), settled=True)


@contextlib.contextmanager
def mini_server(**kw: Any) -> Iterator[MiniServer]:
    server = MiniServer(**kw)
    try:
        yield server
    finally:
        server.stop()
    assert server.errors == []


def test_real_sdk_sends_a_batch_through_the_machine() -> None:
    with (
        mini_server() as server,
        ServiceBusClient.from_connection_string(server.conn_str) as client,
        client.get_queue_sender("q") as sender,
    ):
        sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(3)])
        sender.send_messages(ServiceBusMessage("single"))
    formats = [f for f, _ in server.received]
    assert formats == [0x80013700, 0]
    batch = _decode.decode_payload(memoryview(server.received[0][1]))
    inner = [_decode.decode_payload(memoryview(d)) for d in batch.data]
    assert [b"".join(m.data) for m in inner] == [b"m0", b"m1", b"m2"]


def test_real_sdk_peek_lock_receive_and_settle_every_way() -> None:
    with (
        mini_server(to_deliver=4) as server,
        ServiceBusClient.from_connection_string(server.conn_str) as client,
        client.get_queue_receiver("q", max_wait_time=5) as receiver,
    ):
        got: list[Any] = []
        while len(got) < 4:
            batch = receiver.receive_messages(max_message_count=4 - len(got), max_wait_time=5)
            assert batch
            got += batch
        locks = [str(m.lock_token) for m in got]
        receiver.complete_message(got[0])
        receiver.abandon_message(got[1])
        receiver.defer_message(got[2])
        receiver.dead_letter_message(got[3], reason="bad", error_description="very bad")
    outcomes = {str(uuid.UUID(bytes_le=tag)): outcome for tag, outcome in server.settled}
    assert [outcomes[lock] for lock in locks] == ["Accepted", "Modified", "Modified", "Rejected"]
    assert server.states[locks[2]].undeliverable_here
    assert not server.states[locks[1]].undeliverable_here
    error = server.states[locks[3]].error
    assert error.condition == "com.microsoft:dead-letter"
    assert error.info["DeadLetterReason"] == "bad"


def test_real_sdk_receive_and_delete_needs_no_settlement() -> None:
    with (
        mini_server(to_deliver=1) as server,
        ServiceBusClient.from_connection_string(server.conn_str) as client,
        client.get_queue_receiver(
            "q", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE, max_wait_time=5
        ) as receiver,
    ):
        got = receiver.receive_messages(max_message_count=1, max_wait_time=5)
    assert len(got) == 1


def test_real_sdk_large_messages_cross_in_many_frames() -> None:
    body = bytes(i % 251 for i in range(300_000))  # > our max-frame-size: the client splits
    # the client takes frames and messages up to 1 MiB: a message just below that does not fit
    # in one frame with its transfer performative, so the machine splits it
    limit = 1024 * 1024
    overhead = len(delivery(uuid.uuid4(), b"x" * 1000, 1)) - 1000
    big = bytes(i % 239 for i in range(limit - overhead - 2))
    with (
        mini_server(to_deliver=1, body=big) as server,
        ServiceBusClient.from_connection_string(server.conn_str) as client,
    ):
        with client.get_queue_sender("q") as sender:
            sender.send_messages(ServiceBusMessage(body))
        with client.get_queue_receiver("q", max_wait_time=5) as receiver:
            (got,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            receiver.complete_message(got)
    ((_, payload),) = server.received
    assert b"".join(_decode.decode_payload(memoryview(payload)).data) == body
    assert b"".join(got.body) == big


def test_real_sdk_session_receiver_gets_the_session_or_times_out() -> None:
    with (
        mini_server(to_deliver=1) as server,
        ServiceBusClient.from_connection_string(server.conn_str, retry_total=0) as client,
    ):
        with client.get_queue_receiver("q", session_id="s-1", max_wait_time=5) as receiver:
            assert receiver.session.session_id == "s-1"
            locked = receiver.session.locked_until_utc
            assert locked is not None and locked > datetime.now(UTC)
            (got,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            receiver.complete_message(got)
        receiver = client.get_queue_receiver(
            "q", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=1
        )
        with pytest.raises(OperationTimeoutError), receiver:
            receiver.receive_messages(max_message_count=1, max_wait_time=1)


def test_real_async_sdk_sends_receives_and_settles() -> None:
    from azure.servicebus.aio import ServiceBusClient as AsyncClient

    async def run(server: MiniServer) -> list[str]:
        async with AsyncClient.from_connection_string(server.conn_str) as client:
            async with client.get_queue_sender("q") as sender:
                await sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
            async with client.get_queue_receiver("q", max_wait_time=5) as receiver:
                got = await receiver.receive_messages(max_message_count=1, max_wait_time=5)
                locks = [str(m.lock_token) for m in got]
                for m in got:
                    await receiver.abandon_message(m)
        return locks

    with mini_server(to_deliver=1) as server:
        locks = asyncio.run(run(server))
    assert [f for f, _ in server.received] == [0x80013700]
    assert [(str(uuid.UUID(bytes_le=t)), o) for t, o in server.settled] == [(locks[0], "Modified")]
