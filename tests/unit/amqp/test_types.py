"""The AMQP 1.0 type system: the specification's encodings, round trips, _pyamqp as an oracle."""

from __future__ import annotations

import contextlib
import math
import uuid

import pytest
from azure.servicebus._pyamqp import _decode as sdk_decode
from azure.servicebus._pyamqp import _encode as sdk_encode
from hypothesis import given
from hypothesis import strategies as st

from qmgr.amqp.types import (
    Array,
    Byte,
    Char,
    Decimal32,
    Decimal64,
    Decimal128,
    DecodeError,
    Described,
    EncodeError,
    Float,
    Int,
    Long,
    Short,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
    decode,
    encode,
)

U = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")

# (value, its encoding) from the type tables of AMQP 1.0 part 1, the compact forms chosen.
SPEC = [
    (None, "40"),
    (True, "41"),
    (False, "42"),
    (UByte(7), "5007"),
    (UShort(0x1234), "601234"),
    (UInt(0), "43"),
    (UInt(255), "52ff"),
    (UInt(256), "7000000100"),
    (ULong(0), "44"),
    (ULong(16), "5310"),
    (ULong(0x80013700), "8000000000" + "80013700"),
    (Byte(-1), "51ff"),
    (Short(-2), "61fffe"),
    (Int(-3), "54fd"),
    (Int(1000), "71000003e8"),
    (Long(5), "5505"),
    (Long(-129), "81ffffffffffffff7f"),
    (Float(1.5), "723fc00000"),
    (1.5, "823ff8000000000000"),
    (Decimal32(b"\x22\x50\x00\x01"), "7422500001"),
    (Decimal64(bytes(8)), "84" + "00" * 8),
    (Decimal128(bytes(16)), "94" + "00" * 16),
    (Char("é"), "73000000e9"),
    (Timestamp(1_700_000_000_000), "83" + (1_700_000_000_000).to_bytes(8, "big").hex()),
    (U, "98" + U.hex),
    (b"ab", "a0026162"),
    (b"x" * 256, "b000000100" + "78" * 256),
    ("hé", "a10368c3a9"),
    (Symbol("amqp:accepted:list"), "a312" + b"amqp:accepted:list".hex()),
    ("s" * 300, "b10000012c" + "73" * 300),
    ([], "45"),
    ([1, "a"], "c0060254" + "01a10161"),
    ({Symbol("k"): None}, "c10502a3016b40"),
    (Array([Symbol("a"), Symbol("bc")], Symbol), "e00702a30161026263"),
    (Array([Long(1), Long(2)], Long), "e0120281" + "0000000000000001" + "0000000000000002"),
    (Array([U], uuid.UUID), "e0120198" + U.hex),
    (Described(ULong(0x24), []), "005324" + "45"),
    (Described(Symbol("x:y"), "v"), "00a303783a79a10176"),
]


@pytest.mark.parametrize(("value", "hexed"), SPEC, ids=[h[:16] for _, h in SPEC])
def test_spec_encodings(value, hexed):
    assert encode(value).hex() == hexed
    back = decode(bytes.fromhex(hexed))
    assert back == value
    assert type(back) is type(value)


# Wider forms than the encoder picks still decode (a decoder accepts every form).
WIDE = [
    ("7000000000", UInt(0)),
    ("800000000000000005", ULong(5)),
    ("7100000005", Int(5)),
    ("810000000000000005", Long(5)),
    ("5601", True),
    ("5600", False),
    ("b00000000161", b"a"),
    ("b10000000161", "a"),
    ("b30000000161", Symbol("a")),
    ("d0000000050000000140", [None]),
    ("d10000000800000002a1016140", {"a": None}),
    ("f00000000700000001a3016b", Array([Symbol("k")], Symbol)),
    ("00800000000000000024d00000000400000000", Described(ULong(0x24), [])),
    ("e00201" + "43", Array([UInt(0)], UInt)),  # an array of uint0: elements of no width
]


@pytest.mark.parametrize(("hexed", "value"), WIDE)
def test_every_form_decodes(hexed, value):
    assert decode(bytes.fromhex(hexed)) == value


def test_plain_int_picks_int_then_long_then_ulong():
    assert type(decode(encode(5))) is Int
    assert type(decode(encode(2**40))) is Long
    assert type(decode(encode(2**63))) is ULong
    with pytest.raises(EncodeError):
        encode(2**64)


def test_ranges_are_checked():
    for cls, bad in [(UByte, 256), (UShort, -1), (UInt, 2**32), (Byte, 128), (Int, 2**31)]:
        with pytest.raises(EncodeError):
            cls(bad)
    with pytest.raises(EncodeError):
        encode(Symbol("é"))
    with pytest.raises(EncodeError):
        encode(object())


def test_large_lists_and_maps_take_the_32_bit_forms():
    big = list(range(300))
    assert encode(big)[0] == 0xD0
    assert decode(encode(big)) == big
    assert encode({str(i): i for i in range(200)})[0] == 0xD1


@pytest.mark.parametrize(
    "hexed",
    [
        "",
        "ff",  # unknown constructor
        "71000001",  # truncated int
        "a105616263",  # string shorter than its size
        "a102c328",  # not UTF-8
        "a30180",  # not ASCII
        "c00502414141",  # list count beyond its size
        "c0020241",  # size smaller than elements
        "c10301a101",  # odd map count
        "c106024541a10161",  # unhashable key (a list)
        "00710000000140",  # descriptor is not a ulong or symbol
        "e0020198",  # array count beyond its data
        "5602",  # boolean byte that is neither
        "73ffffffff",  # char beyond Unicode
        "4040",  # bytes after the value
        "d0ffffffff00000001",  # size past the data
    ],
)
def test_malformed_input_is_a_decode_error(hexed):
    with pytest.raises(DecodeError):
        decode(bytes.fromhex(hexed))


def test_deep_nesting_is_refused():
    value: list = []
    for _ in range(100):
        value = [value]
    data = encode(value)
    with pytest.raises(DecodeError):
        decode(data)


# --- hypothesis round trips ----------------------------------------------------------------


def _ints(cls):
    return st.integers(min_value=cls.lo, max_value=cls.hi).map(cls)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    *(_ints(c) for c in (UByte, UShort, UInt, ULong, Byte, Short, Int, Long, Timestamp)),
    st.floats(allow_nan=False),
    st.floats(allow_nan=False, width=32).map(Float),
    st.characters().map(Char),
    st.uuids(),
    st.binary(max_size=300),
    st.text(max_size=300),
    st.text(alphabet=st.characters(max_codepoint=127), max_size=40).map(Symbol),
    st.binary(min_size=16, max_size=16).map(Decimal128),
)
hashable = st.one_of(
    st.none(), st.booleans(), _ints(Int), _ints(ULong), st.text(max_size=20),
    st.text(alphabet=st.characters(max_codepoint=127), max_size=20).map(Symbol), st.uuids(),
)  # fmt: skip
arrays = st.one_of(
    st.lists(_ints(Long), max_size=20).map(lambda v: Array(v, Long)),
    st.lists(st.uuids(), max_size=10).map(lambda v: Array(v, uuid.UUID)),
    st.lists(
        st.text(alphabet=st.characters(max_codepoint=127), max_size=300).map(Symbol), max_size=5
    ).map(lambda v: Array(v, Symbol)),
    st.lists(st.text(max_size=5), max_size=5).map(lambda v: Array(v, str)),
    st.lists(_ints(Timestamp), max_size=5).map(lambda v: Array(v, Timestamp)),
)
values = st.recursive(
    st.one_of(scalars, arrays),
    lambda inner: st.one_of(
        st.lists(inner, max_size=8),
        st.dictionaries(hashable, inner, max_size=8),
        st.builds(
            Described,
            st.one_of(_ints(ULong), st.text(alphabet="abc:", max_size=8).map(Symbol)),
            inner,
        ),
    ),
    max_leaves=30,
)


def _same(a, b) -> bool:
    if type(a) is not type(b) and not (isinstance(a, list) and isinstance(b, list)):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, Described):
        return _same(a.descriptor, b.descriptor) and _same(a.value, b.value)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b


@given(values)
def test_round_trip_keeps_values_and_types(value):
    assert _same(decode(encode(value)), value)


@given(values, st.integers(min_value=0, max_value=200))
def test_truncated_input_is_a_decode_error(value, cut):
    data = encode(value)
    if cut < len(data):
        with pytest.raises(DecodeError):
            decode(data[:cut])


@given(st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_raise_decode_error(data):
    with contextlib.suppress(DecodeError):
        decode(data)


# --- _pyamqp (azure-servicebus 7.15.0) as an independent decoder and encoder ---------------

oracle_values = st.recursive(
    st.one_of(
        st.none(), st.booleans(), _ints(Int), _ints(Long), _ints(UInt), _ints(ULong),
        st.floats(allow_nan=False), st.uuids(), st.binary(max_size=300), st.text(max_size=300),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=6), st.dictionaries(st.text(max_size=10), inner, max_size=6)),
    max_leaves=20,
)  # fmt: skip


def _plain(v):
    """What _pyamqp decodes: str as UTF-8 bytes, everything else as plain Python."""
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {_plain(k): _plain(x) for k, x in v.items()}
    if isinstance(v, bool | float | bytes | uuid.UUID) or v is None:
        return v
    return int(v)


@given(oracle_values)
def test_sdk_decodes_what_we_encode(value):
    data = memoryview(encode(value))
    rest, decoded = sdk_decode._DECODE_BY_CONSTRUCTOR[data[0]](data[1:])
    assert len(rest) == 0
    assert decoded == _plain(value)


@given(oracle_values)
def test_we_decode_what_the_sdk_encodes(value):
    out = bytearray()
    sdk_encode.encode_value(out, sdk_value(value))
    assert _plain(decode(bytes(out))) == _plain(value)


def sdk_value(v):
    """The SDK's typed form for values whose AMQP type is not implied by the Python type."""
    if isinstance(v, UInt):
        return {"TYPE": "UINT", "VALUE": int(v)}
    if isinstance(v, ULong):
        return {"TYPE": "ULONG", "VALUE": int(v)}
    if isinstance(v, Long):
        return {"TYPE": "LONG", "VALUE": int(v)}
    if isinstance(v, list):
        return [sdk_value(x) for x in v]
    if isinstance(v, dict):
        return {k: sdk_value(x) for k, x in v.items()}
    return v


def test_sdk_arrays_and_symbols_decode():
    out = bytearray()
    sdk_encode.encode_value(
        out,
        {"TYPE": "ARRAY", "VALUE": [{"TYPE": "LONG", "VALUE": 5}, {"TYPE": "LONG", "VALUE": 6}]},
    )
    assert decode(bytes(out)) == Array([Long(5), Long(6)], Long)
    out = bytearray()
    sdk_encode.encode_value(out, {"TYPE": "SYMBOL", "VALUE": b"com.microsoft:renew-lock"})
    assert decode(bytes(out)) == Symbol("com.microsoft:renew-lock")
    out = bytearray()
    sdk_encode.encode_value(out, {"TYPE": "TIMESTAMP", "VALUE": 1234})
    assert decode(bytes(out)) == Timestamp(1234)


@pytest.mark.parametrize(
    ("value", "plain"),
    [
        (Array([Long(1), Long(-2)], Long), [1, -2]),
        (Array([U, U], uuid.UUID), [U, U]),
        (Array([Symbol("a"), Symbol("b" * 300)], Symbol), [b"a", b"b" * 300]),
        (Array([Timestamp(5)], Timestamp), [5]),
        (Array([Int(i) for i in range(300)], Int), list(range(300))),
    ],
)
def test_sdk_decodes_our_arrays(value, plain):
    data = memoryview(encode(value))
    rest, decoded = sdk_decode._DECODE_BY_CONSTRUCTOR[data[0]](data[1:])
    assert len(rest) == 0 and decoded == plain


def test_empty_arrays_in_both_forms():
    assert encode(Array([], Long)).hex() == "e0020081"  # with its element constructor (the spec)
    assert decode(bytes.fromhex("e0020081")) == []
    out = bytearray()
    sdk_encode.encode_value(out, {"TYPE": "ARRAY", "VALUE": []})
    assert bytes(out).hex() == "e00100"  # the SDK's: no constructor
    assert decode(bytes(out)) == []
    assert encode(decode(bytes(out))) == bytes(out)
    assert decode(bytes.fromhex("c00502e00100" + "41")) == [[], True]
