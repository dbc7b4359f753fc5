"""A consumer's deliveries written straight as protobuf bytes.

A delivery carries up to thousands of messages. Building it with the protobuf runtime costs a
Python-level object per message (an ``add`` with its fields, a merge of the topic's fields)
before the whole is serialized again, and most of those bytes are the same for every copy of a
publication or every message of a topic. protobuf offers no way to append already-encoded
messages to a repeated field, so this module writes the ``Delivery`` bytes itself: each
message as its shared part (id, body, persistence, reply-to queue, topic and properties; cached
per publication in its ``SharedEncoding`` cell, per topic for the topic's fields) followed by
the fields that are its own, properties included (a copy delivered through a cluster always
has one, its route). The bytes parse to the same ``Delivery`` as ``qmgr.rpc.convert.add_delivery``
builds (a property test checks it).
"""

from __future__ import annotations

import struct

from qmgr.core.message import Message
from qmgr.core.values import Int32, Properties, PropertyValue
from qmgr.rpc.convert import expiry_ms, topic_fields
from qmgr.wire import messages_pb2 as mpb

# field tags: (field number << 3) | wire type (0 varint, 2 length-delimited)
_ID, _BODY, _PERSISTENCE = b"\x0a", b"\x12", b"\x20"
_PRIORITY, _EXPIRY, _CORREL, _PUT_TIME, _BACKOUT = b"\x28", b"\x30", b"\x3a", b"\x40", b"\x48"
_REPLY_TO, _SEQUENCE = b"\x52", b"\x60"
_QUEUE, _MESSAGE, _SIZE = b"\x1a", b"\x22", b"\x28"  # Delivery's queue, messages, size
_PROPERTY, _KEY, _VALUE = b"\x1a", b"\x0a", b"\x12"  # Message.properties, its entry's fields
# Value's fields: string 1, int32 2, int64 3, double 4 (fixed 64 bits), bool 5, bytes 6, null 7
_STRING, _INT32, _INT64, _DOUBLE, _BYTES = b"\x0a", b"\x10", b"\x18", b"\x21", b"\x32"
_NULL, _TRUE, _FALSE = b"\x38\x01", b"\x28\x01", b"\x28\x00"
_double = struct.Struct("<d").pack
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_PERSISTENT = _PERSISTENCE + bytes((mpb.PERSISTENT,))
_NOT_PERSISTENT = _PERSISTENCE + bytes((mpb.NOT_PERSISTENT,))
_SMALL = [bytes((n,)) for n in range(128)]


def varint(n: int) -> bytes:
    """``n`` as a protobuf varint (a negative number as its 64-bit two's complement, as
    protobuf writes a negative int32 or int64)."""
    if 0 <= n < 128:
        return _SMALL[n]
    if 0 < n < 16384:  # a sequence number, a message's length
        return bytes((n & 0x7F | 0x80, n >> 7))
    if 0 < n < 2097152:
        return bytes((n & 0x7F | 0x80, (n >> 7) & 0x7F | 0x80, n >> 14))
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def text_field(tag: bytes, value: str) -> bytes:
    data = value.encode()
    return tag + varint(len(data)) + data


def _value(v: PropertyValue) -> bytes:
    """A property value as an encoded ``Value`` (its one field, as ``value_to_wire`` sets it)."""
    if isinstance(v, str):
        data = v.encode()
        return _STRING + varint(len(data)) + data
    if v is None:
        return _NULL
    if isinstance(v, bool):
        return _TRUE if v else _FALSE
    if isinstance(v, Int32):
        return _INT32 + varint(v)
    if isinstance(v, int):
        if not _INT64_MIN <= v <= _INT64_MAX:  # as the protobuf runtime refuses it
            raise ValueError(f"Value out of range: {v}")
        return _INT64 + varint(v)
    if isinstance(v, float):
        return _DOUBLE + _double(v)
    return _BYTES + varint(len(v)) + v


def encoded_properties(props: Properties) -> list[bytes]:
    """Each property as a map entry of ``Message.properties``."""
    parts: list[bytes] = []
    for k, v in props.items():
        key = k.encode()
        value = _value(v)
        entry = b"".join((_KEY, varint(len(key)), key, _VALUE, varint(len(value)), value))
        parts += (_PROPERTY, varint(len(entry)), entry)
    return parts


def shared_fields(msg: Message) -> bytes:
    """The fields every copy of ``msg``'s publication has alike: id, body, the publication's
    properties, persistence, reply-to queue, and the topic with MQTopicString (after the
    properties: a map entry read later wins, as ``shared_to_wire`` sets it last)."""
    body = msg.body
    parts = [
        text_field(_ID, msg.message_id),
        _BODY,
        varint(len(body)),
        body,
        _PERSISTENT if msg.persistent else _NOT_PERSISTENT,
    ]
    if msg.properties:
        parts += encoded_properties(msg.properties)
    if msg.reply_to_queue:
        parts.append(text_field(_REPLY_TO, msg.reply_to_queue))
    if msg.topic:
        parts.append(topic_fields(msg.topic))
    return b"".join(parts)


def _extra_properties(msg: Message) -> bytes:
    """MQSubUserData and MQIsRetained, the publication properties a copy may have of its own."""
    extra: Properties = {}
    if msg.sub_user_data:
        extra["MQSubUserData"] = msg.sub_user_data
    if msg.retained:
        extra["MQIsRetained"] = True
    return b"".join(encoded_properties(extra))


class EncodedDelivery:
    """One delivery as bytes: its queue and its messages, each encoded once; ``size`` is the
    encoded size without the ``size`` field, as ``Delivery.ByteSize()`` counts it before that
    field is set."""

    __slots__ = ("parts", "size")

    def __init__(self, queue: str, msgs: list[Message]) -> None:
        # one list of bytes for the whole delivery: the queue, then each message's tag and
        # length followed by its fields (two entries a message), joined once when written
        parts = [text_field(_QUEUE, queue)] if queue else []
        append = parts.append
        put_time_ms = -1
        put_time_field = b""
        for m in msgs:
            cell = m.shared
            if cell is None:
                shared = shared_fields(m)
            elif cell.data is not None:  # copies of one publication share it
                shared = cell.data
            else:
                shared = cell.data = shared_fields(m)
            put_time = m.put_time
            if int(put_time * 1000) != put_time_ms:  # the same for a run's copies
                put_time_ms = int(put_time * 1000)
                put_time_field = _PUT_TIME + varint(put_time_ms)
            own = [shared, put_time_field, _SEQUENCE, varint(m.sequence)]
            if m.priority:
                own += (_PRIORITY, varint(m.priority))
            expiry = m.expiry
            if expiry is not None:
                own += (_EXPIRY, varint(expiry_ms(m)))
            correl_id = m.correl_id
            if correl_id:
                own += (_CORREL, varint(len(correl_id)), correl_id)
            if m.backout_count:
                own += (_BACKOUT, varint(m.backout_count))
            if m.topic and (m.sub_user_data or m.retained):
                own.append(_extra_properties(m))
            data = b"".join(own)
            append(_MESSAGE + varint(len(data)))
            append(data)
        self.parts = parts
        self.size = sum(map(len, parts))

    def drop_last(self) -> int:
        """Remove the last message; returns the bytes it took."""
        n = len(self.parts.pop()) + len(self.parts.pop())
        self.size -= n
        return n

    def to_bytes(self, size: int) -> bytes:
        """The ``Delivery`` with its ``size`` field set to ``size``."""
        self.parts.append(_SIZE + varint(size))
        return b"".join(self.parts)
