"""The blocking client: one gRPC channel to one queue manager node."""

from __future__ import annotations

import functools
import threading
import uuid
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from typing import Any

import grpc

from qmgr.client import convert, direct
from qmgr.client.connect import PathLike, WithMetadata, call_metadata, open_channel
from qmgr.client.errors import (
    ConnectionFailed,
    MQClientError,
    MqscCommandError,
    UnitsOfWork,
    acknowledged_too_late,
    backed_out,
    from_rpc_error,
    publish_error,
)
from qmgr.client.flow import (
    DEFAULT_PENDING_BYTES,
    DEFAULT_PENDING_MESSAGES,
    MAX_RESPONSE_BYTES,
    BufferedConsumer,
    DeliveryBuffer,
    EncodedStreams,
    open_consumer,
    open_subscription,
)
from qmgr.client.pubwire import BatchEncoder
from qmgr.client.servicebus import ServiceBusAdmin
from qmgr.client.types import MqscRecord, OutgoingMessage, PublishResult, ReceivedMessage
from qmgr.core.values import PropertyValue
from qmgr.wire import admin_pb2, admin_pb2_grpc, messaging_pb2, messaging_pb2_grpc

CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_RESPONSE_BYTES),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
]

SlowConsumerCallback = Callable[[Any], None]
AckCallback = Callable[[int, int], None]  # (batch id, publications accepted in it)
ACK_DELAY = 0.02  # seconds an acknowledgement may wait to be merged with the next ones


class Subscription(BufferedConsumer):
    """An open subscription (or queue consumer): iterate it, or call :meth:`receive` or
    :meth:`receive_batch`.

    Delivery is acknowledged and flow-controlled: the node sends no more than the buffer holds
    (``max_pending_messages``/``max_pending_bytes``); with ``ack="auto"`` a message is
    acknowledged once it has been handed to the application, with ``ack="explicit"`` by
    :meth:`ack`. Closing acknowledges only that: everything else goes back on the queue on the
    node (backout count raised). Closing a non-durable subscription removes it. When the buffer
    is full the node stops sending: :attr:`slow_consumer` is true and ``on_slow_consumer`` (if
    given) is called from the reader thread; nothing is dropped.

    Three threads share one lock: the application's, the reader (converts each delivery before
    taking the lock, then buffers it whole) and the control stream's, which sends what the
    buffer owes the node. The application's thread only tells the control stream that
    something is owed (once, or again when it became urgent), so taking a message wakes no
    other thread. Without a reader thread (``consume()``), the application's thread reads the
    stream itself when it has nothing to take, the lock released meanwhile."""

    def __init__(
        self,
        method: Any,
        opening: Any,
        control_type: Any,
        buffer: DeliveryBuffer,
        *,
        named: bool,
        queue: str = "",
        on_slow_consumer: SlowConsumerCallback | None = None,
        open_timeout: float = 30.0,
        background: bool = True,
    ) -> None:
        """``background=False``: no reader thread; the application's thread reads the stream
        itself whenever it waits for messages (see :meth:`_pull`), with no time-out."""
        self._control_type = control_type
        self._buf = buffer
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)  # something to take, or the end
        self._owed = threading.Condition(self._lock)  # something for the control stream
        self._signalled = False  # the control stream was told something is owed
        self._ending: str | None = None  # "final": send the final report and end; "abort": end
        self._ended = False
        self._closed = False
        self._error: BaseException | None = None
        self._on_slow = on_slow_consumer
        self._call = method(self._control_stream(opening))
        self.name = self.sub_id = ""
        self.queue = queue
        if named:  # the node answers with the subscription, within open_timeout
            timer = threading.Timer(open_timeout, self._call.cancel)
            timer.start()
            try:
                first = next(self._call)
            except grpc.RpcError as exc:
                self._end_controls("abort")
                if exc.code() == grpc.StatusCode.CANCELLED:
                    raise ConnectionFailed(
                        2009, "MQRC_CONNECTION_BROKEN", f"no answer in {open_timeout} s"
                    ) from None
                raise from_rpc_error(exc) from None
            finally:
                timer.cancel()
            self.name = first.subscription
            self.sub_id = first.sub_id
            self.queue = first.queue
        self._reader: threading.Thread | None = None
        if background:
            self._reader = threading.Thread(target=self._read, daemon=True)
            self._reader.start()

    def _control_stream(self, opening: Any) -> Iterator[Any]:
        """The messages to the node: the opening one, then acknowledgements and credit. What is
        owed within ACK_DELAY of the first is sent as one (at once when it returns a quarter
        of the buffer's credit); when closing, the final report, then the end."""
        yield opening
        buf = self._buf
        while True:
            with self._lock:
                self._owed.wait_for(lambda: self._signalled or self._ending is not None)
                if self._ending is None:
                    self._owed.wait_for(
                        lambda: self._ending is not None or buf.credit_due(), ACK_DELAY
                    )
                if self._ending == "abort":
                    return
                final = self._ending is not None
                ack = buf.control(final=final)
                self._signalled = False
            if ack is not None:
                yield self._control_type(ack=ack)
            if final:
                return

    def _poke(self) -> None:
        """Tell the control stream (holding the lock) that the buffer owes the node something:
        once, and again when it is due at once."""
        self._buf.news = False
        if not self._signalled:
            self._signalled = True
            self._owed.notify()
        elif self._buf.credit_due():
            self._owed.notify()

    def _end_controls(self, how: str) -> None:
        with self._lock:
            self._ending = how
            self._owed.notify()

    def _read(self) -> None:
        convert_delivery = self._buf.convert
        try:
            for delivery in self._call:
                batch = convert_delivery(delivery)
                with self._lock:
                    slow = self._buf.add_converted(batch, delivery.size)
                    if self._buf.news:
                        self._poke()
                    self._arrived.notify_all()
                if slow and self._on_slow is not None:
                    self._on_slow(self)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                self._error = from_rpc_error(exc)
        finally:
            with self._lock:
                self._ended = True
                self._arrived.notify_all()

    def _wait(self, timeout: float | None) -> bool:
        """Wait (holding the lock) until something is buffered; False on time-out or end,
        raising the error that ended the stream, once."""
        if self._closed:  # what was not handed out went back to the queue
            return False
        if self._reader is None:
            while not (self._buf.ready() or self._ended):
                self._pull()
        elif not self._buf.ready():
            self._arrived.wait_for(lambda: self._buf.ready() or self._ended, timeout)
        if self._buf.ready():
            return True
        error, self._error = self._error, None
        if error is not None:
            raise error
        return False

    def _pull(self) -> None:
        """Read the next delivery into the buffer (holding the lock, released meanwhile),
        as the reader thread would: a consumer with no reader thread waits on the stream
        itself, so a delivery wakes the thread that takes it and no other."""
        delivery: Any = None
        error: BaseException | None = None
        self._lock.release()
        try:
            delivery = next(self._call, None)
            batch = self._buf.convert(delivery) if delivery is not None else []
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                error = from_rpc_error(exc)
        finally:
            self._lock.acquire()
        if delivery is None:
            self._ended = True
            self._error = self._error or error
            return
        self._buf.add_converted(batch, delivery.size)
        if self._buf.news:
            self._poke()

    def receive_batch(self, timeout: float | None = None) -> list[ReceivedMessage]:
        """Every message already received (at least one, waiting up to ``timeout``); an empty
        list on time-out or when closed."""
        with self._lock:
            if not self._wait(timeout):
                return []
            out = self._buf.take_all()
            if self._buf.news:
                self._poke()
        return out

    def receive(self, timeout: float | None = None) -> ReceivedMessage | None:
        """The next message, or None after ``timeout`` seconds (or when closed)."""
        buf = self._buf
        with self._lock:
            if not self._closed:  # a message that is not its delivery's last: nothing owed
                msg = next(buf.taking, None)
                if msg is not None:
                    return msg
            msg = None if self._closed else buf.take_one()
            if msg is None:
                if not self._wait(timeout):
                    return None
                msg = buf.take_one()
            if buf.news:
                self._poke()
        return msg

    def ack(self) -> None:
        """Acknowledge every message handed to the application so far. Raises
        MQRC_HCONN_ERROR once closed, MQRC_CONNECTION_BROKEN once the stream has ended (the
        messages not acknowledged before went back on the queue)."""
        with self._lock:
            if self._closed or self._ended:
                raise acknowledged_too_late(self._closed)
            self._buf.acknowledge()
            self._poke()

    def __iter__(self) -> Iterator[ReceivedMessage]:
        while True:
            msg = self.receive()
            if msg is None:
                return
            yield msg

    def close(self, timeout: float = 10.0) -> None:
        """Acknowledge what was handed to the application (``ack="auto"``), end the stream and
        wait for the node to put everything else back on the queue."""
        if self._closed:
            return
        with self._lock:
            self._closed = True
        self._end_controls("final")
        if self._reader is None:
            self._drain(timeout)
            return
        self._reader.join(timeout=timeout)
        self._call.cancel()
        self._reader.join(timeout=5)

    def _drain(self, timeout: float) -> None:
        """Read the stream to its end (the node ends it once it has the final report),
        dropping what still arrives, within ``timeout`` seconds; then cancel it."""
        timer = threading.Timer(timeout, self._call.cancel)
        timer.start()
        try:
            if not self._ended:
                for _ in self._call:
                    pass
        except grpc.RpcError:
            pass
        finally:
            timer.cancel()
            self._call.cancel()
            with self._lock:
                self._ended = True

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class StreamPublisher:
    """Publishes on one long-lived stream in batches, with up to ``window`` batches awaiting
    acknowledgement. ``flush()`` waits for every acknowledgement and raises the first error;
    when the node acknowledges nothing for the client's timeout (a hung node), flushing or
    waiting for a window slot raises MQRC_CONNECTION_BROKEN.

    ``on_ack(batch_id, accepted)`` is called (on the stream's reader thread) when the node
    answers a batch: its first ``accepted`` publications are published (committed first when
    persistent). :attr:`pending_batch_id` is the id of the batch the next publication goes in."""

    def __init__(
        self,
        open_stream: Callable[[], Any],
        batch_size: int,
        window: int,
        timeout: float = 30.0,
        on_ack: AckCallback | None = None,
    ) -> None:
        """``open_stream`` opens the publish stream (see :mod:`qmgr.client.direct`)."""
        self._batch_size = batch_size
        self._on_ack = on_ack
        self._timeout = timeout  # the longest wait for an acknowledgement before giving up
        self._acks = 0
        self._window = window
        self._next_id = 1  # the id the pending batch will be sent with
        self._batch = BatchEncoder()
        self._add = self._batch.add
        self._count = 0
        self._outstanding = 0
        self._done = threading.Condition()
        self.accepted = 0
        self.deliveries = 0
        self.forwards = 0
        self.forwarded_to: set[str] = set()
        self.cluster = ""
        self._error: BaseException | None = None
        self._stream = open_stream()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            for resp in self._stream:
                if self._on_ack is not None:
                    try:
                        self._on_ack(resp.batch_id, resp.accepted)
                    except Exception as exc:  # the application's callback failed
                        with self._done:
                            self._error = self._error or exc
                with self._done:
                    self.accepted += resp.accepted
                    self.deliveries += resp.deliveries
                    self.forwards += resp.forwards
                    self.forwarded_to.update(resp.forwarded_to)
                    self.cluster = resp.cluster or self.cluster
                    if resp.HasField("error") and self._error is None:
                        self._error = publish_error(resp, self.accepted)
                    self._outstanding -= 1
                    self._acks += 1
                    # a publisher waiting for a window slot is woken once half the window is
                    # free, not at each acknowledgement (one wake-up per several batches)
                    if self._outstanding <= self._window // 2 or self._error is not None:
                        self._done.notify_all()
        except grpc.RpcError as exc:
            with self._done:
                self._error = self._error or from_rpc_error(exc)
        finally:
            with self._done:
                if self._outstanding > 0 and self._error is None:
                    self._error = ConnectionFailed(
                        2009, "MQRC_CONNECTION_BROKEN", "the publish stream ended early"
                    )
                self._outstanding = 0
                self._done.notify_all()  # wakes a publisher waiting for a window slot

    def publish(
        self,
        topic: str,
        body: bytes | str | OutgoingMessage,
        *,
        properties: dict[str, PropertyValue] | None = None,
        persistent: bool | None = None,
        retain: bool = False,
    ) -> None:
        """Add a publication to the pending batch (sent once it holds ``batch_size``). Raises
        ``ValueError`` for a property that cannot be carried, leaving the batch as it was."""
        self._add(topic, body, properties, persistent, retain)
        self._count += 1
        if self._count >= self._batch_size:
            self._send()

    @property
    def pending_batch_id(self) -> int:
        """The id the batch being filled will be sent with (see ``on_ack``)."""
        return self._next_id

    def _send(self) -> None:
        if not self._count:
            return
        with self._done:
            free = self._slot_free() or self._done.wait_for(self._slot_free, self._timeout)
            if free and self._error is None:
                self._outstanding += 1
        if self._error is not None:
            raise self._error
        if not free:
            self._unanswered()
        self._stream.send(self._batch.request(self._next_id))
        self._next_id += 1
        self._count = 0

    def _slot_free(self) -> bool:
        """Whether a batch may be sent: fewer than ``window`` await acknowledgement (or the
        stream has failed)."""
        return self._outstanding < self._window or self._error is not None

    def _unanswered(self) -> None:
        """The node acknowledged nothing for the timeout: end the stream with an error."""
        with self._done:
            self._error = self._error or ConnectionFailed(
                2009, "MQRC_CONNECTION_BROKEN", f"no acknowledgement in {self._timeout} s"
            )
        self._stream.cancel()
        raise self._error

    def _progress(self, acks: int) -> Callable[[], bool]:
        """Whether everything was acknowledged or some acknowledgement came after ``acks``."""
        return lambda: self._outstanding <= 0 or self._acks != acks

    def flush(self) -> PublishResult:
        self._send()
        with self._done:
            while self._outstanding > 0:
                if not self._done.wait_for(self._progress(self._acks), self._timeout):
                    break
        if self._outstanding > 0 and self._error is None:
            self._unanswered()
        if self._error is not None:
            raise self._error
        return PublishResult(
            self.accepted,
            self.deliveries,
            self.forwards,
            tuple(sorted(self.forwarded_to)),
            self.cluster,
        )

    def close(self) -> PublishResult:
        try:
            return self.flush()
        finally:
            self._stream.done_sending()
            self._reader.join(timeout=5)


class QueueManagerClient:
    """put/get/browse, publish (single, batched, streamed), subscribe, and MQSC."""

    def __init__(
        self,
        address: str,
        timeout: float = 30.0,
        *,
        tls_ca: PathLike | None = None,
        tls_cert: PathLike | None = None,
        tls_key: PathLike | None = None,
        user: str | None = None,
        password: str | None = None,
    ) -> None:
        """A client of the node at ``address``. With ``tls_ca`` (default: ``$QMGR_TLS_CA``) or
        a client certificate (``tls_cert``/``tls_key``) the channel is TLS; ``user`` and
        ``password`` go with every call (a node started with ``--auth`` requires them)."""
        self.address = address
        self.timeout = timeout
        metadata = call_metadata(user, password)
        self._channel = open_channel(grpc, address, CHANNEL_OPTIONS, tls_ca, tls_cert, tls_key)
        self._msg: Any = WithMetadata(messaging_pb2_grpc.MessagingStub(self._channel), metadata)
        self._admin: Any = WithMetadata(admin_pb2_grpc.AdminStub(self._channel), metadata)
        self._direct = direct.available(self._channel)
        streams = (direct.DirectStreams if self._direct else EncodedStreams)(self._channel)
        self._streams: Any = WithMetadata(streams, metadata)
        self._connect_lock = threading.Lock()
        self._connection: Any = None
        self._connection_id = ""
        self._units = UnitsOfWork()

    def connection_id(self) -> str:
        """This client's connection on the node, opened the first time a unit of work needs
        it (and again if the node has lost it): units of work belong to it and are backed out
        when it ends."""
        with self._connect_lock:
            if self._connection is None or self._connection.done():
                call = self._msg.Connect(messaging_pb2.ConnectRequest())
                try:
                    event = next(call)
                except grpc.RpcError as exc:
                    raise from_rpc_error(exc) from None
                self._connection = call
                self._connection_id = event.connection_id
            return self._connection_id

    def _call(self, method: Any, request: Any, timeout: float | None = None) -> Any:
        try:
            return method(request, timeout=timeout or self.timeout)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None

    # -- queues -----------------------------------------------------------------------------

    def put(
        self,
        queue: str,
        body: bytes | str | OutgoingMessage,
        *,
        properties: dict[str, PropertyValue] | None = None,
        persistent: bool | None = None,
        priority: int | None = None,
        ttl_ms: int = 0,
        correl_id: bytes = b"",
    ) -> str:
        msg = convert.outgoing(body, properties, persistent, priority, ttl_ms, correl_id)
        return self.put_many(queue, [msg])[0]

    def put_many(self, queue: str, messages: list[OutgoingMessage]) -> list[str]:
        request = messaging_pb2.PutRequest(queue=queue)
        for m in messages:
            convert.to_wire(m, request.messages.add())
        return list(self._call(self._msg.Put, request).message_ids)

    def get_many(
        self,
        queue: str,
        max_messages: int = 1,
        *,
        wait_ms: int = 0,
        unit_of_work: str = "",
        browse: bool = False,
        browse_after: int = 0,
        message_id: str = "",
        correl_id: bytes = b"",
    ) -> list[ReceivedMessage]:
        connection_id = self.connection_id() if unit_of_work else ""
        if unit_of_work:
            self._units.began(unit_of_work, connection_id)
        request = messaging_pb2.GetRequest(
            queue=queue,
            max_messages=max_messages,
            wait_ms=wait_ms,
            browse=browse,
            browse_after=browse_after,
            unit_of_work=unit_of_work,
            match_message_id=message_id,
            match_correl_id=correl_id,
            connection_id=connection_id,
            max_response_bytes=MAX_RESPONSE_BYTES,
        )
        timeout = self.timeout + wait_ms / 1000.0
        return [convert.from_wire(m) for m in self._call(self._msg.Get, request, timeout).messages]

    def get(
        self, queue: str, *, wait_ms: int = 0, unit_of_work: str = "", **kw: Any
    ) -> ReceivedMessage | None:
        got = self.get_many(queue, 1, wait_ms=wait_ms, unit_of_work=unit_of_work, **kw)
        return got[0] if got else None

    def browse(self, queue: str, *, after: int = 0, limit: int = 100) -> list[ReceivedMessage]:
        return self.get_many(queue, limit, browse=True, browse_after=after)

    def commit(self, unit_of_work: str) -> int:
        """Commit; raises MQRC_BACKED_OUT (having backed out the rest) when the connection
        the unit of work began on ended before, as the node then backed it out."""
        request = messaging_pb2.UnitOfWork(
            unit_of_work=unit_of_work, connection_id=self.connection_id()
        )
        if not self._units.ending(unit_of_work, request.connection_id):
            self._call(self._msg.Backout, request)
            raise backed_out(unit_of_work)
        return int(self._call(self._msg.Commit, request).messages)

    def backout(self, unit_of_work: str) -> int:
        request = messaging_pb2.UnitOfWork(
            unit_of_work=unit_of_work, connection_id=self.connection_id()
        )
        self._units.ending(unit_of_work, request.connection_id)
        return int(self._call(self._msg.Backout, request).messages)

    @contextmanager
    def unit_of_work(self) -> Iterator[str]:
        """Gets inside the block are committed at its end, backed out if it raises."""
        uow = uuid.uuid4().hex
        try:
            yield uow
        except BaseException:
            self.backout(uow)
            raise
        self.commit(uow)

    def consume(
        self,
        queue: str,
        max_batch: int = 256,
        *,
        max_pending_messages: int = DEFAULT_PENDING_MESSAGES,
        max_pending_bytes: int = DEFAULT_PENDING_BYTES,
    ) -> Generator[list[ReceivedMessage], None, None]:
        """Batches of messages from ``queue`` as they arrive. Each batch is acknowledged once
        the next one is asked for (or the iteration ends): a consumer that dies while it
        handles one gets it again; what was not handed out goes back on the queue. The
        iterating thread reads the stream itself while it waits for a batch (no reader
        thread: nothing but that thread takes the messages)."""
        consumer = self._consumer(
            queue, max_batch, "explicit", max_pending_messages, max_pending_bytes, None, False
        )
        try:
            while True:
                batch = consumer.receive_batch()
                if not batch:
                    return
                try:
                    yield batch
                except GeneratorExit:  # the iteration ended
                    consumer.ack()
                    raise
                consumer.ack()
        finally:
            consumer.close()

    def consumer(
        self,
        queue: str,
        max_batch: int = 256,
        *,
        ack: str = "auto",
        max_pending_messages: int = DEFAULT_PENDING_MESSAGES,
        max_pending_bytes: int = DEFAULT_PENDING_BYTES,
        on_slow_consumer: SlowConsumerCallback | None = None,
    ) -> Subscription:
        """A streaming consumer of ``queue`` with the interface of a :class:`Subscription`."""
        return self._consumer(
            queue, max_batch, ack, max_pending_messages, max_pending_bytes, on_slow_consumer, True
        )

    def _consumer(
        self,
        queue: str,
        max_batch: int,
        ack: str,
        max_pending_messages: int,
        max_pending_bytes: int,
        on_slow_consumer: SlowConsumerCallback | None,
        background: bool,
    ) -> Subscription:
        buffer = DeliveryBuffer(max_pending_messages, max_pending_bytes, ack)
        return Subscription(
            self._streams.Consume,
            open_consumer(queue, max_batch, buffer),
            messaging_pb2.ConsumeControl,
            buffer,
            named=False,
            queue=queue,
            on_slow_consumer=on_slow_consumer,
            background=background,
        )

    # -- publish/subscribe ------------------------------------------------------------------

    def publish(
        self,
        topic: str,
        body: bytes | str | OutgoingMessage,
        *,
        properties: dict[str, PropertyValue] | None = None,
        persistent: bool | None = None,
        priority: int | None = None,
        ttl_ms: int = 0,
        retain: bool = False,
        scope_qmgr: bool = False,
    ) -> int:
        """Publish one message; returns the copies delivered to subscriptions on this node."""
        msg = convert.outgoing(body, properties, persistent, priority, ttl_ms)
        return self.publish_many([(topic, msg)], retain=retain, scope_qmgr=scope_qmgr).deliveries

    def publish_many(
        self,
        publications: list[tuple[str, OutgoingMessage]],
        *,
        retain: bool = False,
        scope_qmgr: bool = False,
    ) -> PublishResult:
        request = messaging_pb2.PublishRequest()
        for topic, msg in publications:
            convert.publication(topic, msg, retain, scope_qmgr, request.publications.add())
        resp = self._call(self._msg.Publish, request)
        if resp.HasField("error"):
            raise publish_error(resp, resp.accepted)
        return convert.publish_result(resp)

    def stream_publisher(
        self, batch_size: int = 100, window: int = 8, *, on_ack: AckCallback | None = None
    ) -> StreamPublisher:
        """A :class:`StreamPublisher`; ``on_ack(batch_id, accepted)`` is told of each batch
        the node answers."""
        if self._direct:
            open_stream = self._streams.PublishStream
        else:
            open_stream = functools.partial(direct.QueuedStream, self._streams.PublishStream)
        return StreamPublisher(open_stream, batch_size, window, self.timeout, on_ack)

    def subscribe(
        self,
        topic: str,
        *,
        name: str = "",
        durable: bool = False,
        destination: str = "",
        new_publications_only: bool = False,
        scope_qmgr: bool = False,
        user_data: str = "",
        max_batch: int = 256,
        ack: str = "auto",
        max_pending_messages: int = DEFAULT_PENDING_MESSAGES,
        max_pending_bytes: int = DEFAULT_PENDING_BYTES,
        on_slow_consumer: SlowConsumerCallback | None = None,
        wildcard_char: bool = False,
    ) -> Subscription:
        """Create (or resume) a subscription and receive its publications; see
        :class:`Subscription` for acknowledgement, flow control and the slow-consumer signal.
        ``wildcard_char`` is MQSO_WILDCARD_CHAR (WSCHEMA(CHAR)): in ``topic``, ``*`` matches
        any characters including ``/``, ``?`` one character, ``%`` escapes."""
        buffer = DeliveryBuffer(max_pending_messages, max_pending_bytes, ack)
        opening = open_subscription(
            buffer,
            name=name,
            topic=topic,
            durable=durable,
            destination=destination,
            new_publications_only=new_publications_only,
            scope_qmgr=scope_qmgr,
            user_data=user_data,
            max_batch=max_batch,
            wildcard_char=wildcard_char,
        )
        return Subscription(
            self._streams.Subscribe,
            opening,
            messaging_pb2.SubscribeControl,
            buffer,
            named=True,
            on_slow_consumer=on_slow_consumer,
            open_timeout=self.timeout,
        )

    def create_subscription(
        self, topic: str, *, name: str, durable: bool = True, destination: str = ""
    ) -> str:
        """Create (or resume) a subscription without receiving; returns its queue."""
        request = messaging_pb2.SubscribeRequest(
            name=name, topic=topic, durable=durable, destination=destination, no_receive=True
        )
        call = self._msg.Subscribe(
            iter([messaging_pb2.SubscribeControl(open=request)]), timeout=self.timeout
        )
        try:
            first = next(call)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None
        finally:
            call.cancel()
        return str(first.queue)

    def unsubscribe(self, name: str) -> None:
        self._call(self._msg.Unsubscribe, messaging_pb2.UnsubscribeRequest(name=name))

    # -- admin ------------------------------------------------------------------------------

    def mqsc(self, command: str, *, check: bool = True) -> list[MqscRecord]:
        """Run one MQSC command; returns its records, raising MqscCommandError on failure
        unless ``check`` is False."""
        resp = self._call(self._admin.Mqsc, admin_pb2.MqscRequest(command=command))
        recs = convert.records(resp)
        if check and not resp.ok:
            raise MqscCommandError(command, recs)
        return recs

    def mqsc_ok(self, command: str) -> tuple[bool, list[MqscRecord]]:
        resp = self._call(self._admin.Mqsc, admin_pb2.MqscRequest(command=command))
        return bool(resp.ok), convert.records(resp)

    @property
    def servicebus(self) -> ServiceBusAdmin:
        """The Service Bus namespace the node hosts: entities, rules, Config.json, and sending
        and inspecting messages (see :mod:`qmgr.client.servicebus`)."""
        return ServiceBusAdmin(self._call, self._admin)

    def wait_ready(self, timeout: float = 10.0) -> None:
        try:
            grpc.channel_ready_future(self._channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            raise MQClientError(
                2059, "MQRC_Q_MGR_NOT_AVAILABLE", f"no node at {self.address}"
            ) from None

    def close(self) -> None:
        if self._connection is not None:
            self._connection.cancel()
        self._channel.close()

    def __enter__(self) -> QueueManagerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
