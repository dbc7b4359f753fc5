"""Bridges between the MQ topic tree and the node's Service Bus namespace (pure).

A bridge is an object of qmgr's own, defined with MQSC (``DEFINE BRIDGE``):

- ``DIRECTION(TOSB)``: an ordinary durable MQ subscription on ``TOPICSTR`` (wildcards allowed;
  named :func:`subscription_name`, its queue managed) whose publications are sent to the
  Service Bus queue or topic ``SBENTITY`` of the namespace the same node hosts;
- ``DIRECTION(FROMSB)``: the messages of the Service Bus queue or subscription ``SBENTITY``
  (``topic/Subscriptions/name``) are published, persistent, on ``TOPICSTR``.

Mapping MQ → Service Bus (:func:`to_servicebus`):

- body → body (one AMQP ``data`` section);
- every MQ message property → an application property of the same name and value (strings,
  integers, floats, booleans and byte strings keep their type; a property whose value is null
  is left out, as AMQP application properties carry simple values only);
- the publication's topic string → ``Subject`` (``sys.Label``) and the application property
  ``MQTopicString``;
- persistence → the AMQP header's ``durable``; the time the MQ message has left to live →
  ``TimeToLive``; ReplyToQ → ``ReplyTo``;
- MsgId → ``MessageId``. The queue manager where a publication was first put stamps its MsgId
  from its own identity, its incarnation and a counter, and the id travels unchanged with every
  copy through the cluster, so it is stable per (origin node, publication): Service Bus
  duplicate detection absorbs a redelivery. An application that sets MsgId itself gets it
  passed on as is;
- ``SESSPROP(name)``: the value of that MQ property (as text) → ``SessionId``; a message
  without it is sent without a session id.

Mapping Service Bus → MQ (:func:`to_mq`):

- body → body (a body that is not one ``data`` section arrives as its encoded AMQP sections);
- application properties → MQ properties: strings, integers, floats, booleans and byte
  strings as they are; timestamps as ISO 8601 text, durations as seconds, anything else as
  its text. Names that are not MQ property names (dot-separated identifiers; ``MQ...`` is
  reserved for the queue manager) are left out and counted in the bridge's ``DROPPED``
  status; ``MQTopicString`` is the MQ publication's own;
- system properties → MQ properties ``SbMessageId``, ``SbCorrelationId``, ``SbSessionId``,
  ``SbSubject``, ``SbSequenceNumber`` and ``SbEnqueuedTime`` (epoch seconds), when set;
- the publication is persistent; its expiry is the message's remaining time to live.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from qmgr.core import limits
from qmgr.core.errors import MQError
from qmgr.core.message import Message
from qmgr.core.values import Properties, PropertyValue
from qmgr.servicebus.message import SbMessage, Stored

Direction = Literal["TOSB", "FROMSB"]
DIRECTIONS: tuple[Direction, ...] = ("TOSB", "FROMSB")
SUB_PREFIX = "SYSTEM.BRIDGE."
TOPIC_PROPERTY = "MQTopicString"
MAX_SESSION_ID = 128  # Service Bus's limit on SessionId
# the AMQP adapter's key for the header fields a message keeps (see qmgr.sbamqp.message)
AMQP_HEADER = "amqp-header"


def subscription_name(bridge: str) -> str:
    """The durable MQ subscription a TOSB bridge reads through."""
    return SUB_PREFIX + bridge


@dataclass(frozen=True)
class BridgeDef:
    """One bridge definition, as stored and displayed."""

    name: str
    direction: Direction
    topic_str: str
    sb_entity: str
    sessprop: str = ""
    descr: str = ""
    created: float = 0.0
    altered: float = 0.0

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise MQError(
                "MQRC_OPTIONS_ERROR", f"DIRECTION must be TOSB or FROMSB, not {self.direction!r}"
            )

    @property
    def subscription(self) -> str:
        return subscription_name(self.name)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BridgeDef:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)

    def altered_with(self, **changes: Any) -> BridgeDef:
        return replace(self, **changes)


def check_topic(bridge: BridgeDef) -> None:
    """A FROMSB bridge publishes on its topic string, which must hold no wildcard."""
    limits.check_topic_string(bridge.topic_str)
    if bridge.direction == "FROMSB":
        levels = bridge.topic_str.split("/")
        if any(level in ("#", "+") for level in levels):
            raise MQError(
                "MQRC_TOPIC_STRING_ERROR",
                f"a FROMSB bridge publishes on TOPICSTR, which must not contain wildcards "
                f"('{bridge.topic_str}')",
            )


def message_id(msg: Message) -> str:
    """The Service Bus MessageId of an MQ message (stable across redelivery)."""
    return msg.message_id


def to_servicebus(msg: Message, *, sessprop: str = "", now: float) -> SbMessage:
    """The Service Bus message for one MQ publication copy (see the module text)."""
    props: dict[str, Any] = {k: v for k, v in msg.properties.items() if v is not None}
    topic = msg.topic
    if topic:
        props[TOPIC_PROPERTY] = topic
    session_id = None
    if sessprop:
        value = msg.properties.get(sessprop)
        if value is not None:
            session_id = _text(value)[:MAX_SESSION_ID]
    ttl = None
    if msg.expiry is not None:
        ttl = max(msg.expiry - now, 0.001)
    return SbMessage(
        body=msg.body,
        body_type="data",
        message_id=message_id(msg),
        session_id=session_id,
        reply_to=msg.reply_to_queue or None,
        subject=topic or None,
        time_to_live=ttl,
        properties=props,
        extra={
            AMQP_HEADER: {"durable": bool(msg.persistent), "priority": 4, "first_acquirer": False}
        },
    )


def _text(value: PropertyValue) -> str:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class Inbound:
    """An MQ publication made from a Service Bus message, with the names left out."""

    message: Message
    dropped: tuple[str, ...]


def to_mq(stored: Stored, *, now: float) -> Inbound:
    """The persistent MQ publication for one Service Bus message (see the module text); its
    MsgId is left for the queue manager to stamp."""
    sb = stored.message
    props: Properties = {}
    dropped: list[str] = []
    for name, value in sb.properties.items():
        key = str(name)
        if key == TOPIC_PROPERTY:
            continue
        try:
            limits.check_property_name(key)
        except MQError:
            dropped.append(key)
            continue
        props[key] = _property_value(value)
    system: dict[str, PropertyValue] = {
        "SbMessageId": sb.message_id,
        "SbCorrelationId": sb.correlation_id,
        "SbSessionId": sb.session_id,
        "SbSubject": sb.subject,
        "SbSequenceNumber": stored.sequence_number,
        "SbEnqueuedTime": stored.enqueued_time,
    }
    for key, value in system.items():
        if value is not None:
            props[key] = value
    ttl = 0.0
    if math.isfinite(stored.expires_at):
        ttl = min(max(stored.expires_at - now, 0.1), limits.MAX_TTL_SECONDS)
    msg = Message(
        message_id="",
        body=bytes(sb.body),
        properties=props,
        persistent=True,
        priority=limits.PRIORITY_AS_DEFAULT,
        ttl=ttl,
        reply_to_queue=sb.reply_to or "",
    )
    return Inbound(msg, tuple(dropped))


def _property_value(value: Any) -> PropertyValue:
    if value is None or isinstance(value, str | bool | float | bytes):
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else str(value)
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    return str(value)
