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

    Deliveries are kept whole, as converted batches, and handed out by position in the batch
    at hand: taking a message costs an index step, and the counts the application sees
    (:attr:`pending_messages`) are derived from two running totals instead of kept per
    message."""

    def __init__(self, max_messages: int, max_bytes: int, ack: str) -> None:
        if ack not in ACK_MODES:
            raise ValueError(f"ack must be one of {ACK_MODES}, not {ack!r}")
        if max_messages < 1 or max_bytes < 1:
            raise ValueError("max_pending_messages and max_pending_bytes must be positive")
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.auto = ack == "auto"
        self._deliveries: deque[tuple[list[ReceivedMessage], int]] = deque()
        self._current: list[ReceivedMessage] = []  # the delivery being handed out
        self._next = 0  # the position in it of the next message to hand out
        self._current_size = 0
        self.received = 0  # messages received (cumulative)
        self.pending_bytes = 0
        self.handed = 0  # handed to the application (cumulative)
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
        return self._next < len(self._current) or bool(self._deliveries)

    def _delivery_taken(self) -> None:
        """The delivery at hand has been handed out whole: its credit is due."""
        self._credit_messages += len(self._current)
        self._credit_bytes += self._current_size
        self.pending_bytes -= self._current_size
        self._current = []
        self._next = self._current_size = 0
        self.full = False
        self.news = True

    def take_one(self) -> ReceivedMessage | None:
        current, i = self._current, self._next
        if i >= len(current):
            if not self._deliveries:
                return None
            current, self._current_size = self._deliveries.popleft()
            self._current, i = current, 0
        msg = current[i]
        self.handed += 1
        if i + 1 < len(current):
            self._next = i + 1
        else:
            self._delivery_taken()
        return msg

    def take_all(self) -> list[ReceivedMessage]:
        out = self._current[self._next :]
        if self._current:
            self._delivery_taken()
        while self._deliveries:
            self._current, self._current_size = self._deliveries.popleft()
            out += self._current
            self._delivery_taken()
        self.handed += len(out)
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
