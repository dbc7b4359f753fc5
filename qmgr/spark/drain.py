"""One partition of ``spark.read.format("qmgr")``: one MQ queue or one Service Bus entity
drained in order into rows of :data:`READ_SCHEMA`.

A drain ends after ``idle`` seconds with nothing new (or at ``max_messages``). Messages are
acknowledged (MQ) or completed (Service Bus peek-lock) once the partition has handed them to
Spark, a batch at a time: a task that fails leaves what it had not handed over on the queue.
A sequenced drain (``sessions="sequenced"``) completes each message as the sequenced-delivery
helper processes it, once its row is queued for Spark (at most :data:`SEQUENCED_LAG` ahead of
the rows Spark has taken). Sessions (``all`` and ``sequenced``)
are read ``receivers`` at a time (:data:`qmgr.spark.options.SESSION_RECEIVERS` over a read's
partitions), each on a receiver of its own, so that the wait that tells a session has nothing
more overlaps the others' reading."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from qmgr.client import ReceivedMessage
from qmgr.spark.options import MqSource, SbSource
from qmgr.spark.sink import client

READ_SCHEMA = (
    "source string, body binary, topic string, properties map<string,string>, "
    "message_id string, correlation_id string, enqueue_time timestamp, "
    "receive_time timestamp, route string, delivery_count int, session_id string, "
    "sequence_number long"
)
ROUTE_PROPERTY = "qmgr.route"
TOPIC_PROPERTY = "MQTopicString"
# how long a drain may hold one session, its lock renewed (a session of a long run is read for
# longer than its lock duration, a minute by default)
SESSION_LOCK_RENEWAL = 3600.0
SEQUENCED_LAG = 1_000  # rows a sequenced drain completes ahead of those Spark has taken
# early arrivals the sequenced drain holds locked in memory per session before it defers the
# furthest ahead (the helper's max_held): a deferred message costs three round trips (the
# deferral, its share of a fetch, a $management settlement) where a held one costs none, and
# two topic hosts displace a publisher's messages by up to about 10,000 in a loaded run; a held
# message takes a few kilobytes, so the drain's sessions hold at most some 16,000 x receivers
SEQUENCED_MAX_HELD = 16_000
Row = tuple[Any, ...]


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _timestamp(seconds: float | None) -> datetime | None:
    return None if not seconds else datetime.fromtimestamp(seconds, tz=UTC)


def mq_row(label: str, msg: ReceivedMessage) -> Row:
    props = {k: _text(v) for k, v in msg.properties.items()}
    return (
        label,
        msg.body,
        msg.topic or props.get(TOPIC_PROPERTY),
        props,
        msg.message_id or None,
        msg.correl_id.hex() if msg.correl_id else None,
        _timestamp(msg.put_time_ms / 1000.0),
        _timestamp(msg.received_at),
        props.get(ROUTE_PROPERTY),
        msg.backout_count,
        None,
        msg.sequence or None,
    )


class QmgrReadError(RuntimeError):
    """A source could not be drained (its node or entity failed or refused the reader)."""


def drain(
    src: MqSource | SbSource, idle: float, max_messages: int | None, batch_size: int
) -> Iterator[Row]:
    """The rows of one source; a failure is a :class:`QmgrReadError` naming the source."""
    from azure.servicebus.exceptions import ServiceBusError

    from qmgr.client import MQClientError

    try:
        if isinstance(src, SbSource):
            yield from drain_sb(src, idle, max_messages, batch_size)
        else:
            yield from drain_mq(src, idle, max_messages, batch_size)
    except (MQClientError, ServiceBusError) as exc:
        raise QmgrReadError(
            f"qmgr data source: reading {src.label} failed: {type(exc).__name__}: {exc}"
        ) from exc


def drain_mq(
    src: MqSource, idle: float, max_messages: int | None, batch_size: int
) -> Iterator[Row]:
    """Consume ``src.queue`` with explicit acknowledgement, a batch at a time."""
    with client(src.address, src.security) as qm:
        consumer = qm.consumer(src.queue, max_batch=batch_size, ack="explicit")
        try:
            taken = 0
            while max_messages is None or taken < max_messages:
                msg = consumer.receive(timeout=idle)
                if msg is None:
                    break
                yield mq_row(src.label, msg)
                taken += 1
                if taken % batch_size == 0:
                    consumer.ack()
            if taken % batch_size:
                consumer.ack()
        finally:
            consumer.close()


class MqStream:
    """A continuous drain of one MQ queue for Spark's simple stream reader (on the driver).

    Offsets count the messages handed to Spark: ``{"taken": n}``. Each :meth:`batch` takes what
    has arrived (waiting up to ``wait`` seconds for the first message, at most ``limit``).
    A micro-batch's messages are acknowledged once Spark has finished it: when it commits that
    batch, or when it asks for the next one (it only does so after finishing the previous
    one). A query that stops or dies before leaves them on the queue for the next reader."""

    def __init__(self, src: MqSource, wait: float, limit: int, batch_size: int) -> None:
        self.src = src
        self.wait = wait
        self.limit = limit
        self.batch_size = batch_size
        self._qm: Any = None
        self._consumer: Any = None
        self._through = -1  # the offset of everything handed over so far (-1: nothing yet)
        self._unacked = False

    def _open(self) -> Any:
        if self._consumer is None:
            self._qm = client(self.src.address, self.src.security)
            self._consumer = self._qm.consumer(
                self.src.queue, max_batch=self.batch_size, ack="explicit"
            )
        return self._consumer

    def _take(self, most: int, wait: float) -> list[Row]:
        consumer = self._open()
        if self._unacked:  # Spark finished the micro-batch that took them
            consumer.ack()
            self._unacked = False
        rows: list[Row] = []
        msg = consumer.receive(timeout=wait)
        while msg is not None:
            rows.append(mq_row(self.src.label, msg))
            if len(rows) >= most:
                break
            msg = consumer.receive(timeout=0)
        self._unacked = bool(rows)
        return rows

    def batch(self, start: int) -> list[Row]:
        rows = self._take(self.limit, self.wait)
        self._through = start + len(rows)
        return rows

    def replay(self, start: int, end: int) -> list[Row]:
        """A micro-batch planned before a restart: what it had taken went back on the queue
        unacknowledged, so the same number of messages is taken again from its head."""
        rows = self._take(end - start, self.wait) if end > start else []
        self._through = start + len(rows)
        return rows

    def commit(self, end: int) -> None:
        if end == self._through and self._unacked:
            self._consumer.ack()
            self._unacked = False


def _sb_body(msg: Any) -> bytes:
    body = msg.body
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    try:
        return b"".join(bytes(part) for part in body)
    except TypeError:
        return str(msg).encode()


def sb_row(label: str, msg: Any, received: float) -> Row:
    props = {_text(k) or "": _text(v) for k, v in (msg.application_properties or {}).items()}
    return (
        label,
        _sb_body(msg),
        props.get(TOPIC_PROPERTY) or msg.subject,
        props,
        _text(msg.message_id),
        _text(msg.correlation_id),
        msg.enqueued_time_utc,
        _timestamp(received),
        props.get(ROUTE_PROPERTY),
        msg.delivery_count,
        msg.session_id,
        msg.sequence_number,
    )


class _Budget:
    """How many more messages a drain may take (max_messages over all its sessions, whose
    receivers reserve their batches from it at once)."""

    def __init__(self, limit: int | None) -> None:
        self.left = limit
        self._lock = threading.Lock()

    def reserve(self, batch_size: int) -> int:
        """Up to ``batch_size`` messages this receiver may take (0: the budget is used up)."""
        with self._lock:
            if self.left is None:
                return batch_size
            n = min(batch_size, self.left)
            self.left -= n
            return n

    def refund(self, n: int) -> None:
        """``n`` reserved messages were not received."""
        if self.left is not None and n:
            with self._lock:
                self.left += n


def _receiver(sb: Any, src: SbSource, idle: float, session_id: Any = None) -> Any:
    from azure.servicebus import ServiceBusReceiveMode

    mode = (
        ServiceBusReceiveMode.RECEIVE_AND_DELETE
        if src.receive_mode == "receive_and_delete"
        else ServiceBusReceiveMode.PEEK_LOCK
    )
    kwargs: dict[str, Any] = {"receive_mode": mode, "max_wait_time": idle}
    if session_id is not None:
        kwargs["session_id"] = session_id
    if src.queue is not None:
        return sb.get_queue_receiver(src.queue, **kwargs)
    return sb.get_subscription_receiver(src.topic, src.subscription, **kwargs)


def _batches(
    receiver: Any,
    budget: _Budget,
    batch_size: int,
    idle: float,
    quiet: float | None = None,
) -> Iterator[list[Any]]:
    """Receive batches until nothing arrives for ``idle`` seconds (``quiet`` after the first
    batch, when given) or the budget is used up."""
    wait = idle
    while (most := budget.reserve(batch_size)) > 0:
        batch = receiver.receive_messages(max_message_count=most, max_wait_time=wait)
        budget.refund(most - len(batch))
        if quiet is not None:
            wait = quiet
        if not batch:
            return
        yield batch


def _complete(receiver: Any, src: SbSource, batch: list[Any]) -> None:
    if src.receive_mode == "peek_lock":
        for msg in batch:
            receiver.complete_message(msg)


def _drain_receiver(
    receiver: Any, src: SbSource, idle: float, budget: _Budget, batch_size: int
) -> Iterator[Row]:
    """Receive until nothing arrives for ``idle`` seconds; each batch is completed once its
    rows were handed over."""
    for batch in _batches(receiver, budget, batch_size, idle):
        received = time.time()
        for msg in batch:
            yield sb_row(src.label, msg, received)
        _complete(receiver, src, batch)


class _Closed(BaseException):
    """The partition's generator was closed (Spark stopped reading): a sequenced drain stops
    before it settles anything more (a BaseException, so the helper does not take it for a
    handler's failure and dead-letter the message)."""


@dataclass
class _Batch:
    rows: list[Row]
    taken: threading.Event  # set once the generator has yielded them


class _Handover:
    """Rows that receivers (threads) hand to the partition's generator. A session receiver
    completes its batch once the generator has yielded every row of it (:meth:`hand`), and
    completes nothing more once the generator is closed (what Spark had not taken stays). The
    sequenced helper completes each message once its row is queued (:meth:`put`), at most
    ``lag`` rows ahead of the generator: waiting for each row to be yielded would hand the
    interpreter lock between threads once per message (up to a switch interval each), and
    Spark's Python worker takes a read's rows in Arrow batches (10,000 by default) anyway."""

    def __init__(self, lag: int = 0) -> None:
        self.items: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.closed = threading.Event()
        self._room = threading.Semaphore(lag)  # rows :meth:`put` may queue ahead

    def hand(self, rows: list[Row]) -> bool:
        """Wait until ``rows`` were yielded (True) or the generator was closed (False)."""
        batch = _Batch(rows, threading.Event())
        self.items.put(batch)
        while not batch.taken.wait(0.2):
            if self.closed.is_set():
                return False
        return True

    def put(self, row: Row) -> None:
        """Queue ``row`` without waiting for the generator to yield it, unless
        :data:`SEQUENCED_LAG` rows are queued already; :class:`_Closed` once the generator was
        closed."""
        while not self._room.acquire(timeout=0.2):
            if self.closed.is_set():
                raise _Closed
        if self.closed.is_set():
            raise _Closed
        self.items.put(row)

    def rows(self, produce: Callable[[], object]) -> Iterator[Row]:
        """Runs ``produce()`` on a thread and yields the rows handed over until it returns;
        its error is raised here."""
        end = object()

        def run() -> None:
            try:
                produce()
            except _Closed:
                pass
            except BaseException as exc:  # noqa: BLE001 - raised by the generator
                self.items.put(exc)
            self.items.put(end)

        thread = threading.Thread(target=run, name="qmgr-sb-sessions", daemon=True)
        thread.start()
        try:
            while (item := self.items.get()) is not end:
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, _Batch):
                    yield from item.rows
                    item.taken.set()
                else:
                    yield item
                    self._room.release()
        finally:
            self.closed.set()
            thread.join()


def _drain_sessions(
    sb: Any, src: SbSource, idle: float, budget: _Budget, batch_size: int
) -> Iterator[Row]:
    """Every session, ``src.receivers`` at a time (each with a next-available session
    receiver of its own), until none is available for ``idle`` seconds while no receiver holds
    one. A session is left once nothing has arrived in it for a short while (what arrives later
    makes it available again), and those waits overlap, so a drain does not wait once per
    session. Each session's rows come in its order; sessions read at once interleave."""
    from azure.servicebus import NEXT_AVAILABLE_SESSION

    from qmgr.client.sequenced import SESSION_QUIET, SessionStats, take_sessions

    handover = _Handover()
    stop = threading.Event()  # the budget is used up

    def open_receiver(session_id: str | None) -> Any:
        return _receiver(
            sb, src, idle, NEXT_AVAILABLE_SESSION if session_id is None else session_id
        )

    def work(receiver: Any, again: bool) -> SessionStats:
        stats = SessionStats(session_id=str(receiver.session.session_id))
        for batch in _batches(receiver, budget, batch_size, idle, min(idle, SESSION_QUIET)):
            received = time.time()
            if not handover.hand([sb_row(src.label, msg, received) for msg in batch]):
                stop.set()
                break
            _complete(receiver, src, batch)
            stats.processed += len(batch)
        if budget.left == 0:
            stop.set()
        return stats

    yield from handover.rows(
        lambda: take_sessions(
            open_receiver,
            work,
            receivers=src.receivers,
            stop=stop,
            max_lock_renewal=SESSION_LOCK_RENEWAL,
        )
    )


def _drain_sequenced(sb: Any, src: SbSource, idle: float) -> Iterator[Row]:
    """Every session through :func:`qmgr.client.sequenced.drain_sessions`, which processes each
    session's messages in the order of ``src.sequence_property`` (deferring early arrivals);
    each row goes to Spark as its message is processed (a long drain holds no list of them)."""
    from qmgr.client.sequenced import drain_sessions

    handover = _Handover(SEQUENCED_LAG)

    def handle(msg: Any) -> None:
        handover.put(sb_row(src.label, msg, time.time()))

    yield from handover.rows(
        lambda: drain_sessions(
            sb,
            handle,
            queue_name=src.queue,
            topic_name=src.topic,
            subscription_name=src.subscription,
            sequence_property=src.sequence_property,
            idle_timeout=idle,
            receivers=src.receivers,
            max_lock_renewal=SESSION_LOCK_RENEWAL,
            look_ahead=False,  # partitions share the sessions: none held here while one idles
            max_held=SEQUENCED_MAX_HELD,
        )
    )


def drain_sb(
    src: SbSource, idle: float, max_messages: int | None, batch_size: int
) -> Iterator[Row]:
    from azure.servicebus import ServiceBusClient

    budget = _Budget(max_messages)
    with ServiceBusClient.from_connection_string(src.connection_string) as sb:
        if src.sessions == "all":
            yield from _drain_sessions(sb, src, idle, budget, batch_size)
        elif src.sessions == "sequenced":
            yield from _drain_sequenced(sb, src, idle)
        else:
            with _receiver(sb, src, idle) as receiver:
                yield from _drain_receiver(receiver, src, idle, budget, batch_size)
