"""The Service Bus port: AMQP, HTTPS and HTTP on one listening socket (``--servicebus-port``).

Every Service Bus SDK is given one connection string, ``Endpoint=sb://HOST:PORT;...``: its data
plane speaks AMQP to that port, and its admin client speaks HTTPS (Python) or plain HTTP (.NET
and JS with ``UseDevelopmentEmulator=true``) to the same port. So the first bytes of each
connection decide what it is:

- ``AMQP``: an AMQP 1.0 connection, handed to the AMQP handler (``amqp_handler``); without one
  the connection is closed with a log line saying so
- ``0x16`` (a TLS handshake record): TLS, then HTTP inside it
- an upper-case ASCII letter (an HTTP method): plain HTTP
- anything else, or nothing within ``SNIFF_TIMEOUT``: the connection is closed

TLS runs through ``ssl.MemoryBIO`` rather than ``start_tls``, because the bytes read to sniff
the connection are part of the ClientHello and must reach the TLS engine. HTTP is parsed by h11;
each request is answered by ``qmgr.atom.api.ManagementApi``, and a request that changed the
namespace is committed (``runtime.durable()``) before its answer. When the node has Service Bus
keys (``--servicebus-keys``), every request but ``GET /health`` needs ``Authorization:
SharedAccessSignature ...`` with a valid token for the request's URL whose key has the
``Manage`` claim, or it is answered 401 (``ClientAuthenticationError`` in the SDK) and changes
nothing. One connection failing never affects another.

The certificate is ``--tls-cert/--tls-key`` when given, else a self-signed one made once per
data directory (``servicebus-tls.pem``/``servicebus-tls.key``; in memory without a data
directory), which the SDK accepts with ``connection_verify=False``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import ssl
import tempfile
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import h11

from qmgr.atom.api import TEXT_TYPE, XML_TYPE, ManagementApi, Response
from qmgr.atom.descriptions import error as error_body
from qmgr.servicebus.sas import Right, SasError, require

if TYPE_CHECKING:
    from qmgr.node.runtime import NodeRuntime
from qmgr.security.files import write_private
from qmgr.security.pki import self_signed

log = logging.getLogger("qmgr.servicebus.port")

SNIFF_TIMEOUT = 30.0  # seconds a connection may stay silent before its first bytes
IDLE_TIMEOUT = 120.0  # seconds an HTTP connection may wait for its next bytes
MAX_BODY = 4 * 1024 * 1024
READ_SIZE = 65536
CERT_FILE = "servicebus-tls.pem"
KEY_FILE = "servicebus-tls.key"
HTTP_FIRST = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")

# the AMQP handler: reader, writer, the sniffed bytes, and why to refuse the connection (None:
# serve it)
AmqpHandler = Callable[
    [asyncio.StreamReader, asyncio.StreamWriter, bytes, str | None], Awaitable[None]
]


def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


class _Closed(Exception):
    """The peer went away (or sent what ends the connection)."""


# ---------------------------------------------------------------------- certificates


def _self_signed() -> tuple[bytes, bytes]:
    issued = self_signed(
        "qmgr Service Bus emulator", dt.datetime.now(dt.UTC), ("localhost", "127.0.0.1", "::1")
    )
    return issued.cert_pem, issued.key_pem


def server_context(
    data_dir: Path | None, cert: Path | None = None, key: Path | None = None
) -> ssl.SSLContext:
    """The TLS context of the port: the given pair, else the data directory's self-signed one
    (made on first use)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    if cert is not None and key is not None:
        context.load_cert_chain(cert, key)
        return context
    if data_dir is not None:
        cert_path, key_path = data_dir / CERT_FILE, data_dir / KEY_FILE
        if not (cert_path.exists() and key_path.exists()):
            cert_pem, key_pem = _self_signed()
            write_private(key_path, key_pem)
            write_private(cert_path, cert_pem)  # in the 0700 data directory; no link followed
        context.load_cert_chain(cert_path, key_path)
        return context
    cert_pem, key_pem = _self_signed()
    with tempfile.TemporaryDirectory() as tmp:
        cert_path, key_path = Path(tmp) / CERT_FILE, Path(tmp) / KEY_FILE
        write_private(key_path, key_pem)
        cert_path.write_bytes(cert_pem)
        context.load_cert_chain(cert_path, key_path)
    return context


# ---------------------------------------------------------------------- byte streams


class _Plain:
    """Bytes to and from the socket, the sniffed prefix first."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, first: bytes
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.pending = first

    async def recv(self) -> bytes:
        if self.pending:
            data, self.pending = self.pending, b""
            return data
        return await asyncio.wait_for(self.reader.read(READ_SIZE), IDLE_TIMEOUT)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def close(self) -> None:
        pass


class _Tls(_Plain):
    """TLS over the socket through memory BIOs (so the sniffed ClientHello bytes count)."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        first: bytes,
        context: ssl.SSLContext,
    ) -> None:
        super().__init__(reader, writer, first)
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_side=True)

    async def _flush(self) -> None:
        data = self.outgoing.read()
        if data:
            await super().send(data)

    async def _feed(self) -> None:
        data = await super().recv()
        if not data:
            self.incoming.write_eof()
            raise _Closed
        self.incoming.write(data)

    async def handshake(self) -> None:
        while True:
            try:
                self.tls.do_handshake()
                await self._flush()
                return
            except ssl.SSLWantReadError:
                await self._flush()
                await self._feed()

    async def recv(self) -> bytes:
        while True:
            try:
                return self.tls.read(READ_SIZE)
            except ssl.SSLWantReadError:
                await self._flush()
                await self._feed()
            except ssl.SSLZeroReturnError:
                return b""

    async def send(self, data: bytes) -> None:
        self.tls.write(data)
        await self._flush()

    async def close(self) -> None:
        with contextlib.suppress(ssl.SSLError, OSError, ConnectionError):
            self.tls.unwrap()
        with contextlib.suppress(OSError, ConnectionError):
            await self._flush()


# ---------------------------------------------------------------------- the port


class ServiceBusPort:
    def __init__(
        self,
        runtime: NodeRuntime,
        host: str,
        port: int,
        context: ssl.SSLContext,
        amqp_handler: AmqpHandler | None = None,
        amqp_close: Callable[[str], None] | None = None,
    ) -> None:
        """``amqp_close(why)`` closes every open AMQP connection (at ``stop``)."""
        assert runtime.servicebus is not None
        self.rt = runtime
        self.host = host
        self.port = port
        self.context = context
        self.amqp_handler = amqp_handler
        self.amqp_close = amqp_close
        host_ = runtime.servicebus
        self.api = ManagementApi(host_.namespace, host_.clock.now, runtime.config.servicebus_keys)
        self.now = host_.clock.now
        self.keys = runtime.config.servicebus_keys  # None: every request is accepted
        self.limits = runtime.config.servicebus_port_limits
        self.open = 0  # connections open on the port now
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        """Listen; returns the port (the one chosen when asked for 0)."""
        self._server = await asyncio.start_server(self._connection, self.host, self.port)
        sockets = self._server.sockets
        return int(sockets[0].getsockname()[1]) if sockets else self.port

    async def stop(self) -> None:
        """Stop listening and close the open AMQP connections, before the node closes its
        store (a connection still served then would fail its commits)."""
        if self._server is not None:
            self._server.close()  # no new connection from here on
        if self.amqp_close is not None:
            self.amqp_close("the node is stopping")
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            self._server = None

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        self.open += 1
        over = self.open > self.limits.connections
        if over:
            log.warning(
                "Service Bus port: refusing %s: %d connections open, the limit is %d "
                "(--servicebus-limit connections=N)",
                peer,
                self.open - 1,
                self.limits.connections,
            )
        try:
            first = await self._sniff(reader)
            if first.startswith(b"AMQP"):
                await self._amqp(reader, writer, first, peer, over)
            elif first[:1] == b"\x16":
                stream = _Tls(reader, writer, first, self.context)
                await asyncio.wait_for(stream.handshake(), self.limits.http_request_seconds)
                await self._http(stream, over)
                await stream.close()
            elif first[:1] and first[0] in HTTP_FIRST:
                await self._http(_Plain(reader, writer, first), over)
            elif first:
                log.info(
                    "Service Bus port: closing %s: it sent %r, not AMQP/TLS/HTTP", peer, first[:8]
                )
        except (TimeoutError, _Closed, ConnectionError, asyncio.IncompleteReadError):
            pass
        except ssl.SSLError as exc:
            log.info("Service Bus port: TLS with %s failed: %s", peer, exc)
        except Exception:
            log.exception("Service Bus port: connection from %s failed", peer)
        finally:
            self.open -= 1
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _sniff(self, reader: asyncio.StreamReader) -> bytes:
        """The first bytes: enough to tell ``AMQP`` from the rest (b"" if the peer left)."""
        data = b""
        while True:
            chunk = await asyncio.wait_for(reader.read(READ_SIZE), SNIFF_TIMEOUT)
            if not chunk:
                return b"" if len(data) < 4 and b"AMQP".startswith(data) else data
            data += chunk
            if len(data) >= 4 or not b"AMQP".startswith(data):
                return data

    async def _amqp(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        first: bytes,
        peer: object,
        over: bool,
    ) -> None:
        if self.amqp_handler is not None:
            refusal = None
            if over:
                refusal = f"the port holds at most {self.limits.connections} connections"
            await self.amqp_handler(reader, writer, first, refusal)
            return
        log.warning(
            "Service Bus port: AMQP connection from %s closed: this node does not serve AMQP yet",
            peer,
        )

    async def _http(self, stream: _Plain, over: bool = False) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=64 * 1024)
        while True:
            request, body = await self._read_request(conn, stream)
            if request is None:
                return
            if over:  # answered, then closed
                text = f"the port holds at most {self.limits.connections} connections\n"
                await self._respond(conn, stream, Response(503, TEXT_TYPE, text.encode()), request)
                return
            response = await self._answer(request, body)
            await self._respond(conn, stream, response, request)
            if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                return
            try:
                conn.start_next_cycle()
            except h11.LocalProtocolError:
                return

    async def _read_request(
        self, conn: h11.Connection, stream: _Plain
    ) -> tuple[h11.Request | None, bytes]:
        """The next request and its body (None when the connection is over). A connection may
        stay idle between requests up to ``IDLE_TIMEOUT``; once a request's first bytes came,
        the whole of it must arrive within the ``http_request_seconds`` limit (408 otherwise),
        so a client trickling bytes cannot hold a connection for ever."""
        request: h11.Request | None = None
        body = bytearray()
        loop = asyncio.get_running_loop()
        deadline: float | None = None
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                await self._bad_request(conn, stream, str(exc), exc.error_status_hint)
                return None, b""
            if event is h11.NEED_DATA:
                if deadline is None:
                    data = await stream.recv()
                    deadline = loop.time() + self.limits.http_request_seconds
                else:
                    try:
                        data = await asyncio.wait_for(
                            stream.recv(), max(0.0, deadline - loop.time())
                        )
                    except TimeoutError:
                        limit = self.limits.http_request_seconds
                        await self._bad_request(
                            conn, stream, f"request not received within {limit} s", 408
                        )
                        return None, b""
                conn.receive_data(data)
                if not data and conn.their_state is h11.IDLE:
                    return None, b""
                continue
            if isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_BODY:
                    await self._bad_request(conn, stream, "request body too large", 413)
                    return None, b""
            elif isinstance(event, h11.EndOfMessage):
                return request, bytes(body)
            elif isinstance(event, h11.ConnectionClosed):
                return None, b""

    async def _bad_request(
        self, conn: h11.Connection, stream: _Plain, detail: str, status: int
    ) -> None:
        if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        body = f"{detail}\n".encode()
        with contextlib.suppress(h11.LocalProtocolError):
            await stream.send(
                conn.send(
                    h11.Response(
                        status_code=status,
                        reason=_reason(status),
                        headers=[
                            ("Content-Type", TEXT_TYPE),
                            ("Content-Length", str(len(body))),
                            ("Connection", "close"),
                        ],
                    )
                )
                or b""
            )
            await stream.send(conn.send(h11.Data(data=body)) or b"")
            await stream.send(conn.send(h11.EndOfMessage()) or b"")

    async def _answer(self, request: h11.Request, body: bytes) -> Response:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in request.headers}
        method = request.method.decode("ascii", "replace").upper()
        target = request.target.decode("latin-1")
        host = headers.get("host", f"{self.host}:{self.port}")
        refused = self._refused(method, target, headers, host)
        if refused is not None:
            return refused
        try:
            response = self.api.handle(method, target, headers, body, host)  # atomic: no await
        except Exception:
            log.exception("Service Bus port: %s %s failed", method, target)
            return Response(500, TEXT_TYPE, b"Internal error: see the node's log\n")
        if response.changed:
            assert self.rt.servicebus is not None
            self.rt.servicebus.changed()
            await self.rt.durable()
        log.debug("%s %s -> %s", method, target, response.status)
        return response

    def _refused(
        self, method: str, target: str, headers: dict[str, str], host: str
    ) -> Response | None:
        """With keys: the 401 answer to a request without a token granting Manage on its URL."""
        path = urlsplit(target).path
        if self.keys is None or (method == "GET" and path.strip("/").lower() == "health"):
            return None
        try:
            grant = self.keys.verify(
                headers.get("authorization", ""), f"https://{host}{path}", self.now()
            )
            require(grant, Right.MANAGE)
        except SasError as exc:
            log.info("Service Bus port: %s %s refused: %s", method, path, exc)
            return Response(401, XML_TYPE, error_body(401, f"Unauthorized: {exc}"))
        return None

    async def _respond(
        self, conn: h11.Connection, stream: _Plain, response: Response, request: h11.Request
    ) -> None:
        headers = [
            ("Content-Type", response.content_type),
            ("Content-Length", str(len(response.body))),
            ("Server", "qmgr"),
        ]
        reason = _reason(response.status)
        out = conn.send(h11.Response(status_code=response.status, headers=headers, reason=reason))
        out = out or b""
        if request.method != b"HEAD":
            out += conn.send(h11.Data(data=response.body)) or b""
        out += conn.send(h11.EndOfMessage()) or b""
        await stream.send(out)
