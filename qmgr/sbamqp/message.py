"""Service Bus messages over AMQP: batches, and the namespace's ``SbMessage`` to and from AMQP.

The sections themselves (encoding, decoding, ``Message``) are :mod:`qmgr.amqp.message`; this
module gives them their Service Bus meaning.

A Service Bus batch is a transfer with ``message-format = 0x80013700`` whose message holds one
``data`` section per inner message, each the whole encoding of that message: ``split_batch``.

``to_sb_message`` and ``to_amqp`` convert to and from the namespace's ``SbMessage``/``Stored``.
Every message a client sends is read once on the node's event loop, so ``to_sb_message`` (and
``split_batch``) read the shapes clients write straight from the bytes into the namespace's
message, and hand any other shape, and anything malformed, to the general decoder
(``to_sb_message_general``), which says what is wrong; the two give the same message. The
mapping:

- properties: message-id, correlation-id, to, subject, reply-to, content-type, group-id
  (session id), reply-to-group-id; header ``ttl`` (ms) is ``time_to_live`` (seconds).
- message annotations ``x-opt-scheduled-enqueue-time`` and ``x-opt-partition-key``; the ones
  the broker sets (``x-opt-sequence-number``, ``x-opt-enqueued-time``, ``x-opt-locked-until``,
  ``x-opt-message-state``, ``x-opt-enqueue-sequence-number``, ``x-opt-deadletter-source``,
  ``x-opt-lock-token``) are dropped on the way in and written on the way out from ``Stored``.
- application properties: int → ``Int32``, long → ``int``, timestamp → UTC ``datetime``,
  ``com.microsoft:timespan`` → ``timedelta``, ``com.microsoft:uri`` and symbols → ``str``, and
  back (``int`` → long, ``Int32`` → int).
- the body: one ``data`` section is ``body`` with ``body_type = "data"``; any other body is kept
  as its encoded sections with ``body_type`` ``amqp-data``, ``amqp-sequence`` or ``amqp-value``.
  A body another client sent with some other ``body_type`` goes out as one ``data`` section.
- ``extra`` keeps, store-friendly, what the namespace does not use: ``amqp-header`` (durable,
  priority, first-acquirer), ``amqp-properties`` (the other property fields and a message-id or
  correlation-id that is not a string, as encoded bytes), ``amqp-annotations`` (other message
  annotations, encoded), ``amqp-footer`` (encoded).
"""

from __future__ import annotations

import datetime as dt
import math
import struct
import uuid
from typing import Any

from qmgr.amqp.message import (
    AMQP_SEQUENCE,
    AMQP_VALUE,
    APPLICATION_PROPERTIES,
    DATA,
    DELIVERY_ANNOTATIONS,
    FOOTER,
    HEADER,
    MESSAGE_ANNOTATIONS,
    PROPERTIES,
    Header,
    Message,
    Properties,
    decode_message,
    decode_with_body,
    encode_message,
    timestamp,
    write_section,
)
from qmgr.amqp.performatives import decode_as, encode_described
from qmgr.amqp.types import (
    MAP_PAIRS_UNCHECKED,
    DecodeError,
    Described,
    EncodeError,
    Float,
    Int,
    Long,
    Symbol,
    Timestamp,
    ULong,
    decode_value,
    encode,
    write_binary,
    write_list,
    write_long,
    write_map,
    write_string,
    write_symbol,
    write_timestamp,
    write_uint,
)
from qmgr.core.values import Int32
from qmgr.servicebus.message import SbMessage, Stored

BATCH_FORMAT = 0x80013700
_AMQP_BODIES = frozenset({"amqp-data", "amqp-sequence", "amqp-value"})
TIMESPAN = Symbol("com.microsoft:timespan")
URI = Symbol("com.microsoft:uri")
DATETIME_OFFSET = Symbol("com.microsoft:datetime-offset")
_TICKS_AT_EPOCH = 621355968000000000

# Message annotations.
SEQUENCE_NUMBER = Symbol("x-opt-sequence-number")
ENQUEUED_TIME = Symbol("x-opt-enqueued-time")
LOCKED_UNTIL = Symbol("x-opt-locked-until")
MESSAGE_STATE = Symbol("x-opt-message-state")
SCHEDULED_ENQUEUE_TIME = Symbol("x-opt-scheduled-enqueue-time")
PARTITION_KEY = Symbol("x-opt-partition-key")
ENQUEUE_SEQUENCE_NUMBER = Symbol("x-opt-enqueue-sequence-number")
DEADLETTER_SOURCE = Symbol("x-opt-deadletter-source")
LOCK_TOKEN = Symbol("x-opt-lock-token")
_BROKER_ANNOTATIONS = frozenset(
    {
        SEQUENCE_NUMBER,
        ENQUEUED_TIME,
        LOCKED_UNTIL,
        MESSAGE_STATE,
        ENQUEUE_SEQUENCE_NUMBER,
        DEADLETTER_SOURCE,
        LOCK_TOKEN,
    }
)


def split_batch(payload: bytes | bytearray | memoryview) -> list[bytes]:
    """The inner messages (each encoded whole) of a ``message-format = 0x80013700`` transfer."""
    data = bytes(payload)
    read = _read(data)
    if read is not None and read.body_code in (0, DATA):
        return [data[s:e] for s, e in read.data]
    outer = decode_message(data)
    if outer.body_type != "data":
        raise DecodeError("a batch message carries its messages in data sections")
    return [bytes(part) for part in outer.body]


def encode_batch(messages: list[bytes]) -> bytes:
    """A batch payload holding the encoded ``messages`` (the sender's side, for tests and tools)."""
    return encode_message(Message(body=messages, body_type="data"))


# --- to and from the namespace's messages ---------------------------------------------------


def dotnet_ticks(seconds: float) -> Long:
    """Epoch ``seconds`` as .NET ticks (100 ns since 0001-01-01), for the link property
    ``com.microsoft:locked-until-utc`` of a session receiver (whole milliseconds, as Service Bus)."""
    return Long(_TICKS_AT_EPOCH + round(seconds * 1000) * 10_000)


def _utc(seconds: float) -> dt.datetime:
    """The UTC time of epoch ``seconds``; ``DecodeError`` beyond what a datetime holds."""
    try:
        return dt.datetime.fromtimestamp(seconds, dt.UTC)
    except (ValueError, OverflowError, OSError) as e:
        raise DecodeError(f"a time out of range: {e}") from e


def to_sb_value(v: Any) -> Any:
    """An AMQP property value as the namespace holds it (typed wrappers to Python values);
    ``DecodeError`` for a time out of the range of Python's."""
    if isinstance(v, Int):
        return Int32(int(v))
    if isinstance(v, Timestamp):
        return _utc(int(v) / 1000)
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, str):
        return str(v)
    if isinstance(v, Described):
        if v.descriptor == TIMESPAN and isinstance(v.value, int):
            return dt.timedelta(microseconds=int(v.value) // 10)
        if v.descriptor == URI and isinstance(v.value, str):
            return str(v.value)
        if v.descriptor == DATETIME_OFFSET and isinstance(v.value, int):
            return _utc((int(v.value) - _TICKS_AT_EPOCH) / 10_000_000)
        return to_sb_value(v.value)
    if isinstance(v, list):
        return [to_sb_value(x) for x in v]
    if isinstance(v, dict):
        return {to_sb_value(k): to_sb_value(x) for k, x in v.items()}
    return v


def to_amqp_value(v: Any) -> Any:
    """A namespace property value as AMQP encodes it (the inverse of ``to_sb_value``)."""
    if isinstance(v, Int32):
        return Int(v)
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return Long(v) if -(2**63) <= v < 2**63 else ULong(v)
    if isinstance(v, dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=dt.UTC)
        return Timestamp(round(v.timestamp() * 1000))
    if isinstance(v, dt.timedelta):
        ticks = (v.days * 86400 + v.seconds) * 10_000_000 + v.microseconds * 10
        return Described(TIMESPAN, Long(ticks))
    if isinstance(v, list):
        return [to_amqp_value(x) for x in v]
    if isinstance(v, dict):
        return {to_amqp_value(k): to_amqp_value(x) for k, x in v.items()}
    if v is None or isinstance(v, float | str | bytes | uuid.UUID):
        return v
    return str(v)  # a value no AMQP type holds (a property set by some other client): its text


def _id_text(v: Any) -> str | None:
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bytes):
        return v.hex()
    return str(v)


def to_sb_message(
    payload: bytes | bytearray | memoryview, message_id: str | None = None
) -> SbMessage:
    """The namespace's message for one received message; ``message_id`` is stamped when the
    message has none (the JS SDK sends none and needs one back).

    Read by ``_read`` (the shapes clients write, straight from the bytes) or, for anything else,
    by ``to_sb_message_general``; both give the same message, and malformed input reaches the
    general reader, which raises ``DecodeError``."""
    data = bytes(payload)
    sb = _plain(data)
    if sb is not None:
        return sb
    read = _read(data)
    sb = to_sb_message_general(data) if read is None else read.message(data)
    if sb.message_id is None:
        sb.message_id = message_id
    return sb


def to_sb_message_general(
    payload: bytes | bytearray | memoryview, message_id: str | None = None
) -> SbMessage:
    """``to_sb_message`` through the general decoder (every section decoded to its values)."""
    m, raw_body = decode_with_body(bytes(payload))
    extra: dict[str, Any] = {}
    if m.body_type == "data" and len(m.body) == 1:
        body, body_type = m.body[0], "data"
    elif m.body_type == "data" and not m.body:
        body, body_type = b"", "data"
    else:
        body, body_type = raw_body, "amqp-" + m.body_type
    sb = SbMessage(body=bytes(body), body_type=body_type)
    h = m.header
    if h is not None:
        if h.ttl is not None and h.ttl > 0:
            sb.time_to_live = h.ttl / 1000
        _keep_header(extra, h.durable, h.priority, h.first_acquirer)
    p = m.properties
    if p is not None:
        sb.message_id = _id_text(p.message_id)
        sb.correlation_id = _id_text(p.correlation_id)
        sb.to = _id_text(p.to)
        sb.subject = p.subject
        sb.reply_to = _id_text(p.reply_to)
        sb.content_type = None if p.content_type is None else str(p.content_type)
        sb.session_id = p.group_id
        sb.reply_to_session_id = p.reply_to_group_id
        _keep_properties(
            extra,
            None if isinstance(p.message_id, str) else p.message_id,
            p.user_id,
            None if isinstance(p.correlation_id, str) else p.correlation_id,
            p.content_encoding,
            p.absolute_expiry_time,
            p.creation_time,
            p.group_sequence,
        )
    if sb.message_id is None:
        sb.message_id = message_id
    if m.message_annotations:
        _take_annotations(sb, extra, m.message_annotations)
    if m.application_properties:
        sb.properties = {str(k): to_sb_value(v) for k, v in m.application_properties.items()}
    if m.footer:
        extra["amqp-footer"] = encode(m.footer)
    sb.extra = extra
    return sb


_DEFAULT_HEADER = {"durable": False, "priority": 4, "first_acquirer": False}


def _keep_header(extra: dict[str, Any], durable: bool, priority: int, first: bool) -> None:
    """The header's flags in ``extra`` unless they are the defaults."""
    kept = {"durable": durable, "priority": int(priority), "first_acquirer": first}
    if kept != _DEFAULT_HEADER:
        extra["amqp-header"] = kept


def _keep_properties(
    extra: dict[str, Any],
    message_id: Any,
    user_id: Any,
    correlation_id: Any,
    content_encoding: Any,
    absolute_expiry_time: Any,
    creation_time: Any,
    group_sequence: Any,
) -> None:
    """The property fields the namespace has no place for (and identifiers that are not
    strings) in ``extra``, encoded, unless all are absent."""
    rest = (message_id, user_id, correlation_id, content_encoding, absolute_expiry_time,
            creation_time, group_sequence)  # fmt: skip
    if rest.count(None) == len(rest):
        return
    kept = Properties(
        message_id=message_id,
        user_id=user_id,
        correlation_id=correlation_id,
        content_encoding=content_encoding,
        absolute_expiry_time=absolute_expiry_time,
        creation_time=creation_time,
        group_sequence=group_sequence,
    )
    extra["amqp-properties"] = encode(encode_described(kept))


def _take_annotations(sb: SbMessage, extra: dict[str, Any], annotations: dict[Any, Any]) -> None:
    """Scheduled enqueue time and partition key into ``sb``; the broker's annotations
    dropped; the others kept, encoded, in ``extra``."""
    rest_annotations = {}
    for key, value in annotations.items():
        if key == SCHEDULED_ENQUEUE_TIME and isinstance(value, int):
            sb.scheduled_enqueue_time = int(value) / 1000
        elif key == PARTITION_KEY and isinstance(value, str):
            sb.partition_key = str(value)
        elif key not in _BROKER_ANNOTATIONS:
            rest_annotations[key] = value
    if rest_annotations:
        extra["amqp-annotations"] = encode(rest_annotations)


def to_amqp(
    stored: Stored,
    *,
    lock_token: uuid.UUID | None = None,
    locked_until: float | None = None,
) -> bytes:
    """The encoded message a receiver gets for ``stored``, with the broker's annotations.

    ``locked_until`` (epoch seconds) is written as ``x-opt-locked-until`` unless the message is
    locked through its session; ``lock_token`` is also given as the delivery annotation
    ``x-opt-lock-token`` (the delivery tag is the primary carrier).

    A message that keeps nothing but its header's flags from another AMQP client (every
    message an SDK sends) is written by a hand-specialised encoder, byte for byte what the
    general one below writes (a property test holds them to it) at a fraction of its cost:
    this runs once per delivery.
    """
    sb = stored.message
    extra = sb.extra or {}
    if (not extra or extra.keys() == _HEADER_ONLY) and _plain_ids(sb):
        return _to_amqp_plain(stored, sb, extra.get("amqp-header") or {}, lock_token, locked_until)
    return to_amqp_general(stored, lock_token=lock_token, locked_until=locked_until)


def to_amqp_general(
    stored: Stored,
    *,
    lock_token: uuid.UUID | None = None,
    locked_until: float | None = None,
) -> bytes:
    sb = stored.message
    extra = sb.extra or {}
    kept = extra.get("amqp-header") or {}
    header = Header(
        durable=bool(kept.get("durable", False)),
        priority=int(kept.get("priority", 4)),
        ttl=None if sb.time_to_live is None else min(round(sb.time_to_live * 1000), 0xFFFFFFFF),
        first_acquirer=bool(kept.get("first_acquirer", False)),
        delivery_count=stored.delivery_count,
    )
    if "amqp-properties" in extra:
        props = decode_as(Properties, _described(extra["amqp-properties"]))
    else:
        props = Properties()
    if props.message_id is None:
        props.message_id = sb.message_id
    if props.correlation_id is None:
        props.correlation_id = sb.correlation_id
    props.to = sb.to
    props.subject = sb.subject
    props.reply_to = sb.reply_to
    props.content_type = sb.content_type
    props.group_id = sb.session_id
    props.reply_to_group_id = sb.reply_to_session_id
    if math.isfinite(stored.expires_at):
        props.absolute_expiry_time = timestamp(stored.expires_at)
    annotations: dict[Any, Any] = {}
    if "amqp-annotations" in extra:
        annotations.update(_map(extra["amqp-annotations"]))
    annotations[SEQUENCE_NUMBER] = Long(stored.sequence_number)
    annotations[ENQUEUED_TIME] = timestamp(stored.enqueued_time)
    annotations[MESSAGE_STATE] = Long(stored.state.value)
    if stored.enqueued_sequence_number:
        annotations[ENQUEUE_SEQUENCE_NUMBER] = Long(stored.enqueued_sequence_number)
    if locked_until is not None and not stored.session_lock:
        annotations[LOCKED_UNTIL] = timestamp(locked_until)
    scheduled = stored.scheduled_enqueue_time or sb.scheduled_enqueue_time
    if scheduled is not None:
        annotations[SCHEDULED_ENQUEUE_TIME] = timestamp(scheduled)
    if sb.partition_key is not None:
        annotations[PARTITION_KEY] = sb.partition_key
    if stored.dead_letter_source is not None:
        annotations[DEADLETTER_SOURCE] = stored.dead_letter_source
    message = Message(
        header=header,
        delivery_annotations=None if lock_token is None else {LOCK_TOKEN: lock_token},
        message_annotations=annotations,
        properties=props,
        application_properties={k: to_amqp_value(v) for k, v in sb.properties.items()}
        if sb.properties
        else None,
        footer=_map(extra["amqp-footer"]) if "amqp-footer" in extra else None,
    )
    # "data", and bodies other clients named otherwise, go out as one data section
    data_section = sb.body_type not in _AMQP_BODIES
    return encode_message(message, b"\x00\x53\x75" + encode(sb.body) if data_section else sb.body)


_HEADER_ONLY = {"amqp-header"}
_S = {k: encode(k) for k in (SEQUENCE_NUMBER, ENQUEUED_TIME, MESSAGE_STATE,
                               ENQUEUE_SEQUENCE_NUMBER, LOCKED_UNTIL, SCHEDULED_ENQUEUE_TIME,
                               PARTITION_KEY, DEADLETTER_SOURCE, LOCK_TOKEN)}  # fmt: skip
_NULL = 0x40


def _plain_ids(sb: SbMessage) -> bool:
    """The identifiers ``to_amqp_plain`` writes as strings are strings (or absent)."""
    for v in (sb.message_id, sb.correlation_id, sb.to, sb.reply_to):
        if v is not None and type(v) is not str:
            return False
    return True


def _string_or_null(out: bytearray, v: str | None) -> None:
    if v is None:
        out.append(_NULL)
    else:
        write_string(out, v)


def _to_amqp_plain(
    stored: Stored,
    sb: SbMessage,
    kept: dict[str, Any],
    lock_token: uuid.UUID | None,
    locked_until: float | None,
) -> bytes:
    """``to_amqp_general`` for a message without kept properties, annotations or footer."""
    out = bytearray(b"\x00\x53\x70")  # header: durable, priority, ttl, first-acquirer, count
    f = bytearray(b"\x41" if kept.get("durable", False) else b"\x42")
    priority = int(kept.get("priority", 4))
    if not 0 <= priority <= 0xFF:
        raise EncodeError(f"UByte out of range: {priority}")
    f += bytes((0x50, priority))
    if sb.time_to_live is None:
        f.append(_NULL)
    else:
        write_uint(f, min(round(sb.time_to_live * 1000), 0xFFFFFFFF))
    f.append(0x41 if kept.get("first_acquirer", False) else 0x42)
    write_uint(f, stored.delivery_count)
    write_list(out, 5, f)
    if lock_token is not None:
        out += b"\x00\x53\x71"
        f = bytearray(_S[LOCK_TOKEN])
        f.append(0x98)
        f += lock_token.bytes
        write_map(out, 1, f)
    out += b"\x00\x53\x72"  # message annotations: what the broker says of the delivery
    f = bytearray(_S[SEQUENCE_NUMBER])
    write_long(f, stored.sequence_number)
    f += _S[ENQUEUED_TIME]
    write_timestamp(f, round(stored.enqueued_time * 1000))
    f += _S[MESSAGE_STATE]
    write_long(f, stored.state.value)
    pairs = 3
    if stored.enqueued_sequence_number:
        f += _S[ENQUEUE_SEQUENCE_NUMBER]
        write_long(f, stored.enqueued_sequence_number)
        pairs += 1
    if locked_until is not None and not stored.session_lock:
        f += _S[LOCKED_UNTIL]
        write_timestamp(f, round(locked_until * 1000))
        pairs += 1
    scheduled = stored.scheduled_enqueue_time or sb.scheduled_enqueue_time
    if scheduled is not None:
        f += _S[SCHEDULED_ENQUEUE_TIME]
        write_timestamp(f, round(scheduled * 1000))
        pairs += 1
    if sb.partition_key is not None:
        f += _S[PARTITION_KEY]
        write_string(f, sb.partition_key)
        pairs += 1
    if stored.dead_letter_source is not None:
        f += _S[DEADLETTER_SOURCE]
        write_string(f, stored.dead_letter_source)
        pairs += 1
    write_map(out, pairs, f)
    out += b"\x00\x53\x73"  # properties, all 13 fields
    f = bytearray()
    _string_or_null(f, sb.message_id)
    f.append(_NULL)  # user-id
    _string_or_null(f, sb.to)
    _string_or_null(f, sb.subject)
    _string_or_null(f, sb.reply_to)
    _string_or_null(f, sb.correlation_id)
    if sb.content_type is None:
        f.append(_NULL)
    else:
        write_symbol(f, sb.content_type)
    f.append(_NULL)  # content-encoding
    if math.isfinite(stored.expires_at):
        write_timestamp(f, round(stored.expires_at * 1000))
    else:
        f.append(_NULL)
    f.append(_NULL)  # creation-time
    _string_or_null(f, sb.session_id)
    f.append(_NULL)  # group-sequence
    _string_or_null(f, sb.reply_to_session_id)
    write_list(out, 13, f)
    if sb.properties:
        write_section(
            out, APPLICATION_PROPERTIES, {k: to_amqp_value(v) for k, v in sb.properties.items()}
        )
    if sb.body_type in _AMQP_BODIES:
        out += sb.body
    else:
        out += b"\x00\x53\x75"
        write_binary(out, sb.body)
    return bytes(out)


def _described(raw: bytes) -> Described:
    value, _ = decode_value(raw, 0)
    if not isinstance(value, Described):
        raise DecodeError("kept properties are a described list")
    return value


def _map(raw: bytes) -> dict[Any, Any]:
    value, _ = decode_value(raw, 0)
    if not isinstance(value, dict):
        raise DecodeError("kept annotations are a map")
    return value


# --- reading a message straight from its bytes ----------------------------------------------
#
# A message sent through the node is read once, on the event loop, and was ~half the node's CPU
# per sent message through the general decoder (every field a typed value, every section a
# ``Described``, then a dataclass, then the namespace's message). ``_read`` reads the shapes
# clients write directly into what the namespace keeps: sections under small-ulong
# descriptors; header and properties fields null or of their usual encoding; application
# properties of scalar values under string keys; message annotations that are the scheduled
# enqueue time, the partition key or the broker's own. Any other shape of a section (and
# anything malformed) gives up on the whole message (``None``), and the general decoder reads
# it, with its errors. Other sections (delivery annotations, footer, amqp-sequence and
# amqp-value bodies) are decoded here by the general decoder, section by section.


class _Unusual(Exception):
    """A shape ``_read`` leaves to the general decoder."""


_GIVE_UP = (_Unusual, ValueError, IndexError, TypeError, OverflowError, OSError, struct.error)
_u32_at = struct.Struct(">I").unpack_from
_i8_at = struct.Struct(">b").unpack_from
_i16_at = struct.Struct(">h").unpack_from
_i32_at = struct.Struct(">i").unpack_from
_i64_at = struct.Struct(">q").unpack_from
_u16_at = struct.Struct(">H").unpack_from
_u64_at = struct.Struct(">Q").unpack_from
_f32_at = struct.Struct(">f").unpack_from
_f64_at = struct.Struct(">d").unpack_from

# The codes ``_scalar`` gives: one per AMQP type, whatever its encoding.
_STR, _SYM, _BIN, _NULL_C, _BOOL = 0xA1, 0xA3, 0xA0, 0x40, 0x56
_UBYTE, _USHORT, _UINT, _ULONG = 0x50, 0x60, 0x70, 0x80
_BYTE, _SHORT, _INT, _LONG = 0x51, 0x61, 0x71, 0x81
_FLOAT, _DOUBLE, _TIMESTAMP, _UUID = 0x72, 0x82, 0x83, 0x98
_FIXED_WIDTH = {0x50: 1, 0x60: 2, 0x70: 4, 0x80: 8, 0x51: 1, 0x61: 2, 0x71: 4, 0x81: 8,
                0x72: 4, 0x82: 8, 0x83: 8, 0x98: 16}  # fmt: skip
_SHORT_FORMS = {0x52: _UINT, 0x53: _ULONG, 0x54: _INT, 0x55: _LONG}
_ZERO_FORMS = {0x43: (_UINT, 0), 0x44: (_ULONG, 0), 0x41: (_BOOL, True), 0x42: (_BOOL, False)}


def _scalar(data: bytes, pos: int) -> tuple[int, Any, int]:
    """(type code, plain Python value, position after) of the scalar encoded at ``pos``;
    ``_Unusual`` for a compound, described, char or decimal value."""
    c = data[pos]
    if c == 0xA1 or c == 0xA3 or c == 0xA0 or c == 0xB1 or c == 0xB3 or c == 0xB0:
        if c < 0xB0:
            s = pos + 2
            e = s + data[pos + 1]
        else:
            s = pos + 5
            e = s + _u32_at(data, pos + 1)[0]
            c -= 0x10
        if e > len(data):
            raise _Unusual
        if c == _STR:
            return c, data[s:e].decode("utf-8"), e
        if c == _SYM:
            return c, data[s:e].decode("ascii"), e
        return c, data[s:e], e
    if c == 0x40:
        return c, None, pos + 1
    zero = _ZERO_FORMS.get(c)
    if zero is not None:
        return zero[0], zero[1], pos + 1
    short = _SHORT_FORMS.get(c)
    if short is not None:
        v = data[pos + 1] if short in (_UINT, _ULONG) else _i8_at(data, pos + 1)[0]
        return short, v, pos + 2
    if c == 0x56:
        b = data[pos + 1]
        if b > 1:
            raise _Unusual
        return _BOOL, b == 1, pos + 2
    width = _FIXED_WIDTH.get(c)
    if width is None:
        raise _Unusual
    s = pos + 1
    if s + width > len(data):
        raise _Unusual
    if c == _UBYTE:
        v = data[s]
    elif c == _USHORT:
        v = _u16_at(data, s)[0]
    elif c == _UINT:
        v = _u32_at(data, s)[0]
    elif c == _ULONG:
        v = _u64_at(data, s)[0]
    elif c == _BYTE:
        v = _i8_at(data, s)[0]
    elif c == _SHORT:
        v = _i16_at(data, s)[0]
    elif c == _INT:
        v = _i32_at(data, s)[0]
    elif c in (_LONG, _TIMESTAMP):
        v = _i64_at(data, s)[0]
    elif c == _FLOAT:
        v = Float(_f32_at(data, s)[0])
    elif c == _DOUBLE:
        v = _f64_at(data, s)[0]
    else:
        v = uuid.UUID(bytes=data[s : s + 16])
    return c, v, s + width


def _compound(data: bytes, pos: int, list0: bool) -> tuple[int, int, int]:
    """(count, position of the first element, end) of the list (``list0``) or map at ``pos``."""
    c = data[pos]
    if c == 0x45 and list0:
        return 0, pos + 1, pos + 1
    if c == (0xC0 if list0 else 0xC1):
        end = pos + 2 + data[pos + 1]
        count, first = data[pos + 2], pos + 3
    elif c == (0xD0 if list0 else 0xD1):
        size, count = struct.unpack_from(">II", data, pos + 1)
        end, first = pos + 5 + size, pos + 9
    else:
        raise _Unusual
    if end > len(data) or first > end:
        raise _Unusual
    return count, first, end


def _app_value(code: int, v: Any) -> Any:
    """An application property's value as ``to_sb_value`` gives it."""
    if code == _INT:
        return Int32(v)
    if code == _TIMESTAMP:
        return _utc(v / 1000)
    return v  # str for a symbol, int for the other integers, bool, float, Float, bytes, uuid


# header fields: durable, priority, ttl, first-acquirer, delivery-count
_HEADER_CODES = ((_BOOL,), (_UBYTE,), (_UINT,), (_BOOL,), (_UINT,))
# properties fields (``Properties``, in order): what each is read from here
_PROPERTY_CODES = ((_STR,), (_BIN,), (_STR,), (_STR,), (_STR,), (_STR,), (_SYM, _STR),
                   (_SYM, _STR), (_TIMESTAMP,), (_TIMESTAMP,), (_STR,), (_UINT,), (_STR,))  # fmt: skip
_BODY = (DATA, AMQP_SEQUENCE, AMQP_VALUE)
_NO_FIELDS: tuple[Any, ...] = (None,) * 13


def _fields(data: bytes, pos: int, codes: tuple[tuple[int, ...], ...]) -> tuple[list[Any], int]:
    """The fields of a described list's list at ``pos`` (absent ones None), each of the type
    ``codes`` names for it; and the position after the list."""
    values = [None] * len(codes)
    if data[pos] == 0x40:
        return values, pos + 1
    count, pos, end = _compound(data, pos, True)
    if count > len(codes):
        raise _Unusual
    for i in range(count):
        if end - pos == count - i and data.count(0x40, pos, end) == end - pos:
            pos = end  # one byte for each field left, all nulls (an SDK's usual tail)
            break
        if data[pos] == 0x40:
            pos += 1
            continue
        code, values[i], pos = _scalar(data, pos)
        if code not in codes[i]:
            raise _Unusual
    if pos != end:
        raise _Unusual
    return values, pos


class _Read:
    """What ``_read`` found in a message: header and properties fields, the namespace's
    annotations and application properties, what ``extra`` keeps, and where the body is."""

    __slots__ = ("header", "props", "scheduled", "partition_key", "app", "footer", "body_code",
                 "data", "body_start", "body_end")  # fmt: skip

    def __init__(self) -> None:
        self.header: list[Any] | None = None
        self.props: list[Any] | None = None
        self.scheduled: float | None = None
        self.partition_key: str | None = None
        self.app: dict[str, Any] | None = None
        self.footer: bytes | None = None  # encoded, when not empty
        self.body_code = 0  # no body section yet
        self.data: list[tuple[int, int]] = []  # (start, end) of each data section's bytes
        self.body_start = self.body_end = 0

    def message(self, data: bytes) -> SbMessage:
        """The namespace's message (``to_sb_message_general`` of the same bytes)."""
        extra: dict[str, Any] = {}
        if self.body_code == DATA and len(self.data) == 1:
            s, e = self.data[0]
            body, body_type = data[s:e], "data"
        elif self.body_code == 0:
            body, body_type = b"", "data"
        else:
            body = data[self.body_start : self.body_end]
            body_type = "amqp-data" if self.body_code == DATA else _BODY_TYPES[self.body_code]
        ttl = None
        h = self.header
        if h is not None:
            if h[2]:
                ttl = h[2] / 1000
            _keep_header(extra, h[0] or False, 4 if h[1] is None else h[1], h[3] or False)
        p = self.props or _NO_FIELDS
        if self.props is not None:
            _keep_properties(
                extra,
                None,
                p[1],
                None,
                None if p[7] is None else Symbol(p[7]),
                p[8],
                p[9],
                p[11],
            )
        if self.footer is not None:
            extra["amqp-footer"] = self.footer
        return SbMessage(
            body,
            body_type,
            p[0],  # message-id
            p[5],  # correlation-id
            p[10],  # group-id: the session
            p[4],  # reply-to
            p[12],  # reply-to-group-id
            p[2],  # to
            p[3],  # subject
            p[6],  # content-type
            self.partition_key,
            ttl,
            self.scheduled,
            {} if self.app is None else self.app,
            extra,
        )


_BODY_TYPES = {AMQP_SEQUENCE: "amqp-sequence", AMQP_VALUE: "amqp-value"}


# The shape of most messages sent (an SDK's message with nothing set but its message-id, and
# a data body: a properties list whose first field is a str8 and every other one null, then one
# data section), recognised with a few byte comparisons before ``_read`` is tried.
_PLAIN_PROPERTIES = b"\x00\x53\x73\xc0"  # properties section, list8
_DATA8, _DATA32 = b"\x00\x53\x75\xa0", b"\x00\x53\x75\xb0"  # data section, vbin8 / vbin32


def _plain(data: bytes) -> SbMessage | None:
    """The namespace's message (what ``_read`` gives) when ``data`` has exactly that shape,
    else None."""
    if not data.startswith(_PLAIN_PROPERTIES) or len(data) < 8 or data[6] != 0xA1:
        return None
    end = 5 + data[4]  # after the list: its size counts the bytes after the size byte
    count = data[5]
    id_end = 8 + data[7]
    nulls = end - id_end
    if not 0 < count <= 13 or nulls != count - 1 or data.count(0x40, id_end, end) != nulls:
        return None
    if data.startswith(_DATA8, end) and len(data) >= end + 5:
        start = end + 5
        stop = start + data[end + 4]
    elif data.startswith(_DATA32, end) and len(data) >= end + 8:
        start = end + 8
        stop = start + _u32_at(data, end + 4)[0]
    else:
        return None
    if stop != len(data):
        return None
    try:
        message_id = data[8:id_end].decode("utf-8")
    except UnicodeDecodeError:
        return None  # malformed: the general decoder says so
    return SbMessage(data[start:stop], "data", message_id)


def _read(data: bytes) -> _Read | None:
    """``data``'s sections read straight from the bytes; None when some section has a shape
    this leaves to the general decoder (which also says what is malformed)."""
    try:
        return _read_sections(data)
    except _GIVE_UP:
        return None


def _read_sections(data: bytes) -> _Read:
    r = _Read()
    n = len(data)
    pos = 0
    last = 0
    while pos < n:
        if data[pos] != 0 or data[pos + 1] != 0x53:
            raise _Unusual
        code = data[pos + 2]
        if code < last or (code == last and code != DATA and code != AMQP_SEQUENCE):
            raise _Unusual
        if last in _BODY and code in _BODY and code != last:
            raise _Unusual
        last = code
        start = pos
        pos += 3
        if code == DATA:
            c = data[pos]
            if c == 0xA0:
                s = pos + 2
                e = s + data[pos + 1]
            elif c == 0xB0:
                s = pos + 5
                e = s + _u32_at(data, pos + 1)[0]
            else:
                raise _Unusual
            if e > n:
                raise _Unusual
            if not r.data:
                r.body_start = start
            r.data.append((s, e))
            r.body_code = DATA
            r.body_end = pos = e
        elif code == PROPERTIES:
            r.props, pos = _fields(data, pos, _PROPERTY_CODES)
        elif code == HEADER:
            r.header, pos = _fields(data, pos, _HEADER_CODES)
        elif code == APPLICATION_PROPERTIES:
            pos = _read_application_properties(r, data, pos)
        elif code == MESSAGE_ANNOTATIONS:
            pos = _read_annotations(r, data, pos)
        elif code in (DELIVERY_ANNOTATIONS, FOOTER, AMQP_SEQUENCE, AMQP_VALUE):
            value, pos = decode_value(data, start)
            inner = value.value
            if code == AMQP_SEQUENCE and not isinstance(inner, list):
                raise _Unusual
            if code in (DELIVERY_ANNOTATIONS, FOOTER) and not isinstance(inner, dict | None):
                raise _Unusual
            if code == FOOTER and inner:
                r.footer = encode(inner)
            if code in (AMQP_SEQUENCE, AMQP_VALUE):
                if r.body_code == 0:
                    r.body_start = start
                r.body_code = code
                r.body_end = pos
        else:
            raise _Unusual
    return r


def _pairs(data: bytes, pos: int) -> tuple[int, int, int]:
    """(pairs, position of the first key, end) of the map section value at ``pos`` (none for
    a null)."""
    if data[pos] == 0x40:
        return 0, pos + 1, pos + 1
    count, pos, end = _compound(data, pos, False)
    if count % 2 or count > 2 * MAP_PAIRS_UNCHECKED:
        raise _Unusual  # odd, or enough keys for the general decoder's look at their hashes
    return count // 2, pos, end


def _read_application_properties(r: _Read, data: bytes, pos: int) -> int:
    pairs, pos, end = _pairs(data, pos)
    app: dict[str, Any] = {}
    for _ in range(pairs):
        code, key, pos = _scalar(data, pos)
        if code != _STR and code != _SYM:
            raise _Unusual
        code, value, pos = _scalar(data, pos)
        app[key] = _app_value(code, value) if code in (_INT, _TIMESTAMP) else value
    if pos != end:
        raise _Unusual
    if app:
        r.app = app
    return pos


def _read_annotations(r: _Read, data: bytes, pos: int) -> int:
    pairs, pos, end = _pairs(data, pos)
    for _ in range(pairs):
        code, key, pos = _scalar(data, pos)
        if code != _SYM:
            raise _Unusual
        code, value, pos = _scalar(data, pos)
        if key == SCHEDULED_ENQUEUE_TIME and code == _TIMESTAMP:
            r.scheduled = value / 1000
        elif key == PARTITION_KEY and (code in (_STR, _SYM)):
            r.partition_key = value
        elif key not in _BROKER_ANNOTATIONS:
            raise _Unusual  # kept encoded as the general decoder reads it
    if pos != end:
        raise _Unusual
    return pos
