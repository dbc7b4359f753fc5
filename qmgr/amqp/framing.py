"""AMQP 1.0 framing (part 2.3): protocol headers, frames out, a frame decoder for bytes in.

A frame: ``size`` (uint32, the whole frame), ``doff`` (data offset in 4-byte words, at least 2),
``type`` (0 AMQP, 1 SASL), ``channel`` (uint16), the extended header (skipped), then the body: a
described performative followed, for a transfer, by its payload. A frame of 8 bytes is a
heartbeat.

``FrameDecoder`` is fed whatever arrives and returns what is complete: ``ProtocolHeader`` items
(the first 8 bytes of the stream, and the AMQP header that follows the SASL exchange) and
``Frame`` items. Bad input raises ``FramingError`` carrying the AMQP error condition the
connection must be closed with; once raised, the decoder stays broken (the connection is gone).

A frame's performative is read by one ``decode_value`` over the frame's body, so the work and
memory it costs are bounded by that frame's bytes (``qmgr.amqp.types`` says how); the payload of a
transfer is not decoded here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from qmgr.amqp.performatives import (
    PERFORMATIVES,
    SASL_FRAMES,
    Accepted,
    Composite,
    Disposition,
    Released,
    Transfer,
    decode_described,
    encode_described,
)
from qmgr.amqp.types import DecodeError, Described, decode_value, encode, encode_into

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_HEADER = b"AMQP\x03\x01\x00\x00"
TLS_HEADER = b"AMQP\x02\x01\x00\x00"
PROTO_AMQP, PROTO_TLS, PROTO_SASL = 0, 2, 3
TYPE_AMQP, TYPE_SASL = 0, 1
MIN_MAX_FRAME_SIZE = 512
HEARTBEAT = b"\x00\x00\x00\x08\x02\x00\x00\x00"

# Conditions (AMQP 1.0 part 2.8.15/16).
DECODE_ERROR = "amqp:decode-error"
FRAMING_ERROR = "amqp:connection:framing-error"
NOT_ALLOWED = "amqp:not-allowed"

_HEAD = struct.Struct(">IBBH")


class FramingError(Exception):
    """The byte stream cannot go on: close the connection with ``condition``."""

    def __init__(self, condition: str, description: str) -> None:
        super().__init__(f"{condition}: {description}")
        self.condition = condition
        self.description = description


class ProtocolHeaderError(FramingError):
    """The peer's protocol header is not one we speak: answer with ``expected`` and close."""

    def __init__(self, received: bytes, expected: bytes) -> None:
        super().__init__(FRAMING_ERROR, f"unsupported protocol header {received!r}")
        self.received = received
        self.expected = expected


@dataclass(frozen=True, slots=True)
class ProtocolHeader:
    protocol_id: int  # 0 AMQP, 2 TLS, 3 SASL
    major: int = 1
    minor: int = 0
    revision: int = 0

    def to_bytes(self) -> bytes:
        return b"AMQP" + bytes((self.protocol_id, self.major, self.minor, self.revision))


@dataclass(slots=True)
class Frame:
    """One frame: ``performative`` is None for a heartbeat (an empty frame)."""

    channel: int
    performative: Any  # a performative or SASL dataclass; None for a heartbeat
    payload: bytes = b""
    sasl: bool = False


def encode_frame(
    channel: int, performative: Composite | None, payload: bytes = b"", sasl: bool = False
) -> bytes:
    """One frame holding ``performative`` (every field written) and ``payload``.

    ``performative=None`` gives an empty frame (a heartbeat). Splitting transfers to fit the
    peer's max-frame-size is the connection's job.
    """
    out = bytearray(8)
    if performative is not None:
        encode_into(out, encode_described(performative))
        out += payload
    _HEAD.pack_into(out, 0, len(out), 2, TYPE_SASL if sasl else TYPE_AMQP, channel)
    return bytes(out)


# The two frames sent once per message (a transfer out, a settlement echoed) are written
# directly, byte for byte what ``encode_frame`` writes for the same performative.
_PACK_I = struct.Struct(">I").pack
_TRANSFER_START = b"\x00\x53\x14"  # described, descriptor smallulong 0x14
_DISPOSITION_START = b"\x00\x53\x15"
# rcv-settle-mode, state: null; resume, aborted, batchable: false
_TRANSFER_END = b"\x40\x40\x42\x42\x42"
_STATES: dict[type, bytes] = {cls: encode(encode_described(cls())) for cls in (Accepted, Released)}


def _uint(v: int) -> bytes:
    if v == 0:
        return b"\x43"
    if v < 256:
        return bytes((0x52, v))
    return b"\x70" + _PACK_I(v)


def _frame(channel: int, start: bytes, count: int, fields: bytes, payload: bytes) -> bytes:
    """A frame whose body is ``start`` (a described list's descriptor), then the list of
    ``count`` encoded ``fields``, then ``payload``."""
    n = len(fields) + 1
    if n < 256 and count < 256:
        listed = bytes((0xC0, n, count))
    else:
        listed = b"\xd0" + _PACK_I(n + 3) + _PACK_I(count)
    size = 8 + len(start) + len(listed) + len(fields) + len(payload)
    return b"".join((_HEAD.pack(size, 2, TYPE_AMQP, channel), start, listed, fields, payload))


def encode_transfer_frame(
    channel: int,
    handle: int,
    delivery_id: int,
    tag: bytes,
    payload: bytes,
    *,
    message_format: int = 0,
    settled: bool = False,
    more: bool = False,
) -> bytes:
    """``encode_frame(channel, Transfer(...), payload)`` for a transfer with no state, not
    resumed, aborted or batchable (the server's every transfer), written directly."""
    n = len(tag)
    fields = b"".join(
        (
            _uint(handle),
            _uint(delivery_id),
            bytes((0xA0, n)) + tag if n < 256 else b"\xb0" + _PACK_I(n) + tag,
            _uint(message_format),
            b"\x41" if settled else b"\x42",
            b"\x41" if more else b"\x42",
            _TRANSFER_END,
        )
    )
    return _frame(channel, _TRANSFER_START, 11, fields, payload)


def encode_disposition_frame(
    channel: int,
    role: bool,
    first: int,
    last: int,
    settled: bool,
    state: Any,
    batchable: bool = False,
) -> bytes:
    """``encode_frame(channel, Disposition(...))``, written directly (``state`` a delivery
    state dataclass or None)."""
    encoded = b"\x40" if state is None else _STATES.get(type(state))
    if encoded is None:
        encoded = encode(encode_described(state))
    fields = b"".join(
        (
            b"\x41" if role else b"\x42",
            _uint(first),
            _uint(last),
            b"\x41" if settled else b"\x42",
            encoded,
            b"\x41" if batchable else b"\x42",
        )
    )
    return _frame(channel, _DISPOSITION_START, 6, fields, b"")


# A disposition, the frame received once per settled message, read directly in the shapes
# clients write it: a list8 of up to six fields; booleans as true/false or the one-byte form;
# uints in their three forms; no state, or accepted. Anything else goes to the general decoder.
_UNSET = object()


def _bool_at(body: bytes, pos: int) -> tuple[Any, int]:
    code = body[pos]
    if code == 0x41:
        return True, pos + 1
    if code == 0x42:
        return False, pos + 1
    if code == 0x56 and body[pos + 1] <= 1:
        return body[pos + 1] == 1, pos + 2
    if code == 0x40:
        return None, pos + 1
    return _UNSET, pos


def _uint_at(body: bytes, pos: int) -> tuple[Any, int]:
    code = body[pos]
    if code == 0x52:
        return body[pos + 1], pos + 2
    if code == 0x70:
        return int.from_bytes(body[pos + 1 : pos + 5], "big"), pos + 5
    if code == 0x43:
        return 0, pos + 1
    if code == 0x40:
        return None, pos + 1
    return _UNSET, pos


_ACCEPTED_FORMS = (b"\x00\x53\x24\x45", b"\x00\x53\x24\xc0\x01\x00")


def read_disposition(body: bytes) -> Disposition | None:
    """The disposition in ``body`` (a frame body starting with its descriptor), as the general
    decoder reads it, or None when it is not in one of the common shapes."""
    try:
        if body[3] != 0xC0 or len(body) != 5 + body[4] or not 2 <= body[5] <= 6:
            return None
        count, pos = body[5], 6
        role, pos = _bool_at(body, pos)
        first, pos = _uint_at(body, pos)
        if role is None or role is _UNSET or first is None or first is _UNSET:
            return None  # mandatory, or another shape: the general decoder says what is wrong
        d = Disposition(role=role, first=first)
        if count > 2:
            last, pos = _uint_at(body, pos)
            if last is _UNSET:
                return None
            d.last = last
        if count > 3:
            settled, pos = _bool_at(body, pos)
            if settled is _UNSET:
                return None
            d.settled = bool(settled)
        if count > 4:
            if body[pos] == 0x40:
                pos += 1
            elif body[pos : pos + 4] == _ACCEPTED_FORMS[0]:
                d.state, pos = Accepted(), pos + 4
            elif body[pos : pos + 6] == _ACCEPTED_FORMS[1]:
                d.state, pos = Accepted(), pos + 6
            else:
                return None
        if count > 5:
            batchable, pos = _bool_at(body, pos)
            if batchable is _UNSET:
                return None
            d.batchable = bool(batchable)
        if pos != len(body):
            return None
        return d
    except IndexError:
        return None


def transfer_overhead(performative: Composite) -> int:
    """Bytes of a frame holding ``performative`` before its payload (to size transfer parts)."""
    out = bytearray(8)
    encode_into(out, encode_described(performative))
    return len(out)


class FrameDecoder:
    """Bytes in, protocol headers and frames out.

    ``max_frame_size``: the largest frame accepted (what this side advertised in its Open;
    change it with the attribute). The stream must begin with a protocol header; after a SASL
    header, SASL frames follow until the next header (normally the AMQP header).
    """

    def __init__(self, max_frame_size: int = 0xFFFFFFFF) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._expect_header = True
        self._layer: int | None = None  # protocol id of the last header
        self._broken: FramingError | None = None

    @property
    def layer(self) -> int | None:
        """The protocol id of the last header received (None before any)."""
        return self._layer

    def feed(self, data: bytes | bytearray | memoryview) -> list[ProtocolHeader | Frame]:
        if self._broken is not None:
            raise self._broken
        self._buf += data
        try:
            return self._drain()
        except FramingError as e:
            self._broken = e
            raise

    def _drain(self) -> list[ProtocolHeader | Frame]:
        out: list[ProtocolHeader | Frame] = []
        buf = self._buf
        pos = 0
        n = len(buf)
        while True:
            if self._expect_header or (self._layer == PROTO_SASL and buf[pos : pos + 4] == b"AMQP"):
                if n - pos < 8:
                    if bytes(buf[pos : pos + 4]) != b"AMQP"[: min(4, n - pos)]:
                        raise ProtocolHeaderError(bytes(buf[pos : pos + 8]), AMQP_HEADER)
                    break
                header = bytes(buf[pos : pos + 8])
                pos += 8
                out.append(self._header(header))
                continue
            if n - pos < 8:
                break
            size, doff, ftype, channel = _HEAD.unpack_from(buf, pos)
            if size < 8 or doff < 2 or doff * 4 > size:
                raise FramingError(
                    FRAMING_ERROR, f"malformed frame header (size {size}, doff {doff})"
                )
            if size > self.max_frame_size:
                raise FramingError(
                    FRAMING_ERROR,
                    f"frame of {size} bytes exceeds max-frame-size {self.max_frame_size}",
                )
            if n - pos < size:
                break
            body = bytes(buf[pos + doff * 4 : pos + size])
            pos += size
            out.append(self._frame(ftype, channel, body))
        del buf[:pos]
        return out

    def _header(self, raw: bytes) -> ProtocolHeader:
        if (
            raw[:4] != b"AMQP"
            or raw[5:] != b"\x01\x00\x00"
            or raw[4] not in (PROTO_AMQP, PROTO_TLS, PROTO_SASL)
        ):
            expected = SASL_HEADER if self._layer is None else AMQP_HEADER
            raise ProtocolHeaderError(raw, expected)
        if self._layer is not None and raw[4] != PROTO_AMQP:
            raise ProtocolHeaderError(raw, AMQP_HEADER)
        self._expect_header = False
        self._layer = raw[4]
        return ProtocolHeader(raw[4], raw[5], raw[6], raw[7])

    def _frame(self, ftype: int, channel: int, body: bytes) -> Frame:
        sasl = self._layer == PROTO_SASL
        if ftype != (TYPE_SASL if sasl else TYPE_AMQP):
            raise FramingError(
                FRAMING_ERROR, f"frame type {ftype} in the {'SASL' if sasl else 'AMQP'} layer"
            )
        if not body:
            if sasl:
                raise FramingError(FRAMING_ERROR, "empty frame in the SASL layer")
            return Frame(channel, None)
        if not sasl and body.startswith(_DISPOSITION_START):
            disposition = read_disposition(body)
            if disposition is not None:
                return Frame(channel, disposition, b"", False)
        try:
            described, end = decode_value(body, 0)
            if not isinstance(described, Described):
                raise DecodeError("a frame body starts with a described performative")
            performative = decode_described(described)
        except DecodeError as e:
            raise FramingError(DECODE_ERROR, str(e)) from e
        allowed = SASL_FRAMES if sasl else PERFORMATIVES
        if type(performative) not in allowed:
            raise FramingError(
                DECODE_ERROR, f"not a {'SASL frame' if sasl else 'performative'}: {performative!r}"
            )
        payload = body[end:]
        if payload and not isinstance(performative, Transfer):
            raise FramingError(
                DECODE_ERROR, f"{len(payload)} bytes after a {type(performative).__name__}"
            )
        return Frame(channel, performative, payload, sasl)
