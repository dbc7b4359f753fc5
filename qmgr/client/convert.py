"""Client-side conversion between application shapes and wire messages.

Deliveries to consumers are decoded with a view of the wire schema made here (the same field
numbers and wire types, so the same bytes): a message's property map is seen as its raw map
entries, which :func:`received` turns into properties through a cache of entries already
seen. Copies of a publication and messages of one application mostly carry the same entries
(the topic string, the application's own tags), and a map decoded entry by entry into Python
costs as much as the rest of the message together; the cache makes a known entry a lookup.
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from operator import attrgetter
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

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


def properties_to_wire(
    properties: dict[str, PropertyValue], out: MutableMapping[str, messages_pb2.Value]
) -> None:
    """``properties`` into a message's property map, each checked (``ValueError`` if one is
    not valid); a string, the usual kind, takes the short way."""
    for k, v in properties.items():
        if type(v) is str and k:
            out[k].string_value = v
        else:
            value_to_wire(check_property(k, v), out[k])


def to_wire(m: OutgoingMessage, out: messages_pb2.Message) -> messages_pb2.Message:
    """``m`` into ``out`` (a new message: fields at their defaults are left unset)."""
    body = m.body
    out.body = body.encode() if isinstance(body, str) else body
    if m.properties:
        properties_to_wire(m.properties, out.properties)
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


def _view_classes() -> dict[str, Any]:
    """Delivery and Message as seen by a consumer (Message.properties as raw entries), and a
    map entry on its own, in a pool of their own."""
    field = descriptor_pb2.FieldDescriptorProto
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(messages_pb2.DESCRIPTOR.serialized_pb)
    view = descriptor_pb2.FileDescriptorProto(
        name="qmgr/client/delivery_view.proto",
        package="qmgr.client.view",
        syntax="proto3",
        dependency=[messages_pb2.DESCRIPTOR.name],
    )
    message = view.message_type.add(name="Message")
    for f in messages_pb2.Message.DESCRIPTOR.fields:
        if f.name == "properties":
            message.field.add(
                name=f.name, number=f.number, type=field.TYPE_BYTES, label=field.LABEL_REPEATED
            )
        else:
            kind = field.TYPE_INT32 if f.type == field.TYPE_ENUM else f.type
            message.field.add(name=f.name, number=f.number, type=kind)
    delivery = view.message_type.add(name="Delivery")
    for f in messaging_pb2.Delivery.DESCRIPTOR.fields:
        if f.name == "messages":
            delivery.field.add(
                name=f.name,
                number=f.number,
                type=field.TYPE_MESSAGE,
                label=field.LABEL_REPEATED,
                type_name=".qmgr.client.view.Message",
            )
        else:
            delivery.field.add(name=f.name, number=f.number, type=f.type)
    entry = view.message_type.add(name="Entry")
    entry.field.add(name="key", number=1, type=field.TYPE_STRING)
    entry.field.add(name="value", number=2, type=field.TYPE_MESSAGE, type_name=".qmgr.wire.Value")
    pool.Add(view)
    classes = message_factory.GetMessageClassesForFiles([view.name], pool)
    return {name.rsplit(".", 1)[1]: cls for name, cls in classes.items()}


_VIEW = _view_classes()
DeliveryView: Any = _VIEW["Delivery"]  # parses what the node sends as messaging_pb2.Delivery
_Entry: Any = _VIEW["Entry"]
_ENTRY_CACHE: dict[bytes, tuple[str, PropertyValue]] = {}
ENTRY_CACHE_SIZE = 4096  # entries kept (the cache starts again when full)
ENTRY_CACHE_BYTES = 256  # longer entries are decoded each time
_fields = attrgetter(
    "message_id",
    "body",
    "properties",
    "persistence",
    "priority",
    "correl_id",
    "put_time_ms",
    "backout_count",
    "topic",
    "sequence",
    "expiry_ms",
    "reply_to_queue",
)


def _entry(raw: bytes) -> tuple[str, PropertyValue]:
    """A raw property map entry as (name, value), from the cache when it was seen before."""
    kv = _ENTRY_CACHE.get(raw)
    if kv is None:
        entry = _Entry.FromString(raw)
        kv = (entry.key, value_from_wire(entry.value))
        if len(raw) <= ENTRY_CACHE_BYTES:
            if len(_ENTRY_CACHE) >= ENTRY_CACHE_SIZE:
                _ENTRY_CACHE.clear()
            _ENTRY_CACHE[raw] = kv
    return kv


def received(messages: Iterable[Any], received_at: float) -> list[ReceivedMessage]:
    """Messages of a :data:`DeliveryView` as the application sees them. A message whose raw
    property entries are those of the one before gets a copy of its properties."""
    out: list[ReceivedMessage] = []
    append = out.append
    persistent = messages_pb2.PERSISTENT
    cached = _ENTRY_CACHE.get
    last_raw: Any = ()
    last: dict[str, PropertyValue] = {}
    for mid, body, raw, pers, pri, cid, put, backout, topic, seq, exp, reply in map(
        _fields, messages
    ):
        if raw == last_raw:
            props = last.copy()
        else:
            props = {}
            for entry in raw:
                kv = cached(entry)
                k, v = kv if kv is not None else _entry(entry)
                props[k] = v
            last_raw, last = raw, props.copy()
        append(
            ReceivedMessage(
                mid,
                body,
                props,
                pers == persistent,
                pri,
                cid,
                put,
                backout,
                topic,
                seq,
                exp,
                reply,
                received_at,
            )
        )
    return out


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
