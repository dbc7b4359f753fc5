"""The server side of an AMQP 1.0 connection, its sessions and links, as a sans-IO state machine.

In the manner of h11: the driver feeds received bytes to :meth:`Connection.receive_data` and gets
events back; the server answers through methods (:meth:`Connection.accept_sasl`,
:meth:`~Connection.attach_reply`, :meth:`~Connection.send_transfer`, :meth:`~Connection.settle`,
:meth:`~Connection.flow`, :meth:`~Connection.detach`, :meth:`~Connection.close`) that only queue
frames; :meth:`Connection.data_to_send` hands the queued bytes to the driver, and
:meth:`Connection.tick` keeps heartbeats and the idle timeout with a time the driver passes in.
There is no socket, no task and no clock read here.

Written here rather than taken from a library: Apache Qpid Proton's binding hides the transfer's
``message-format`` (Service Bus batches are ``0x80013700``), trims trailing null fields from
performatives (which crashes azure-servicebus <= 7.14) and its acceptor cannot share a port with
HTTP. The frames themselves are encoded and decoded by :mod:`qmgr.amqp.framing` and
:mod:`qmgr.amqp.performatives`; this module holds the state (OASIS AMQP 1.0 part 2: connection,
session and link endpoints, session windows, link credit, deliveries, settlement; part 5: SASL).

What is answered without asking the server: the protocol headers, SASL mechanisms (ANONYMOUS and
PLAIN), the Open (with this connection's parameters), Begin, peer-initiated End/Detach/Close,
flow ``echo`` requests and session-window top-ups. What needs the server: the SASL verdict (the
machine pauses after :class:`SaslInit` until :meth:`Connection.accept_sasl`; then call
``receive_data(b"")`` to go on with any bytes that came meanwhile), the Attach reply (so that it
can hold a session-filter attach, or refuse one), credit for the peer's senders, the deliveries to
the peer's receivers and every settlement.

Protocol errors close the connection with the AMQP error that names them (framing and decode
errors, frames out of order, channels and handles out of range, ...); errors that belong to one
link detach that link (credit exceeded, oversize message) and leave the rest serving. Events are
returned after a whole read is processed, so an event can name a link or session that a later
frame of the same read already detached or ended: calls on it then do nothing (``Link.live``),
and :attr:`Link.can_send` says whether a delivery may go out now.

A driver, in outline::

    conn = Connection("node", now=loop.time(), idle_timeout=None)
    while not conn.closed:
        data = await read()  # b"" at EOF -> conn.receive_eof()
        events = conn.receive_data(data, now=loop.time())
        while events:
            event = events.pop(0)
            if isinstance(event, SaslInit):
                conn.accept_sasl()
                events += conn.receive_data(b"")
            ...  # LinkAttached -> attach_reply (+ flow for the peer's senders), and so on
        write(conn.data_to_send())
        # and when the deadline conn.tick(now) returned comes: tick again, write, check closed
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from qmgr.amqp import performatives as p
from qmgr.amqp.framing import (
    AMQP_HEADER,
    FRAMING_ERROR,
    HEARTBEAT,
    MIN_MAX_FRAME_SIZE,
    PROTO_AMQP,
    PROTO_SASL,
    SASL_HEADER,
    Frame,
    FrameDecoder,
    FramingError,
    ProtocolHeader,
    ProtocolHeaderError,
    encode_disposition_frame,
    encode_frame,
    encode_transfer_frame,
)
from qmgr.amqp.types import Symbol

SENDER = False  # the AMQP ``role`` boolean
RECEIVER = True
SND_UNSETTLED, SND_SETTLED, SND_MIXED = 0, 1, 2
RCV_FIRST, RCV_SECOND = 0, 1

SASL_OK, SASL_AUTH, SASL_SYS = 0, 1, 2

_U32 = 0xFFFFFFFF


def _serial_diff(a: int, b: int) -> int:
    """``a - b`` in RFC-1982 serial arithmetic over 32 bits (a signed difference)."""
    d = (a - b) & _U32
    return d - (1 << 32) if d & 0x80000000 else d


class LocalProtocolError(Exception):
    """The server called a method that the protocol state does not allow (a bug in the caller)."""


# --------------------------------------------------------------------------- endpoints


class State(enum.Enum):
    EXPECT_HEADER = "expect-header"
    SASL_INIT = "sasl-init"  # mechanisms sent, waiting for sasl-init
    SASL_PENDING = "sasl-pending"  # sasl-init received, waiting for accept_sasl
    EXPECT_AMQP_HEADER = "expect-amqp-header"
    EXPECT_OPEN = "expect-open"
    OPENED = "opened"
    CLOSE_SENT = "close-sent"  # discarding until the peer's close
    CLOSED = "closed"


_HANDSHAKE = frozenset(
    {
        State.EXPECT_HEADER,
        State.SASL_INIT,
        State.SASL_PENDING,
        State.EXPECT_AMQP_HEADER,
        State.EXPECT_OPEN,
    }
)


@dataclass(eq=False)
class Delivery:
    """A delivery this server sent and the peer has not settled yet."""

    link: Link
    delivery_id: int
    tag: bytes


@dataclass(eq=False)
class Session:
    channel: int  # ours
    remote_channel: int
    handle_max: int
    remote_handle_max: int
    next_outgoing_id: int = 0
    outgoing_window: int = _U32
    next_incoming_id: int = 0
    incoming_window: int = 0
    target_incoming_window: int = 0
    remote_incoming_window: int = 0
    remote_outgoing_window: int = 0
    ending: bool = False  # End sent by us, waiting for the peer's
    mapped: bool = True  # False once ended or the connection is gone
    links: dict[int, Link] = field(default_factory=dict)  # by the peer's handle
    output_handles: dict[int, Link] = field(default_factory=dict)  # by ours
    unsettled: dict[int, Delivery] = field(default_factory=dict)  # ours, by delivery-id
    # the peer's handles of links detached on both sides (until the peer attaches them again):
    # a late frame for one is dropped, not a session error (see ``_link``)
    detached: set[int] = field(default_factory=set)
    # deliveries owed to the peer (``Connection.send_owed``) waiting for its incoming window
    backlog: deque[tuple[Link, bytes, bytes, int, bool]] = field(default_factory=deque)

    def __repr__(self) -> str:
        return f"Session(channel={self.channel}, remote_channel={self.remote_channel})"


@dataclass(eq=False)
class Link:
    """One link endpoint. ``is_sender`` is this server's role (the peer's is the opposite)."""

    session: Session
    name: str
    handle: int  # the peer's
    output_handle: int  # ours
    is_sender: bool
    source: Any
    target: Any
    properties: dict[Any, Any] | None
    snd_settle_mode: int
    rcv_settle_mode: int
    peer_max_message_size: int | None
    peer_initial_delivery_count: int | None
    attached: bool = False  # our Attach sent
    detaching: bool = False  # our Detach sent, waiting for the peer's
    max_message_size: int | None = None  # ours, for deliveries we receive
    delivery_count: int = 0
    credit: int = 0
    drain: bool = False
    available: int | None = None
    _partial: bytearray | None = None
    _partial_meta: tuple[int, bytes, int, bool] | None = None
    _oversize: bool = False  # the delivery being read went past max-message-size: dropped

    @property
    def live(self) -> bool:
        """False once the link, its session or its connection is detached, ended or closed.

        Events can name a link that later frames of the same read already detached or ended:
        calls on such a link do nothing.
        """
        return not self.detaching and self.session.mapped and not self.session.ending

    @property
    def can_send(self) -> bool:
        """True when one more delivery may be sent on this link now."""
        return (
            self.is_sender
            and self.attached
            and self.live
            and self.credit > 0
            and self.session.remote_incoming_window > 0
            and not self.session.backlog
        )

    def __repr__(self) -> str:
        role = "sender" if self.is_sender else "receiver"
        return f"Link({self.name!r}, {role}, handle={self.handle})"


# --------------------------------------------------------------------------- events


class Event:
    """Base of what :meth:`Connection.receive_data` returns."""


@dataclass(frozen=True)
class SaslInit(Event):
    mechanism: str
    initial_response: bytes | None
    hostname: str | None

    @property
    def plain_credentials(self) -> tuple[str, str] | None:
        """``(username, password)`` of a PLAIN response (RFC 4616), else None."""
        if self.mechanism != "PLAIN" or self.initial_response is None:
            return None
        parts = bytes(self.initial_response).split(b"\x00")
        if len(parts) != 3:
            return None
        return parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")


@dataclass(frozen=True)
class Opened(Event):
    container_id: str
    hostname: str | None
    max_frame_size: int
    channel_max: int
    idle_timeout: int | None  # ms
    properties: dict[Any, Any] | None


@dataclass(frozen=True)
class SessionBegun(Event):
    session: Session


@dataclass(frozen=True)
class LinkAttached(Event):
    """The peer attached a link; answer with :meth:`Connection.attach_reply` (or refuse_attach).

    ``role`` is the peer's role as its Attach says it (``SENDER``: the peer sends, we receive).
    """

    link: Link
    role: bool
    name: str
    source: Any
    target: Any
    properties: dict[Any, Any] | None
    snd_settle_mode: int
    rcv_settle_mode: int


@dataclass(frozen=True)
class TransferReceived(Event):
    """A whole delivery from the peer (multi-frame transfers already joined)."""

    link: Link
    delivery_id: int
    delivery_tag: bytes
    message_format: int
    payload: bytes
    settled: bool


@dataclass(frozen=True)
class CreditChanged(Event):
    """The peer's receiver gave credit (or asked to drain it) on a link we send on."""

    link: Link
    credit: int
    drain: bool


@dataclass(frozen=True)
class DispositionReceived(Event):
    """``role`` is the peer's (``RECEIVER``: it settles deliveries we sent, listed in
    ``deliveries``)."""

    session: Session
    role: bool
    first: int
    last: int
    settled: bool
    state: Any
    deliveries: tuple[Delivery, ...]


@dataclass(frozen=True)
class LinkDetached(Event):
    """A link is gone: by the peer (``by_peer``) or by us for a link error. ``unsettled`` are the
    deliveries we sent on it that the peer never settled."""

    link: Link
    closed: bool
    error: Any
    by_peer: bool
    unsettled: tuple[Delivery, ...] = ()


@dataclass(frozen=True)
class SessionEnded(Event):
    session: Session
    error: Any
    by_peer: bool
    links: tuple[Link, ...] = ()


@dataclass(frozen=True)
class Closed(Event):
    """The connection is over (the peer closed it, or we closed it for a protocol error)."""

    error: Any
    by_peer: bool


# --------------------------------------------------------------------------- the machine


class Connection:
    """One server-side AMQP 1.0 connection (SASL layer included)."""

    def __init__(
        self,
        container_id: str,
        *,
        now: float = 0.0,
        max_frame_size: int = 65536,
        channel_max: int = 255,
        handle_max: int = 4095,
        idle_timeout: float | None = None,
        incoming_window: int = 5000,
        max_message_size: int = 1024 * 1024,
        properties: dict[Any, Any] | None = None,
        sasl_mechanisms: tuple[str, ...] = ("ANONYMOUS", "PLAIN"),
        require_sasl: bool = False,
        close_timeout: float = 5.0,
        handshake_timeout: float | None = 30.0,
        max_links: int | None = None,
        max_partial_bytes: int | None = None,
    ) -> None:
        if max_frame_size < MIN_MAX_FRAME_SIZE:
            raise ValueError(f"max_frame_size must be at least {MIN_MAX_FRAME_SIZE}")
        self.container_id = container_id
        self.max_frame_size = max_frame_size
        self.channel_max = channel_max
        self.handle_max = handle_max
        self.idle_timeout = idle_timeout
        self.incoming_window = incoming_window
        self.max_message_size = max_message_size
        self.properties = properties
        self.sasl_mechanisms = sasl_mechanisms
        self.require_sasl = require_sasl
        self.close_timeout = close_timeout
        # budgets of what the peer may make us hold (None: no budget beyond channel-max,
        # handle-max and max-message-size): links over all sessions, and bytes of unfinished
        # multi-frame deliveries over all links; going past either closes the connection
        # with amqp:resource-limit-exceeded
        self.max_links = max_links
        self.max_partial_bytes = max_partial_bytes
        self._partial_bytes = 0  # an upper bound: recounted when it reaches the budget
        self._partial_links: set[Link] = set()

        self.state = State.EXPECT_HEADER
        self.remote_max_frame_size = MIN_MAX_FRAME_SIZE
        self.remote_idle_timeout: float | None = None  # seconds
        self.remote_container_id: str | None = None
        self.remote_hostname: str | None = None
        self.sessions: dict[int, Session] = {}  # by the peer's channel
        self._local_channels: dict[int, Session] = {}
        self._open_sent = False
        self._buffer = bytearray()
        self._decoder = FrameDecoder(max_frame_size=max_frame_size)
        self._pending: deque[ProtocolHeader | Frame | FramingError] = deque()
        self._out: list[bytes] = []
        self._events: list[Event] = []
        self._now = now
        self._last_received = now
        self._last_sent = now
        self._close_sent_at = now
        self._started_at = now
        self.handshake_timeout = handshake_timeout

    # ----------------------------------------------------------------- driver side

    @property
    def closed(self) -> bool:
        """True once the transport should be closed (after sending :meth:`data_to_send`)."""
        return self.state is State.CLOSED

    def data_to_send(self) -> bytes:
        """The bytes queued for the peer since the last call."""
        if not self._out:
            return b""
        data = b"".join(self._out)
        self._out.clear()
        return data

    def receive_data(self, data: bytes, now: float | None = None) -> list[Event]:
        """Feed received bytes (``b""`` to go on after a pause); return the events they make."""
        if now is not None:
            self._now = now
        if data:
            self._last_received = self._now
        if self.state is State.CLOSED:
            return []
        self._buffer += data
        try:
            self._process()
        except FramingError as e:
            self._fail(e.condition, e.description)
        events, self._events = self._events, []
        return events

    def receive_eof(self) -> list[Event]:
        """The peer closed the transport."""
        if self.state is not State.CLOSED:
            self._unmap_all()
            self.state = State.CLOSED
            self._events.append(Closed(error=None, by_peer=True))
        events, self._events = self._events, []
        return events

    def tick(self, now: float) -> float | None:
        """Keep heartbeats and the idle timeout; return when to call again (None: no need)."""
        self._now = now
        deadlines: list[float] = []
        if self.state is State.CLOSE_SENT:
            if now - self._close_sent_at >= self.close_timeout:
                self.state = State.CLOSED
                return None
            deadlines.append(self._close_sent_at + self.close_timeout)
        if self.state in _HANDSHAKE and self.handshake_timeout is not None:
            expires = self._started_at + self.handshake_timeout
            if now >= expires:  # half-open or stalled before open: give the socket back
                self._fail("amqp:resource-limit-exceeded", "no open within the handshake timeout")
                return None
            deadlines.append(expires)
        if self.state is not State.OPENED:
            return min(deadlines) if deadlines else None
        if self.idle_timeout:
            expires = self._last_received + self.idle_timeout
            if now >= expires:
                self._fail("amqp:resource-limit-exceeded", "local-idle-timeout expired")
                return None
            deadlines.append(expires)
        if self.remote_idle_timeout:
            due = self._last_sent + self.remote_idle_timeout / 2
            if now >= due:
                self._write(HEARTBEAT)
                due = now + self.remote_idle_timeout / 2
            deadlines.append(due)
        return min(deadlines) if deadlines else None

    def events(self) -> list[Event]:
        """Events made outside :meth:`receive_data`: a refused SASL verdict, a timeout in
        :meth:`tick` (each a :class:`Closed`)."""
        events, self._events = self._events, []
        return events

    # ----------------------------------------------------------------- server side

    def accept_sasl(self, ok: bool = True, code: int | None = None) -> None:
        """Answer the :class:`SaslInit`: outcome ``ok`` (code 0) or ``auth`` (code 1, then close)."""
        if self.state is not State.SASL_PENDING:
            raise LocalProtocolError(f"no SASL exchange pending (state {self.state.value})")
        outcome = SASL_OK if ok else (code if code is not None else SASL_AUTH)
        self._send_sasl(p.SaslOutcome(code=outcome, additional_data=None))
        if outcome == SASL_OK:
            self.state = State.EXPECT_AMQP_HEADER
        else:
            self.state = State.CLOSED
            self._events.append(
                Closed(
                    error=p.Error(
                        condition="amqp:unauthorized-access",
                        description="SASL authentication failed",
                        info=None,
                    ),
                    by_peer=False,
                )
            )

    def attach_reply(
        self,
        link: Link,
        *,
        source: Any = ...,
        target: Any = ...,
        properties: dict[Any, Any] | None = None,
        max_message_size: int | None = None,
        initial_delivery_count: int = 0,
        snd_settle_mode: int | None = None,
        rcv_settle_mode: int | None = None,
        offered_capabilities: Any = None,
        desired_capabilities: Any = None,
    ) -> None:
        """Send our Attach for a link the peer attached; source and target echo the peer's unless
        given. ``max_message_size`` is what we accept on our receivers (and advertise)."""
        if not link.live:
            return
        if link.attached:
            raise LocalProtocolError(f"{link!r} already attached")
        if max_message_size is None:
            max_message_size = self.max_message_size
        link.max_message_size = max_message_size or None
        link.attached = True
        if link.is_sender:
            link.delivery_count = initial_delivery_count
        self._send(
            link.session,
            p.Attach(
                name=link.name,
                handle=link.output_handle,
                role=RECEIVER if not link.is_sender else SENDER,
                snd_settle_mode=link.snd_settle_mode
                if snd_settle_mode is None
                else snd_settle_mode,
                rcv_settle_mode=link.rcv_settle_mode
                if rcv_settle_mode is None
                else rcv_settle_mode,
                source=link.source if source is ... else source,
                target=link.target if target is ... else target,
                unsettled=None,
                incomplete_unsettled=False,
                initial_delivery_count=initial_delivery_count if link.is_sender else None,
                max_message_size=max_message_size,
                offered_capabilities=offered_capabilities,
                desired_capabilities=desired_capabilities,
                properties=properties,
            ),
        )

    def refuse_attach(
        self,
        link: Link,
        error: Any,
        *,
        source: Any = ...,
        target: Any = ...,
        properties: Any = None,
    ) -> None:
        """Attach then detach at once with ``error`` (how Service Bus refuses a link)."""
        if not link.attached:
            self.attach_reply(link, source=source, target=target, properties=properties)
        self.detach(link, error)

    def flow(self, link: Link, credit: int | None = None, *, echo: bool = False) -> None:
        """Send this link's flow state.

        On a link we receive on, ``credit`` is the new credit granted to the peer's sender. On a
        link we send on, this reports our delivery-count; when the peer asked to drain, the
        credit left is used up first (the drain answer, sent even when nothing was delivered).
        """
        if not link.live:
            return
        if link.is_sender:
            if link.drain and link.credit > 0:
                link.delivery_count = (link.delivery_count + link.credit) & _U32
                link.credit = 0
        elif credit is not None:
            if credit < 0:
                raise LocalProtocolError("credit must not be negative")
            link.credit = credit
        self._send_flow(link.session, link, echo=echo)

    def send_transfer(
        self,
        link: Link,
        tag: bytes,
        payload: bytes,
        *,
        message_format: int = 0,
        settled: bool = False,
    ) -> int:
        """Send one delivery on a link we send on, split to the peer's max frame size; uses one
        credit. Returns its delivery-id (needed to match the peer's disposition)."""
        if not link.can_send or link.session.backlog:
            raise LocalProtocolError(f"cannot send on {link!r} now (credit {link.credit})")
        self._check_size(link, payload)
        link.delivery_count = (link.delivery_count + 1) & _U32
        link.credit -= 1
        return self._transfer_out(link, bytes(tag), payload, message_format, settled)

    def send_owed(
        self,
        link: Link,
        tag: bytes,
        payload: bytes,
        *,
        message_format: int = 0,
        settled: bool = False,
    ) -> None:
        """Send a delivery the peer is owed whatever its link credit: the answer to a request
        it made on a request/response link pair (``$management``, ``$cbs``), or a message
        already taken for it (receive-and-delete, removed before it goes out).

        Clients grant a reply link credit once and may never top it up (azure-servicebus grants
        10,000), yet expect every request answered for the life of the connection; the request
        itself came within the credit we gave, so what is owed stays bounded by what the peer
        asked for. The session window still applies: while the peer's incoming window is shut
        the delivery waits, in order, behind the others owed on its session, and goes out when
        the peer's flow opens the window (a link gone by then drops it)."""
        if not (link.is_sender and link.attached and link.live):
            raise LocalProtocolError(f"cannot send on {link!r}: not attached")
        self._check_size(link, payload)
        link.delivery_count = (link.delivery_count + 1) & _U32
        link.credit = max(0, link.credit - 1)
        session = link.session
        if session.backlog or session.remote_incoming_window <= 0:
            session.backlog.append((link, bytes(tag), payload, message_format, settled))
            return
        self._transfer_out(link, bytes(tag), payload, message_format, settled)

    def _check_size(self, link: Link, payload: bytes) -> None:
        if link.peer_max_message_size and len(payload) > link.peer_max_message_size:
            raise LocalProtocolError(
                f"message of {len(payload)} bytes exceeds the peer's max-message-size "
                f"{link.peer_max_message_size}"
            )

    def _send_backlog(self, session: Session) -> None:
        backlog = session.backlog
        while backlog and session.remote_incoming_window > 0:
            link, tag, payload, message_format, settled = backlog.popleft()
            if link.live:
                self._transfer_out(link, tag, payload, message_format, settled)

    def _transfer_out(
        self, link: Link, tag: bytes, payload: bytes, message_format: int, settled: bool
    ) -> int:
        session = link.session
        delivery_id = session.next_outgoing_id

        def frame(part: bytes, more: bool) -> bytes:
            return encode_transfer_frame(
                session.channel,
                link.output_handle,
                delivery_id,
                tag,
                part,
                message_format=message_format,
                settled=settled,
                more=more,
            )

        whole = frame(payload, False)
        frames = [whole]
        if len(whole) > self.remote_max_frame_size:  # split: every part but the last has more
            room = self.remote_max_frame_size - len(frame(b"", True))
            if room <= 0:
                raise LocalProtocolError("the peer's max-frame-size leaves no room for a payload")
            view = memoryview(payload)
            frames = [
                frame(bytes(view[i : i + room]), True) for i in range(0, len(view) - room, room)
            ]
            rest = len(frames) * room
            frames.append(frame(bytes(view[rest:]), False))
        session.next_outgoing_id = (delivery_id + 1) & _U32
        session.remote_incoming_window -= 1
        if not settled:
            session.unsettled[delivery_id] = Delivery(link, delivery_id, tag)
        for f in frames:
            self._write(f)
        return delivery_id

    def settle(
        self, link: Link, delivery_id: int, state: Any = None, *, settled: bool = True
    ) -> None:
        """Disposition for one delivery on ``link``: accept the peer's transfer (on a link we
        receive on) or settle/echo the outcome of one we sent."""
        self.disposition(
            link.session,
            role=SENDER if link.is_sender else RECEIVER,
            first=delivery_id,
            last=delivery_id,
            settled=settled,
            state=state,
        )

    def disposition(
        self,
        session: Session,
        *,
        role: bool,
        first: int,
        last: int | None = None,
        settled: bool = True,
        state: Any = None,
        batchable: bool = False,
    ) -> None:
        """A raw disposition; ``role`` is ours (``SENDER`` for deliveries we sent)."""
        if not session.mapped or session.ending:
            return
        last = first if last is None else last
        if settled and role is SENDER:
            self._take_unsettled(session, first, last)
        self._write(
            encode_disposition_frame(session.channel, role, first, last, settled, state, batchable)
        )

    def detach(self, link: Link, error: Any = None, *, closed: bool = True) -> None:
        """Detach a link (with ``error`` for a link error); the peer's reply frees it."""
        if not link.live or link.session.links.get(link.handle) is not link:
            return
        if not link.attached:  # a detach always follows an attach
            link.attached = True
            self._attach_reply_bare(link)
        link.detaching = True
        self._send(link.session, p.Detach(handle=link.output_handle, closed=closed, error=error))

    def end(self, session: Session, error: Any = None) -> None:
        """End a session (with ``error`` for a session error); the peer's reply frees it."""
        if session.ending or not session.mapped:
            return
        session.ending = True
        self._send(session, p.End(error=error))

    def close(self, error: Any = None) -> None:
        """Close the connection; :attr:`closed` turns true at the peer's reply (or tick timeout)."""
        if self.state in (State.CLOSE_SENT, State.CLOSED):
            return
        if self.state is not State.OPENED and self.state is not State.EXPECT_OPEN:
            self.state = State.CLOSED
            return
        if not self._open_sent:
            self._send_open()
        self._write(encode_frame(0, p.Close(error=error)))
        self._unmap_all()
        self.state = State.CLOSE_SENT
        self._close_sent_at = self._now

    # ----------------------------------------------------------------- internals

    def _write(self, data: bytes) -> None:
        self._out.append(data)
        self._last_sent = self._now

    def _send(self, session: Session, performative: Any, payload: bytes = b"") -> None:
        self._write(encode_frame(session.channel, performative, payload))

    def _send_sasl(self, performative: Any) -> None:
        self._write(encode_frame(0, performative, sasl=True))

    def _send_open(self) -> None:
        self._open_sent = True
        self._write(
            encode_frame(
                0,
                p.Open(
                    container_id=self.container_id,
                    hostname=None,
                    max_frame_size=self.max_frame_size,
                    channel_max=self.channel_max,
                    idle_time_out=int(self.idle_timeout * 1000) if self.idle_timeout else None,
                    outgoing_locales=None,
                    incoming_locales=None,
                    offered_capabilities=None,
                    desired_capabilities=None,
                    properties=self.properties,
                ),
            )
        )

    def _send_flow(self, session: Session, link: Link | None, *, echo: bool = False) -> None:
        self._send(
            session,
            p.Flow(
                next_incoming_id=session.next_incoming_id,
                incoming_window=session.incoming_window,
                next_outgoing_id=session.next_outgoing_id,
                outgoing_window=session.outgoing_window,
                handle=None if link is None else link.output_handle,
                delivery_count=None if link is None else link.delivery_count,
                link_credit=None if link is None else link.credit,
                available=None if link is None else link.available,
                drain=False if link is None else link.drain,
                echo=echo,
                properties=None,
            ),
        )

    def _fail(self, condition: str, description: str) -> None:
        """Close the connection for a protocol error and stop reading."""
        error = p.Error(condition=condition, description=description, info=None)
        if self.state in (State.OPENED, State.EXPECT_OPEN):
            if not self._open_sent:
                self._send_open()
            self._write(encode_frame(0, p.Close(error=error)))
        self._unmap_all()
        self.state = State.CLOSED
        self._buffer.clear()
        self._pending.clear()
        self._events.append(Closed(error=error, by_peer=False))

    def _unmap_all(self) -> None:
        for session in self.sessions.values():
            session.mapped = False
        self.sessions.clear()
        self._local_channels.clear()

    def _process(self) -> None:
        if self._buffer:
            data = bytes(self._buffer)
            self._buffer.clear()
            try:
                self._pending.extend(self._decoder.feed(data))
            except FramingError as e:  # handled after what is already pending
                self._pending.append(e)
        while self._pending and self.state not in (State.CLOSED, State.SASL_PENDING):
            item = self._pending.popleft()
            if isinstance(item, ProtocolHeaderError):
                self._header_mismatch()
            elif isinstance(item, FramingError):
                raise item
            elif isinstance(item, ProtocolHeader):
                self._on_header(item)
            else:
                self._on_frame(item)

    def _on_header(self, header: ProtocolHeader) -> None:
        if self.state is State.EXPECT_HEADER and header.protocol_id == PROTO_SASL:
            self._write(SASL_HEADER)
            self._send_sasl(
                p.SaslMechanisms(sasl_server_mechanisms=[Symbol(m) for m in self.sasl_mechanisms])
            )
            self.state = State.SASL_INIT
        elif header.protocol_id == PROTO_AMQP and (
            self.state is State.EXPECT_AMQP_HEADER
            or (self.state is State.EXPECT_HEADER and not self.require_sasl)
        ):
            self._write(AMQP_HEADER)
            self.state = State.EXPECT_OPEN
        elif self.state in (State.EXPECT_HEADER, State.EXPECT_AMQP_HEADER):
            self._header_mismatch()
        else:
            raise FramingError(FRAMING_ERROR, "protocol header out of place")

    def _header_mismatch(self) -> None:
        """Answer a header we do not speak with the one we do, then close (part 2, 2.2)."""
        want_sasl = self.state is State.EXPECT_HEADER and (
            self.require_sasl or bool(self.sasl_mechanisms)
        )
        self._write(SASL_HEADER if want_sasl else AMQP_HEADER)
        self.state = State.CLOSED
        self._pending.clear()
        self._events.append(
            Closed(
                error=p.Error(
                    condition=FRAMING_ERROR, description="protocol header mismatch", info=None
                ),
                by_peer=False,
            )
        )

    # ----------------------------------------------------------------- frames

    def _on_frame(self, frame: Frame) -> None:
        perf = frame.performative
        if self.state is State.SASL_INIT:
            if not isinstance(perf, p.SaslInit):
                raise FramingError(FRAMING_ERROR, "expected sasl-init")
            mech = str(perf.mechanism)
            if mech not in self.sasl_mechanisms:
                self._send_sasl(p.SaslOutcome(code=SASL_AUTH, additional_data=None))
                self.state = State.CLOSED
                self._events.append(
                    Closed(
                        error=p.Error(
                            condition="amqp:unauthorized-access",
                            description=f"SASL mechanism {mech} not offered",
                            info=None,
                        ),
                        by_peer=False,
                    )
                )
                return
            self.state = State.SASL_PENDING
            self._events.append(
                SaslInit(
                    mechanism=mech,
                    initial_response=perf.initial_response,
                    hostname=perf.hostname,
                )
            )
            return
        if perf is None:  # heartbeat
            return
        if getattr(frame, "sasl", False) or isinstance(
            perf, (p.SaslInit, p.SaslMechanisms, p.SaslOutcome, p.SaslChallenge, p.SaslResponse)
        ):
            raise FramingError(FRAMING_ERROR, "SASL frame after SASL")
        if self.state is State.CLOSE_SENT:
            if isinstance(perf, p.Close):
                self.state = State.CLOSED
            return
        if self.state is State.EXPECT_OPEN:
            if not isinstance(perf, p.Open):
                raise FramingError("amqp:not-allowed", f"expected open, got {type(perf).__name__}")
            self._on_open(perf)
            return
        handler = _HANDLERS.get(type(perf))
        if handler is None:
            raise FramingError("amqp:not-allowed", f"unexpected {type(perf).__name__}")
        handler(self, frame.channel, perf, frame.payload)

    def _on_open(self, perf: Any) -> None:
        if perf.container_id is None:
            raise FramingError("amqp:invalid-field", "open without container-id")
        self.remote_container_id = perf.container_id
        self.remote_hostname = perf.hostname
        remote_max = perf.max_frame_size if perf.max_frame_size is not None else _U32
        if remote_max < MIN_MAX_FRAME_SIZE:
            raise FramingError(
                "amqp:invalid-field", f"max-frame-size {remote_max} below {MIN_MAX_FRAME_SIZE}"
            )
        self.remote_max_frame_size = min(remote_max, _U32)
        channel_max = perf.channel_max if perf.channel_max is not None else 65535
        self.channel_max = min(self.channel_max, channel_max)
        self.remote_idle_timeout = perf.idle_time_out / 1000 if perf.idle_time_out else None
        self._send_open()
        self.state = State.OPENED
        self._events.append(
            Opened(
                container_id=perf.container_id,
                hostname=perf.hostname,
                max_frame_size=self.remote_max_frame_size,
                channel_max=channel_max,
                idle_timeout=perf.idle_time_out,
                properties=perf.properties,
            )
        )

    def _session(self, channel: int) -> Session | None:
        session = self.sessions.get(channel)
        if session is None:
            raise FramingError("amqp:not-allowed", f"no session on channel {channel}")
        if session.ending:  # discarding until the peer's End
            return None
        return session

    def _on_open_again(self, channel: int, perf: Any, payload: bytes) -> None:
        raise FramingError("amqp:not-allowed", "open received twice")

    def _on_begin(self, channel: int, perf: Any, payload: bytes) -> None:
        if channel > self.channel_max:
            raise FramingError(
                FRAMING_ERROR, f"channel {channel} above channel-max {self.channel_max}"
            )
        if perf.remote_channel is not None:
            raise FramingError("amqp:not-allowed", "begin answering a session we never began")
        if channel in self.sessions:
            raise FramingError("amqp:not-allowed", f"channel {channel} already in use")
        local = channel if channel not in self._local_channels else self._free_channel()
        handle_max = perf.handle_max if perf.handle_max is not None else _U32
        session = Session(
            channel=local,
            remote_channel=channel,
            handle_max=self.handle_max,
            remote_handle_max=handle_max,
            next_incoming_id=perf.next_outgoing_id,
            incoming_window=self.incoming_window,
            target_incoming_window=self.incoming_window,
            remote_incoming_window=perf.incoming_window,
            remote_outgoing_window=perf.outgoing_window,
        )
        self.sessions[channel] = session
        self._local_channels[local] = session
        self._send(
            session,
            p.Begin(
                remote_channel=channel,
                next_outgoing_id=session.next_outgoing_id,
                incoming_window=session.incoming_window,
                outgoing_window=session.outgoing_window,
                handle_max=self.handle_max,
                offered_capabilities=None,
                desired_capabilities=None,
                properties=None,
            ),
        )
        self._events.append(SessionBegun(session))

    def _free_channel(self) -> int:
        for c in range(self.channel_max + 1):
            if c not in self._local_channels:
                return c
        raise FramingError("amqp:resource-limit-exceeded", "no free channel")

    def _on_attach(self, channel: int, perf: Any, payload: bytes) -> None:
        session = self._session(channel)
        if session is None:
            return
        handle = perf.handle
        if handle > session.handle_max:
            raise FramingError(
                FRAMING_ERROR, f"handle {handle} above handle-max {session.handle_max}"
            )
        if handle in session.links:
            self._end_with(session, "amqp:session:handle-in-use", f"handle {handle} in use")
            return
        if perf.role is None or perf.name is None:
            raise FramingError("amqp:invalid-field", "attach without name or role")
        if self.max_links is not None:
            links = sum(len(s.links) for s in self.sessions.values())
            if links >= self.max_links:
                raise FramingError(
                    "amqp:resource-limit-exceeded",
                    f"a connection may hold at most {self.max_links} links",
                )
        output = handle if handle not in session.output_handles else self._free_handle(session)
        link = Link(
            session=session,
            name=perf.name,
            handle=handle,
            output_handle=output,
            is_sender=bool(perf.role) is RECEIVER,
            source=perf.source,
            target=perf.target,
            properties=perf.properties,
            snd_settle_mode=perf.snd_settle_mode if perf.snd_settle_mode is not None else SND_MIXED,
            rcv_settle_mode=perf.rcv_settle_mode if perf.rcv_settle_mode is not None else RCV_FIRST,
            peer_max_message_size=perf.max_message_size or None,
            peer_initial_delivery_count=perf.initial_delivery_count,
        )
        if not link.is_sender:
            link.delivery_count = perf.initial_delivery_count or 0
        session.links[handle] = link
        session.detached.discard(handle)
        session.output_handles[output] = link
        self._events.append(
            LinkAttached(
                link=link,
                role=bool(perf.role),
                name=perf.name,
                source=perf.source,
                target=perf.target,
                properties=perf.properties,
                snd_settle_mode=link.snd_settle_mode,
                rcv_settle_mode=link.rcv_settle_mode,
            )
        )

    def _free_handle(self, session: Session) -> int:
        for h in range(session.handle_max + 1):
            if h not in session.output_handles:
                return h
        raise FramingError("amqp:resource-limit-exceeded", "no free handle")

    def _link(self, session: Session, handle: int | None) -> Link | None:
        if handle is None:
            raise FramingError("amqp:invalid-field", "frame without a handle")
        link = session.links.get(handle)
        if link is None and handle not in session.detached:
            # a handle never attached; one detached already is dropped quietly: azure-servicebus
            # retries a receive on a link refused with com.microsoft:timeout (no session
            # available) and sends a flow for it after the detach
            self._end_with(
                session, "amqp:session:unattached-handle", f"handle {handle} is not attached"
            )
        return link

    def _on_flow(self, channel: int, perf: Any, payload: bytes) -> None:
        session = self._session(channel)
        if session is None:
            return
        remote_next_incoming = perf.next_incoming_id if perf.next_incoming_id is not None else 0
        was_blocked = session.remote_incoming_window <= 0
        session.remote_incoming_window = _serial_diff(
            remote_next_incoming + perf.incoming_window, session.next_outgoing_id
        )
        session.remote_outgoing_window = perf.outgoing_window
        self._send_backlog(session)
        link = None if perf.handle is None else self._link(session, perf.handle)
        if was_blocked and session.remote_incoming_window > 0 and not session.ending:
            # the window opened (whichever flow carried it): the session's other senders with
            # credit may send again (the flow's own link is told below)
            for other in session.links.values():
                if other is not link and other.is_sender and other.credit > 0:
                    self._events.append(CreditChanged(other, other.credit, other.drain))
        if perf.handle is None:
            if perf.echo:
                self._send_flow(session, None)
            return
        if link is None or link.detaching:
            return
        if link.is_sender:
            count = perf.delivery_count
            if count is None:
                count = link.delivery_count if link.attached else 0
            credit = perf.link_credit or 0
            link.credit = max(0, _serial_diff(count + credit, link.delivery_count))
            link.drain = bool(perf.drain)
            self._events.append(CreditChanged(link, link.credit, link.drain))
        else:
            if perf.delivery_count is not None:
                limit = link.delivery_count + link.credit
                link.delivery_count = perf.delivery_count
                link.credit = max(0, _serial_diff(limit, perf.delivery_count))
            link.available = perf.available
        if perf.echo:
            self._send_flow(session, link)

    def _on_transfer(self, channel: int, perf: Any, payload: bytes) -> None:
        session = self._session(channel)
        if session is None:
            return
        link = self._link(session, perf.handle)
        if link is None or link.detaching:
            return
        if link.is_sender:
            self._detach_with(link, "amqp:not-allowed", "transfer on a link this server sends on")
            return
        if link._partial is None:
            if perf.delivery_id is None or perf.delivery_tag is None:
                raise FramingError(
                    "amqp:invalid-field", "first transfer of a delivery without delivery-id or tag"
                )
            session.next_incoming_id = (perf.delivery_id + 1) & _U32
            session.incoming_window -= 1
            session.remote_outgoing_window -= 1
            if link.credit <= 0:
                self._detach_with(
                    link, "amqp:link:transfer-limit-exceeded", "transfer without credit"
                )
                return
            link.credit -= 1
            link.delivery_count = (link.delivery_count + 1) & _U32
            link._partial = bytearray()
            link._partial_meta = (
                perf.delivery_id,
                bytes(perf.delivery_tag),
                perf.message_format or 0,
                bool(perf.settled),
            )
        elif (
            perf.delivery_id is not None
            and link._partial_meta is not None
            and perf.delivery_id != link._partial_meta[0]
        ):
            raise FramingError("amqp:invalid-field", "delivery-id changed inside a delivery")
        if session.incoming_window < session.target_incoming_window // 2:
            session.incoming_window = session.target_incoming_window
            self._send_flow(session, None)
        if perf.aborted:
            self._drop_partial(link)
            return
        if not link._oversize:
            if perf.more or link._partial:
                self._hold_partial(link, len(payload))
            link._partial += payload
            if link.max_message_size and len(link._partial) > link.max_message_size:
                # read to its end and dropped, then rejected: the sender keeps its link
                link._oversize = True
                if link in self._partial_links:
                    self._partial_bytes -= len(link._partial)
                link._partial = bytearray()
        if perf.more:
            return
        assert link._partial_meta is not None
        delivery_id, tag, message_format, settled = link._partial_meta
        data = bytes(link._partial)
        oversize = link._oversize
        self._drop_partial(link)
        if oversize:
            if not (settled or perf.settled):
                error = p.Error(
                    condition="amqp:link:message-size-exceeded",
                    description=f"message larger than max-message-size {link.max_message_size}",
                    info=None,
                )
                self.settle(link, delivery_id, p.Rejected(error=error))
            return
        self._events.append(
            TransferReceived(
                link=link,
                delivery_id=delivery_id,
                delivery_tag=tag,
                message_format=message_format,
                payload=data,
                settled=settled or bool(perf.settled),
            )
        )

    def _hold_partial(self, link: Link, size: int) -> None:
        """Count ``size`` more bytes of an unfinished delivery against the connection's
        budget (links gone since are recounted out only when the budget is reached)."""
        self._partial_links.add(link)
        self._partial_bytes += size
        budget = self.max_partial_bytes
        if budget is None or self._partial_bytes <= budget:
            return
        for held in list(self._partial_links):
            if not held.live or held._partial is None:
                self._partial_links.discard(held)
        self._partial_bytes = size + sum(len(held._partial or b"") for held in self._partial_links)
        if self._partial_bytes > budget:
            raise FramingError(
                "amqp:resource-limit-exceeded",
                f"unfinished deliveries of a connection may hold at most {budget} bytes",
            )

    def _drop_partial(self, link: Link) -> None:
        if link in self._partial_links:
            self._partial_links.discard(link)
            self._partial_bytes -= len(link._partial or b"")
        link._partial = link._partial_meta = None
        link._oversize = False

    def _on_disposition(self, channel: int, perf: Any, payload: bytes) -> None:
        session = self._session(channel)
        if session is None:
            return
        first = perf.first
        last = perf.last if perf.last is not None else first
        deliveries: tuple[Delivery, ...] = ()
        if bool(perf.role) is RECEIVER:
            if perf.settled:
                deliveries = tuple(self._take_unsettled(session, first, last))
            else:
                deliveries = tuple(self._find_unsettled(session, first, last))
        self._events.append(
            DispositionReceived(
                session=session,
                role=bool(perf.role),
                first=first,
                last=last,
                settled=bool(perf.settled),
                state=perf.state,
                deliveries=deliveries,
            )
        )

    def _find_unsettled(self, session: Session, first: int, last: int) -> list[Delivery]:
        span = _serial_diff(last, first)
        if span < 0:
            raise FramingError("amqp:invalid-field", f"disposition range {first}..{last}")
        if span < len(session.unsettled):
            found = (session.unsettled.get((first + i) & _U32) for i in range(span + 1))
            return [d for d in found if d is not None]
        return [d for i, d in session.unsettled.items() if 0 <= _serial_diff(i, first) <= span]

    def _take_unsettled(self, session: Session, first: int, last: int) -> list[Delivery]:
        found = self._find_unsettled(session, first, last)
        for d in found:
            del session.unsettled[d.delivery_id]
        return found

    def _on_detach(self, channel: int, perf: Any, payload: bytes) -> None:
        session = self._session(channel)
        if session is None:
            return
        link = self._link(session, perf.handle)
        if link is None:
            return
        del session.links[link.handle]
        session.detached.add(link.handle)
        session.output_handles.pop(link.output_handle, None)
        unsettled = tuple(d for d in session.unsettled.values() if d.link is link)
        for d in unsettled:
            del session.unsettled[d.delivery_id]
        if link.detaching:  # the reply to ours
            return
        link.detaching = True
        if not link.attached:  # detached before we answered: attach so the detach pairs up
            link.attached = True
            self._attach_reply_bare(link)
        self._send(
            session, p.Detach(handle=link.output_handle, closed=bool(perf.closed), error=None)
        )
        self._events.append(
            LinkDetached(
                link=link,
                closed=bool(perf.closed),
                error=perf.error,
                by_peer=True,
                unsettled=unsettled,
            )
        )

    def _attach_reply_bare(self, link: Link) -> None:
        self._send(
            link.session,
            p.Attach(
                name=link.name,
                handle=link.output_handle,
                role=SENDER if link.is_sender else RECEIVER,
                snd_settle_mode=link.snd_settle_mode,
                rcv_settle_mode=link.rcv_settle_mode,
                source=None,
                target=None,
                unsettled=None,
                incomplete_unsettled=False,
                initial_delivery_count=0 if link.is_sender else None,
                max_message_size=None,
                offered_capabilities=None,
                desired_capabilities=None,
                properties=None,
            ),
        )

    def _detach_with(self, link: Link, condition: str, description: str) -> None:
        error = p.Error(condition=condition, description=description, info=None)
        self.detach(link, error)
        self._events.append(LinkDetached(link=link, closed=True, error=error, by_peer=False))

    def _on_end(self, channel: int, perf: Any, payload: bytes) -> None:
        session = self.sessions.get(channel)
        if session is None:
            raise FramingError("amqp:not-allowed", f"no session on channel {channel}")
        del self.sessions[channel]
        del self._local_channels[session.channel]
        session.mapped = False
        links = tuple(session.links.values())
        if session.ending:  # the reply to ours
            return
        self._send(session, p.End(error=None))
        self._events.append(
            SessionEnded(session=session, error=perf.error, by_peer=True, links=links)
        )

    def _end_with(self, session: Session, condition: str, description: str) -> None:
        error = p.Error(condition=condition, description=description, info=None)
        self.end(session, error)
        self._events.append(
            SessionEnded(
                session=session, error=error, by_peer=False, links=tuple(session.links.values())
            )
        )

    def _on_close(self, channel: int, perf: Any, payload: bytes) -> None:
        self._write(encode_frame(0, p.Close(error=None)))
        self._unmap_all()
        self.state = State.CLOSED
        self._events.append(Closed(error=perf.error, by_peer=True))


_HANDLERS: dict[type, Any] = {
    p.Open: Connection._on_open_again,
    p.Begin: Connection._on_begin,
    p.Attach: Connection._on_attach,
    p.Flow: Connection._on_flow,
    p.Transfer: Connection._on_transfer,
    p.Disposition: Connection._on_disposition,
    p.Detach: Connection._on_detach,
    p.End: Connection._on_end,
    p.Close: Connection._on_close,
}
