"""Client-side conversion between application shapes and wire messages.

Deliveries to consumers are decoded with a view of the wire schema made here (the same field
numbers and wire types, so the same bytes): a message's property map is seen as its raw map
entries, which :func:`received` turns into properties through a cache of entries already
seen. Copies of a publication and messages of one application mostly carry the same entries
(the topic string, the application's own tags), and a map decoded entry by entry into Python
costs as much as the rest of the message together; the cache makes a known entry a lookup.

A delivery of many messages is read a second way as well, by columns: a view in which the
delivery's messages field is one message whose fields are all repeated, so the parser merges
every message into it and each field becomes one list of all the messages' values, made by the
protobuf runtime in one call (reading a field of each message from Python costs a call per
field per message, most of a message's conversion). A column holds a value for every message
or for none (a field at its default is not on the wire); only then is it used: a column that
some messages lack cannot tell which, and that delivery is read message by message. Property
entries are used by columns when every message carries the same entries (one list repeated);
otherwise each message's own are read. This relies on what every protobuf encoder does (a
field of a message written once, a map key once), as the node's does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, MutableMapping
from itertools import repeat
from operator import attrgetter
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

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
    """Delivery and Message as seen by a consumer (Message.properties as raw entries), a map
    entry on its own, the delivery with its messages as bytes (DeliveryHead: they are
    counted, not read), and by columns (Columns: Message with every field repeated;
    DeliveryColumns: its messages field as one Columns), in a pool of their own."""
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
    head = view.message_type.add(name="DeliveryHead")
    for f in messaging_pb2.Delivery.DESCRIPTOR.fields:
        if f.name == "messages":
            delivery.field.add(
                name=f.name,
                number=f.number,
                type=field.TYPE_MESSAGE,
                label=field.LABEL_REPEATED,
                type_name=".qmgr.client.view.Message",
            )
            head.field.add(
                name=f.name, number=f.number, type=field.TYPE_BYTES, label=field.LABEL_REPEATED
            )
        else:
            delivery.field.add(name=f.name, number=f.number, type=f.type)
            head.field.add(name=f.name, number=f.number, type=f.type)
    columns = view.message_type.add(name="Columns")
    for f in messages_pb2.Message.DESCRIPTOR.fields:
        kind = f.type
        if f.name == "properties":
            kind = field.TYPE_BYTES
        elif f.type == field.TYPE_ENUM:
            kind = field.TYPE_INT32
        columns.field.add(name=f.name, number=f.number, type=kind, label=field.LABEL_REPEATED)
    by_columns = view.message_type.add(name="DeliveryColumns")
    by_columns.field.add(
        name="messages",
        number=messaging_pb2.Delivery.DESCRIPTOR.fields_by_name["messages"].number,
        type=field.TYPE_MESSAGE,
        type_name=".qmgr.client.view.Columns",
    )
    entry = view.message_type.add(name="Entry")
    entry.field.add(name="key", number=1, type=field.TYPE_STRING)
    entry.field.add(name="value", number=2, type=field.TYPE_MESSAGE, type_name=".qmgr.wire.Value")
    pool.Add(view)
    classes = message_factory.GetMessageClassesForFiles([view.name], pool)
    return {name.rsplit(".", 1)[1]: cls for name, cls in classes.items()}


_VIEW = _view_classes()
DeliveryView: Any = _VIEW["Delivery"]  # parses what the node sends as messaging_pb2.Delivery
_Entry: Any = _VIEW["Entry"]
_DeliveryColumns: Any = _VIEW["DeliveryColumns"]
_DeliveryHead: Any = _VIEW["DeliveryHead"]
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


def _each_properties(raws: Iterable[Any]) -> Iterator[dict[str, PropertyValue]]:
    """Each message's properties from its raw property entries; a message whose entries are
    those of the one before gets a copy of its properties."""
    cached = _ENTRY_CACHE.get
    last_raw: Any = ()
    last: dict[str, PropertyValue] = {}
    for raw in raws:
        if raw == last_raw:
            yield last.copy()
            continue
        props = {}
        for entry in raw:
            kv = cached(entry)
            k, v = kv if kv is not None else _entry(entry)
            props[k] = v
        last_raw, last = raw, props
        yield props.copy()


def received(messages: Iterable[Any], received_at: float) -> list[ReceivedMessage]:
    """Messages of a :data:`DeliveryView` as the application sees them, read one by one."""
    rows = list(map(_fields, messages))
    persistent = messages_pb2.PERSISTENT
    return [
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
        for (mid, body, _, pers, pri, cid, put, backout, topic, seq, exp, reply), props in zip(
            rows, _each_properties(row[2] for row in rows), strict=True
        )
    ]


class WireDelivery:
    """A delivery as the node sent it (what the Subscribe and Consume streams decode to): its
    fields but the messages, which are counted, and the messages by columns (see
    :func:`delivered`), with their properties when every message has the same, or else (also)
    as a :data:`DeliveryView`. All of it is read as the delivery arrives, so a delivery that
    cannot be read fails the stream there, as any other message would."""

    __slots__ = ("data", "head", "count", "columns", "properties", "view")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.head = _DeliveryHead.FromString(data)
        self.count = len(self.head.messages)
        # the columns of every message merged into one Columns message (in the order of
        # _COLUMNS), when each suits
        self.columns: list[Any] | None = None
        self.properties: dict[str, PropertyValue] | None = None  # each message's, if alike
        count = self.count
        if count >= COLUMNS_FROM:
            with contextlib.suppress(DecodeError):
                merged = _DeliveryColumns.FromString(data).messages
                columns = list(map(getattr, repeat(merged), _COLUMN_NAMES))
                if all(len(column) in (0, count) for column in columns):
                    self.columns = columns
                    self.properties = _same_properties(merged.properties[:], count)
        self.view: Any = None
        if self.columns is None or self.properties is None:
            self.view = DeliveryView.FromString(data)

    @property
    def size(self) -> int:
        return int(self.head.size)

    @property
    def subscription(self) -> str:
        return str(self.head.subscription)

    @property
    def sub_id(self) -> str:
        return str(self.head.sub_id)

    @property
    def queue(self) -> str:
        return str(self.head.queue)


COLUMNS_FROM = 8  # a delivery of fewer messages is read message by message

# ReceivedMessage's fields but the properties, as columns of the wire's fields: (field, the
# value of a message that does not carry it)
_COLUMNS = (
    ("message_id", ""),
    ("body", b""),
    ("persistence", 0),
    ("priority", 0),
    ("correl_id", b""),
    ("put_time_ms", 0),
    ("backout_count", 0),
    ("topic", ""),
    ("sequence", 0),
    ("expiry_ms", 0),
    ("reply_to_queue", ""),
)
_COLUMN_NAMES = tuple(name for name, _ in _COLUMNS)


def _same_properties(entries: list[bytes], count: int) -> dict[str, PropertyValue] | None:
    """The properties of each of ``count`` messages whose raw entries, all together, are
    ``entries``, when every message has the same (None: they may differ). With k distinct
    entries repeated ``count`` times, no message has more than k (within k + 1 entries in a
    row one repeats, and a message carries a key once), so each has exactly those k."""
    if not entries:
        return {}
    k, rest = divmod(len(entries), count)
    if rest:
        return None
    first = entries[:k]
    if k == 1:  # the usual case (one property, or the topic string alone): no list made
        if entries.count(first[0]) != count:
            return None
    elif len(set(first)) != k or entries != first * count:
        return None
    return next(_each_properties((first,)))


def delivered(delivery: WireDelivery, received_at: float) -> list[ReceivedMessage]:
    """A delivery's messages as the application sees them (the same as :func:`received`
    gives): by columns when the delivery could be read so, else one by one."""
    merged, count = delivery.columns, delivery.count
    if merged is None:
        return received(delivery.view.messages, received_at)
    columns: list[Iterable[Any]] = [
        column if len(column) else repeat(default, count)
        for column, (_, default) in zip(merged, _COLUMNS, strict=True)
    ]
    ids, bodies, persistence, *tail = columns
    props = delivery.properties
    each_props = (
        map(dict.copy, repeat(props, count))
        if props is not None
        else _each_properties(m.properties for m in delivery.view.messages)
    )
    return list(
        map(
            ReceivedMessage,
            ids,
            bodies,
            each_props,
            _persistent(persistence, count),
            *tail,
            repeat(received_at, count),
        )
    )


def _persistent(persistence: Iterable[int], count: int) -> Iterable[bool]:
    """Each message's persistence as ``ReceivedMessage.persistent``."""
    values = list(persistence)
    persistent = values.count(messages_pb2.PERSISTENT)
    if persistent in (0, count):
        return repeat(persistent == count, count)
    return [v == messages_pb2.PERSISTENT for v in values]


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
