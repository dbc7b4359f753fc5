"""Framing: headers, frames in any split, heartbeats, and malformed input as typed errors."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qmgr.amqp import performatives as p
from qmgr.amqp.framing import (
    AMQP_HEADER,
    DECODE_ERROR,
    FRAMING_ERROR,
    HEARTBEAT,
    SASL_HEADER,
    TLS_HEADER,
    Frame,
    FrameDecoder,
    FramingError,
    ProtocolHeader,
    ProtocolHeaderError,
    encode_disposition_frame,
    encode_frame,
    encode_transfer_frame,
    read_disposition,
    transfer_overhead,
)
from qmgr.amqp.types import decode_value, encode

CONVERSATION = (
    SASL_HEADER
    + encode_frame(0, p.SaslInit(mechanism="ANONYMOUS", hostname="localhost"), sasl=True)
    + AMQP_HEADER
    + encode_frame(0, p.Open(container_id="client", max_frame_size=65536))
    + encode_frame(0, p.Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10))
    + HEARTBEAT
    + encode_frame(
        3, p.Transfer(handle=0, delivery_id=0, delivery_tag=b"t", message_format=0x80013700), b"xyz"
    )
    + encode_frame(0, p.Close())
)


def _expected() -> list:
    return [
        ProtocolHeader(3),
        Frame(0, p.SaslInit(mechanism="ANONYMOUS", hostname="localhost"), b"", True),
        ProtocolHeader(0),
        Frame(0, p.Open(container_id="client", max_frame_size=65536)),
        Frame(0, p.Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)),
        Frame(0, None),
        Frame(
            3,
            p.Transfer(handle=0, delivery_id=0, delivery_tag=b"t", message_format=0x80013700),
            b"xyz",
        ),
        Frame(0, p.Close()),
    ]


def test_a_whole_conversation_at_once():
    assert FrameDecoder().feed(CONVERSATION) == _expected()


@given(st.lists(st.integers(min_value=0, max_value=len(CONVERSATION)), max_size=12))
def test_any_split_gives_the_same_frames(cuts):
    decoder = FrameDecoder()
    out = []
    bounds = [0, *sorted(cuts), len(CONVERSATION)]
    for a, b in zip(bounds, bounds[1:], strict=False):
        out += decoder.feed(CONVERSATION[a:b])
    assert out == _expected()


def test_header_bytes():
    assert AMQP_HEADER == b"AMQP\x00\x01\x00\x00"
    assert SASL_HEADER == b"AMQP\x03\x01\x00\x00"
    assert ProtocolHeader(2).to_bytes() == TLS_HEADER
    assert encode_frame(0, None) == HEARTBEAT == b"\x00\x00\x00\x08\x02\x00\x00\x00"


def test_frame_layout():
    frame = encode_frame(7, p.End())
    size, doff, ftype, channel = struct.unpack(">IBBH", frame[:8])
    assert (size, doff, ftype, channel) == (len(frame), 2, 0, 7)
    assert frame[8:] == b"\x00\x53\x17\xc0\x02\x01\x40"  # end with its one (null) field
    sasl = encode_frame(0, p.SaslOutcome(code=0), sasl=True)
    assert sasl[5] == 1


def test_extended_header_is_skipped():
    body = encode_frame(0, p.End())[8:]
    frame = struct.pack(">IBBH", 12 + len(body), 3, 0, 0) + b"\xff" * 4 + body
    assert FrameDecoder().feed(AMQP_HEADER + frame)[1] == Frame(0, p.End())


def test_transfer_overhead_is_the_frame_without_payload():
    t = p.Transfer(handle=1, delivery_id=2, delivery_tag=b"0123456789abcdef", message_format=0)
    assert transfer_overhead(t) == len(encode_frame(0, t))


def _error(data: bytes, max_frame_size: int = 0xFFFFFFFF) -> FramingError:
    with pytest.raises(FramingError) as info:
        FrameDecoder(max_frame_size).feed(data)
    return info.value


@pytest.mark.parametrize(
    "data",
    [b"GET / HTTP/1.1\r\n", b"AMQP\x01\x01\x00\x00", b"AMQP\x00\x02\x00\x00", b"\x16\x03\x01"],
)
def test_foreign_protocol_headers(data):
    err = _error(data)
    assert isinstance(err, ProtocolHeaderError)
    assert err.expected in (AMQP_HEADER, SASL_HEADER)


def test_only_amqp_may_follow_sasl():
    err = _error(SASL_HEADER + SASL_HEADER)
    assert isinstance(err, ProtocolHeaderError) and err.expected == AMQP_HEADER


def test_oversize_frame_is_a_framing_error():
    big = encode_frame(0, p.Transfer(handle=0), b"x" * 600)
    err = _error(AMQP_HEADER + big[:20], max_frame_size=512)  # refused from its header alone
    assert err.condition == FRAMING_ERROR
    assert FrameDecoder(4096).feed(AMQP_HEADER + big)[1].payload == b"x" * 600


@pytest.mark.parametrize(
    "frame",
    [
        struct.pack(">IBBH", 4, 2, 0, 0),  # size below the header
        struct.pack(">IBBH", 8, 1, 0, 0),  # doff below 2
        struct.pack(">IBBH", 12, 4, 0, 0) + b"\0" * 4,  # doff past the frame
        struct.pack(">IBBH", 8, 2, 1, 0),  # a SASL frame in the AMQP layer
    ],
)
def test_malformed_frame_headers(frame):
    assert _error(AMQP_HEADER + frame).condition == FRAMING_ERROR


@pytest.mark.parametrize(
    "body",
    [
        b"\x53\x10",  # not described
        b"\x00\x53\x10\xc0\x05\x01",  # list runs past the frame
        b"\x00\x53\x99\x45",  # unknown descriptor
        b"\x00\x53\x41\xc0\x01\x00",  # a SASL init in the AMQP layer
        b"\x00\x53\x10\x45",  # open without container-id
        b"\x00\x53\x17\x45\xff",  # bytes after an end
        b"\x00\x53\x10\xc0\x03\x01\xa1\x05",  # string runs past
    ],
)
def test_malformed_bodies_are_decode_errors(body):
    frame = struct.pack(">IBBH", 8 + len(body), 2, 0, 0) + body
    assert _error(AMQP_HEADER + frame).condition == DECODE_ERROR


def test_empty_sasl_frame_is_refused():
    assert _error(SASL_HEADER + struct.pack(">IBBH", 8, 2, 1, 0)).condition == FRAMING_ERROR


def test_a_broken_decoder_stays_broken():
    decoder = FrameDecoder()
    with pytest.raises(FramingError):
        decoder.feed(b"HTTP/1.1")
    with pytest.raises(FramingError):
        decoder.feed(AMQP_HEADER)


def test_layer_tracks_the_last_header():
    decoder = FrameDecoder()
    assert decoder.layer is None
    decoder.feed(SASL_HEADER)
    assert decoder.layer == 3
    decoder.feed(AMQP_HEADER)
    assert decoder.layer == 0


@given(st.binary(max_size=200))
def test_garbage_after_the_header_is_a_framing_error_or_frames(data):
    decoder = FrameDecoder(4096)
    try:
        decoder.feed(AMQP_HEADER + data)
    except FramingError as e:
        assert e.condition in (FRAMING_ERROR, DECODE_ERROR)


def test_the_sdks_sasl_exchange_decodes():
    from azure.servicebus._pyamqp import _encode as sdk_encode
    from azure.servicebus._pyamqp import performatives as sdk_perf

    header, body = sdk_encode.encode_frame(
        sdk_perf.SASLInit(mechanism=b"ANONYMOUS", initial_response=b"", hostname="localhost"),
        frame_type=b"\x01",
    )
    out = FrameDecoder().feed(SASL_HEADER + header + b"\x00\x00" + body + AMQP_HEADER)
    assert out == [
        ProtocolHeader(3),
        Frame(
            0,
            p.SaslInit(mechanism="ANONYMOUS", initial_response=b"", hostname="localhost"),
            b"",
            True,
        ),
        ProtocolHeader(0),
    ]


UINTS = st.one_of(st.sampled_from([0, 1, 255, 256, 0xFFFFFFFF]), st.integers(0, 0xFFFFFFFF))
STATES = st.sampled_from(
    [
        None,
        p.Accepted(),
        p.Released(),
        p.Rejected(),
        p.Modified(delivery_failed=True, undeliverable_here=True),
        p.Rejected(error=p.Error(condition="amqp:internal-error", description="x" * 300)),
    ]
)


@given(
    st.integers(0, 0xFFFF),
    UINTS,
    UINTS,
    st.binary(max_size=300),
    st.binary(max_size=300),
    st.sampled_from([0, 0x80013700]),
    st.booleans(),
    st.booleans(),
)
def test_the_direct_transfer_frame_is_the_generic_one(
    channel, handle, delivery_id, tag, payload, fmt, settled, more
):
    transfer = p.Transfer(handle, delivery_id, tag, fmt, settled, more)  # the spec's order
    generic = encode_frame(channel, transfer, payload)
    direct = encode_transfer_frame(
        channel, handle, delivery_id, tag, payload, message_format=fmt, settled=settled, more=more
    )
    assert direct == generic


@given(st.integers(0, 0xFFFF), st.booleans(), UINTS, UINTS, st.booleans(), STATES, st.booleans())
def test_the_direct_disposition_frame_is_the_generic_one(
    channel, role, first, last, settled, state, batchable
):
    generic = encode_frame(
        channel,
        p.Disposition(
            role=role, first=first, last=last, settled=settled, state=state, batchable=batchable
        ),
    )
    assert encode_disposition_frame(channel, role, first, last, settled, state, batchable) == (
        generic
    )


def _general(body: bytes) -> p.Disposition:
    value, end = decode_value(body, 0)
    assert end == len(body)
    return p.decode_described(value)


def _sdk_disposition(**fields: object) -> bytes:
    """The frame body azure-servicebus's own encoder writes for a disposition."""
    from azure.servicebus._pyamqp._encode import encode_frame
    from azure.servicebus._pyamqp.outcomes import Accepted, Rejected, Released
    from azure.servicebus._pyamqp.performatives import DispositionFrame

    state = {"accepted": Accepted(), "released": Released(), "rejected": Rejected(), None: None}
    fields["state"] = state[fields["state"]]  # type: ignore[index]
    _, body = encode_frame(DispositionFrame(**fields))
    return bytes(body)


uints = st.integers(min_value=0, max_value=2**32 - 1)


@given(
    st.booleans(),
    uints,
    st.one_of(st.none(), uints),
    st.booleans(),
    st.sampled_from(["accepted", "released", "rejected", None]),
    st.one_of(st.none(), st.booleans()),
)
def test_a_disposition_is_read_directly_as_the_general_decoder_reads_it(
    role, first, last, settled, state, batchable
):
    """The disposition frame a client sends for every settled message is read by a
    specialised reader: what it reads is what the general decoder reads, and the SDK's
    accepted dispositions (every complete) are read by it."""
    sdk = _sdk_disposition(
        role=role, first=first, last=last, settled=settled, state=state, batchable=batchable
    )
    states = {"accepted": p.Accepted(), "released": p.Released(), "rejected": p.Rejected()}
    ours = encode(
        p.encode_described(
            p.Disposition(role, first, last, settled, states.get(state or ""), bool(batchable))
        )
    )
    for body in (sdk, ours):
        fast = read_disposition(body)
        if state in ("accepted", None):
            assert fast is not None
        if fast is not None:
            assert fast == _general(body)
            assert type(fast.state) is type(_general(body).state)


@given(st.binary(min_size=1, max_size=30))
def test_a_garbled_disposition_is_left_to_the_general_decoder(tail):
    body = b"\x00\x53\x15" + tail
    fast = read_disposition(body)
    if fast is not None:
        assert fast == _general(body)


def test_a_disposition_without_its_mandatory_first_is_refused_as_before():
    body = b"\x00\x53\x15\xc0\x03\x02\x41\x40"  # role, first null
    assert read_disposition(body) is None
    decoder = FrameDecoder()
    decoder.feed(AMQP_HEADER)
    frame = struct.pack(">IBBH", 8 + len(body), 2, 0, 0) + body
    with pytest.raises(FramingError, match="mandatory first"):
        decoder.feed(frame)
