"""The asyncio driver of AMQP 1.0 connections on the Service Bus port.

:class:`qmgr.node.sbport.ServiceBusPort` sniffs ``AMQP`` and hands the socket to
:meth:`AmqpServer.handle` (its ``amqp_handler`` hook) with the bytes it already read. Per
connection: a :class:`qmgr.amqp.connection.Connection` (the sans-IO machine) gets the bytes read
and the time; SASL ANONYMOUS and PLAIN are accepted; its events go to
:class:`qmgr.sbamqp.links.SbLinks` (the Service Bus meaning); what the machine queued is written
after each step. A timer callback calls ``tick`` (heartbeats, idle and handshake timeouts) when
the machine asks for it. Messages that become available without this connection doing anything
(sent on another connection, a lock expired, a scheduled message activated) reach its waiting
receivers through the namespace host's listeners: nothing polls. A malformed frame closes only
its own connection, with the AMQP error the machine chose.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from qmgr.amqp import performatives as p
from qmgr.amqp.connection import Closed, Connection, Event, Opened, SaslInit
from qmgr.sbamqp.conditions import RESOURCE_LIMIT_EXCEEDED
from qmgr.sbamqp.links import SbLinks
from qmgr.servicebus.sas import Claims
from qmgr.store import StoreFailed

if TYPE_CHECKING:
    from qmgr.node.runtime import NodeRuntime

log = logging.getLogger("qmgr.servicebus.amqp")

IDLE_TIMEOUT = 240.0  # seconds without a frame before a connection is closed
MAX_TICK = 5.0  # seconds at most between two looks at a connection's timers


class _Protocol(asyncio.Protocol):
    """The socket's callbacks, handed to the connection's functions; writes that back up stop
    the reading until they drain."""

    def __init__(
        self,
        transport: asyncio.Transport,
        received: Callable[[bytes], None],
        eof: Callable[[], None],
        lost: Callable[[Exception | None], None],
    ) -> None:
        self.transport = transport
        self.received = received
        self.eof = eof
        self.lost = lost

    def data_received(self, data: bytes) -> None:
        self.received(data)

    def eof_received(self) -> bool:
        self.eof()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost(exc)

    def pause_writing(self) -> None:
        self.transport.pause_reading()

    def resume_writing(self) -> None:
        if not self.transport.is_closing():
            self.transport.resume_reading()


FORCED = "amqp:connection:forced"  # the node closes the connection: it is stopping


class AmqpServer:
    """Serves every AMQP connection of one node's Service Bus port."""

    def __init__(self, runtime: NodeRuntime) -> None:
        assert runtime.servicebus is not None
        self.rt = runtime
        self.host = runtime.servicebus
        self.container_id = f"qmgr-{uuid.uuid4().hex[:12]}"
        # every open connection's links, with what closes the connection (``close_all``)
        self.connections: dict[SbLinks, Callable[[str], None]] = {}
        # and what runs each one's timer at once (``clock_moved``)
        self.clock_listeners: dict[SbLinks, Callable[[], None]] = {}
        self.keys = runtime.config.servicebus_keys  # None: every token is accepted
        self.limits = runtime.config.servicebus_port_limits
        self.host.listen(self._available)

    def clock_moved(self) -> None:
        """The clock jumped forward (a test moved it): every connection's timer runs now, so
        links whose token has expired by the moved clock are detached at once."""
        for moved in list(self.clock_listeners.values()):
            moved()

    def _available(self) -> None:
        """The namespace changed: let every connection's waiting receivers look again."""
        for links in list(self.connections):
            links.wake()

    async def handle(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        first: bytes,
        refusal: str | None = None,
    ) -> None:
        """Serve one connection until it ends. The socket is taken over from the stream with
        a protocol of its own: bytes are handled as they arrive, in the event-loop callback
        that read them (no task woken per read). With ``refusal`` (the port is full) the
        connection is opened and at once closed with ``amqp:resource-limit-exceeded``, so the
        client reads why."""
        loop = asyncio.get_running_loop()
        transport = writer.transport
        assert isinstance(transport, asyncio.Transport)  # a socket's: reads and writes
        streams = transport.get_protocol()  # told when the socket is gone (the port waits)
        limits = self.limits
        conn = Connection(
            self.container_id,
            now=loop.time(),
            idle_timeout=IDLE_TIMEOUT,
            channel_max=limits.sessions_per_connection - 1,
            handle_max=limits.links_per_session - 1,
            max_links=limits.links_per_connection,
            max_partial_bytes=limits.partial_bytes_per_connection,
        )
        ended: asyncio.Future[None] = loop.create_future()

        def flush() -> None:
            data = conn.data_to_send()
            if data and not transport.is_closing():
                transport.write(data)

        links = SbLinks(
            conn,
            self.host.namespace,
            now=self.host.clock.now,
            changed=self.host.changed,
            deadline_moved=self.host.deadline_moved,
            when_durable=self._when_durable,
            call_later=loop.call_later,
            flush=flush,
            claims=None if self.keys is None else Claims(self.keys),
            max_tokens=limits.tokens_per_connection,
        )
        timer: asyncio.TimerHandle | None = None

        def close(why: str) -> None:
            if not conn.closed:
                conn.close(p.Error(condition=FORCED, description=why))
                flush()
            transport.close()  # what was written goes first

        self.connections[links] = close

        def clock_moved() -> None:
            if timer is not None:
                timer.cancel()
            tick()

        self.clock_listeners[links] = clock_moved

        def received(data: bytes) -> None:
            if conn.closed:
                return
            events = self._sasl(conn, conn.receive_data(data, now=loop.time()))
            if refusal is not None:
                if any(isinstance(e, Opened) for e in events):
                    conn.close(p.Error(condition=RESOURCE_LIMIT_EXCEEDED, description=refusal))
            elif events:
                links.handle(events)
            flush()
            if conn.closed:
                transport.close()

        def eof() -> None:
            if not conn.closed:
                links.handle(conn.receive_eof())
            transport.close()

        def lost(exc: Exception | None) -> None:
            streams.connection_lost(exc)
            if not ended.done():
                ended.set_result(None)

        def tick() -> None:
            nonlocal timer
            deadline = conn.tick(loop.time())
            for event in conn.events():
                if isinstance(event, Closed):
                    log.info("Service Bus AMQP: connection closed: %s", event.error)
            links.expire_tokens()
            flush()
            if conn.closed:  # a timeout
                transport.close()
                timer = None
                return
            wait = MAX_TICK if deadline is None else min(MAX_TICK, deadline - loop.time())
            token_wait = links.token_wait()
            if token_wait is not None:  # with keys: detach links once their token expires
                wait = min(wait, token_wait + 0.01)
            timer = loop.call_later(max(0.0, wait), tick)

        # bytes the stream read beyond the sniffed ones (none unless the peer sent a lot at once)
        held = getattr(reader, "_buffer", None)
        pending = first + bytes(held or b"")
        if held:
            held.clear()
        transport.set_protocol(_Protocol(transport, received, eof, lost))
        if not transport.is_reading() and not transport.is_closing():
            transport.resume_reading()
        tick()
        try:
            received(pending)
            if reader.at_eof():
                eof()
            await ended
        finally:
            if timer is not None:
                timer.cancel()
            links.close()
            links.commit()
            self.connections.pop(links, None)
            self.clock_listeners.pop(links, None)
            with contextlib.suppress(Exception):
                flush()

    def close_all(self, why: str) -> None:
        """Close every open connection with ``amqp:connection:forced`` and ``why`` (the node
        is stopping): the clients read why, and nothing is served after the store closes."""
        for close in list(self.connections.values()):
            close(why)

    def _when_durable(self, callback: Callable[[StoreFailed | None], None]) -> None:
        committer = self.rt.committer
        if committer is None:  # no data directory: nothing to wait for
            callback(None)
        else:
            committer.when_durable(callback)

    @staticmethod
    def _sasl(conn: Connection, events: list[Event]) -> list[Event]:
        """Accept SASL ANONYMOUS/PLAIN at once; the machine goes on with the bytes it holds."""
        out: list[Event] = []
        while events:
            event = events.pop(0)
            if isinstance(event, SaslInit):
                conn.accept_sasl()
                events += conn.receive_data(b"")
            else:
                out.append(event)
        return out
