"""The blocking client's streams, each run by the thread that reads it.

A bidirectional stream of the gRPC runtime's blocking API passes every message through three
Python threads: one feeds the request iterator and sleeps until each send completes, a
channel-wide one takes every completion off the runtime's queue and wakes whoever waits for
it, and the reader wakes last. On the SDK's streams (a publisher's batches and their answers,
a subscriber's deliveries) those wake-ups were most of the client's CPU per message.

A :class:`DirectStream` is a call with a completion queue of its own (the runtime's
"segregated" call, which its single-threaded unary-stream mode uses too): the thread that
reads the responses takes every completion itself, sends included, and a send is started by
the thread that sends, at once when no other is in flight (a call allows one at a time),
else by the reader when the one before completes. Responses, their order, the end of the
stream and its status are those of the runtime's own streams; the error raised is a
``grpc.RpcError`` with the status code, details and trailing metadata.

No library offers this through a public API, so it rests on the runtime's lower layer
(``grpc._cython.cygrpc``); :func:`blocking_streams` falls back to the public API's streams
(:class:`QueuedStream` for the publisher) when that layer is not as expected.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from qmgr.client.convert import WireDelivery
from qmgr.wire import messaging_pb2

try:
    from grpc._cython import cygrpc
except ImportError:  # pragma: no cover - the runtime's layout changed
    cygrpc = None

log = logging.getLogger(__name__)

ENABLED = True  # streams of the runtime's public API when False (tests compare both)
_STATUS = {code.value[0]: code for code in grpc.StatusCode}


class StreamError(grpc.RpcError):
    """How a stream ended when not with OK (the shape ``errors.from_rpc_error`` reads)."""

    def __init__(self, code: grpc.StatusCode, details: str, trailing: tuple[Any, ...]) -> None:
        super().__init__(f"{code}: {details}")
        self._code = code
        self._details = details
        self._trailing = trailing

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> tuple[Any, ...]:
        return self._trailing


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value or "")


class DirectStream:
    """One bidirectional stream (see the module docstring). :meth:`send` and
    :meth:`done_sending` may be called from any thread; iterating (the responses, until the
    stream ends) from one thread at a time, which also completes the sends."""

    def __init__(
        self,
        channel: Any,
        method: bytes,
        deserializer: Callable[[bytes], Any],
        metadata: tuple[tuple[str, str], ...],
    ) -> None:
        self._deserialize = deserializer
        self._lock = threading.Lock()
        self._waiting: deque[bytes | None] = deque()  # sends queued behind the one in flight
        self._sending = False
        self._finished_sending = False
        self._responses: deque[Any] = deque()
        self._code: grpc.StatusCode | None = None
        self._details = ""
        self._trailing: tuple[Any, ...] = ()
        ops = cygrpc.OperationType
        self._send_op, self._receive_op, self._status_op = (
            ops.send_message,
            ops.receive_message,
            ops.receive_status_on_client,
        )
        self._call = channel.segregated_call(
            cygrpc.PropagationConstants.GRPC_PROPAGATE_DEFAULTS,
            method,
            None,
            None,
            metadata,
            None,
            (
                (
                    (
                        cygrpc.SendInitialMetadataOperation(metadata, 0),
                        cygrpc.ReceiveStatusOnClientOperation(0),
                    ),
                    None,
                ),
                ((cygrpc.ReceiveInitialMetadataOperation(0),), None),
            ),
            None,
            None,
        )
        self._pending = 2  # batches started whose completion has not been taken
        self._start((cygrpc.ReceiveMessageOperation(0),))

    def _start(self, operations: tuple[Any, ...]) -> bool:
        """Start a batch (False: the call has ended). Called holding the lock."""
        if self._call.operate(operations, None):
            self._pending += 1
            return True
        return False

    def _start_send(self, data: bytes | None) -> None:
        """Send ``data`` (None: the end of the requests). Called holding the lock."""
        if data is None:
            started = self._start((cygrpc.SendCloseFromClientOperation(0),))
        else:
            started = self._start((cygrpc.SendMessageOperation(data, 0),))
        self._sending = started

    def send(self, data: bytes) -> None:
        """Send one request (ignored once the stream has ended, as the runtime's streams
        stop taking requests then)."""
        with self._lock:
            if self._finished_sending:
                return
            if self._sending:
                self._waiting.append(data)
            else:
                self._start_send(data)

    def done_sending(self) -> None:
        """No more requests: the node sees the end of the stream after the last one."""
        with self._lock:
            if self._finished_sending:
                return
            self._finished_sending = True
            if self._sending:
                self._waiting.append(None)
            else:
                self._start_send(None)

    def send_all(self, requests: Iterator[Any], serializer: Callable[[Any], bytes]) -> None:
        """Send each of ``requests``, then the end (what the runtime's streams do with a
        request iterator, on a thread of their own)."""
        try:
            for request in requests:
                self.send(serializer(request))
        except Exception:
            log.exception("the requests of a stream failed")
            self._abort(grpc.StatusCode.UNKNOWN, "Exception iterating requests!")
        self.done_sending()

    def cancel(self) -> bool:
        """End the stream at once (CANCELLED)."""
        with self._lock:
            if self._code is None:
                self._code, self._details = grpc.StatusCode.CANCELLED, "Locally cancelled"
            self._waiting.clear()
        self._call.cancel(cygrpc.StatusCode.cancelled, "Locally cancelled by application!")
        return True

    def _abort(self, code: grpc.StatusCode, details: str) -> None:
        with self._lock:
            if self._code is None:
                self._code, self._details = code, details
            self._waiting.clear()
        self._call.cancel(cygrpc.StatusCode.cancelled, details)

    def __iter__(self) -> DirectStream:
        return self

    def __next__(self) -> Any:
        responses = self._responses
        while not responses:
            if self._pending == 0:  # every batch completed: the call is over
                if self._code is grpc.StatusCode.OK:
                    raise StopIteration
                raise StreamError(
                    self._code or grpc.StatusCode.UNKNOWN, self._details, self._trailing
                )
            try:
                event = self._call.next_event()
            except BaseException:  # a signal handler raised: the runtime dropped the call
                with self._lock:
                    self._pending = 0
                    if self._code is None:
                        self._code, self._details = grpc.StatusCode.CANCELLED, "interrupted"
                raise
            self._take(event)
        return responses.popleft()

    def _take(self, event: Any) -> None:
        """One completed batch."""
        for operation in event.batch_operations:
            kind = operation.type()
            if kind == self._receive_op:
                data = operation.message()
                if data is not None and self._code is None:
                    try:
                        self._responses.append(self._deserialize(data))
                    except Exception:
                        log.exception("a response could not be read")
                        self._abort(grpc.StatusCode.INTERNAL, "Exception deserializing response!")
                        continue
                    with self._lock:
                        self._start((cygrpc.ReceiveMessageOperation(0),))
            elif kind == self._send_op or kind == cygrpc.OperationType.send_close_from_client:
                with self._lock:
                    self._sending = False
                    if self._waiting:
                        self._start_send(self._waiting.popleft())
            elif kind == self._status_op:
                trailing = operation.trailing_metadata()
                with self._lock:
                    self._waiting.clear()
                    if self._code is None:
                        self._code = _STATUS.get(operation.code(), grpc.StatusCode.UNKNOWN)
                        self._details = _text(operation.details())
                    self._trailing = tuple(trailing or ())
        with self._lock:
            self._pending -= 1


class DirectStreams:
    """The SDK's streams (Subscribe, Consume, PublishStream) as :class:`DirectStream`, with
    the methods of :class:`qmgr.client.flow.EncodedStreams` (``metadata`` by keyword)."""

    def __init__(self, channel: Any) -> None:
        self._channel = channel._channel  # the runtime's lower-layer channel
        service = messaging_pb2.DESCRIPTOR.services_by_name["Messaging"].full_name
        self._subscribe = f"/{service}/Subscribe".encode()
        self._consume = f"/{service}/Consume".encode()
        self._publish = f"/{service}/PublishStream".encode()

    def _driven(
        self, method: bytes, requests: Iterator[Any], serializer: Callable[[Any], bytes], md: Any
    ) -> DirectStream:
        stream = DirectStream(self._channel, method, WireDelivery, tuple(md or ()))
        threading.Thread(target=stream.send_all, args=(requests, serializer), daemon=True).start()
        return stream

    def Subscribe(self, requests: Iterator[Any], metadata: Any = ()) -> DirectStream:  # noqa: N802
        serialize = messaging_pb2.SubscribeControl.SerializeToString
        return self._driven(self._subscribe, requests, serialize, metadata)

    def Consume(self, requests: Iterator[Any], metadata: Any = ()) -> DirectStream:  # noqa: N802
        serialize = messaging_pb2.ConsumeControl.SerializeToString
        return self._driven(self._consume, requests, serialize, metadata)

    def PublishStream(self, metadata: Any = ()) -> DirectStream:  # noqa: N802
        """A publish stream: requests are sent with ``send`` (already encoded)."""
        return DirectStream(
            self._channel,
            self._publish,
            messaging_pb2.PublishResponse.FromString,
            tuple(metadata or ()),
        )


class QueuedStream:
    """A publish stream of the runtime's public API with :class:`DirectStream`'s methods: the
    requests go through a queue its request iterator reads."""

    def __init__(self, method: Callable[[Iterator[bytes]], Any]) -> None:
        self._requests: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._call = method(iter(self._requests.get, None))

    def send(self, data: bytes) -> None:
        self._requests.put(data)

    def done_sending(self) -> None:
        self._requests.put(None)

    def cancel(self) -> bool:
        return bool(self._call.cancel())

    def __iter__(self) -> Iterator[Any]:
        return iter(self._call)


def available(channel: Any) -> bool:
    """Whether ``channel`` (a blocking channel) can carry :class:`DirectStream`."""
    return (
        ENABLED
        and cygrpc is not None
        and hasattr(getattr(channel, "_channel", None), "segregated_call")
        and hasattr(cygrpc, "OperationType")
    )
