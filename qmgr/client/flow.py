"""The consumer side of acknowledged, flow-controlled delivery (shared by both clients).

A :class:`DeliveryBuffer` holds what the node sent and the application has not taken yet. The
node sends only within the credit granted: at most ``max_messages`` messages and (give or take
one message) ``max_bytes`` bytes outstanding. Credit is granted back when the application has
taken a whole delivery; acknowledgements (cumulative message counts) ride on the same control
message, so there is one per delivery, not one per message.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from operator import length_hint
from typing import Any

from qmgr.client import convert
from qmgr.client.convert import WireDelivery
from qmgr.client.types import ReceivedMessage
from qmgr.wire import messaging_pb2

MAX_RESPONSE_BYTES = 64 * 1024 * 1024  # the clients' receive limit, declared to the node
DEFAULT_PENDING_MESSAGES = 65_536
DEFAULT_PENDING_BYTES = 64 * 1024 * 1024
ACK_MODES = ("auto", "explicit")


class DeliveryBuffer:
    """``ack="auto"``: a message is acknowledged once it has been handed to the application;
    ``ack="explicit"``: only by :meth:`acknowledge` (everything handed out so far).

    Deliveries are kept whole, as converted batches. The messages of the one at hand but its
    last are handed out by an iterator (:attr:`taking`): a consumer holding the lock takes one
    with ``next(buffer.taking, None)`` alone, a single call, and the count of messages handed
    out (:attr:`handed`) is derived from the iterator's position instead of kept per message.
    The last message of a delivery goes through :meth:`take_one`, which makes its credit due."""

    def __init__(self, max_messages: int, max_bytes: int, ack: str) -> None:
        if ack not in ACK_MODES:
            raise ValueError(f"ack must be one of {ACK_MODES}, not {ack!r}")
        if max_messages < 1 or max_bytes < 1:
            raise ValueError("max_pending_messages and max_pending_bytes must be positive")
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.auto = ack == "auto"
        self._deliveries: deque[tuple[list[ReceivedMessage], int]] = deque()
        # the delivery being handed out (empty once its last message is handed out), and an
        # iterator over its messages but the last (_ahead of them)
        self._current: list[ReceivedMessage] = []
        self.taking: Iterator[ReceivedMessage] = iter(())
        self._ahead = 0
        self._current_size = 0
        self.received = 0  # messages received (cumulative)
        self.pending_bytes = 0
        self._handed = 0  # handed to the application, less those taken from self.taking
        self.acknowledged = 0  # acknowledged by the application (explicit mode)
        self._credit_messages = 0
        self._credit_bytes = 0
        self._force = False
        self.full = False  # the buffer is full: the node has stopped sending
        self.slow_consumer_events = 0
        # more is owed to the node since the consumer last looked (it clears this): checked
        # on every message taken, so it is a plain attribute
        self.news = False

    @property
    def handed(self) -> int:
        """Messages handed to the application (cumulative)."""
        return self._handed + self._ahead - length_hint(self.taking)

    @property
    def pending_messages(self) -> int:
        """Received, not yet handed to the application."""
        return self.received - self.handed

    def limits(self, max_response_bytes: int) -> messaging_pb2.DeliveryLimits:
        return messaging_pb2.DeliveryLimits(
            max_pending_messages=self.max_messages,
            max_pending_bytes=self.max_bytes,
            max_response_bytes=max_response_bytes,
            reports_handed=True,
        )

    @staticmethod
    def convert(delivery: WireDelivery) -> list[ReceivedMessage]:
        """A delivery's messages (see :class:`EncodedStreams`) as the application sees them;
        needs no lock, as the buffer is not touched."""
        return convert.delivered(delivery, time.time())

    def add(self, delivery: WireDelivery) -> bool:
        """Buffer a delivery; True when this made the buffer full (a slow consumer)."""
        return self.add_converted(self.convert(delivery), delivery.size)

    def add_converted(self, batch: list[ReceivedMessage], size: int) -> bool:
        """Buffer a delivery's messages (see :meth:`convert`) and its size; True when this made
        the buffer full (a slow consumer)."""
        if not batch:  # nothing to hand out: its credit is due at once
            self._credit_bytes += size
            self.news = True
            return False
        self._deliveries.append((batch, size))
        self.received += len(batch)
        self.pending_bytes += size
        if self.full or (
            self.received - self.handed < self.max_messages and self.pending_bytes < self.max_bytes
        ):
            return False
        self.full = True
        self.slow_consumer_events += 1
        return True

    def ready(self) -> bool:
        return bool(self._current or self._deliveries)

    def _delivery_taken(self) -> None:
        """The delivery at hand has been handed out whole: its credit is due."""
        self._handed += len(self._current)
        self._credit_messages += len(self._current)
        self._credit_bytes += self._current_size
        self.pending_bytes -= self._current_size
        self._current = []
        self.taking = iter(())
        self._ahead = self._current_size = 0
        self.full = False
        self.news = True

    def _next_delivery(self) -> bool:
        """Make the next delivery the one at hand; False when there is none."""
        if not self._deliveries:
            return False
        current, self._current_size = self._deliveries.popleft()
        self._current = current
        self._ahead = len(current) - 1
        self.taking = iter(current[:-1])
        return True

    def take_one(self) -> ReceivedMessage | None:
        msg = next(self.taking, None)
        if msg is not None:
            return msg
        if not self._current:
            if not self._next_delivery():
                return None
            msg = next(self.taking, None)
            if msg is not None:
                return msg
        msg = self._current[-1]  # the delivery's last
        self._delivery_taken()
        return msg

    def take_all(self) -> list[ReceivedMessage]:
        out: list[ReceivedMessage] = []
        if self._current:
            out += self.taking
            out.append(self._current[-1])
            self._delivery_taken()
        while self._next_delivery():
            out += self._current
            self._delivery_taken()
        return out

    def acknowledge(self) -> None:
        """Acknowledge everything handed to the application so far."""
        self.acknowledged = self.handed
        self._force = True
        self.news = True

    def credit_due(self) -> bool:
        """Whether the credit owed returns enough (a quarter of the buffer) to send it now."""
        return (
            self._credit_messages * 4 >= self.max_messages
            or self._credit_bytes * 4 >= self.max_bytes
        )

    def control_due(self) -> bool:
        """Whether :meth:`control` has something to send."""
        return bool(self._credit_messages or self._credit_bytes or self._force)

    def control(self, *, final: bool = False) -> messaging_pb2.Ack | None:
        """The acknowledgement and credit to send now, if any: after a whole delivery was
        taken, after :meth:`acknowledge`, and (``final``) when closing: that one says so, as
        the node then knows exactly what was handed to the application."""
        through = self.handed if self.auto else self.acknowledged
        if not (final or self.control_due()):
            return None
        ack = messaging_pb2.Ack(
            acknowledged=through,
            handed=self.handed,
            closing=final,
            credit_messages=self._credit_messages,
            credit_bytes=self._credit_bytes,
        )
        self._credit_messages = self._credit_bytes = 0
        self._force = self.news = False
        return ack


class BufferedConsumer:
    """What both clients' subscriptions report about their buffer."""

    _buf: DeliveryBuffer

    @property
    def slow_consumer(self) -> bool:
        """True while the buffer is full (the node has stopped sending)."""
        return self._buf.full

    @property
    def slow_consumer_events(self) -> int:
        """How many times the buffer became full."""
        return self._buf.slow_consumer_events

    @property
    def pending_messages(self) -> int:
        """Messages received and not yet handed to the application."""
        return self._buf.pending_messages

    @property
    def pending_bytes(self) -> int:
        return self._buf.pending_bytes


def open_subscription(buffer: DeliveryBuffer, **fields: Any) -> messaging_pb2.SubscribeControl:
    """The first message of a Subscribe stream: the subscription and the client's limits."""
    request = messaging_pb2.SubscribeRequest(limits=buffer.limits(MAX_RESPONSE_BYTES), **fields)
    return messaging_pb2.SubscribeControl(open=request)


def open_consumer(
    queue: str, max_batch: int, buffer: DeliveryBuffer
) -> messaging_pb2.ConsumeControl:
    """The first message of a Consume stream: the queue and the client's limits."""
    request = messaging_pb2.ConsumeRequest(
        queue=queue, max_batch=max_batch, limits=buffer.limits(MAX_RESPONSE_BYTES)
    )
    return messaging_pb2.ConsumeControl(open=request)


class EncodedStreams:
    """The streaming methods of ``channel`` (blocking or asyncio) whose messages the SDK
    encodes or decodes its own way, with the same bytes on the wire: Subscribe and Consume
    with deliveries decoded as :class:`WireDelivery` (read the way
    :meth:`DeliveryBuffer.convert` takes them), and PublishStream taking each
    ``PublishRequest`` already encoded (``pubwire.BatchEncoder``)."""

    def __init__(self, channel: Any) -> None:
        service = messaging_pb2.DESCRIPTOR.services_by_name["Messaging"].full_name
        self.Subscribe = channel.stream_stream(
            f"/{service}/Subscribe",
            request_serializer=messaging_pb2.SubscribeControl.SerializeToString,
            response_deserializer=WireDelivery,
        )
        self.PublishStream = channel.stream_stream(
            f"/{service}/PublishStream",
            request_serializer=None,  # bytes as they are
            response_deserializer=messaging_pb2.PublishResponse.FromString,
        )
        self.Consume = channel.stream_stream(
            f"/{service}/Consume",
            request_serializer=messaging_pb2.ConsumeControl.SerializeToString,
            response_deserializer=WireDelivery,
        )
