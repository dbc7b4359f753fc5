"""Client-side conversion between application shapes and wire messages."""

from __future__ import annotations

from qmgr.client.types import MqscRecord, OutgoingMessage, PublishResult, ReceivedMessage
from qmgr.core.values import Int32, PropertyValue, check_property
from qmgr.wire import admin_pb2, messages_pb2, messaging_pb2


def value_to_wire(v: PropertyValue, out: messages_pb2.Value) -> None:
    if v is None:
        out.null_value = True
    elif isinstance(v, bool):
        out.bool_value = v
    elif isinstance(v, Int32):
        out.int32_value = v
    elif isinstance(v, int):
        out.int64_value = v
    elif isinstance(v, float):
        out.double_value = v
    elif isinstance(v, bytes):
        out.bytes_value = v
    else:
        out.string_value = v


def value_from_wire(v: messages_pb2.Value) -> PropertyValue:
    kind = v.WhichOneof("kind")
    if kind == "string_value":
        return v.string_value
    if kind == "int32_value":
        return Int32(v.int32_value)
    if kind == "int64_value":
        return v.int64_value
    if kind == "double_value":
        return v.double_value
    if kind == "bool_value":
        return v.bool_value
    if kind == "bytes_value":
        return v.bytes_value
    return None


def outgoing(
    body: bytes | str | OutgoingMessage,
    properties: dict[str, PropertyValue] | None = None,
    persistent: bool | None = None,
    priority: int | None = None,
    ttl_ms: int = 0,
    correl_id: bytes = b"",
) -> OutgoingMessage:
    if isinstance(body, OutgoingMessage):
        return body
    return OutgoingMessage(body, dict(properties or {}), persistent, priority, ttl_ms, correl_id)


def to_wire(m: OutgoingMessage, out: messages_pb2.Message) -> messages_pb2.Message:
    """``m`` into ``out`` (a new message: fields at their defaults are left unset)."""
    body = m.body
    out.body = body.encode() if isinstance(body, str) else body
    if m.properties:
        props = out.properties
        for k, v in m.properties.items():
            value_to_wire(check_property(k, v), props[k])
    if m.persistent is not None:
        out.persistence = messages_pb2.PERSISTENT if m.persistent else messages_pb2.NOT_PERSISTENT
    out.priority = -1 if m.priority is None else m.priority
    if m.ttl_ms:
        out.expiry_ms = m.ttl_ms
    if m.correl_id:
        out.correl_id = m.correl_id
    if m.message_id:
        out.message_id = m.message_id
    if m.reply_to_queue:
        out.reply_to_queue = m.reply_to_queue
    return out


def from_wire(m: messages_pb2.Message, received_at: float = 0.0) -> ReceivedMessage:
    props = m.properties
    return ReceivedMessage(
        m.message_id,
        m.body,
        {k: value_from_wire(v) for k, v in props.items()} if props else {},
        m.persistence == messages_pb2.PERSISTENT,
        m.priority,
        m.correl_id,
        m.put_time_ms,
        m.backout_count,
        m.topic,
        m.sequence,
        m.expiry_ms,
        m.reply_to_queue,
        received_at,
    )


def publication(
    topic: str, msg: OutgoingMessage, retain: bool, scope_qmgr: bool, out: messaging_pb2.Publication
) -> None:
    out.topic = topic
    if retain:
        out.retain = True
    if scope_qmgr:
        out.scope_qmgr = True
    to_wire(msg, out.message)


def publish_result(resp: messaging_pb2.PublishResponse) -> PublishResult:
    return PublishResult(
        resp.accepted, resp.deliveries, resp.forwards, tuple(resp.forwarded_to), resp.cluster
    )


def records(response: admin_pb2.MqscResponse) -> list[MqscRecord]:
    return [
        MqscRecord(r.code, r.text, {a.key: a.value for a in r.attributes}) for r in response.records
    ]
