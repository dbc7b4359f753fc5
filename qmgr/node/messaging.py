"""What a node does for its messaging applications, whatever carries their calls.

The Messaging service decodes a request, calls :class:`Messaging` and encodes the answer; the
rules live here: a get that waits for a message, the response size budget, units of work and
the connections that own them, a consumer's flow control (credit, cumulative
acknowledgements, what goes back to the queue and with which backout count when the stream
ends), and answering publications in order once they are durable. Nothing here knows the
transport: a consumer's acknowledgements arrive as :class:`Ack` values, its deliveries leave
through a :class:`DeliveryWriter` that encodes and sends them, and a protocol fault of the
client is a :class:`BadAcknowledgement` the transport translates.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import NoReturn, Protocol, TypeVar

from qmgr.core.errors import MQError
from qmgr.core.message import Message
from qmgr.core.qmgr import QueueManager
from qmgr.core.queue import LocalQueue
from qmgr.core.subscription import Subscription
from qmgr.node.runtime import NodeRuntime, Publication, PublishResult

DEFAULT_BATCH = 256  # messages a delivery carries when the consumer names no batch size
TRANSPORT_LIMIT = 64 * 1024 * 1024  # the node's largest message on the wire
DEFAULT_RESPONSE_LIMIT = 4 * 1024 * 1024  # what a client that declares no limit accepts
ENVELOPE = 64 * 1024  # room in a response for its own fields
DEFAULT_PENDING_MESSAGES = 65_536
DEFAULT_PENDING_BYTES = 64 * 1024 * 1024
ACK_QUEUE = 64  # published batches waiting for their commit before reading pauses

D = TypeVar("D")
T = TypeVar("T")
R = TypeVar("R")


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


def fitting(msgs: list[Message], budget: int) -> list[Message]:
    """The leading messages of ``msgs`` that fit in one response of ``budget`` bytes."""
    total = 0
    for i, msg in enumerate(msgs):
        total += wire_size(msg)
        if total > budget:
            return msgs[:i]
    return msgs


def check_fits(
    q: LocalQueue, now: float, budget: int, message_id: str = "", correl_id: bytes = b""
) -> None:
    """Raise if the next (matching) message can never fit in a response of ``budget`` bytes."""
    nxt = q.peek(now, message_id, correl_id)
    if nxt is not None and wire_size(nxt) > budget:
        too_big(q.name, nxt, budget)


def too_big(queue: str, msg: Message, budget: int) -> NoReturn:
    raise MQError(
        "MQRC_MSG_TOO_BIG_FOR_CHANNEL",
        f"the next message on {queue} ({msg.size} bytes of body) does not fit in one response "
        f"of {budget} bytes; declare a larger max_response_bytes",
    )


# -- gets and units of work -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GetOptions:
    """One get: up to ``max_messages`` (at least 1) from ``queue``, waiting up to ``wait_ms``
    for the first; under syncpoint in ``unit_of_work`` (which ``connection_id`` owns) unless
    ``browse``; in one response of at most ``max_response_bytes`` (0: the default limit)."""

    queue: str
    max_messages: int = 1
    wait_ms: int = 0
    browse: bool = False
    browse_after: int = 0
    unit_of_work: str = ""
    connection_id: str = ""
    match_message_id: str = ""
    match_correl_id: bytes = b""
    max_response_bytes: int = 0


class Connections:
    """The open connections of applications: a unit of work under syncpoint belongs to one,
    and is backed out when it closes (by the client, or the client gone)."""

    def __init__(self, qm: QueueManager) -> None:
        self.qm = qm
        self.open_ids: set[str] = set()

    def open(self) -> str:
        conn = f"CONN.{uuid.uuid4().hex}"
        self.open_ids.add(conn)
        return conn

    def close(self, conn: str) -> int:
        """Forget ``conn`` and back out its units of work; returns the messages backed out."""
        self.open_ids.discard(conn)
        return self.qm.backout_owned(conn)

    def owner(self, connection_id: str) -> str:
        """``connection_id`` as the owner of a unit of work ("" for none); raises
        MQRC_HCONN_ERROR for a connection that is not open."""
        if connection_id and connection_id not in self.open_ids:
            raise MQError("MQRC_HCONN_ERROR", f"connection {connection_id} is not open")
        return connection_id


# -- a consumer's flow control -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeliveryLimits:
    """What a consumer declares when it opens: messages and bytes it may have pending (0:
    the defaults), the largest response it accepts (0: the default), and whether its
    acknowledgements report the messages handed to the application."""

    max_pending_messages: int = 0
    max_pending_bytes: int = 0
    max_response_bytes: int = 0
    reports_handed: bool = False


@dataclass(frozen=True, slots=True)
class Ack:
    """A consumer's report: messages acknowledged and handed to the application so far on
    its stream (cumulative), the credit it returns, and whether this report is its last."""

    acknowledged: int
    handed: int = 0
    credit_messages: int = 0
    credit_bytes: int = 0
    closing: bool = False


class BadAcknowledgement(ValueError):
    """A consumer's report that contradicts what its stream sent (a fault of the client)."""


class DeliveryFlow:
    """One streaming consumer: its credit, what was sent and acknowledged, its unit of work."""

    def __init__(self, limits: DeliveryLimits, uow: str = "") -> None:
        self.messages = self.max_messages = limits.max_pending_messages or DEFAULT_PENDING_MESSAGES
        self.bytes = self.max_bytes = limits.max_pending_bytes or DEFAULT_PENDING_BYTES
        self.budget = response_budget(limits.max_response_bytes)
        self.uow = uow or f"STREAM.{uuid.uuid4().hex}"
        self.reports_handed = limits.reports_handed
        self.sent = 0
        self.acknowledged = 0
        self.handed = 0  # as the client last reported
        self.ended = False
        self.closed = False  # the client said it closes (its last report is exact)
        self.error: BaseException | None = None

    @property
    def has_credit(self) -> bool:
        return self.messages > 0 and self.bytes > 0

    def accept(self, ack: Ack) -> int:
        """Take ``ack`` if this stream can: cumulative (never fewer than before, never more
        than were sent), returning no more credit than was used. Returns the messages it
        newly acknowledges (to commit before ``acknowledged``). Raises BadAcknowledgement."""
        if not self.acknowledged <= ack.acknowledged <= self.sent:
            raise BadAcknowledgement(
                f"acknowledged {ack.acknowledged}: {self.acknowledged} were acknowledged and "
                f"{self.sent} sent on this stream"
            )
        if self.reports_handed and not (
            max(self.handed, ack.acknowledged) <= ack.handed <= self.sent
        ):
            raise BadAcknowledgement(
                f"handed {ack.handed}: {self.handed} were handed out, {ack.acknowledged} "
                f"acknowledged and {self.sent} sent on this stream"
            )
        if (
            self.messages + ack.credit_messages > self.max_messages
            or self.bytes + ack.credit_bytes > self.max_bytes
        ):
            raise BadAcknowledgement(
                f"credit of {ack.credit_messages} messages and {ack.credit_bytes} bytes is more "
                f"than the deliveries not yet credited back used"
            )
        self.handed = ack.handed
        self.closed = ack.closing
        return ack.acknowledged - self.acknowledged

    def acknowledged_and_credited(self, ack: Ack, done: int) -> bool:
        """Count ``done`` messages committed and return ``ack``'s credit; True if the
        sender was waiting for credit."""
        self.acknowledged += done
        waiting = not self.has_credit
        self.messages += ack.credit_messages
        self.bytes += ack.credit_bytes
        return waiting

    def delivered(self, count: int, size: int) -> None:
        """A delivery of ``count`` messages and ``size`` bytes was sent."""
        self.messages -= count
        self.bytes -= size
        self.sent += count

    def counted(self) -> int | None:
        """How many of the messages not acknowledged get their backout count raised when the
        stream ends (None: all). With reports of what was handed out, those the application
        never saw go back as they were; if the client is gone, its last report may be late,
        so the first message not acknowledged counts (a poison message moves on)."""
        if not self.reports_handed:
            return None
        n = self.handed - self.acknowledged
        return n if self.closed else max(n, 1)


class DeliveryWriter(Protocol[D]):
    """How a consumer's deliveries are encoded and sent (``D``: one encoded delivery)."""

    def encode(self, queue: str, msgs: list[Message]) -> D: ...

    def size(self, delivery: D) -> int:
        """The exact encoded size of ``delivery``."""
        ...

    def drop_last(self, delivery: D) -> int:
        """Remove the last message of ``delivery``; returns the bytes it took."""
        ...

    async def write(self, delivery: D, size: int) -> None:
        """Send ``delivery``, counted as ``size`` bytes against the consumer's credit."""
        ...


# -- the node's messaging ----------------------------------------------------------------------


class Messaging:
    """A node's messaging calls, each with plain values in and out."""

    def __init__(self, runtime: NodeRuntime) -> None:
        self.rt = runtime
        self.qm = runtime.qm
        self.connections = Connections(runtime.qm)

    # -- queues

    async def put(self, queue: str, msgs: list[Message]) -> None:
        """Put ``msgs`` on ``queue`` (all or none; each stamped in place); answered once a
        persistent one is committed."""
        self.qm.put(queue, msgs)
        if any(m.persistent for m in msgs):
            await self.rt.durable()

    async def get(self, o: GetOptions) -> list[Message]:
        """Get (or browse) per ``o``, waiting up to ``o.wait_ms`` for a message. A
        destructive get outside syncpoint is answered once the removal is committed."""
        limit = max(1, o.max_messages)
        budget = response_budget(o.max_response_bytes)
        deadline = time.monotonic() + o.wait_ms / 1000.0
        owner = ""
        if o.unit_of_work and not o.connection_id:
            raise MQError("MQRC_HCONN_ERROR", "a get under syncpoint needs a connection")
        qm = self.qm
        while True:
            if o.unit_of_work:  # it belongs to a connection (still open after a wait)
                owner = self.connections.owner(o.connection_id)
            if o.browse:
                msgs = qm.browse(o.queue, after=o.browse_after, limit=limit)
                fit = fitting(msgs, budget)
                if msgs and not fit:
                    too_big(o.queue, msgs[0], budget)
                msgs = fit
            else:
                msgs = qm.get(
                    o.queue,
                    unit_of_work=o.unit_of_work,
                    owner=owner,
                    message_id=o.match_message_id,
                    correl_id=o.match_correl_id,
                    limit=limit,
                    size=wire_size,
                    max_bytes=budget,
                )
                if not msgs:
                    check_fits(
                        qm.queue(o.queue),
                        qm.clock.now(),
                        budget,
                        o.match_message_id,
                        o.match_correl_id,
                    )
            remaining = deadline - time.monotonic()
            if msgs or remaining <= 0:
                break
            await self.rt.signals.wait(o.queue, remaining)
        if not o.browse and not o.unit_of_work and any(m.persistent for m in msgs):
            await self.rt.durable()
        return msgs

    async def commit(self, unit_of_work: str, connection_id: str) -> int:
        n = self.qm.commit(unit_of_work, owner=self.connections.owner(connection_id))
        await self.rt.durable()
        return n

    async def backout(self, unit_of_work: str, connection_id: str) -> int:
        n = self.qm.backout(unit_of_work, owner=self.connections.owner(connection_id))
        await self.rt.durable()
        return n

    async def connection(self, opened: Callable[[str], Awaitable[None]]) -> None:
        """Hold a connection open until this call is cancelled (``opened`` is told its id);
        its units of work are backed out then."""
        conn = self.connections.open()
        try:
            await opened(conn)
            await asyncio.Event().wait()
        finally:
            self.connections.close(conn)

    def check_consumable(self, queue: str) -> None:
        """Raise if ``queue`` does not exist or is GET(DISABLED)."""
        self.qm.queue(queue).check_get()

    # -- a consumer's deliveries

    async def deliver(
        self,
        queue: str,
        limits: DeliveryLimits,
        batch: int,
        acks: AsyncIterator[Ack],
        writer: DeliveryWriter[D],
    ) -> None:
        """Send ``queue``'s messages within the credit the client grants, inside a unit of
        work of this stream: acknowledged ones are committed, the rest backed out at the end.
        Raises BadAcknowledgement for a report the stream cannot take, and whatever reading
        ``acks`` raised."""
        qm = self.qm
        signals = self.rt.signals
        flow = DeliveryFlow(limits)

        async def read_acks() -> None:
            try:
                async for ack in acks:
                    done = flow.accept(ack)
                    if done > 0:
                        qm.commit(flow.uow, owner=flow.uow, count=done)
                    if flow.acknowledged_and_credited(ack, done):
                        signals.notify(queue)  # the sender waits for credit
            except Exception as exc:  # the handler re-raises it
                flow.error = exc
            finally:
                flow.ended = True
                signals.notify(queue)

        reader = asyncio.get_running_loop().create_task(read_acks())
        yielded = False  # the loop already ran once before this delivery
        try:
            while not flow.ended:
                q = qm.queues.get(queue)
                if q is None:  # deleted (or its subscription removed) under the consumer
                    raise MQError("MQRC_Q_DELETED", f"queue {queue} has been deleted")
                if not flow.has_credit:
                    await signals.wait(queue, 1.0)
                    continue
                limit = min(batch, flow.messages)
                if 0 < q.depth < limit and not yielded:
                    # a part batch: let the loop run what is ready first (publications
                    # already received), once, so deliveries and their acknowledgements are
                    # fewer and fuller; each costs the node a write and a read
                    yielded = True
                    await asyncio.sleep(0)
                    continue
                yielded = False
                # taken by body size, then trimmed to the exact encoded size (before sending)
                msgs = qm.get(
                    queue,
                    unit_of_work=flow.uow,
                    owner=flow.uow,
                    limit=limit,
                    max_bytes=min(flow.budget, flow.bytes),
                    first_max_bytes=flow.budget,
                )
                if not msgs:
                    check_fits(q, qm.clock.now(), flow.budget)
                    await signals.wait(queue, 1.0)
                    continue
                delivery = writer.encode(queue, msgs)
                count = len(msgs)
                size = writer.size(delivery)
                if size > flow.budget:
                    count = self._trim(queue, flow, writer, delivery, count, size)
                    size = writer.size(delivery)
                flow.delivered(count, size)
                await writer.write(delivery, size)
            if flow.error is not None:
                raise flow.error
        finally:
            reader.cancel()
            qm.backout(flow.uow, owner=flow.uow, counted=flow.counted())

    def _trim(
        self,
        queue: str,
        flow: DeliveryFlow,
        writer: DeliveryWriter[D],
        delivery: D,
        count: int,
        size: int,
    ) -> int:
        """Drop the last messages of ``delivery`` (back on the queue, as if never taken)
        until it fits the client's response limit; returns the messages left."""
        while size > flow.budget:
            if count == 1:
                (msg,) = self.qm.untake(flow.uow, 1, owner=flow.uow)
                too_big(queue, msg, flow.budget)
            size -= writer.drop_last(delivery)
            count -= 1
            self.qm.untake(flow.uow, 1, owner=flow.uow)
        return count

    # -- publish/subscribe

    def publish(self, batch: list[Publication]) -> PublishResult:
        """Publish ``batch`` on the node's one publish path (not waiting for its commit)."""
        return self.rt.publish_batch(batch)

    async def publish_committed(self, batch: list[Publication]) -> PublishResult:
        """Publish ``batch``; answered once what it changed is committed."""
        position = self.rt.position
        result = self.rt.publish_batch(batch)
        if self.rt.position != position:
            await self.rt.durable()
        return result

    async def in_order_once_durable(
        self, batches: AsyncIterator[T], publish: Callable[[T], R]
    ) -> AsyncIterator[R]:
        """Publish each of ``batches`` as it arrives (``publish`` answers it); yield the
        answers in order, each once what its batch changed is committed. Commits overlap with
        the next batches, so persistent throughput is not one commit per batch; at most
        ACK_QUEUE answers wait for theirs, so a client that does not read its answers stops
        being read. Whatever reading ``batches`` raised is raised after the answers before."""
        acks: asyncio.Queue[tuple[R, int | None] | None] = asyncio.Queue(ACK_QUEUE)
        failure: list[BaseException] = []
        rt = self.rt

        async def reader() -> None:
            try:
                async for item in batches:
                    position = rt.position
                    answer = publish(item)
                    target = rt.position
                    await acks.put((answer, target if target != position else None))
            except Exception as exc:  # raised by the consumer of the answers
                failure.append(exc)
            await acks.put(None)

        task = asyncio.get_running_loop().create_task(reader())
        try:
            while True:
                entry = await acks.get()
                if entry is None:
                    break
                answer, target = entry
                if target is not None:
                    await rt.durable(target)
                yield answer
            if failure:
                raise failure[0]
        finally:
            task.cancel()

    async def subscribe(
        self,
        topic: str,
        *,
        name: str = "",
        durable: bool = False,
        dest: str = "",
        new_publications_only: bool = False,
        scope_qmgr: bool = False,
        user_data: str = "",
        wildcard_char: bool = False,
    ) -> Subscription:
        """Create a subscription, or resume the durable one called ``name``; a durable one
        is answered once committed."""
        sub, _ = self.qm.subscribe(
            topic,
            name=name,
            durable=durable,
            dest=dest,
            new_publications_only=new_publications_only,
            subscope="QMGR" if scope_qmgr else "ALL",
            userdata=user_data,
            wschema="CHAR" if wildcard_char else "TOPIC",
        )
        if sub.durable:
            await self.rt.durable()
        return sub

    @contextmanager
    def attached(self, sub: Subscription) -> Iterator[None]:
        """An application is attached to ``sub`` meanwhile (counted in its status); a
        non-durable subscription ends with it."""
        qm = self.qm
        stats = qm.pubsub.stats.get(sub.name)
        if stats is not None:
            stats.active_connections += 1
        try:
            yield
        finally:
            if stats is not None:
                stats.active_connections -= 1
            if not sub.durable and qm.pubsub.subs.get(sub.name) is sub:
                qm.unsubscribe(sub.name)

    async def unsubscribe(self, name: str) -> None:
        self.qm.unsubscribe(name)
        await self.rt.durable()
