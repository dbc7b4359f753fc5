"""Messages to and from rows: typed properties survive the round trip.

A row's header (everything about a message but its id and body) is written in a compact binary
form: a fixed part packed with ``struct`` (format version, flags, priority, backout count,
expiry, put time and the lengths of what follows), then the correlation id, the reply-to queue,
the topic, the subscriber's user data and the properties, each as raw bytes. Properties are a
run of typed entries (kind, name, value), so an ``Int32`` stays an ``Int32`` and a 64-bit
integer stays a plain ``int``. The copies of one publication share one encoding of their
properties (the store caches it by identity), so a copy costs one ``struct.pack`` and a join.

The encoding is written by hand rather than with a general serialiser (pickle, msgpack, CBOR)
because the store must keep Int32 apart from int, must never execute what it reads, and gains
most from the fixed fields being one ``struct`` call; none of those is offered by a library the
project already depends on.

Rows written before the binary form hold their header as JSON text; SQLite keeps a value's
type (TEXT or BLOB) per row, so ``decode_message`` tells the two apart per row and reads both:
old data directories load unchanged and rows converge to the binary form as they are rewritten.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from qmgr.core.message import Message
from qmgr.core.values import INT64_MAX, INT64_MIN, Int32, Properties, PropertyValue

FORMAT_VERSION = 1

# version, flags, priority, backout count, expiry, put time, then the byte lengths of the
# correlation id, reply-to queue, topic, subscriber user data and properties
_FIXED = struct.Struct("<BBiqddIIIII")
_EXPIRY = 1  # flag: the message has an expiry (else the expiry field is 0.0 and means None)
_RETAINED = 2  # flag: MQIsRetained

# property kinds
_NONE, _FALSE, _TRUE, _I32, _I64, _F64, _BYTES, _STR, _BIGINT = range(9)
_ENTRY = struct.Struct("<BI")  # kind, length of the name (then the name, then the value)
_LEN = struct.Struct("<I")
_I32S = struct.Struct("<i")
_I64S = struct.Struct("<q")
_F64S = struct.Struct("<d")


class HeaderError(ValueError):
    """A stored header that cannot be read (damaged, or written by a newer version)."""


def encode_properties(props: Properties) -> bytes:
    """``props`` as typed binary entries (empty properties: no bytes at all)."""
    if not props:
        return b""
    parts: list[bytes] = []
    add = parts.append
    for name, value in props.items():
        raw_name = name.encode()
        if value is None:
            add(_ENTRY.pack(_NONE, len(raw_name)) + raw_name)
        elif value is True or value is False:
            add(_ENTRY.pack(_TRUE if value else _FALSE, len(raw_name)) + raw_name)
        elif isinstance(value, Int32):
            add(_ENTRY.pack(_I32, len(raw_name)) + raw_name + _I32S.pack(value))
        elif isinstance(value, int):
            if INT64_MIN <= value <= INT64_MAX:
                add(_ENTRY.pack(_I64, len(raw_name)) + raw_name + _I64S.pack(value))
            else:  # not a valid property, but a row must never be refused for it
                text = str(value).encode()
                add(_ENTRY.pack(_BIGINT, len(raw_name)) + raw_name + _LEN.pack(len(text)) + text)
        elif isinstance(value, float):
            add(_ENTRY.pack(_F64, len(raw_name)) + raw_name + _F64S.pack(value))
        elif isinstance(value, bytes):
            add(_ENTRY.pack(_BYTES, len(raw_name)) + raw_name + _LEN.pack(len(value)) + value)
        elif isinstance(value, str):
            text = value.encode()
            add(_ENTRY.pack(_STR, len(raw_name)) + raw_name + _LEN.pack(len(text)) + text)
        else:
            raise TypeError(f"property {name}: unsupported type {type(value).__name__}")
    return b"".join(parts)


def decode_properties(data: bytes) -> Properties:
    props: Properties = {}
    pos = 0
    end = len(data)
    while pos < end:
        kind, name_len = _ENTRY.unpack_from(data, pos)
        pos += _ENTRY.size
        name = data[pos : pos + name_len].decode()
        pos += name_len
        value: PropertyValue
        if kind == _NONE:
            value = None
        elif kind == _FALSE:
            value = False
        elif kind == _TRUE:
            value = True
        elif kind == _I32:
            value = Int32(_I32S.unpack_from(data, pos)[0])
            pos += 4
        elif kind == _I64:
            value = _I64S.unpack_from(data, pos)[0]
            pos += 8
        elif kind == _F64:
            value = _F64S.unpack_from(data, pos)[0]
            pos += 8
        elif kind in (_BYTES, _STR, _BIGINT):
            (size,) = _LEN.unpack_from(data, pos)
            pos += 4
            raw = data[pos : pos + size]
            if len(raw) != size:
                raise HeaderError(f"property {name}: value cut short")
            pos += size
            value = raw if kind == _BYTES else int(raw) if kind == _BIGINT else raw.decode()
        else:
            raise HeaderError(f"property {name}: unknown kind {kind}")
        props[name] = value
    if pos != end:
        raise HeaderError("properties cut short")
    return props


def encode_header(msg: Message, encoded_properties: bytes | None = None) -> bytes:
    """The message's metadata in the binary form; ``encoded_properties`` saves re-encoding
    properties shared by the copies of one publication."""
    props = encode_properties(msg.properties) if encoded_properties is None else encoded_properties
    reply_to = msg.reply_to_queue.encode()
    topic = msg.topic.encode()
    user_data = msg.sub_user_data.encode()
    expiry = msg.expiry
    correl = msg.correl_id
    fixed = _FIXED.pack(
        FORMAT_VERSION,
        (_RETAINED if msg.retained else 0) | (0 if expiry is None else _EXPIRY),
        msg.priority,
        msg.backout_count,
        0.0 if expiry is None else expiry,
        msg.put_time,
        len(correl),
        len(reply_to),
        len(topic),
        len(user_data),
        len(props),
    )
    return b"".join((fixed, correl, reply_to, topic, user_data, props))


def decode_message(seq: int, message_id: str, body: bytes, header: str | bytes) -> Message:
    """A stored row as a message: a binary header (bytes) or one written as JSON (text)."""
    if isinstance(header, str):
        return _decode_json(seq, message_id, body, header)
    try:
        return _decode_binary(seq, message_id, body, header)
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        raise HeaderError(f"message {seq} ({message_id}): unreadable header: {exc}") from None


def _decode_binary(seq: int, message_id: str, body: bytes, header: bytes) -> Message:
    if not header or header[0] != FORMAT_VERSION:
        version = header[0] if header else "none"
        raise HeaderError(f"header format {version} is not {FORMAT_VERSION}")
    (
        _,
        flags,
        priority,
        backout,
        expiry,
        put_time,
        n_correl,
        n_reply,
        n_topic,
        n_user,
        n_props,
    ) = _FIXED.unpack_from(header)
    pos = _FIXED.size
    if pos + n_correl + n_reply + n_topic + n_user + n_props != len(header):
        raise HeaderError("header length does not match its fields")
    correl = header[pos : pos + n_correl]
    pos += n_correl
    reply_to = header[pos : pos + n_reply].decode()
    pos += n_reply
    topic = header[pos : pos + n_topic].decode()
    pos += n_topic
    user_data = header[pos : pos + n_user].decode()
    pos += n_user
    return Message(
        message_id,
        bytes(body),
        decode_properties(header[pos:]) if n_props else {},
        True,
        priority,
        0.0,
        expiry if flags & _EXPIRY else None,
        bytes(correl),
        put_time,
        backout,
        reply_to,
        topic,
        user_data,
        bool(flags & _RETAINED),
        seq,
    )


# -- the JSON form of rows written before the binary one -------------------------------------


def encode_json_properties(props: Properties) -> list[list[Any]]:
    out: list[list[Any]] = []
    for name, value in props.items():
        if value is None:
            out.append([name, "n", None])
        elif isinstance(value, bool):
            out.append([name, "b", value])
        elif isinstance(value, Int32):
            out.append([name, "i", int(value)])
        elif isinstance(value, int):
            out.append([name, "l", value])
        elif isinstance(value, float):
            out.append([name, "d", value])
        elif isinstance(value, bytes):
            out.append([name, "y", value.hex()])
        else:
            out.append([name, "s", value])
    return out


def encode_json_header(msg: Message, encoded_properties: list[list[Any]] | None = None) -> str:
    """A header in the JSON form rows had before the binary one (what old data directories
    hold; the store no longer writes it)."""
    return json.dumps(
        {
            "p": encode_json_properties(msg.properties)
            if encoded_properties is None
            else encoded_properties,
            "pr": msg.priority,
            "ex": msg.expiry,
            "c": msg.correl_id.hex(),
            "t": msg.put_time,
            "bo": msg.backout_count,
            "r": msg.reply_to_queue,
            "tp": msg.topic,
            "ud": msg.sub_user_data,
            "rt": msg.retained,
        },
        separators=(",", ":"),
    )


def _decode_json_properties(items: list[list[Any]]) -> Properties:
    props: Properties = {}
    for name, kind, raw in items:
        value: PropertyValue
        if kind == "i":
            value = Int32(raw)
        elif kind == "y":
            value = bytes.fromhex(raw)
        elif kind == "d":
            value = float(raw)
        else:
            value = raw
        props[name] = value
    return props


def _decode_json(seq: int, message_id: str, body: bytes, header: str) -> Message:
    try:
        h = json.loads(header)
        return Message(
            message_id=message_id,
            body=bytes(body),
            properties=_decode_json_properties(h["p"]),
            persistent=True,
            priority=h["pr"],
            expiry=h["ex"],
            correl_id=bytes.fromhex(h["c"]),
            put_time=h["t"],
            backout_count=h["bo"],
            reply_to_queue=h["r"],
            topic=h["tp"],
            sub_user_data=h["ud"],
            retained=h["rt"],
            sequence=seq,
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise HeaderError(f"message {seq} ({message_id}): unreadable header: {exc!r}") from None
