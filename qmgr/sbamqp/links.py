"""Service Bus over one AMQP connection: what the links of the real SDKs mean to the namespace.

The protocol is :class:`qmgr.amqp.connection.Connection` (sans-IO); the asyncio driver
(:mod:`qmgr.node.amqp_server`) feeds it bytes and hands its events here. This module gives them
their Service Bus meaning (reference ``docs/servicebus-amqp.md`` §B–G). Like the connection it
does no I/O and reads no clock: the driver supplies the time (``now``), the timer
(``call_later``, for a session receiver's wait), the commit (``when_durable``) and the writes
(``flush``).

- ``$cbs``: a link pair; a ``put-token`` is answered with ``status-code`` 202 on the ``$cbs``
  receiver link, ``correlation-id`` = the request's message-id. Without keys every token is
  accepted; with keys (``claims``, :mod:`qmgr.servicebus.sas`) a token that is malformed, signed
  with an unknown or wrong key, expired or out of scope is answered 401 (the SDK raises its
  authentication error), and every other link needs a token put for its entity: a sender the
  ``Send`` claim, a receiver ``Listen``, ``$management`` the claim of each operation (rule
  operations ``Manage``); a link without one is attached and detached with
  ``amqp:unauthorized-access``, as is a link whose token expired without being renewed.
- ``<entity>/$management``: a link pair; each request goes to
  :func:`qmgr.sbamqp.management.respond` and its answer back on the client's receiver link whose
  address is the request's ``reply-to``.
- sender links (the client sends): each transfer (a ``0x80013700`` batch split into its inner
  messages) goes to ``Namespace.send`` (or ``schedule``); ``accepted`` is sent only after the
  change is durable; a refused send is ``rejected`` with the condition the SDK maps to its
  exception class.
- receiver links (the client receives): messages go out as credit allows. Peek-lock: the lock
  token is the delivery tag (a .NET Guid, ``bytes_le``) and ``x-opt-locked-until`` is set;
  receive-and-delete: sent pre-settled, after the removal is durable. Dispositions complete,
  abandon, defer, dead-letter or release, and are echoed settled with the same outcome (a
  ``rejected`` with ``com.microsoft:message-lock-lost`` when the lock was lost). A drain is always
  answered; what a link had not settled when it went is released.
- session receivers: the source filter ``com.microsoft:session-filter`` names a session or asks
  for the next available one; the Attach reply puts the granted id in the filter and
  ``com.microsoft:locked-until-utc`` (.NET ticks) in the link properties; when no session comes
  within the link's ``com.microsoft:timeout`` the link is attached and detached with
  ``com.microsoft:timeout``.

The answers that acknowledge a send, a receive-and-delete or a settlement wait for the commit
(``when_durable``: the answers of one batch of events share one commit, and the connection goes
on reading meanwhile; answers leave in the order they were made), so nothing acknowledged is
lost and a message whose complete was echoed never comes back after a ``kill -9``. Sends of every
link and connection that arrive while a commit is being written share the next one (see
:mod:`qmgr.node.committer`). A commit that fails acknowledges nothing it held: its sends are
``rejected`` (``amqp:internal-error``, with the store's error) and the connection is closed, as
the node stops. A change that
may make messages available (a send, an abandon, a release, a dead-letter, a link gone with
locks, a ``$management`` change) is followed, once durable, by ``changed()``: the host tells every
connection's waiting receivers (:meth:`SbLinks.wake`); a commit that only carries completes or
receive-and-delete removals tells nobody. A peek-lock delivery calls ``deadline_moved()`` so the
host's timer knows when the lock expires. Nothing polls: a next-available session receiver
waits until a session is released or sent to, or its ``com.microsoft:timeout`` passes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from qmgr.amqp import performatives as p
from qmgr.amqp.connection import (
    RECEIVER,
    SND_SETTLED,
    Connection,
    CreditChanged,
    DispositionReceived,
    Event,
    Link,
    LinkAttached,
    LinkDetached,
    SessionEnded,
    TransferReceived,
)
from qmgr.amqp.message import Message, Properties, decode_message, encode_message
from qmgr.amqp.types import DecodeError, Described, Int, Symbol
from qmgr.sbamqp import management
from qmgr.sbamqp.conditions import (
    DECODE_ERROR,
    INTERNAL_ERROR,
    NOT_ALLOWED,
    RESOURCE_LIMIT_EXCEEDED,
    TIMEOUT,
    UNAUTHORIZED,
    error_for,
)
from qmgr.sbamqp.message import BATCH_FORMAT, dotnet_ticks, split_batch, to_amqp, to_sb_message
from qmgr.servicebus.errors import Code, ServiceBusError
from qmgr.servicebus.namespace import Namespace, ReceiveMode, SessionLock
from qmgr.servicebus.sas import Claims, Right, SasError

log = logging.getLogger("qmgr.servicebus.amqp")

SESSION_FILTER = Symbol("com.microsoft:session-filter")
LOCKED_UNTIL_UTC = Symbol("com.microsoft:locked-until-utc")
LINK_TIMEOUT = Symbol("com.microsoft:timeout")
SENDER_CREDIT = 500  # credit kept granted to a client's sender link
DEFAULT_SESSION_WAIT = 60.0  # seconds, when the link names no com.microsoft:timeout

CBS_MAX_MESSAGE = 64 * 1024  # a put-token request is a token and an audience: small
# the claim each $management operation needs (the others: Listen)
MGMT_RIGHTS = {
    management.SCHEDULE_MESSAGE: Right.SEND,
    management.CANCEL_SCHEDULED_MESSAGE: Right.SEND,
    management.ADD_RULE: Right.MANAGE,
    management.REMOVE_RULE: Right.MANAGE,
    management.ENUMERATE_RULES: Right.MANAGE,
}
LINK_RIGHTS = {"send": Right.SEND, "receive": Right.LISTEN, "mgmt": Right.NONE}


def _with_session(source: Any, session_id: str) -> Any:
    """A receiver's source with ``session_id`` in its session filter (the attach answer)."""
    filt = dict(getattr(source, "filter", None) or {})
    key = SESSION_FILTER if SESSION_FILTER in filt else "com.microsoft:session-filter"
    filt[key] = session_id
    with contextlib.suppress(TypeError):
        source = dataclasses.replace(source, filter=filt)
    return source


def _tag() -> bytes:
    """A delivery tag for a pre-settled transfer (nobody settles it, so it need not be a
    lock token; no system call, unlike ``uuid.uuid4``)."""
    return random.randbytes(16)


def entity_path(address: Any) -> str:
    """``amqps://host:port/queue`` (or a bare ``queue``) → ``queue``."""
    if isinstance(address, Described):
        address = address.value
    text = "" if address is None else str(address)
    if "://" in text:
        text = text.split("://", 1)[1]
        text = text.split("/", 1)[1] if "/" in text else ""
    return text.strip("/")


def _address(terminus: Any) -> str:
    return entity_path(getattr(terminus, "address", None))


@dataclass(eq=False)
class LinkState:
    kind: str  # "cbs", "mgmt", "send" (the client sends), "receive" (the client receives)
    path: str
    link: Link
    mode: ReceiveMode = ReceiveMode.PEEK_LOCK
    session_id: str | None = None
    session_lock: uuid.UUID | None = None  # the lock its session was granted under
    delivering: bool = False


class Timer(Protocol):
    """A callback ``call_later`` scheduled (the driver's timer handle)."""

    def cancel(self) -> None: ...


# ``call_later(delay, callback)``: run ``callback`` after ``delay`` seconds, unless cancelled
CallLater = Callable[[float, Callable[[], None]], Timer]
# ``when_durable(callback)``: ``callback(None)`` once every change so far is on disk, or
# ``callback(error)`` if it never will be (the store failed)
WhenDurable = Callable[[Callable[[Exception | None], None]], None]


@dataclass(eq=False)
class SessionWait:
    """A next-available session receiver's attach, answered when a session can be locked or
    when its timeout passes."""

    event: LinkAttached
    path: str
    mode: ReceiveMode
    timeout: Timer | None = None


class SbLinks:
    """The Service Bus meaning of one AMQP connection's events."""

    def __init__(
        self,
        conn: Connection,
        namespace: Namespace,
        *,
        now: Callable[[], float],
        changed: Callable[[], None],
        deadline_moved: Callable[[], None],
        when_durable: WhenDurable,
        call_later: CallLater,
        flush: Callable[[], None],
        claims: Claims | None = None,
        max_tokens: int | None = None,
    ) -> None:
        self.conn = conn
        self.claims = claims
        self.max_tokens = max_tokens  # CBS tokens the connection may hold at once
        self.ns = namespace
        self.now = now
        self._changed = changed
        self._deadline_moved = deadline_moved
        self._when_durable = when_durable
        self._call_later = call_later
        self.flush = flush
        self.links: dict[Link, LinkState] = {}
        self._dirty = False  # changes the next answers must wait for (on disk first)
        self._waiting = 0  # answers waiting for the disk (later ones go after them)
        self._wake = False  # changes that may make messages available to other receivers
        self._after: list[Callable[[], None]] = []
        self._sends: list[TransferReceived] = []  # sends whose accept waits in ``_after``
        self._session_waits: dict[Link, SessionWait] = {}
        self.closed = False

    # ------------------------------------------------------------------ events

    def handle(self, events: list[Event]) -> None:
        """Act on one batch of events; answers that acknowledge a change wait for one commit
        (the connection goes on reading meanwhile)."""
        for event in events:
            try:
                self._on(event)
            except ServiceBusError as exc:  # a refused operation not tied to a delivery
                log.info("Service Bus AMQP: %s", exc)
        self.commit()

    def commit(self) -> None:
        """Send the answers collected so far once everything changed so far is on disk (in
        order: after the answers of earlier calls); what was sent without waiting goes now."""
        after, self._after = self._after, []
        sends, self._sends = self._sends, []
        dirty, self._dirty = self._dirty, False
        wake, self._wake = self._wake, False
        if dirty or self._waiting:  # behind the disk, or behind answers that are
            self._waiting += 1
            self._when_durable(functools.partial(self._answer_durable, after, sends, wake))
        else:
            for action in after:
                action()
        self.flush()

    def _answer_durable(
        self,
        after: list[Callable[[], None]],
        sends: list[TransferReceived],
        wake: bool,
        error: Exception | None,
    ) -> None:
        self._waiting -= 1
        if error is not None:  # the node stops: nothing more is acknowledged
            self._refuse_sends(sends, error)
            log.error("Service Bus AMQP: closing a connection: %s", error)
            self.conn.close(p.Error(condition=INTERNAL_ERROR, description=str(error)))
            self.flush()
            return
        if wake:
            self._changed()
        for action in after:
            action()
        self.flush()

    def _refuse_sends(self, sends: list[TransferReceived], error: Exception) -> None:
        """The commit that held these sends failed: each is rejected (the client's send fails
        with why; nothing of it is stored, so sending it again cannot make a duplicate)."""
        text = f"the message was not stored: {error}"
        refusal = p.Rejected(error=p.Error(condition=INTERNAL_ERROR, description=text))
        for ev in sends:
            if ev.link.live:
                self.conn.settle(ev.link, ev.delivery_id, refusal)

    def _mark(self, wake: bool = True) -> None:
        """The namespace changed: answers wait for the disk; ``wake``: other receivers may
        find messages now."""
        self._dirty = True
        if wake:
            self._wake = True

    def wake(self) -> None:
        """Messages may have become available: serve this connection's waiting receivers and
        next-available session attaches, then send (after a commit, if they removed
        messages)."""
        if self.closed:
            return
        self.poke()
        self.commit()

    def _on(self, event: Event) -> None:
        if isinstance(event, LinkAttached):
            self._attached(event)
        elif isinstance(event, TransferReceived):
            self._transfer(event)
        elif isinstance(event, CreditChanged):
            st = self.links.get(event.link)
            if st is not None:
                self._credit(st, event.drain)
        elif isinstance(event, DispositionReceived):
            if event.role is RECEIVER:
                self._disposition(event)
        elif isinstance(event, LinkDetached):
            self._gone(event.link, [d.tag for d in event.unsettled])
        elif isinstance(event, SessionEnded):
            for link in event.links:
                self._gone(link, self._unsettled_tags(link))

    def poke(self) -> None:
        """Something may be available now: serve the receivers that hold credit."""
        for st in list(self.links.values()):
            if st.kind == "receive" and st.link.credit > 0 and not st.delivering:
                self._deliver(st)
        for wait in list(self._session_waits.values()):
            self._try_session(wait)

    # ------------------------------------------------------------------ attach

    def _attached(self, ev: LinkAttached) -> None:
        link = ev.link
        client_sends = ev.role is not RECEIVER  # the peer's role: SENDER = it sends
        terminus = ev.target if client_sends else ev.source
        path = _address(terminus)
        low = path.lower()
        if low == "$cbs":
            self.links[link] = LinkState("cbs", path, link)
            self.conn.attach_reply(link, max_message_size=CBS_MAX_MESSAGE)
            if client_sends:
                self.conn.flow(link, SENDER_CREDIT)
            return
        if low.endswith("/$management"):
            if not self._authorized(link, path[: -len("/$management")], Right.NONE, client_sends):
                return
            self.links[link] = LinkState("mgmt", path[: -len("/$management")], link)
            self._reply_attach(link, client_sends)
            return
        if not self._authorized(
            link, path, Right.SEND if client_sends else Right.LISTEN, client_sends
        ):
            return
        if client_sends:
            try:
                self.ns.check_sender(path)
            except ServiceBusError as exc:  # as Service Bus refuses: no terminus, then detach
                self.conn.refuse_attach(link, error_for(exc), target=None)
                return
            self.links[link] = LinkState("send", path, link)
            self._reply_attach(link, True)
            return
        mode = (
            ReceiveMode.RECEIVE_AND_DELETE
            if ev.snd_settle_mode == SND_SETTLED
            else ReceiveMode.PEEK_LOCK
        )
        try:
            sessions = self.ns.check_receiver(path)
        except ServiceBusError as exc:
            self.conn.refuse_attach(link, error_for(exc), source=None)
            return
        filt = getattr(ev.source, "filter", None) or {}
        sessionful = SESSION_FILTER in filt or "com.microsoft:session-filter" in filt
        if sessionful != sessions:
            text = (
                f"'{path}' requires sessions: receive with a session receiver"
                if sessions
                else f"'{path}' is not session-enabled: receive without a session"
            )
            error = p.Error(condition=NOT_ALLOWED, description=text)
            self.conn.refuse_attach(link, error, source=None)
            return
        if sessionful:
            wanted = filt.get(SESSION_FILTER, filt.get("com.microsoft:session-filter"))
            if isinstance(wanted, Described):
                wanted = wanted.value
            self._accept_session(ev, path, mode, None if wanted is None else str(wanted))
            return
        self.links[link] = LinkState("receive", path, link, mode)
        self._reply_attach(link, False)

    def _authorized(self, link: Link, path: str, right: Right, client_sends: bool) -> bool:
        """With keys: whether a token put on this connection lets ``link`` use ``path`` with
        ``right``; if not the link is refused with ``amqp:unauthorized-access``."""
        if self.claims is None:
            return True
        try:
            self.claims.check(path, right, self.now())
        except SasError as exc:
            error = p.Error(condition=UNAUTHORIZED, description=str(exc))
            if client_sends:
                self.conn.refuse_attach(link, error, target=None)
            else:
                self.conn.refuse_attach(link, error, source=None)
            return False
        return True

    def token_wait(self) -> float | None:
        """Seconds until the first token on this connection expires (None: no keys or no
        token), so the connection's timer runs :meth:`expire_tokens` then."""
        if self.claims is None:
            return None
        expiry = self.claims.next_expiry()
        return None if expiry is None else max(0.0, expiry - self.now())

    def expire_tokens(self) -> None:
        """With keys: detach (``amqp:unauthorized-access``) the links whose token expired
        without being renewed."""
        if self.claims is None:
            return
        now = self.now()
        for link, st in list(self.links.items()):
            right = LINK_RIGHTS.get(st.kind)
            if right is None or not link.live:
                continue
            try:
                self.claims.check(st.path, right, now)
            except SasError as exc:
                self.conn.detach(link, p.Error(condition=UNAUTHORIZED, description=str(exc)))
                self._gone(link, self._unsettled_tags(link))
        self.claims.expired(now)

    def _reply_attach(self, link: Link, client_sends: bool) -> None:
        self.conn.attach_reply(link)
        if client_sends:
            self.conn.flow(link, SENDER_CREDIT)

    def _accept_session(
        self, ev: LinkAttached, path: str, mode: ReceiveMode, wanted: str | None
    ) -> None:
        link = ev.link
        try:
            lock = self.ns.accept_session(path, wanted)
        except ServiceBusError as exc:
            self.conn.refuse_attach(link, error_for(exc))
            return
        if lock is not None:
            self._grant(ev, path, mode, lock)
            return
        timeout_ms = (ev.properties or {}).get(LINK_TIMEOUT)
        wait = DEFAULT_SESSION_WAIT if not timeout_ms else int(timeout_ms) / 1000
        pending = SessionWait(ev, path, mode)
        pending.timeout = self._call_later(wait, functools.partial(self._session_timeout, pending))
        self._session_waits[link] = pending

    def _try_session(self, wait: SessionWait) -> None:
        """A waiting next-available attach: lock a session if one can be had now."""
        link = wait.event.link
        if not link.live:
            self._end_session_wait(link)
            return
        try:
            lock = self.ns.accept_session(wait.path, None)
        except ServiceBusError as exc:
            self._end_session_wait(link)
            self.conn.refuse_attach(link, error_for(exc))
            return
        if lock is not None:
            self._end_session_wait(link)
            self._grant(wait.event, wait.path, wait.mode, lock)

    def _session_timeout(self, wait: SessionWait) -> None:
        link = wait.event.link
        if self._session_waits.get(link) is not wait:
            return
        self._end_session_wait(link)
        if link.live and not self.closed:
            # the attach answer has the shape of a granted one (the SDK reads the session id
            # from the source's filter and the lock from the properties whenever the source
            # names its entity), with no session in it and no lock, and the detach that follows
            # says why; a null source would be refused by the SDK as a broken link and retried
            self.conn.refuse_attach(
                link,
                p.Error(
                    condition=TIMEOUT,
                    description="no session available within the timeout",
                ),
                source=_with_session(wait.event.source, ""),
                properties={},
            )
            self.flush()

    def _end_session_wait(self, link: Link) -> None:
        wait = self._session_waits.pop(link, None)
        if wait is not None and wait.timeout is not None:
            wait.timeout.cancel()

    def _grant(self, ev: LinkAttached, path: str, mode: ReceiveMode, lock: SessionLock) -> None:
        source = _with_session(ev.source, lock.session_id)
        props = dict(ev.properties or {})
        props[LOCKED_UNTIL_UTC] = dotnet_ticks(lock.locked_until)
        st = LinkState(
            "receive", path, ev.link, mode, session_id=lock.session_id, session_lock=lock.lock_token
        )
        self.links[ev.link] = st
        self.conn.attach_reply(ev.link, source=source, properties=props)
        self._deadline_moved()  # the session lock expires
        if ev.link.credit > 0:
            self._deliver(st)

    # ------------------------------------------------------------------ transfers in

    def _transfer(self, ev: TransferReceived) -> None:
        st = self.links.get(ev.link)
        link = ev.link
        if link.credit < SENDER_CREDIT // 2 and link.live:
            self.conn.flow(link, SENDER_CREDIT)
        if st is None:
            return
        if st.kind == "cbs":
            self._cbs(ev)
        elif st.kind == "mgmt":
            self._mgmt(st, ev)
        elif st.kind == "send":
            self._send(st, ev)

    def _answer(self, ev: TransferReceived, state: Any) -> None:
        if not ev.settled:
            self.conn.settle(ev.link, ev.delivery_id, state)

    def _send(self, st: LinkState, ev: TransferReceived) -> None:
        try:
            batch = ev.message_format == BATCH_FORMAT
            parts = split_batch(ev.payload) if batch else [ev.payload]
            messages = [to_sb_message(part) for part in parts]
            for m in messages:  # stamped when the client gave none (the JS SDK gives none)
                if m.message_id is None:
                    m.message_id = uuid.uuid4().hex
        except (DecodeError, ValueError) as exc:
            self._answer(
                ev,
                p.Rejected(error=p.Error(condition=DECODE_ERROR, description=str(exc))),
            )
            return
        now = self.now()
        try:
            scheduled = [m for m in messages if m.scheduled_enqueue_time is not None]
            if scheduled and len(scheduled) == len(messages):
                at = scheduled[0].scheduled_enqueue_time
                assert at is not None
                self.ns.schedule(st.path, messages, at if at > now else now)
            else:
                self.ns.send(st.path, messages)
        except ServiceBusError as exc:
            self._answer(ev, p.Rejected(error=error_for(exc)))
            return
        self._mark()
        if not ev.settled:
            self._sends.append(ev)
            self._after.append(lambda: self.conn.settle(ev.link, ev.delivery_id, p.Accepted()))

    def _request(self, ev: TransferReceived) -> Message | None:
        """A request on a ``$cbs`` or ``$management`` link, accepted; None (rejected) if bad."""
        try:
            request = decode_message(ev.payload)
        except DecodeError as exc:
            self._answer(
                ev, p.Rejected(error=p.Error(condition=DECODE_ERROR, description=str(exc)))
            )
            return None
        self._answer(ev, p.Accepted())
        return request

    def _cbs(self, ev: TransferReceived) -> None:
        request = self._request(ev)
        if request is None:
            return
        msg_id = request.properties.message_id if request.properties else None
        status, text = self._put_token(request)
        reply = Message(
            properties=Properties(correlation_id=msg_id),
            application_properties={"status-code": Int(status), "status-description": text},
            body=None,
        )
        self._reply_on(
            "cbs",
            None,
            ev.link,
            encode_message(reply),
            request.properties.reply_to if request.properties else None,
        )

    def _put_token(self, request: Message) -> tuple[int, str]:
        """The status of a CBS put-token: 202 (accepted), 401 (refused token), 400 (bad
        request)."""
        if self.claims is None:
            return 202, "Accepted"
        app = request.application_properties or {}
        audience, token = app.get("name"), request.body
        if app.get("operation") != "put-token" or not isinstance(audience, str):
            return 400, "a $cbs request is operation 'put-token' with the audience in 'name'"
        if not isinstance(token, str):
            return 401, "the token (the request's body) is not a string"
        try:
            self.claims.put_token(token, audience, self.now())
        except SasError as exc:
            log.info("Service Bus AMQP: put-token for %s refused: %s", audience, exc)
            return 401, str(exc)
        if self.max_tokens is not None and len(self.claims) > self.max_tokens:
            text = f"a connection may hold at most {self.max_tokens} tokens"
            self.conn.close(p.Error(condition=RESOURCE_LIMIT_EXCEEDED, description=text))
            return 403, text
        return 202, "Accepted"

    def _mgmt(self, st: LinkState, ev: TransferReceived) -> None:
        request = self._request(ev)
        if request is None:
            return
        try:
            if self.claims is not None:
                operation = (request.application_properties or {}).get("operation")
                right = MGMT_RIGHTS.get(str(operation), Right.LISTEN)
                self.claims.check(st.path, right, self.now())
        except SasError as exc:
            response = management.refusal(request, 401, str(exc), UNAUTHORIZED)
        else:
            holder = self._session_lock_of(request)
            reply = management.respond(self.ns, st.path, request, holder=holder)
            if reply.changed:
                self._mark()
            response = reply.message
        reply_to = request.properties.reply_to if request.properties else None
        data = encode_message(response)
        self._after.append(lambda: self._reply_on("mgmt", st.path, ev.link, data, reply_to))

    def _session_lock_of(self, request: Message) -> uuid.UUID | None:
        """The session lock of the receiver link a ``$management`` request names as its
        associated link (the SDK names it on each request of a receiver): the session
        operations then act only while that receiver still holds its session."""
        app = request.application_properties or {}
        name = app.get("associated-link-name")
        if not isinstance(name, str):
            return None
        for st in self.links.values():
            if st.session_lock is not None and st.link.name == name:
                return st.session_lock
        return None

    def _reply_on(
        self, kind: str, path: str | None, request_link: Link, data: bytes, reply_to: Any
    ) -> None:
        """Send a response on the client's receiver link of the same node."""
        target = None
        wanted = None if reply_to is None else entity_path(reply_to).lower()
        for st in self.links.values():
            if st.kind != kind or not st.link.is_sender or not st.link.live:
                continue
            if kind == "mgmt" and (st.path.lower() != (path or "").lower()):
                continue
            if wanted and _address(st.link.source).lower() == wanted:
                target = st
                break
            if st.link.session is request_link.session or target is None:
                target = st
        if target is None:
            log.info("Service Bus AMQP: no %s receiver link to answer on", kind)
            return
        if target.link.attached:
            self.conn.send_owed(target.link, _tag(), data, settled=True)

    # ------------------------------------------------------------------ transfers out

    def _credit(self, st: LinkState, drain: bool) -> None:
        if st.kind == "receive" and not st.delivering:
            self._deliver(st)
        if drain:
            if st.delivering:  # answered once the delivery in flight is out
                self._after.append(lambda: self.conn.flow(st.link))
            else:
                self.conn.flow(st.link)

    def _deliver(self, st: LinkState) -> None:
        link = st.link
        if not link.can_send or not link.attached:
            return
        try:
            room = min(link.credit, link.session.remote_incoming_window)
            got = self.ns.receive(
                st.path, room, st.mode, session=st.session_id, holder=st.session_lock
            )
        except ServiceBusError as exc:
            if exc.code in (Code.SESSION_LOCK_LOST, Code.ENTITY_NOT_FOUND):
                self.conn.detach(link, error_for(exc))
                self.links.pop(link, None)
            else:
                log.info("Service Bus AMQP: receive on %s: %s", st.path, exc)
            return
        if not got:
            return
        if st.mode is ReceiveMode.PEEK_LOCK:
            for stored in got:
                token = stored.lock_token
                assert token is not None
                data = to_amqp(stored, lock_token=token, locked_until=stored.locked_until)
                self.conn.send_transfer(link, token.bytes_le, data)
            self._deadline_moved()  # the host's timer learns when these locks expire
            return
        # receive-and-delete: the removal is made durable before the messages go out
        self._mark(wake=False)
        st.delivering = True

        def out() -> None:
            st.delivering = False
            for stored in got:
                if not (link.live and link.attached):
                    log.warning(
                        "Service Bus AMQP: receive-and-delete link %s went away; message %s of "
                        "%s was removed",
                        link.name,
                        stored.sequence_number,
                        st.path,
                    )
                    continue
                self.conn.send_owed(link, _tag(), to_amqp(stored), settled=True)

        self._after.append(out)

    # ------------------------------------------------------------------ settlement

    def _disposition(self, ev: DispositionReceived) -> None:
        state = ev.state
        for delivery in ev.deliveries:
            st = self.links.get(delivery.link)
            if st is None or st.kind != "receive" or st.mode is not ReceiveMode.PEEK_LOCK:
                continue
            token = uuid.UUID(bytes_le=bytes(delivery.tag))
            # a dead-letter is echoed as a plain rejected: one with an error means failure
            echo: Any = p.Rejected() if isinstance(state, p.Rejected) else state
            try:
                self._settle(st.path, token, state)
                # the echo waits until the settlement is on disk; a complete frees nothing
                # another receiver could take
                self._mark(wake=not isinstance(state, p.Accepted))
            except ServiceBusError as exc:
                echo = p.Rejected(error=error_for(exc))
            if not ev.settled:
                link, did = delivery.link, delivery.delivery_id
                self._after.append(functools.partial(self.conn.settle, link, did, echo))

    def _settle(self, path: str, token: uuid.UUID, state: Any) -> None:
        ns = self.ns
        if isinstance(state, p.Accepted):
            ns.complete(path, token)
        elif isinstance(state, p.Modified):
            props = _app_props(state.message_annotations)
            if state.undeliverable_here:
                ns.defer(path, token, props)
            else:
                ns.abandon(path, token, props)
        elif isinstance(state, p.Rejected):
            info = (state.error.info if state.error is not None else None) or {}
            reason = info.get("DeadLetterReason", info.get(Symbol("DeadLetterReason")))
            desc = info.get(
                "DeadLetterErrorDescription", info.get(Symbol("DeadLetterErrorDescription"))
            )
            ns.dead_letter(
                path,
                token,
                None if reason is None else str(reason),
                None if desc is None else str(desc),
            )
        else:  # released, or no outcome
            ns.release(path, token)

    # ------------------------------------------------------------------ links gone

    def _gone(self, link: Link, unsettled: list[bytes]) -> None:
        self._end_session_wait(link)
        st = self.links.pop(link, None)
        if st is None or st.kind != "receive":
            return
        if st.mode is ReceiveMode.PEEK_LOCK:
            for tag in unsettled:
                with contextlib.suppress(ServiceBusError):
                    self.ns.release(st.path, uuid.UUID(bytes_le=bytes(tag)))
                    self._mark()
        if st.session_id is not None:
            with contextlib.suppress(ServiceBusError):
                self.ns.release_session(st.path, st.session_id, st.session_lock)
                self._mark()

    def close(self) -> None:
        """The connection is over: release what its receivers held."""
        self.closed = True
        for link in list(self._session_waits):
            self._end_session_wait(link)
        for link in list(self.links):
            self._gone(link, self._unsettled_tags(link))

    @staticmethod
    def _unsettled_tags(link: Link) -> list[bytes]:
        return [d.tag for d in link.session.unsettled.values() if d.link is link]


def _app_props(annotations: Any) -> dict[str, Any] | None:
    if not annotations:
        return None
    return {str(k): v for k, v in annotations.items()}
