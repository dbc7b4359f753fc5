"""The asyncio driver of AMQP 1.0 connections on the Service Bus port.

:class:`qmgr.node.sbport.ServiceBusPort` sniffs ``AMQP`` and hands the socket to
:meth:`AmqpServer.handle` (its ``amqp_handler`` hook) with the bytes it already read. Per
connection: a :class:`qmgr.amqp.connection.Connection` (the sans-IO machine) gets the bytes read
and the time; SASL ANONYMOUS and PLAIN are accepted; its events go to
:class:`qmgr.node.sb_links.SbLinks` (the Service Bus meaning); what the machine queued is written
after each step. A timer task calls ``tick`` (heartbeats, idle and handshake timeouts) and looks
for messages that became available without this connection doing anything (sent on another
connection, a lock expired, a scheduled message activated). A malformed frame closes only its
own connection, with the AMQP error the machine chose.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

from qmgr.amqp.connection import Closed, Connection, Event, SaslInit
from qmgr.node.sb_links import POLL, SbLinks
from qmgr.servicebus.sas import Claims

if TYPE_CHECKING:
    from qmgr.node.runtime import NodeRuntime

log = logging.getLogger("qmgr.servicebus.amqp")

READ_SIZE = 256 * 1024
IDLE_TIMEOUT = 240.0  # seconds without a frame before a connection is closed


class AmqpServer:
    """Serves every AMQP connection of one node's Service Bus port."""

    def __init__(self, runtime: NodeRuntime) -> None:
        assert runtime.servicebus is not None
        self.rt = runtime
        self.host = runtime.servicebus
        self.container_id = f"qmgr-{uuid.uuid4().hex[:12]}"
        self.connections: weakref.WeakSet[SbLinks] = weakref.WeakSet()
        self.keys = runtime.config.servicebus_keys  # None: every token is accepted
        # each connection's timer, woken early when the node's bridges send
        self._wake: weakref.WeakKeyDictionary[SbLinks, asyncio.Event] = weakref.WeakKeyDictionary()
        self.host.on_arrival.append(self.arrived)

    def arrived(self) -> None:
        """Messages were sent from inside the node (a bridge): every connection's timer looks
        for them now instead of at its next tick."""
        for wake in list(self._wake.values()):
            wake.set()

    def poke_all(self, but: SbLinks | None = None) -> None:
        """The namespace changed: let every connection's receivers look for messages."""
        for links in list(self.connections):
            if links is not but and not links.closed:
                links.poke()
                links.flush()

    async def handle(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, first: bytes
    ) -> None:
        loop = asyncio.get_running_loop()
        conn = Connection(self.container_id, now=loop.time(), idle_timeout=IDLE_TIMEOUT)

        def flush() -> None:
            data = conn.data_to_send()
            if data and not writer.is_closing():
                writer.write(data)

        async def durable() -> None:
            await self.rt.durable()

        links = SbLinks(
            conn,
            self.host.namespace,
            now=self.host.clock.now,
            changed=self._changed,
            durable=durable,
            flush=flush,
            claims=None if self.keys is None else Claims(self.keys),
        )
        self.connections.add(links)
        wake = self._wake[links] = asyncio.Event()
        timer = loop.create_task(self._timer(conn, links, flush, wake))
        try:
            data = first
            while not conn.closed:
                events = self._sasl(conn, conn.receive_data(data, now=loop.time()))
                if events and await links.handle(events):
                    self.poke_all(but=links)
                flush()
                if conn.closed:
                    break
                await writer.drain()
                data = await reader.read(READ_SIZE)
                if not data:
                    await links.handle(conn.receive_eof())
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timer
            links.close()
            with contextlib.suppress(Exception):
                await links.commit()
            self.connections.discard(links)
            self.poke_all()
            with contextlib.suppress(Exception):
                flush()
                await writer.drain()

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

    def _changed(self) -> None:
        self.host.changed()

    async def _timer(
        self, conn: Connection, links: SbLinks, flush: Callable[[], None], wake: asyncio.Event
    ) -> None:
        loop = asyncio.get_running_loop()
        while not conn.closed:
            deadline = conn.tick(loop.time())
            for event in conn.events():
                if isinstance(event, Closed):
                    log.info("Service Bus AMQP: connection closed: %s", event.error)
            flush()
            if conn.closed:
                break
            wait = POLL if deadline is None else max(0.0, min(POLL, deadline - loop.time()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), wait)
            wake.clear()
            links.expire_tokens()
            links.poke()
            await links.commit()
