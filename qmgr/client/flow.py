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
from qmgr.client.types import ReceivedMessage
from qmgr.wire import messaging_pb2

MAX_RESPONSE_BYTES = 64 * 1024 * 1024  # the clients' receive limit, declared to the node
DEFAULT_PENDING_MESSAGES = 65_536
DEFAULT_PENDING_BYTES = 64 * 1024 * 1024
ACK_MODES = ("auto", "explicit")


def merge_ack(into: messaging_pb2.Ack, later: messaging_pb2.Ack) -> None:
    """Fold a later acknowledgement into an earlier one (acknowledgements are cumulative,
    credit adds up)."""
    into.acknowledged = max(into.acknowledged, later.acknowledged)
    into.handed = max(into.handed, later.handed)
    into.closing = into.closing or later.closing
    into.credit_messages += later.credit_messages
    into.credit_bytes += later.credit_bytes


class DeliveryBuffer:
    """``ack="auto"``: a message is acknowledged once it has been handed to the application;
    ``ack="explicit"``: only by :meth:`acknowledge` (everything handed out so far)."""

    def __init__(self, max_messages: int, max_bytes: int, ack: str) -> None:
        if ack not in ACK_MODES:
            raise ValueError(f"ack must be one of {ACK_MODES}, not {ack!r}")
        if max_messages < 1 or max_bytes < 1:
            raise ValueError("max_pending_messages and max_pending_bytes must be positive")
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.auto = ack == "auto"
        self._deliveries: deque[tuple[list[ReceivedMessage], int]] = deque()
        self._current: deque[ReceivedMessage] = deque()
        self._current_count = 0
        self._current_size = 0
        self.pending_messages = 0  # received, not yet handed to the application
        self.pending_bytes = 0
        self.handed = 0  # handed to the application (cumulative)
        self.acknowledged = 0  # acknowledged by the application (explicit mode)
        self._ack_sent = 0
        self._credit_messages = 0
        self._credit_bytes = 0
        self._force = False
        self.full = False  # the buffer is full: the node has stopped sending
        self.slow_consumer_events = 0

    def limits(self, max_response_bytes: int) -> messaging_pb2.DeliveryLimits:
        return messaging_pb2.DeliveryLimits(
            max_pending_messages=self.max_messages,
            max_pending_bytes=self.max_bytes,
            max_response_bytes=max_response_bytes,
            reports_handed=True,
        )

    def add(self, delivery: messaging_pb2.Delivery) -> bool:
        """Buffer a delivery; True when this made the buffer full (a slow consumer)."""
        now = time.time()
        from_wire = convert.from_wire
        batch = [from_wire(m, now) for m in delivery.messages]
        self._deliveries.append((batch, delivery.size))
        self.pending_messages += len(batch)
        self.pending_bytes += delivery.size
        if self.full or (
            self.pending_messages < self.max_messages and self.pending_bytes < self.max_bytes
        ):
            return False
        self.full = True
        self.slow_consumer_events += 1
        return True

    def ready(self) -> bool:
        return bool(self._current or self._deliveries)

    def _next_delivery(self) -> None:
        batch, size = self._deliveries.popleft()
        self._current.extend(batch)
        self._current_count = len(batch)
        self._current_size = size

    def _delivery_taken(self) -> None:
        self._credit_messages += self._current_count
        self._credit_bytes += self._current_size
        self.pending_bytes -= self._current_size
        self._current_count = self._current_size = 0
        self.full = False

    def take_one(self) -> ReceivedMessage | None:
        if not self._current:
            if not self._deliveries:
                return None
            self._next_delivery()
        msg = self._current.popleft()
        self.handed += 1
        self.pending_messages -= 1
        if not self._current:
            self._delivery_taken()
        return msg

    def take_all(self) -> list[ReceivedMessage]:
        out = list(self._current)
        self._current.clear()
        if out:
            self._delivery_taken()
        while self._deliveries:
            self._next_delivery()
            out.extend(self._current)
            self._current.clear()
            self._delivery_taken()
        self.handed += len(out)
        self.pending_messages -= len(out)
        return out

    def acknowledge(self) -> None:
        """Acknowledge everything handed to the application so far."""
        self.acknowledged = self.handed
        self._force = True

    def credit_is_due(self, ack: messaging_pb2.Ack) -> bool:
        """Whether ``ack`` returns enough credit (a quarter of the buffer) to send it now."""
        return (
            ack.credit_messages * 4 >= self.max_messages or ack.credit_bytes * 4 >= self.max_bytes
        )

    def control(self, *, final: bool = False) -> messaging_pb2.Ack | None:
        """The acknowledgement and credit to send now, if any: after a whole delivery was
        taken, after :meth:`acknowledge`, and (``final``) when closing: that one says so, as
        the node then knows exactly what was handed to the application."""
        through = self.handed if self.auto else self.acknowledged
        if not (self._credit_messages or self._force or final):
            return None
        ack = messaging_pb2.Ack(
            acknowledged=through,
            handed=self.handed,
            closing=final,
            credit_messages=self._credit_messages,
            credit_bytes=self._credit_bytes,
        )
        self._ack_sent = through
        self._credit_messages = self._credit_bytes = 0
        self._force = False
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
