"""Performatives: every field written, spec defaults, and azure-servicebus's _pyamqp as an oracle."""

from __future__ import annotations

import uuid

import pytest
from azure.servicebus._pyamqp import _decode as sdk_decode
from azure.servicebus._pyamqp import _encode as sdk_encode
from azure.servicebus._pyamqp import performatives as sdk_perf
from hypothesis import given
from hypothesis import strategies as st

from qmgr.amqp import performatives as p
from qmgr.amqp.framing import encode_frame
from qmgr.amqp.types import DecodeError, Described, Symbol, UInt, ULong, decode, encode
from tests.unit.amqp.sdk_frames import flow_frame, open_frame

SAMPLES: list[p.Composite] = [
    p.Open(
        container_id="node-1",
        hostname="localhost",
        max_frame_size=65536,
        idle_time_out=120000,
        offered_capabilities=[Symbol("ANONYMOUS-RELAY")],
        properties={"product": "qmgr"},
    ),
    p.Begin(
        remote_channel=0,
        next_outgoing_id=1,
        incoming_window=5000,
        outgoing_window=5000,
        handle_max=255,
    ),
    p.Attach(
        name="sender-link",
        handle=1,
        role=p.RECEIVER,
        snd_settle_mode=p.SND_UNSETTLED,
        rcv_settle_mode=p.RCV_SECOND,
        source=p.Source(
            address="amqps://localhost:5672/q1",
            filter={
                Symbol("com.microsoft:session-filter"): Described(
                    Symbol("com.microsoft:session-filter"), "s1"
                )
            },
        ),
        target=p.Target(address="receiver"),
        initial_delivery_count=0,
        max_message_size=1048576,
        properties={"com.microsoft:receiver-name": "r"},
    ),
    p.Flow(
        next_incoming_id=3,
        incoming_window=100,
        next_outgoing_id=7,
        outgoing_window=100,
        handle=1,
        delivery_count=4,
        link_credit=10,
        drain=True,
    ),
    p.Transfer(
        handle=1,
        delivery_id=9,
        delivery_tag=uuid.UUID(int=5).bytes_le,
        message_format=0x80013700,
        settled=False,
    ),
    p.Disposition(role=p.RECEIVER, first=3, last=5, settled=True, state=p.Accepted()),
    p.Disposition(
        role=p.SENDER,
        first=1,
        state=p.Rejected(p.Error("com.microsoft:dead-letter", "why", {"DeadLetterReason": "r"})),
    ),
    p.Disposition(
        role=p.RECEIVER, first=1, state=p.Modified(delivery_failed=True, undeliverable_here=True)
    ),
    p.Disposition(role=p.RECEIVER, first=1, state=p.Released()),
    p.Disposition(role=p.RECEIVER, first=1, state=p.Received(0, 12)),
    p.Detach(handle=1, closed=True, error=p.Error("com.microsoft:timeout", "no session")),
    p.End(),
    p.Close(error=p.Error("amqp:decode-error", "bad")),
    p.SaslMechanisms([Symbol("ANONYMOUS"), Symbol("PLAIN")]),
    p.SaslInit(mechanism="ANONYMOUS", initial_response=b"", hostname="localhost"),
    p.SaslChallenge(b"c"),
    p.SaslResponse(b"r"),
    p.SaslOutcome(code=p.SASL_OK, additional_data=None),
]


@pytest.mark.parametrize("value", SAMPLES, ids=lambda v: type(v).__name__)
def test_round_trip(value):
    back = p.decode_described(decode(encode(p.encode_described(value))))
    assert back == value
    assert type(back) is type(value)


@pytest.mark.parametrize("value", SAMPLES, ids=lambda v: type(v).__name__)
def test_every_field_is_written(value):
    described = p.encode_described(value)
    assert described.descriptor == value.DESCRIPTOR
    assert len(described.value) == len(type(value).KINDS)


def test_spec_defaults_fill_absent_and_null_fields():
    # open with only container-id (a trimmed list), as Proton writes it
    trimmed = Described(ULong(0x10), ["c"])
    assert p.decode_described(trimmed) == p.Open(container_id="c")
    nulls = Described(ULong(0x10), ["c", None, None, None])
    opened = p.decode_described(nulls)
    assert opened.max_frame_size == 0xFFFFFFFF and opened.channel_max == 0xFFFF
    attach = p.decode_described(Described(ULong(0x12), ["n", UInt(0), True]))
    assert attach.snd_settle_mode == p.SND_MIXED and attach.rcv_settle_mode == p.RCV_FIRST
    source = p.decode_described(Described(ULong(0x28), []))
    assert source.expiry_policy == "session-end" and source.durable == 0


def test_symbolic_descriptor_is_accepted():
    value = Described(Symbol("amqp:accepted:list"), [])
    assert p.decode_described(value) == p.Accepted()


def test_unknown_descriptor_stays_described():
    value = Described(Symbol("com.microsoft:session-filter"), "s")
    assert p.decode_described(value) is value


def test_extra_fields_are_ignored():
    assert p.decode_described(Described(ULong(0x24), [1, 2])) == p.Accepted()


@pytest.mark.parametrize(
    "value",
    [
        Described(ULong(0x10), []),  # open without container-id
        Described(ULong(0x14), [None]),  # transfer without handle
        Described(ULong(0x12), ["n", "not-a-handle", True]),
        Described(ULong(0x12), ["n", UInt(1), UInt(1)]),  # role is a boolean
        Described(ULong(0x13), "not a list"),
        Described(ULong(0x10), ["c", None, -1]),  # max-frame-size is a uint
        Described(ULong(0x10), ["c", None, None, None, None, None, None, ["x"]]),  # capabilities
    ],
)
def test_wrong_fields_are_decode_errors(value):
    with pytest.raises(DecodeError):
        p.decode_described(value)


def _sdk_fields(frame: bytes) -> tuple[int, list]:
    return sdk_decode.decode_frame(memoryview(frame)[8:])


def test_sdk_decodes_our_open_with_every_field():
    ours = p.Open(
        container_id="node",
        max_frame_size=65536,
        channel_max=255,
        idle_time_out=60000,
        properties={"product": "qmgr"},
    )
    code, fields = _sdk_fields(encode_frame(0, ours))
    assert code == 0x10
    assert fields[:5] == [b"node", None, 65536, 255, 60000]
    assert fields[9] == {b"product": b"qmgr"}


def test_sdk_decodes_our_attach_reply():
    ours = p.Attach(
        name="l",
        handle=3,
        role=p.SENDER,
        snd_settle_mode=p.SND_UNSETTLED,
        rcv_settle_mode=p.RCV_SECOND,
        source=p.Source(address="amqps://h:1/q"),
        target=p.Target(address="t"),
        initial_delivery_count=0,
        max_message_size=262144,
    )
    code, fields = _sdk_fields(encode_frame(1, ours))
    assert code == 0x12
    assert len(fields) == 14
    assert fields[:5] == [b"l", 3, False, 0, 1]
    assert fields[5][0] == b"amqps://h:1/q" and fields[6][0] == b"t"
    assert fields[9:11] == [0, 262144]


def test_sdk_decodes_our_transfer_and_payload():
    tag = uuid.uuid4().bytes_le
    ours = p.Transfer(
        handle=2, delivery_id=70000, delivery_tag=tag, message_format=0, settled=False
    )
    code, fields = _sdk_fields(encode_frame(1, ours, b"\x00Sw\xa1\x02hi"))
    assert code == 0x14
    assert fields[:5] == [2, 70000, tag, 0, False]
    assert bytes(fields[-1]) == b"\x00Sw\xa1\x02hi"


def test_sdk_decodes_our_sasl_frames():
    code, fields = _sdk_fields(encode_frame(0, p.SaslMechanisms([Symbol("ANONYMOUS")]), sasl=True))
    assert code == 0x40 and fields[0] == [b"ANONYMOUS"] or fields[0] == b"ANONYMOUS"
    code, fields = _sdk_fields(encode_frame(0, p.SaslOutcome(code=0), sasl=True))
    assert code == 0x44 and fields[0] == 0


def _sdk_frame(frame) -> bytes:
    header, body = sdk_encode.encode_frame(frame)
    return header + b"\x00\x00" + body


def test_we_decode_the_sdks_frames():
    from qmgr.amqp.framing import AMQP_HEADER, FrameDecoder

    opening = open_frame("client", 1048576, {"product": "azsdk-python-servicebus"})
    flow = flow_frame(
        next_incoming_id=1,
        incoming_window=5000,
        next_outgoing_id=1,
        outgoing_window=5000,
        handle=1,
        delivery_count=0,
        link_credit=100,
    )
    decoder = FrameDecoder()
    out = decoder.feed(AMQP_HEADER + _sdk_frame(opening) + _sdk_frame(flow))
    opened, flowed = out[1].performative, out[2].performative
    assert opened == p.Open(
        container_id="client",
        hostname="localhost",
        max_frame_size=1048576,
        properties={"product": "azsdk-python-servicebus"},
    )
    assert flowed.link_credit == 100 and flowed.handle == 1 and flowed.drain is False


def test_field_lists_match_the_sdks_definitions():
    from azure.servicebus._pyamqp import endpoints as sdk_endpoints
    from azure.servicebus._pyamqp import message as sdk_message
    from azure.servicebus._pyamqp import outcomes as sdk_outcomes

    from qmgr.amqp import message as m

    pairs = [
        (p.Open, sdk_perf.OpenFrame), (p.Begin, sdk_perf.BeginFrame), (p.Attach, sdk_perf.AttachFrame),
        (p.Flow, sdk_perf.FlowFrame), (p.Transfer, sdk_perf.TransferFrame),
        (p.Disposition, sdk_perf.DispositionFrame), (p.Detach, sdk_perf.DetachFrame), (p.End, sdk_perf.EndFrame),
        (p.Close, sdk_perf.CloseFrame), (p.SaslMechanisms, sdk_perf.SASLMechanism), (p.SaslInit, sdk_perf.SASLInit),
        (p.SaslChallenge, sdk_perf.SASLChallenge), (p.SaslResponse, sdk_perf.SASLResponse),
        (p.SaslOutcome, sdk_perf.SASLOutcome), (p.Received, sdk_outcomes.Received),
        (p.Accepted, sdk_outcomes.Accepted), (p.Rejected, sdk_outcomes.Rejected),
        (p.Released, sdk_outcomes.Released), (p.Modified, sdk_outcomes.Modified),
        (p.Source, sdk_endpoints.Source), (p.Target, sdk_endpoints.Target),
        (m.Header, sdk_message.Header), (m.Properties, sdk_message.Properties),
    ]  # fmt: skip
    # the SDK's names where they differ from the specification's
    sdk_names = {
        "idle_time_out": "idle_timeout",
        "snd_settle_mode": "send_settle_mode",
        "filter": "filters",
    }
    for ours, theirs in pairs:
        assert theirs._code == ours.DESCRIPTOR, ours
        assert [sdk_names.get(n, n) for n in p.field_names(ours)] == [
            f.name
            for f in theirs._definition
            if f is not None  # the transfer ends with its payload
        ], ours


uints = st.integers(min_value=0, max_value=0xFFFFFFFF)
maybe_uint = st.one_of(st.none(), uints)


@given(
    st.builds(
        p.Flow,
        next_incoming_id=maybe_uint, incoming_window=uints, next_outgoing_id=uints, outgoing_window=uints,
        handle=maybe_uint, delivery_count=maybe_uint, link_credit=maybe_uint, available=maybe_uint,
        drain=st.booleans(), echo=st.booleans(),
    )
)  # fmt: skip
def test_sdk_reads_any_flow(flow):
    code, fields = _sdk_fields(encode_frame(0, flow))
    assert code == 0x13
    assert fields == [getattr(flow, n) for n in p.field_names(p.Flow)]


@given(
    st.builds(
        p.Transfer,
        handle=uints, delivery_id=maybe_uint, delivery_tag=st.one_of(st.none(), st.binary(max_size=32)),
        message_format=maybe_uint, settled=st.one_of(st.none(), st.booleans()), more=st.booleans(),
        rcv_settle_mode=st.one_of(st.none(), st.sampled_from([0, 1])), resume=st.booleans(),
        aborted=st.booleans(), batchable=st.booleans(),
    ),
    st.binary(max_size=600),
)  # fmt: skip
def test_transfers_round_trip_and_the_sdk_reads_them(transfer, payload):
    from qmgr.amqp.framing import AMQP_HEADER, FrameDecoder

    frame = encode_frame(5, transfer, payload)
    got = FrameDecoder().feed(AMQP_HEADER + frame)[1]
    assert (got.channel, got.performative, got.payload) == (5, transfer, payload)
    code, fields = _sdk_fields(frame)
    assert code == 0x14
    defaults = sdk_decode._PERFORMATIVE_FIELD_DEFAULTS[0x14]  # the SDK reads null as its default
    ours = [getattr(transfer, n) for n in p.field_names(p.Transfer)]
    assert fields[:11] == [d if v is None else v for v, d in zip(ours, defaults, strict=True)]
    assert bytes(fields[-1]) == payload


@given(
    st.builds(
        sdk_perf.DispositionFrame,
        role=st.booleans(), first=uints, last=maybe_uint, settled=st.booleans(), state=st.none(),
        batchable=st.booleans(),
    )
)  # fmt: skip
def test_we_read_any_sdk_disposition(frame):
    from qmgr.amqp.framing import AMQP_HEADER, FrameDecoder

    got = FrameDecoder().feed(AMQP_HEADER + _sdk_frame(frame))[1].performative
    assert got == p.Disposition(
        frame.role, frame.first, frame.last, frame.settled, None, frame.batchable
    )


@pytest.mark.parametrize("session", ["s-1", None])
def test_we_read_the_sdks_session_receiver_attach(session):
    from azure.servicebus._pyamqp.endpoints import Target as SdkTarget
    from azure.servicebus._transport._pyamqp_transport import PyamqpTransport

    from qmgr.amqp.framing import AMQP_HEADER, FrameDecoder

    source = PyamqpTransport.create_source("amqps://localhost:5672/q", session)
    attach = sdk_perf.AttachFrame(
        name="receiver-link-1", handle=2, role=True, send_settle_mode=0, rcv_settle_mode=1,
        source=source, target=SdkTarget(address="receiver-link-1"), unsettled=None,
        incomplete_unsettled=False, initial_delivery_count=None, max_message_size=None,
        offered_capabilities=None, desired_capabilities=None,
        properties={"com.microsoft:receiver-name": "r", "com.microsoft:timeout": 5000},
    )  # fmt: skip
    got = FrameDecoder().feed(AMQP_HEADER + _sdk_frame(attach))[1].performative
    assert isinstance(got, p.Attach) and isinstance(got.source, p.Source)
    assert got.role is p.RECEIVER and got.rcv_settle_mode == p.RCV_SECOND
    assert got.source.address == "amqps://localhost:5672/q"
    # next available session: the key with a null value; a given session: the id as a string
    assert got.source.filter == {Symbol("com.microsoft:session-filter"): session}
    assert got.properties[Symbol("com.microsoft:timeout")] == 5000  # sent as an int, not a uint
