"""The AMQP 1.0 type system (OASIS AMQP 1.0, part 1): values in Python, encoding and decoding.

Written here rather than taken from a library: Apache Qpid Proton's binding hides the
``message-format`` field and trims trailing null fields, and the decoder in azure-servicebus is a
private module of a client. This one is small, pure, and exact about the spec's types.

Python values and their AMQP types:

========================  =====================================================
Python                    AMQP
========================  =====================================================
``None``                  null
``bool``                  boolean
``int``                   int when it fits 32 bits, else long (else ulong)
``UByte`` ... ``ULong``   ubyte, ushort, uint, ulong
``Byte`` ... ``Long``     byte, short, int, long
``float`` / ``Float``     double / float
``Decimal32/64/128``      decimal32/64/128, kept as their raw big-endian bytes
``Char``                  char (one code point)
``Timestamp``             timestamp (ms since the epoch, signed 64 bits)
``uuid.UUID``             uuid
``bytes``                 binary (``bytearray``/``memoryview`` encode as binary too)
``str`` / ``Symbol``      string / symbol
``list``                  list
``dict``                  map (keys and values of any type)
``Array``                 array: a list with one element type (``Array(items, Symbol)``)
``Described``             a described type: ``Described(descriptor, value)``
========================  =====================================================

Encoding picks the compact forms (``uint0``, ``smalluint``, ``list0``, ``list8``, ``str8`` ...);
decoding accepts every form and returns the typed wrappers, so ``decode(encode(v)) == v`` with the
same types. An empty array is written with its element constructor, as the specification says;
azure-servicebus's ``_pyamqp`` writes it without one and reads it as if it had none (so an empty
array sent to that client shifts what follows: send it none). Both forms are read here. Malformed input raises ``DecodeError``; values that have no encoding raise
``EncodeError``.

Decoding reads bytes from anyone who can open a connection, before they authenticate, on the event
loop every port of the node shares. So its work and what it builds are bounded by the bytes it is
given, a constant per byte, or it raises ``DecodeError``: element counts are checked against the
bytes before anything is built, elements that take no bytes (an array of nulls) draw on a budget of
the decode's own bytes, and a large map whose keys share one hash (quadratic to insert) is refused.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any


class DecodeError(ValueError):
    """Bytes that are not a valid AMQP encoding (AMQP error ``amqp:decode-error``)."""

    condition = "amqp:decode-error"


class EncodeError(ValueError):
    """A value that has no AMQP encoding (out of range, unknown type)."""


class _Ranged(int):
    lo = 0
    hi = 0

    def __new__(cls, value: int = 0) -> Any:
        v = int(value)
        if not cls.lo <= v <= cls.hi:
            raise EncodeError(f"{cls.__name__} out of range: {v}")
        return int.__new__(cls, v)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({int(self)})"


class UByte(_Ranged):
    hi = 0xFF


class UShort(_Ranged):
    hi = 0xFFFF


class UInt(_Ranged):
    hi = 0xFFFFFFFF


class ULong(_Ranged):
    hi = 0xFFFFFFFFFFFFFFFF


class Byte(_Ranged):
    lo, hi = -0x80, 0x7F


class Short(_Ranged):
    lo, hi = -0x8000, 0x7FFF


class Int(_Ranged):
    lo, hi = -0x80000000, 0x7FFFFFFF


class Long(_Ranged):
    lo, hi = -0x8000000000000000, 0x7FFFFFFFFFFFFFFF


class Timestamp(_Ranged):
    """Milliseconds since the Unix epoch."""

    lo, hi = -0x8000000000000000, 0x7FFFFFFFFFFFFFFF


class Float(float):
    """A 32-bit float (plain ``float`` is a double)."""

    def __repr__(self) -> str:
        return f"Float({float(self)!r})"


class Symbol(str):
    """An ASCII symbolic name (plain ``str`` is a UTF-8 string)."""

    def __repr__(self) -> str:
        return f"Symbol({str(self)!r})"


class Char(str):
    """One Unicode code point, encoded as UTF-32BE."""

    def __repr__(self) -> str:
        return f"Char({str(self)!r})"


class _Decimal(bytes):
    size = 0

    def __new__(cls, raw: bytes) -> Any:
        if len(raw) != cls.size:
            raise EncodeError(f"{cls.__name__} needs {cls.size} bytes")
        return bytes.__new__(cls, raw)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({bytes(self)!r})"


class Decimal32(_Decimal):
    size = 4


class Decimal64(_Decimal):
    size = 8


class Decimal128(_Decimal):
    size = 16


class Described:
    """A described value: a descriptor (``ULong`` code or ``Symbol`` name) and the value."""

    __slots__ = ("descriptor", "value")

    def __init__(self, descriptor: Any, value: Any) -> None:
        self.descriptor = descriptor
        self.value = value

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Described)
            and self.descriptor == other.descriptor
            and type(self.descriptor) is type(other.descriptor)
            and self.value == other.value
        )

    def __hash__(self) -> int:
        return hash((self.descriptor, repr(self.value)))

    def __repr__(self) -> str:
        return f"Described({self.descriptor!r}, {self.value!r})"


class Array(list):
    """An AMQP array: elements of one type, named by its Python class (``Array([...], Symbol)``).

    For an array of described values ``element`` is ``Described`` and ``descriptor`` the shared
    descriptor.
    """

    def __init__(self, items: Any = (), element: type = Symbol, descriptor: Any = None) -> None:
        super().__init__(items)
        self.element = element
        self.descriptor = descriptor

    def __repr__(self) -> str:
        return f"Array({list(self)!r}, {self.element.__name__})"


# --- encoding -------------------------------------------------------------------------------

_pack_B = struct.Struct(">B").pack
_pack_H = struct.Struct(">H").pack
_pack_I = struct.Struct(">I").pack
_pack_Q = struct.Struct(">Q").pack
_pack_b = struct.Struct(">b").pack
_pack_h = struct.Struct(">h").pack
_pack_i = struct.Struct(">i").pack
_pack_q = struct.Struct(">q").pack
_pack_f = struct.Struct(">f").pack
_pack_d = struct.Struct(">d").pack
_pack_BB = struct.Struct(">BB").pack
_pack_II = struct.Struct(">II").pack


def encode(value: Any) -> bytes:
    """The AMQP encoding of ``value`` (see the module docstring for the type mapping)."""
    out = bytearray()
    encode_into(out, value)
    return bytes(out)


def encode_into(out: bytearray, value: Any) -> None:
    """Append the encoding of ``value`` to ``out``."""
    if value is None:
        out.append(0x40)
        return
    enc = _ENCODERS.get(type(value))
    if enc is None:
        enc = _encoder_for(value)
    enc(out, value)


def _encoder_for(value: Any) -> Callable[[bytearray, Any], None]:
    for cls, enc in _ENCODERS.items():
        if isinstance(value, cls) and cls not in (bool, int, str, float):
            return enc
    if isinstance(value, bool):
        return _enc_bool
    if isinstance(value, int):
        return _enc_int
    if isinstance(value, str):
        return _enc_str
    if isinstance(value, float):
        return _enc_double
    if isinstance(value, bytes | bytearray | memoryview):
        return _enc_binary
    if isinstance(value, list | tuple):
        return _enc_list
    if isinstance(value, dict):
        return _enc_map
    raise EncodeError(f"no AMQP encoding for {type(value).__name__}")


def _enc_null(out: bytearray, v: Any) -> None:
    out.append(0x40)


def _enc_bool(out: bytearray, v: bool) -> None:
    out.append(0x41 if v else 0x42)


def _enc_ubyte(out: bytearray, v: int) -> None:
    out += _pack_BB(0x50, v)


def _enc_ushort(out: bytearray, v: int) -> None:
    out.append(0x60)
    out += _pack_H(v)


def _enc_uint(out: bytearray, v: int) -> None:
    if v == 0:
        out.append(0x43)
    elif v < 256:
        out += _pack_BB(0x52, v)
    else:
        out.append(0x70)
        out += _pack_I(v)


def _enc_ulong(out: bytearray, v: int) -> None:
    if v == 0:
        out.append(0x44)
    elif v < 256:
        out += _pack_BB(0x53, v)
    else:
        out.append(0x80)
        out += _pack_Q(v)


def _enc_byte(out: bytearray, v: int) -> None:
    out.append(0x51)
    out += _pack_b(v)


def _enc_short(out: bytearray, v: int) -> None:
    out.append(0x61)
    out += _pack_h(v)


def _enc_int32(out: bytearray, v: int) -> None:
    if -128 <= v <= 127:
        out.append(0x54)
        out += _pack_b(v)
    else:
        out.append(0x71)
        out += _pack_i(v)


def _enc_long(out: bytearray, v: int) -> None:
    if -128 <= v <= 127:
        out.append(0x55)
        out += _pack_b(v)
    else:
        out.append(0x81)
        out += _pack_q(v)


def _enc_int(out: bytearray, v: int) -> None:
    if -0x80000000 <= v <= 0x7FFFFFFF:
        _enc_int32(out, v)
    elif -0x8000000000000000 <= v <= 0x7FFFFFFFFFFFFFFF:
        _enc_long(out, v)
    elif 0 <= v <= 0xFFFFFFFFFFFFFFFF:
        _enc_ulong(out, v)
    else:
        raise EncodeError(f"integer out of AMQP range: {v}")


def _enc_timestamp(out: bytearray, v: int) -> None:
    out.append(0x83)
    out += _pack_q(v)


def _enc_float(out: bytearray, v: float) -> None:
    out.append(0x72)
    out += _pack_f(v)


def _enc_double(out: bytearray, v: float) -> None:
    out.append(0x82)
    out += _pack_d(v)


def _enc_decimal(out: bytearray, v: _Decimal) -> None:
    out.append({4: 0x74, 8: 0x84, 16: 0x94}[len(v)])
    out += v


def _enc_char(out: bytearray, v: str) -> None:
    if len(v) != 1:
        raise EncodeError("a char is one code point")
    out.append(0x73)
    out += _pack_I(ord(v))


def _enc_uuid(out: bytearray, v: uuid.UUID) -> None:
    out.append(0x98)
    out += v.bytes


def _enc_variable(
    out: bytearray, code8: int, code32: int, raw: bytes | bytearray | memoryview
) -> None:
    n = len(raw)
    if n < 256:
        out += _pack_BB(code8, n)
    else:
        out.append(code32)
        out += _pack_I(n)
    out += raw


def _enc_binary(out: bytearray, v: bytes | bytearray | memoryview) -> None:
    _enc_variable(out, 0xA0, 0xB0, v)


def _enc_str(out: bytearray, v: str) -> None:
    _enc_variable(out, 0xA1, 0xB1, v.encode("utf-8"))


_SYMBOLS: dict[str, bytes] = {}  # encoded symbols: the same few names (keys, conditions) recur
_SYMBOLS_KEPT = 4096


def _enc_symbol(out: bytearray, v: str) -> None:
    done = _SYMBOLS.get(v)
    if done is not None:
        out += done
        return
    try:
        raw = v.encode("ascii")
    except UnicodeEncodeError as e:
        raise EncodeError(f"a symbol is ASCII: {v!r}") from e
    start = len(out)
    _enc_variable(out, 0xA3, 0xB3, raw)
    if len(_SYMBOLS) < _SYMBOLS_KEPT and len(raw) <= 64:
        _SYMBOLS[str(v)] = bytes(out[start:])


def _enc_compound(
    out: bytearray, code0: int | None, code8: int, code32: int, count: int, body: bytearray
) -> None:
    if count == 0 and code0 is not None:
        out.append(code0)
    elif len(body) + 1 < 256 and count < 256:
        out += _pack_BB(code8, len(body) + 1)
        out.append(count)
        out += body
    else:
        out.append(code32)
        out += _pack_II(len(body) + 4, count)
        out += body


def _enc_list(out: bytearray, v: list[Any] | tuple[Any, ...]) -> None:
    body = bytearray()
    for item in v:
        encode_into(body, item)
    _enc_compound(out, 0x45, 0xC0, 0xD0, len(v), body)


def _enc_map(out: bytearray, v: dict[Any, Any]) -> None:
    body = bytearray()
    for k, item in v.items():
        encode_into(body, k)
        encode_into(body, item)
    _enc_compound(out, None, 0xC1, 0xD1, 2 * len(v), body)


def _enc_described(out: bytearray, v: Described) -> None:
    out.append(0x00)
    encode_into(out, v.descriptor)
    encode_into(out, v.value)


# Typed writers for hand-specialised encoders (``qmgr.sbamqp.message.to_amqp``): each appends one
# value of its AMQP type exactly as ``encode_into`` writes the matching wrapper.
write_uint = _enc_uint
write_long = _enc_long
write_timestamp = _enc_timestamp
write_string = _enc_str
write_symbol = _enc_symbol
write_binary = _enc_binary


def write_list(out: bytearray, count: int, body: bytearray) -> None:
    """A list of ``count`` items already encoded in ``body``."""
    _enc_compound(out, 0x45, 0xC0, 0xD0, count, body)


def write_map(out: bytearray, pairs: int, body: bytearray) -> None:
    """A map of ``pairs`` keys and values already encoded in ``body``."""
    _enc_compound(out, None, 0xC1, 0xD1, 2 * pairs, body)


# Array elements: (constructor, how to write one element without its constructor).
def _fixed(code: int, pack: Callable[[Any], bytes]) -> tuple[int, Callable[[bytearray, Any], None]]:
    def write(out: bytearray, v: Any) -> None:
        out += pack(v)

    return code, write


_ARRAY_FIXED: dict[type, tuple[int, Callable[[bytearray, Any], None]]] = {
    bool: _fixed(0x56, lambda v: b"\x01" if v else b"\x00"),
    UByte: _fixed(0x50, _pack_B),
    UShort: _fixed(0x60, _pack_H),
    UInt: _fixed(0x70, _pack_I),
    ULong: _fixed(0x80, _pack_Q),
    Byte: _fixed(0x51, _pack_b),
    Short: _fixed(0x61, _pack_h),
    Int: _fixed(0x71, _pack_i),
    Long: _fixed(0x81, _pack_q),
    Timestamp: _fixed(0x83, _pack_q),
    Float: _fixed(0x72, _pack_f),
    float: _fixed(0x82, _pack_d),
    Char: _fixed(0x73, lambda v: _pack_I(ord(v))),
    uuid.UUID: _fixed(0x98, lambda v: v.bytes),
    Decimal32: _fixed(0x74, bytes),
    Decimal64: _fixed(0x84, bytes),
    Decimal128: _fixed(0x94, bytes),
}
_ARRAY_VARIABLE: dict[type, tuple[int, int, Callable[[Any], bytes]]] = {
    bytes: (0xA0, 0xB0, bytes),
    str: (0xA1, 0xB1, lambda v: v.encode("utf-8")),
    Symbol: (0xA3, 0xB3, lambda v: v.encode("ascii")),
}


def _enc_array(out: bytearray, v: Array) -> None:
    constructor = bytearray()
    body = bytearray()
    element = v.element
    if element is int:
        element = Long if any(not -0x80000000 <= x <= 0x7FFFFFFF for x in v) else Int
    if element in _ARRAY_FIXED:
        code, write = _ARRAY_FIXED[element]
        constructor.append(code)
        for item in v:
            write(body, element(item) if element not in (bool, uuid.UUID, float) else item)
    elif element in _ARRAY_VARIABLE:
        code8, code32, raw_of = _ARRAY_VARIABLE[element]
        raws = [raw_of(item) for item in v]
        wide = any(len(r) > 255 for r in raws)
        constructor.append(code32 if wide else code8)
        for r in raws:
            body += _pack_I(len(r)) if wide else _pack_B(len(r))
            body += r
    elif element in (list, dict, Described, Array):
        # Compound elements: always the 32-bit forms, so one constructor fits all.
        if element is Described:
            constructor.append(0x00)
            encode_into(constructor, v.descriptor)
            items = [d.value for d in v]
            inner: type = type(items[0]) if items else list
        else:
            items = list(v)
            inner = element
        compound_codes: dict[type, int] = {list: 0xD0, dict: 0xD1}
        code_or_none = compound_codes.get(inner)
        if code_or_none is None:
            raise EncodeError("arrays of described values hold lists or maps here")
        constructor.append(code_or_none)
        for item in items:
            part = bytearray()
            pairs = item.items() if isinstance(item, dict) else [(x,) for x in item]
            count = 0
            for pair in pairs:
                for x in pair:
                    encode_into(part, x)
                    count += 1
            body += _pack_II(len(part) + 4, count)
            body += part
    elif not v:  # an empty array of no known type: the constructor-less form it was read in
        out += b"\xe0\x01\x00"
        return
    else:
        raise EncodeError(f"no AMQP array of {element.__name__}")
    payload = constructor + body
    if len(payload) + 1 < 256 and len(v) < 256:
        out += _pack_BB(0xE0, len(payload) + 1)
        out.append(len(v))
    else:
        out.append(0xF0)
        out += _pack_II(len(payload) + 4, len(v))
    out += payload


_ENCODERS: dict[type, Callable[[bytearray, Any], None]] = {
    type(None): _enc_null,
    bool: _enc_bool,
    int: _enc_int,
    float: _enc_double,
    str: _enc_str,
    bytes: _enc_binary,
    bytearray: _enc_binary,
    memoryview: _enc_binary,
    list: _enc_list,
    tuple: _enc_list,
    dict: _enc_map,
    UByte: _enc_ubyte,
    UShort: _enc_ushort,
    UInt: _enc_uint,
    ULong: _enc_ulong,
    Byte: _enc_byte,
    Short: _enc_short,
    Int: _enc_int32,
    Long: _enc_long,
    Timestamp: _enc_timestamp,
    Float: _enc_float,
    Decimal32: _enc_decimal,
    Decimal64: _enc_decimal,
    Decimal128: _enc_decimal,
    Char: _enc_char,
    Symbol: _enc_symbol,
    uuid.UUID: _enc_uuid,
    Described: _enc_described,
    Array: _enc_array,
}


# --- decoding -------------------------------------------------------------------------------

_u8 = struct.Struct(">B").unpack_from
_u16 = struct.Struct(">H").unpack_from
_u32 = struct.Struct(">I").unpack_from
_u64 = struct.Struct(">Q").unpack_from
_i8 = struct.Struct(">b").unpack_from
_i16 = struct.Struct(">h").unpack_from
_i32 = struct.Struct(">i").unpack_from
_i64 = struct.Struct(">q").unpack_from
_f32 = struct.Struct(">f").unpack_from
_f64 = struct.Struct(">d").unpack_from

MAX_DEPTH = 64

# What a decode may build is bounded by the bytes it was given. Every value owns at least one byte
# no other value owns (its constructor; for an array element, its fixed width, its length prefix
# or its size and count), so a count of such values is checked against the bytes left before any
# is built. Elements of an array of a zero-width type (null, true, false, uint0, ulong0, list0,
# described or not) own no byte: those are counted, across the whole top-level decode, against the
# bytes it has reached plus ZERO_WIDTH_SLACK. Without that, a 29-byte frame claiming 2^32-1 nulls
# would keep the event loop, and so every port of the node, busy for hours.
ZERO_WIDTH_SLACK = 16

# Maps with more pairs than this have their key hashes looked at before the dict is built: keys of
# one hash that are not equal (uuids a multiple of 2^61-1 apart, described NaNs ...) make each
# insertion compare with every earlier one, quadratic work from linear bytes.
MAP_PAIRS_UNCHECKED = 16
SAME_HASH_KEYS = 8


def decode(data: bytes | bytearray | memoryview) -> Any:
    """Decode exactly one value that fills ``data``."""
    buf = bytes(data)
    value, pos = decode_value(buf, 0)
    if pos != len(buf):
        raise DecodeError(f"{len(buf) - pos} bytes after the value")
    return value


def decode_value(
    buf: bytes, pos: int, depth: int = 0, floor: list[int] | None = None
) -> tuple[Any, int]:
    """Decode one value at ``pos``; returns it and the position after it.

    ``floor`` is the top-level decode's budget of zero-width array elements, one cell shared by
    everything in it and made by its outermost described or compound value: a position such that
    an array ending at ``end`` may hold ``end - floor[0]`` more; it starts ZERO_WIDTH_SLACK before
    the value's first byte and each such array moves it up by its count. Callers leave it out.
    """
    if pos >= len(buf):
        raise DecodeError("truncated: expected a constructor")
    code = buf[pos]
    pos += 1
    if code == 0x40:
        return None, pos
    if code == 0x00:
        if depth >= MAX_DEPTH:
            raise DecodeError("values nested too deeply")
        if floor is None:
            floor = [pos - 1 - ZERO_WIDTH_SLACK]
        descriptor, pos = decode_value(buf, pos, depth + 1, floor)
        if not isinstance(descriptor, ULong | Symbol):
            raise DecodeError(
                f"a descriptor is a ulong or a symbol, not {type(descriptor).__name__}"
            )
        value, pos = decode_value(buf, pos, depth + 1, floor)
        return Described(descriptor, value), pos
    return _decode_body(code, buf, pos, depth, floor)


def _need(buf: bytes, pos: int, n: int) -> None:
    if n < 0 or pos + n > len(buf):
        raise DecodeError("truncated value")


def _decode_body(
    code: int, buf: bytes, pos: int, depth: int, floor: list[int] | None
) -> tuple[Any, int]:
    fixed = _FIXED.get(code)
    if fixed is not None:
        width, read = fixed
        _need(buf, pos, width)
        return read(buf, pos), pos + width
    if code in _VARIABLE:
        wide, make = _VARIABLE[code]
        _need(buf, pos, 4 if wide else 1)
        n = _u32(buf, pos)[0] if wide else buf[pos]
        pos += 4 if wide else 1
        _need(buf, pos, n)
        return make(buf[pos : pos + n]), pos + n
    if code in (0xC0, 0xC1, 0xD0, 0xD1, 0xE0, 0xF0):
        if depth >= MAX_DEPTH:
            raise DecodeError("values nested too deeply")
        if floor is None:
            floor = [pos - 1 - ZERO_WIDTH_SLACK]
        wide = code in (0xD0, 0xD1, 0xF0)
        _need(buf, pos, 8 if wide else 2)
        if wide:
            size, count = struct.unpack_from(">II", buf, pos)
            start = pos + 4
            pos += 8
        else:
            size, count = buf[pos], buf[pos + 1]
            start = pos + 1
            pos += 2
        end = start + size
        if size < (4 if wide else 1) or end > len(buf):
            raise DecodeError("compound size runs past the data")
        value: Any
        if code in (0xE0, 0xF0):
            value, pos = _decode_array(buf, pos, end, count, depth, floor)
        else:
            if count > end - pos:
                raise DecodeError("more elements than bytes")
            items = []
            for _ in range(count):
                item, pos = decode_value(buf, pos, depth + 1, floor)
                items.append(item)
            if code in (0xC1, 0xD1):
                if count % 2:
                    raise DecodeError("a map has an even count")
                if count > 2 * MAP_PAIRS_UNCHECKED:
                    _check_key_hashes(items)
                try:
                    value = {items[i]: items[i + 1] for i in range(0, count, 2)}
                except TypeError as e:
                    raise DecodeError(f"unhashable map key: {e}") from e
            else:
                value = items
        if pos != end:
            raise DecodeError("compound size does not match its elements")
        return value, pos
    raise DecodeError(f"unknown constructor 0x{code:02x}")


def _check_key_hashes(items: list[Any]) -> None:
    seen: dict[int, int] = {}
    for i in range(0, len(items), 2):
        try:
            h = hash(items[i])
        except TypeError as e:
            raise DecodeError(f"unhashable map key: {e}") from e
        n = seen.get(h, 0) + 1
        if n > SAME_HASH_KEYS:
            raise DecodeError(f"more than {SAME_HASH_KEYS} map keys of one hash")
        seen[h] = n


def _decode_array(
    buf: bytes, pos: int, end: int, count: int, depth: int, floor: list[int]
) -> tuple[Array, int]:
    if pos >= end:
        if count == 0:  # azure-servicebus's _pyamqp writes an empty array without a constructor
            return Array([], object), pos
        raise DecodeError("array without a constructor")
    descriptor = None
    code = buf[pos]
    pos += 1
    if code == 0x00:
        descriptor, pos = decode_value(buf, pos, depth + 1, floor)
        if not isinstance(descriptor, ULong | Symbol):
            raise DecodeError("a descriptor is a ulong or a symbol")
        _need(buf, pos, 1)
        code = buf[pos]
        pos += 1
    if code == 0x00:
        raise DecodeError("nested descriptors in an array constructor")
    width = _ELEMENT_WIDTH.get(code, 1)
    if width:
        if count * width > end - pos:
            raise DecodeError("more array elements than bytes")
    elif count:
        if count > end - floor[0]:
            raise DecodeError("more zero-width array elements than bytes")
        floor[0] += count
    items = []
    for _ in range(count):
        item, pos = _decode_body(code, buf, pos, depth + 1, floor)
        if descriptor is not None:
            item = Described(descriptor, item)
        items.append(item)
        if pos > end:
            raise DecodeError("array elements run past its size")
    element: type = Described if descriptor is not None else _ARRAY_ELEMENT.get(code, object)
    return Array(items, element, descriptor), pos


def _c(value: Any) -> Callable[[bytes, int], Any]:
    return lambda buf, pos: value


def _char(buf: bytes, pos: int) -> Char:
    cp = _u32(buf, pos)[0]
    if cp > 0x10FFFF:
        raise DecodeError("char out of Unicode range")
    return Char(chr(cp))


def _bool_byte(buf: bytes, pos: int) -> bool:
    b = buf[pos]
    if b > 1:
        raise DecodeError("boolean byte is 0 or 1")
    return b == 1


_FIXED: dict[int, tuple[int, Callable[[bytes, int], Any]]] = {
    0x40: (0, _c(None)),
    0x41: (0, _c(True)),
    0x42: (0, _c(False)),
    0x56: (1, _bool_byte),
    0x50: (1, lambda b, p: UByte(b[p])),
    0x60: (2, lambda b, p: UShort(_u16(b, p)[0])),
    0x70: (4, lambda b, p: UInt(_u32(b, p)[0])),
    0x52: (1, lambda b, p: UInt(b[p])),
    0x43: (0, _c(UInt(0))),
    0x80: (8, lambda b, p: ULong(_u64(b, p)[0])),
    0x53: (1, lambda b, p: ULong(b[p])),
    0x44: (0, _c(ULong(0))),
    0x51: (1, lambda b, p: Byte(_i8(b, p)[0])),
    0x61: (2, lambda b, p: Short(_i16(b, p)[0])),
    0x71: (4, lambda b, p: Int(_i32(b, p)[0])),
    0x54: (1, lambda b, p: Int(_i8(b, p)[0])),
    0x81: (8, lambda b, p: Long(_i64(b, p)[0])),
    0x55: (1, lambda b, p: Long(_i8(b, p)[0])),
    0x72: (4, lambda b, p: Float(_f32(b, p)[0])),
    0x82: (8, lambda b, p: _f64(b, p)[0]),
    0x74: (4, lambda b, p: Decimal32(b[p : p + 4])),
    0x84: (8, lambda b, p: Decimal64(b[p : p + 8])),
    0x94: (16, lambda b, p: Decimal128(b[p : p + 16])),
    0x73: (4, _char),
    0x83: (8, lambda b, p: Timestamp(_i64(b, p)[0])),
    0x98: (16, lambda b, p: uuid.UUID(bytes=b[p : p + 16])),
    0x45: (0, lambda b, p: []),
}


def _utf8(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DecodeError(f"string is not UTF-8: {e}") from e


def _ascii(raw: bytes) -> Symbol:
    try:
        return Symbol(raw.decode("ascii"))
    except UnicodeDecodeError as e:
        raise DecodeError(f"symbol is not ASCII: {e}") from e


_VARIABLE: dict[int, tuple[bool, Callable[[bytes], Any]]] = {
    0xA0: (False, bytes),
    0xB0: (True, bytes),
    0xA1: (False, _utf8),
    0xB1: (True, _utf8),
    0xA3: (False, _ascii),
    0xB3: (True, _ascii),
}

# The fewest bytes one array element of each constructor takes after the shared constructor.
_ELEMENT_WIDTH: dict[int, int] = {
    **{code: width for code, (width, _) in _FIXED.items()},
    **{code: 4 if wide else 1 for code, (wide, _) in _VARIABLE.items()},
    **{code: 2 for code in (0xC0, 0xC1, 0xE0)},
    **{code: 8 for code in (0xD0, 0xD1, 0xF0)},
}

_ARRAY_ELEMENT: dict[int, type] = {
    0x56: bool,
    0x41: bool,
    0x42: bool,
    0x50: UByte,
    0x60: UShort,
    0x70: UInt,
    0x52: UInt,
    0x43: UInt,
    0x80: ULong,
    0x53: ULong,
    0x44: ULong,
    0x51: Byte,
    0x61: Short,
    0x71: Int,
    0x54: Int,
    0x81: Long,
    0x55: Long,
    0x72: Float,
    0x82: float,
    0x74: Decimal32,
    0x84: Decimal64,
    0x94: Decimal128,
    0x73: Char,
    0x83: Timestamp,
    0x98: uuid.UUID,
    0xA0: bytes,
    0xB0: bytes,
    0xA1: str,
    0xB1: str,
    0xA3: Symbol,
    0xB3: Symbol,
    0xC0: list,
    0xD0: list,
    0x45: list,
    0xC1: dict,
    0xD1: dict,
    0xE0: Array,
    0xF0: Array,
}
