"""The shapes applications see: outgoing messages, received messages, MQSC records."""

from __future__ import annotations

from dataclasses import dataclass, field

from qmgr.core.admin.records import render_record
from qmgr.core.values import Int32, PropertyValue

__all__ = ["Int32", "OutgoingMessage", "ReceivedMessage", "MqscRecord", "PublishResult"]


@dataclass
class OutgoingMessage:
    body: bytes | str
    properties: dict[str, PropertyValue] = field(default_factory=dict)
    persistent: bool | None = None  # None: as the queue's or topic's DEFPSIST
    priority: int | None = None  # None: as DEFPRTY
    ttl_ms: int = 0
    correl_id: bytes = b""
    message_id: str = ""
    reply_to_queue: str = ""


@dataclass(slots=True)
class ReceivedMessage:
    message_id: str
    body: bytes
    properties: dict[str, PropertyValue]
    persistent: bool
    priority: int
    correl_id: bytes
    put_time_ms: int
    backout_count: int
    topic: str
    sequence: int
    expiry_ms: int = 0
    reply_to_queue: str = ""
    received_at: float = 0.0  # when the client took it off the wire (seconds since the epoch)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


@dataclass
class MqscRecord:
    code: str
    text: str
    attrs: dict[str, str]

    def __getitem__(self, key: str) -> str:
        return self.attrs[key]

    def render(self) -> str:
        return render_record(self.code, self.text, self.attrs.items())


@dataclass
class PublishResult:
    """What a node did with publications: how many it accepted, the copies it delivered to its
    own subscriptions, and (a cluster member) the copies it sent on to other members, to which
    members, and its cluster's name. ``deliveries`` and ``forwards`` both 0: nothing was
    delivered anywhere."""

    accepted: int
    deliveries: int
    forwards: int = 0
    forwarded_to: tuple[str, ...] = ()
    cluster: str = ""
