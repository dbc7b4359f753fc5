"""The decoder's work and memory are bounded by the bytes it is given, or it refuses.

Work is counted as profiler events (every Python and C function call and return during the
decode), memory as the tracemalloc peak, and what was built as the nodes of the decoded value. For
any input of N bytes each stays below a constant times N (plus a constant); the constants are the
dearest legitimate shapes (an ``Array`` object for every two bytes of an array of empty arrays,
about 216 bytes of memory per input byte), not a tolerance for the bombs: without the bound a
29-byte array claiming 2^32-1 nulls would decode for hours.
"""

from __future__ import annotations

import struct
import sys
import tracemalloc
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qmgr.amqp.framing import (
    AMQP_HEADER,
    DECODE_ERROR,
    SASL_HEADER,
    Frame,
    FrameDecoder,
    FramingError,
    ProtocolHeader,
)
from qmgr.amqp.types import (
    MAP_PAIRS_UNCHECKED,
    SAME_HASH_KEYS,
    ZERO_WIDTH_SLACK,
    Array,
    DecodeError,
    Described,
    ULong,
    decode,
    decode_value,
    encode,
)

EVENTS_PER_BYTE, EVENTS_FIXED = 32, 1024
MEMORY_PER_BYTE, MEMORY_FIXED = 256, 32768
NODES_PER_BYTE, NODES_FIXED = 4, 4 * ZERO_WIDTH_SLACK

ZERO_WIDTH = (0x40, 0x41, 0x42, 0x43, 0x44, 0x45)  # null, true, false, uint0, ulong0, list0
CONSTRUCTORS = (
    *ZERO_WIDTH,
    *(0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x60, 0x61, 0x70, 0x71, 0x72, 0x73, 0x74),
    *(0x80, 0x81, 0x82, 0x83, 0x84, 0x94, 0x98, 0xA0, 0xA1, 0xA3, 0xB0, 0xB1, 0xB3),
    *(0xC0, 0xC1, 0xD0, 0xD1, 0xE0, 0xF0),
)
P61 = (1 << 61) - 1  # ints (and so uuids) a multiple of this apart hash alike


@dataclass
class Cost:
    events: int
    peak: int
    outcome: Any  # the value, or the error it raised

    def assert_linear(self, n: int) -> None:
        assert self.events <= EVENTS_PER_BYTE * n + EVENTS_FIXED, (n, self.events)
        assert self.peak <= MEMORY_PER_BYTE * n + MEMORY_FIXED, (n, self.peak)


def measure(run: Callable[[], Any], refusal: type[Exception]) -> Cost:
    """Run ``run`` counting profiler events and the tracemalloc peak; ``refusal`` is the one
    exception it may raise (anything else propagates)."""
    events = 0

    def count(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal events
        events += 1

    tracemalloc.start()
    tracemalloc.reset_peak()
    sys.setprofile(count)
    try:
        try:
            outcome = run()
        except refusal as e:
            outcome = e
    finally:
        sys.setprofile(None)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return Cost(events, peak, outcome)


def nodes(value: Any) -> int:
    """Python objects in a decoded value: every element, key, value, descriptor and wrapper."""
    count = 0
    stack = [value]
    while stack:
        v = stack.pop()
        count += 1
        if isinstance(v, Described):
            stack += (v.descriptor, v.value)
        elif isinstance(v, dict):
            for k, x in v.items():
                stack += (k, x)
        elif isinstance(v, list):
            stack += v
    return count


def decode_cost(data: bytes) -> Cost:
    cost = measure(lambda: decode(data), DecodeError)
    cost.assert_linear(len(data))
    if not isinstance(cost.outcome, DecodeError):
        assert nodes(cost.outcome) <= NODES_PER_BYTE * len(data) + NODES_FIXED
    return cost


# --- encodings built by hand: honest sizes, claimed counts -------------------------------------


def array(
    code: int, count: int, elements: bytes = b"", descriptor: bytes = b"", wide: bool = False
) -> bytes:
    """An array of ``count`` elements of ``code`` (after ``descriptor``, an encoded descriptor
    with its 0x00) whose size covers exactly the bytes given."""
    body = descriptor + bytes((code,)) + elements
    if wide or count > 255 or len(body) + 1 > 255:
        return b"\xf0" + struct.pack(">II", len(body) + 4, count) + body
    return bytes((0xE0, len(body) + 1, count)) + body


def compound(
    code8: int, parts: list[bytes], claimed: int | None = None, wide: bool = False
) -> bytes:
    """A list (0xc0) or map (0xc1) of ``parts``, claiming ``claimed`` elements if given."""
    count = len(parts) if claimed is None else claimed
    body = b"".join(parts)
    if wide or count > 255 or len(body) + 1 > 255:
        return bytes((code8 + 0x10,)) + struct.pack(">II", len(body) + 4, count) + body
    return bytes((code8, len(body) + 1, count)) + body


def array_of_arrays(
    inner: list[tuple[int, int]], claimed: int | None = None, wide: bool = False
) -> bytes:
    """An array32 of array32s, each an empty body claiming ``count`` elements of ``code``."""
    elements = b"".join(struct.pack(">II", 5, count) + bytes((code,)) for code, count in inner)
    return array(0xF0, len(inner) if claimed is None else claimed, elements, wide=wide)


def described(descriptor: bytes, value: bytes) -> bytes:
    return b"\x00" + descriptor + value


def frame(body: bytes, sasl: bool) -> bytes:
    return struct.pack(">IBBH", 8 + len(body), 2, 1 if sasl else 0, 0) + body


def bomb(code: int, sasl: bool) -> bytes:
    """The 29 bytes: a header and a sasl-init (or open) over 0xFFFFFFFF elements of ``code``."""
    body = b"\x00\x53" + (b"\x41" if sasl else b"\x10") + array(code, 0xFFFFFFFF)
    return (SASL_HEADER if sasl else AMQP_HEADER) + frame(body, sasl)


# --- strategies ---------------------------------------------------------------------------------

counts = st.one_of(
    st.sampled_from([0, 1, 2, 17, 255, 256, 0xFFFF, 1 << 31, 0xFFFFFFFF]),
    st.integers(min_value=0, max_value=0xFFFFFFFF),
)
descriptors = st.sampled_from([b"", b"\x00\x53\x01", b"\x00\xa3\x01x", b"\x00\x44"])
arrays = st.builds(
    array,
    st.sampled_from(CONSTRUCTORS),
    counts,
    st.binary(max_size=24),
    descriptors,
    st.booleans(),
)
nested_arrays = st.builds(
    array_of_arrays,
    st.lists(st.tuples(st.sampled_from(ZERO_WIDTH), counts), max_size=4),
    st.none() | counts,
    st.booleans(),
)
leaves = st.one_of(
    arrays,
    nested_arrays,
    st.binary(max_size=12),
    st.sampled_from([b"\x40", b"\x41", b"\x43", b"\x45", b"\x53\x07", b"\xa1\x01a"]),
)
near_valid = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.builds(
            compound,
            st.sampled_from([0xC0, 0xC1]),
            st.lists(inner, max_size=5),
            st.none() | counts,
            st.booleans(),
        ),
        st.builds(described, st.sampled_from([b"\x53\x01", b"\xa3\x01x"]) | inner, inner),
    ),
    max_leaves=12,
)
slow = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- the decoder --------------------------------------------------------------------------------


@slow
@given(st.binary(max_size=600))
def test_any_bytes_cost_linear_work_and_memory(data: bytes) -> None:
    decode_cost(data)


@settings(slow, max_examples=400)
@given(near_valid)
def test_near_valid_inputs_cost_linear_work_and_memory(data: bytes) -> None:
    decode_cost(data)


@settings(slow, max_examples=200)
@given(st.lists(near_valid, min_size=1, max_size=6))
def test_values_one_after_another_cost_linear_work(parts: list[bytes]) -> None:
    """As message sections are read: one ``decode_value`` after another over one buffer."""
    data = b"".join(parts)

    def sections() -> None:
        pos = 0
        while pos < len(data):
            _, pos = decode_value(data, pos)

    measure(sections, DecodeError).assert_linear(len(data))


@pytest.mark.parametrize("code", ZERO_WIDTH)
@pytest.mark.parametrize(
    "shape",
    [
        lambda c: array(c, 0xFFFFFFFF),
        lambda c: array(c, 255),
        lambda c: array(c, 0xFFFFFFFF, descriptor=b"\x00\x53\x01"),
        lambda c: compound(0xC0, [b"\x40", array(c, 0xFFFFFFFF)]),
        lambda c: compound(0xC1, [b"\xa1\x01k", array(c, 0xFFFFFFFF)]),
        lambda c: b"\x00" + array(c, 0xFFFFFFFF) + b"\x40",  # in the descriptor's place
        lambda c: b"\x00\x53\x41" + array(c, 0xFFFFFFFF),
        lambda c: array_of_arrays([(c, 0xFFFFFFFF)]),
        lambda c: array_of_arrays([(c, 1000)] * 3),
        lambda c: compound(0xC0, [array(c, 200)] * 8),
    ],
)
def test_zero_width_bombs_are_refused_at_once(code: int, shape: Callable[[int], bytes]) -> None:
    data = shape(code)
    cost = decode_cost(data)
    assert isinstance(cost.outcome, DecodeError)
    assert cost.events < 200


@pytest.mark.parametrize("code", ZERO_WIDTH)
def test_zero_width_elements_the_bytes_back_still_decode(code: int) -> None:
    allowed = 4 + ZERO_WIDTH_SLACK  # an array8 of them is four bytes
    assert len(decode(array(code, allowed))) == allowed
    with pytest.raises(DecodeError, match="zero-width"):
        decode(array(code, allowed + 1))
    assert len(decode(array(code, allowed, descriptor=b"\x00\x53\x01"))) == allowed


def test_the_zero_width_budget_is_per_decode_not_per_array() -> None:
    one = array(0x40, 20)
    assert decode(compound(0xC0, [one])) == [Array([None] * 20, object)]
    with pytest.raises(DecodeError, match="zero-width"):
        decode(compound(0xC0, [one, one]))
    # the bytes of everything before an array back it too
    padded = compound(0xC0, [b"\xa0\x40" + bytes(64), array(0x40, 60)])
    assert len(decode(padded)[1]) == 60


def test_each_call_of_decode_value_has_its_own_budget_from_where_it_starts() -> None:
    one = array(0x40, 20)
    data = one + one
    first, pos = decode_value(data, 0)
    second, end = decode_value(data, pos)
    assert len(first) == len(second) == 20 and end == len(data)


@pytest.mark.parametrize(
    ("code", "width"), [(0x80, 8), (0x98, 16), (0xB0, 4), (0xD0, 8), (0xF0, 8), (0xC0, 2)]
)
def test_array_counts_are_checked_against_the_element_width(code: int, width: int) -> None:
    fits = array(code, 3, bytes(3 * width - 1), wide=True)
    with pytest.raises(DecodeError, match="more array elements than bytes"):
        decode(fits)


def _map_of_keys(keys: list[bytes]) -> bytes:
    return compound(0xC1, [k + b"\x40" for k in keys], 2 * len(keys), wide=True)


def test_map_keys_of_one_hash_are_refused_before_quadratic_work() -> None:
    pairs = MAP_PAIRS_UNCHECKED + 1
    uuids = [b"\x98" + (5 + k * P61).to_bytes(16, "big") for k in range(1, 5000)]
    nan = b"\x00\x53\x01\x82" + struct.pack(">d", float("nan"))
    for keys in (uuids, [nan] * 5000, uuids[:pairs], [nan] * pairs):
        cost = decode_cost(_map_of_keys(keys))
        assert isinstance(cost.outcome, DecodeError), len(keys)
        assert "of one hash" in str(cost.outcome)
    # a few colliding keys, or a small map, are left alone
    assert len(decode(_map_of_keys(uuids[:SAME_HASH_KEYS] + [b"\x40"]))) == SAME_HASH_KEYS + 1
    assert len(decode(_map_of_keys([nan] * MAP_PAIRS_UNCHECKED))) == MAP_PAIRS_UNCHECKED
    many = {f"k{i}": i for i in range(5000)} | {uuid.UUID(int=i): ULong(i) for i in range(5000)}
    assert decode_cost(encode(many)).outcome == many


# --- the frame decoder --------------------------------------------------------------------------


def feed_cost(header: bytes, data: bytes, cuts: list[int]) -> Cost:
    """Feed ``header + data`` in pieces cut at ``cuts``; work and memory linear in the total."""
    stream = header + data
    marks = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    decoder = FrameDecoder()

    def run() -> list[ProtocolHeader | Frame]:
        out: list[ProtocolHeader | Frame] = []
        for a, b in zip(marks, marks[1:], strict=False):
            out += decoder.feed(stream[a:b])
        return out

    cost = measure(run, FramingError)
    cost.assert_linear(len(stream))
    return cost


headers = st.sampled_from([SASL_HEADER, AMQP_HEADER])
cuts = st.lists(st.integers(min_value=0, max_value=10_000), max_size=6)


@slow
@given(headers, st.binary(max_size=600), cuts)
def test_frame_decoder_any_bytes_cost_linear_work_and_memory(
    header: bytes, data: bytes, at: list[int]
) -> None:
    feed_cost(header, data, at)


@settings(slow, max_examples=300)
@given(
    headers,
    st.lists(
        st.tuples(st.sampled_from([0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x41, 0x43]), near_valid),
        min_size=1,
        max_size=4,
    ),
    cuts,
)
def test_frame_decoder_near_valid_frames_cost_linear_work_and_memory(
    header: bytes, bodies: list[tuple[int, bytes]], at: list[int]
) -> None:
    sasl = header == SASL_HEADER
    data = b"".join(frame(b"\x00\x53" + bytes((code,)) + body, sasl) for code, body in bodies)
    feed_cost(header, data, at)


@pytest.mark.parametrize("sasl", [True, False])
@pytest.mark.parametrize("code", ZERO_WIDTH)
def test_the_29_byte_bomb_is_a_decode_error(code: int, sasl: bool) -> None:
    data = bomb(code, sasl)
    assert len(data) == 29
    cost = feed_cost(data[:8], data[8:], [])
    assert isinstance(cost.outcome, FramingError)
    assert cost.outcome.condition == DECODE_ERROR
    assert cost.events < 200
