"""AMQP 1.0 messages (part 3.2): the sections, their encoding and decoding.

An annotated message is a sequence of described sections in this order: header,
delivery-annotations, message-annotations, properties, application-properties, the body (one or
more ``data``, one or more ``amqp-sequence``, or one ``amqp-value``), footer. ``encode_message``
writes them (header and properties with every field); ``decode_message`` reads them and refuses
out-of-order, repeated or mixed body sections with ``DecodeError``.

Nothing here knows Service Bus: what its messages mean (the namespace's message, batches, the
broker's annotations) is :mod:`qmgr.sbamqp.message`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from qmgr.amqp.performatives import (
    ANY,
    BINARY,
    BOOL,
    MESSAGE_ID,
    STRING,
    SYMBOL,
    TIMESTAMP,
    UBYTE,
    UINT,
    Composite,
    Kind,
    decode_as,
    encode_described,
)
from qmgr.amqp.types import (
    DecodeError,
    Described,
    Symbol,
    Timestamp,
    ULong,
    decode_value,
    encode_into,
)

HEADER, DELIVERY_ANNOTATIONS, MESSAGE_ANNOTATIONS, PROPERTIES = 0x70, 0x71, 0x72, 0x73
APPLICATION_PROPERTIES, DATA, AMQP_SEQUENCE, AMQP_VALUE, FOOTER = 0x74, 0x75, 0x76, 0x77, 0x78
_SECTION_NAMES = {
    "amqp:header:list": HEADER,
    "amqp:delivery-annotations:map": DELIVERY_ANNOTATIONS,
    "amqp:message-annotations:map": MESSAGE_ANNOTATIONS,
    "amqp:properties:list": PROPERTIES,
    "amqp:application-properties:map": APPLICATION_PROPERTIES,
    "amqp:data:binary": DATA,
    "amqp:amqp-sequence:list": AMQP_SEQUENCE,
    "amqp:amqp-value:*": AMQP_VALUE,
    "amqp:footer:map": FOOTER,
}

MAP = Kind("map", lambda v: v, lambda v: v)


@dataclass(slots=True)
class Header(Composite):
    DESCRIPTOR: ClassVar[int] = HEADER
    NAME: ClassVar[str] = "amqp:header:list"
    KINDS: ClassVar[tuple[Kind, ...]] = (BOOL, UBYTE, UINT, BOOL, UINT)
    durable: bool = False
    priority: int = 4
    ttl: int | None = None  # milliseconds
    first_acquirer: bool = False
    delivery_count: int = 0


@dataclass(slots=True)
class Properties(Composite):
    DESCRIPTOR: ClassVar[int] = PROPERTIES
    NAME: ClassVar[str] = "amqp:properties:list"
    KINDS: ClassVar[tuple[Kind, ...]] = (
        MESSAGE_ID, BINARY, ANY, STRING, ANY, MESSAGE_ID, SYMBOL, SYMBOL, TIMESTAMP, TIMESTAMP,
        STRING, UINT, STRING,
    )  # fmt: skip
    message_id: Any = None  # string, uuid, ulong or binary
    user_id: bytes | None = None
    to: Any = None
    subject: str | None = None
    reply_to: Any = None
    correlation_id: Any = None
    content_type: str | None = None
    content_encoding: str | None = None
    absolute_expiry_time: int | None = None  # ms
    creation_time: int | None = None  # ms
    group_id: str | None = None
    group_sequence: int | None = None
    reply_to_group_id: str | None = None


@dataclass(slots=True)
class Message:
    """An annotated message. ``body`` is a list of ``bytes`` (``data``), a list of lists
    (``sequence``) or one value (``value``), as ``body_type`` says."""

    header: Header | None = None
    delivery_annotations: dict[Any, Any] | None = None
    message_annotations: dict[Any, Any] | None = None
    properties: Properties | None = None
    application_properties: dict[Any, Any] | None = None
    body: Any = None
    body_type: str = "value"  # "data", "sequence" or "value"
    footer: dict[Any, Any] | None = None


def write_section(out: bytearray, code: int, value: Any) -> None:
    """Append one section: ``value`` described by the small-ulong ``code``."""
    out += b"\x00\x53"
    out.append(code)
    encode_into(out, value)


def _annotations(v: dict[Any, Any]) -> dict[Any, Any]:
    return {Symbol(k) if type(k) is str else k: x for k, x in v.items()}


def encode_body(message: Message) -> bytes:
    """The body sections of ``message``."""
    out = bytearray()
    if message.body_type == "data":
        for part in message.body:
            write_section(out, DATA, bytes(part))
    elif message.body_type == "sequence":
        for part in message.body:
            write_section(out, AMQP_SEQUENCE, list(part))
    elif message.body_type == "value":
        write_section(out, AMQP_VALUE, message.body)
    else:
        raise ValueError(f"unknown body type {message.body_type!r}")
    return bytes(out)


def encode_message(message: Message, body: bytes | None = None) -> bytes:
    """The message's sections; ``body`` gives the body sections already encoded."""
    out = bytearray()
    if message.header is not None:
        encode_into(out, encode_described(message.header))
    if message.delivery_annotations is not None:
        write_section(out, DELIVERY_ANNOTATIONS, _annotations(message.delivery_annotations))
    if message.message_annotations is not None:
        write_section(out, MESSAGE_ANNOTATIONS, _annotations(message.message_annotations))
    if message.properties is not None:
        encode_into(out, encode_described(message.properties))
    if message.application_properties is not None:
        write_section(out, APPLICATION_PROPERTIES, dict(message.application_properties))
    out += encode_body(message) if body is None else body
    if message.footer is not None:
        write_section(out, FOOTER, _annotations(message.footer))
    return bytes(out)


def _sections(data: bytes) -> list[tuple[int, Any, int, int]]:
    """(section code, value, start, end) for each section of ``data``, in order."""
    out = []
    pos = 0
    while pos < len(data):
        start = pos
        value, pos = decode_value(data, pos)
        if not isinstance(value, Described):
            raise DecodeError("a message section is a described value")
        d = value.descriptor
        code = int(d) if isinstance(d, ULong) else _SECTION_NAMES.get(str(d), -1)
        if not HEADER <= code <= FOOTER:
            raise DecodeError(f"not a message section: {d!r}")
        out.append((code, value, start, pos))
    return out


def decode_message(data: bytes | bytearray | memoryview) -> Message:
    """Read a message; malformed or misordered sections raise ``DecodeError``."""
    message, _ = decode_with_body(bytes(data))
    return message


def decode_with_body(data: bytes) -> tuple[Message, bytes]:
    """The message and the raw bytes of its body sections (``DecodeError`` as ``decode_message``)."""
    message = Message(body_type="")
    last = 0
    body_start = body_end = 0
    body: list[Any] = []
    for code, value, start, end in _sections(data):
        repeatable = code in (DATA, AMQP_SEQUENCE) and code == last
        if code < last or (code == last and not repeatable):
            raise DecodeError("message sections out of order or repeated")
        if DATA <= code <= AMQP_VALUE and DATA <= last <= AMQP_VALUE and code != last:
            raise DecodeError(
                "a message body is data, amqp-sequence or amqp-value sections, not a mix"
            )
        last = code
        inner = value.value
        if code == HEADER:
            message.header = _list_as(Header, value)
        elif code == PROPERTIES:
            message.properties = _list_as(Properties, value)
        elif code in (DELIVERY_ANNOTATIONS, MESSAGE_ANNOTATIONS, APPLICATION_PROPERTIES, FOOTER):
            if inner is None:
                inner = {}
            if not isinstance(inner, dict):
                raise DecodeError("an annotations or application-properties section is a map")
            if code == DELIVERY_ANNOTATIONS:
                message.delivery_annotations = inner
            elif code == MESSAGE_ANNOTATIONS:
                message.message_annotations = inner
            elif code == APPLICATION_PROPERTIES:
                message.application_properties = inner
            else:
                message.footer = inner
        else:
            if not body:
                body_start = start
            body_end = end
            if code == DATA:
                if not isinstance(inner, bytes):
                    raise DecodeError("a data section is binary")
                message.body_type = "data"
            elif code == AMQP_SEQUENCE:
                if not isinstance(inner, list):
                    raise DecodeError("an amqp-sequence section is a list")
                message.body_type = "sequence"
            else:
                message.body_type = "value"
            body.append(inner)
    if not body:
        message.body_type = "data"  # no body section: an empty data body
    message.body = body[0] if message.body_type == "value" else body
    return message, data[body_start:body_end]


def _list_as(cls: type[Composite], value: Described) -> Any:
    if value.value is None:
        return cls()
    return decode_as(cls, value)


def timestamp(seconds: float) -> Timestamp:
    """An AMQP timestamp (ms) for epoch ``seconds``."""
    return Timestamp(round(seconds * 1000))
