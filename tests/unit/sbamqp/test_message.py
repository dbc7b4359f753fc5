"""Service Bus messages: batches, SbMessage conversion; azure-servicebus 7.15.0 builds and reads them."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import math
import uuid
from typing import Any

import pytest
from azure.servicebus import ServiceBusMessage, ServiceBusMessageBatch, ServiceBusReceivedMessage
from azure.servicebus._pyamqp._decode import decode_payload
from azure.servicebus._pyamqp._encode import encode_payload
from azure.servicebus._pyamqp.message import BatchMessage
from azure.servicebus._transport._pyamqp_transport import PyamqpTransport
from azure.servicebus.amqp import AmqpAnnotatedMessage, AmqpMessageBodyType
from hypothesis import given
from hypothesis import strategies as st

from qmgr.amqp.message import Header, Message, Properties, decode_message, encode_message
from qmgr.amqp.types import DecodeError, Int, Long, Symbol, Timestamp, UInt
from qmgr.core.values import Int32
from qmgr.sbamqp.message import (
    encode_batch,
    split_batch,
    to_amqp,
    to_amqp_general,
    to_sb_message,
)
from qmgr.servicebus.message import MessageState, SbMessage, Stored
from tests.unit.amqp.test_message import messages

T0 = 1_750_000_000.0


def sdk_bytes(message: ServiceBusMessage | AmqpAnnotatedMessage) -> bytes:
    annotated = message if isinstance(message, AmqpAnnotatedMessage) else message.raw_amqp_message
    return encode_payload(bytearray(), PyamqpTransport.to_outgoing_amqp_message(annotated))


def sdk_batch(messages: list[ServiceBusMessage]) -> bytes:
    batch = ServiceBusMessageBatch(max_size_in_bytes=1 << 20)
    for m in messages:
        batch.add_message(m)
    return encode_payload(bytearray(), BatchMessage(*batch._message))


def every_field_message(application_properties: Any) -> ServiceBusMessage:
    """A message with every field the SDK lets a sender set (body "hello", session "s1")."""
    return ServiceBusMessage(
        "hello",
        application_properties=application_properties,
        session_id="s1",
        message_id="m1",
        correlation_id="c1",
        subject="subj",
        content_type="text/plain",
        reply_to="r",
        reply_to_session_id="rs",
        to="t",
        time_to_live=dt.timedelta(seconds=30),
        scheduled_enqueue_time_utc=dt.datetime.fromtimestamp(T0 + 60, dt.UTC),
        partition_key="s1",
    )


def test_sdk_message_decodes_and_converts():
    sent = every_field_message({"n": 5, "s": "x", "f": 1.5, "flag": True})
    sb = to_sb_message(sdk_bytes(sent))
    assert sb.body == b"hello" and sb.body_type == "data"
    assert (sb.message_id, sb.correlation_id, sb.session_id, sb.subject) == (
        "m1",
        "c1",
        "s1",
        "subj",
    )
    assert (sb.content_type, sb.reply_to, sb.reply_to_session_id, sb.to) == (
        "text/plain",
        "r",
        "rs",
        "t",
    )
    assert sb.time_to_live == 30 and sb.partition_key == "s1"
    assert sb.scheduled_enqueue_time == T0 + 60
    assert sb.properties["n"] == 5 and type(sb.properties["n"]) is Int32
    assert sb.properties["s"] == "x" and sb.properties["f"] == 1.5 and sb.properties["flag"] is True


def test_int_and_long_properties_keep_their_width():
    m = Message(
        application_properties={"i": Int(3), "l": Long(3), "t": Timestamp(1500)},
        body=[b""],
        body_type="data",
    )
    sb = to_sb_message(encode_message(m))
    assert type(sb.properties["i"]) is Int32 and type(sb.properties["l"]) is int
    assert sb.properties["t"] == dt.datetime(1970, 1, 1, 0, 0, 1, 500000, dt.UTC)


def test_message_id_is_stamped_only_when_missing():
    assert (
        to_sb_message(encode_message(Message(body=[b"x"], body_type="data")), "stamp").message_id
        == "stamp"
    )
    given_id = Message(properties=Properties(message_id="own"), body=[b"x"], body_type="data")
    assert to_sb_message(encode_message(given_id), "stamp").message_id == "own"


def test_sdk_batch_splits_into_its_messages():
    sent = [
        ServiceBusMessage(f"body-{i}", message_id=f"id-{i}", application_properties={"i": i})
        for i in range(5)
    ]
    inner = split_batch(sdk_batch(sent))
    assert len(inner) == 5
    got = [to_sb_message(raw) for raw in inner]
    assert [m.body for m in got] == [f"body-{i}".encode() for i in range(5)]
    assert [m.message_id for m in got] == [f"id-{i}" for i in range(5)]
    assert [m.properties["i"] for m in got] == list(range(5))


def test_our_batch_splits_and_a_value_body_is_refused():
    assert split_batch(encode_batch([b"a", b"b"])) == [b"a", b"b"]
    with pytest.raises(DecodeError):
        split_batch(encode_message(Message(body="x", body_type="value")))


def _stored(sb: SbMessage, **kw) -> Stored:
    base = dict(sequence_number=42, enqueued_time=T0, enqueued_sequence_number=7)
    base.update(kw)
    return Stored(sb, **base)


def sdk_received(payload: bytes, tag: bytes | None = None) -> ServiceBusReceivedMessage:
    frame = None
    if tag is not None:
        frame = [0, 1, tag, 0, False, False, None, None, None, None, None]
    return ServiceBusReceivedMessage(
        decode_payload(memoryview(payload)), frame=frame, receiver=None
    )


def test_sdk_reads_what_a_receiver_gets():
    sb = SbMessage(
        body=b"payload",
        message_id="m",
        correlation_id="c",
        session_id=None,
        subject="s",
        content_type="application/json",
        partition_key="pk",
        time_to_live=60.0,
        properties={
            "n": Int32(5),
            "l": 9,
            "when": dt.datetime(2025, 1, 2, tzinfo=dt.UTC),
            "span": dt.timedelta(seconds=90),
        },
    )
    token = uuid.uuid4()
    stored = _stored(sb, delivery_count=2, expires_at=T0 + 60, dead_letter_source="q2")
    raw = to_amqp(stored, lock_token=token, locked_until=T0 + 30)
    got = sdk_received(raw, tag=token.bytes_le)
    assert str(got) == "payload"
    assert got.message_id == "m" and got.correlation_id == "c" and got.subject == "s"
    assert got.content_type == "application/json" and got.partition_key == "pk"
    assert got.sequence_number == 42 and got.enqueued_sequence_number == 7
    assert got.enqueued_time_utc == dt.datetime.fromtimestamp(T0, dt.UTC)
    assert got.locked_until_utc == dt.datetime.fromtimestamp(T0 + 30, dt.UTC)
    assert got.delivery_count == 2
    assert got.time_to_live == dt.timedelta(seconds=60)
    assert got.dead_letter_source == "q2"
    assert got.lock_token == token
    assert got.application_properties[b"n"] == 5 and got.application_properties[b"l"] == 9
    assert got.state.value == 0


def test_session_messages_carry_no_locked_until():
    stored = _stored(SbMessage(body=b"x", session_id="s"), session_lock=True)
    got = decode_message(to_amqp(stored, locked_until=T0 + 30))
    assert Symbol("x-opt-locked-until") not in got.message_annotations
    assert got.properties.group_id == "s"


def test_deferred_and_scheduled_state_annotations():
    stored = _stored(SbMessage(body=b"x"), state=MessageState.DEFERRED)
    assert sdk_received(to_amqp(stored)).state.value == 1
    stored = _stored(
        SbMessage(body=b"x", scheduled_enqueue_time=T0 + 5), state=MessageState.SCHEDULED
    )
    got = sdk_received(to_amqp(stored))
    assert got.state.value == 2
    assert got.scheduled_enqueue_time_utc == dt.datetime.fromtimestamp(T0 + 5, dt.UTC)


def test_what_the_namespace_does_not_use_comes_back():
    m = Message(
        header=Header(durable=True, priority=9),
        message_annotations={
            Symbol("x-custom"): UInt(3),
            Symbol("x-opt-sequence-number"): Long(999),
        },
        properties=Properties(
            message_id=uuid.UUID(int=9), user_id=b"u", content_encoding="gzip", creation_time=1000
        ),
        body=[b"x"],
        body_type="data",
        footer={Symbol("hash"): b"h"},
    )
    sb = to_sb_message(encode_message(m))
    assert sb.message_id == str(uuid.UUID(int=9))
    back = decode_message(to_amqp(_stored(sb)))
    assert back.header.durable is True and back.header.priority == 9
    assert back.properties.message_id == uuid.UUID(int=9)
    assert back.properties.user_id == b"u" and back.properties.content_encoding == "gzip"
    assert back.properties.creation_time == 1000
    assert back.message_annotations[Symbol("x-custom")] == UInt(3)
    assert (
        back.message_annotations[Symbol("x-opt-sequence-number")] == 42
    )  # the broker's, not the sender's
    assert back.footer == {Symbol("hash"): b"h"}


@pytest.mark.parametrize(
    "message",
    [
        Message(body="text value", body_type="value"),
        Message(body=[[1, 2], ["x"]], body_type="sequence"),
        Message(body=[b"a", b"b"], body_type="data"),
    ],
)
def test_other_bodies_come_back_unchanged(message):
    sb = to_sb_message(encode_message(message))
    assert sb.body_type == "amqp-" + message.body_type
    back = decode_message(to_amqp(_stored(sb)))
    assert (back.body, back.body_type) == (message.body, message.body_type)


def test_sdk_value_body_comes_back_to_the_sdk():
    sent = AmqpAnnotatedMessage(value_body={"k": "v"})
    sb = to_sb_message(sdk_bytes(sent))
    got = sdk_received(to_amqp(_stored(sb)))
    assert got.body_type == AmqpMessageBodyType.VALUE
    assert got.body == {b"k": b"v"}


text = st.text(max_size=30)
sb_messages = st.builds(
    SbMessage,
    body=st.binary(max_size=100),
    message_id=st.one_of(st.none(), text),
    correlation_id=st.one_of(st.none(), text),
    session_id=st.one_of(st.none(), text),
    reply_to=st.one_of(st.none(), text),
    subject=st.one_of(st.none(), text),
    content_type=st.one_of(st.none(), st.text(alphabet="abc/+-", max_size=10)),
    partition_key=st.one_of(st.none(), text),
    time_to_live=st.one_of(
        st.none(), st.integers(min_value=1, max_value=10**6).map(lambda ms: ms / 1000)
    ),
    properties=st.dictionaries(
        text,
        st.one_of(
            st.integers(min_value=-(2**63), max_value=2**63 - 1),
            st.integers(min_value=-(2**31), max_value=2**31 - 1).map(Int32),
            text,
            st.booleans(),
            st.floats(allow_nan=False),
            st.uuids(),
            st.binary(max_size=10),
        ),
        max_size=5,
    ),
)


@given(sb_messages)
def test_sb_message_round_trip(sb):
    back = to_sb_message(to_amqp(_stored(sb)))
    for name in (
        "body",
        "message_id",
        "correlation_id",
        "session_id",
        "reply_to",
        "subject",
        "content_type",
        "partition_key",
        "time_to_live",
    ):
        assert getattr(back, name) == getattr(sb, name), name
    assert back.properties == sb.properties
    assert {k: type(v) for k, v in back.properties.items()} == {
        k: type(v) for k, v in sb.properties.items()
    }


stored_states = st.builds(
    lambda sb, kept, seq, enq_seq, count, state, expires, dls, sched, session_lock: Stored(
        dataclasses.replace(sb, extra={"amqp-header": kept} if kept else {}),
        sequence_number=seq,
        enqueued_time=T0,
        expires_at=expires,
        state=state,
        delivery_count=count,
        enqueued_sequence_number=enq_seq,
        dead_letter_source=dls,
        scheduled_enqueue_time=sched,
        session_lock=session_lock,
    ),
    sb_messages,
    st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {
                "durable": st.booleans(),
                "priority": st.integers(0, 255),
                "first_acquirer": st.booleans(),
            }
        ),
    ),
    st.integers(min_value=0, max_value=2**63 - 1),
    st.integers(min_value=0, max_value=2**63 - 1),
    st.integers(min_value=0, max_value=2**32 - 1),
    st.sampled_from(list(MessageState)),
    st.one_of(st.just(math.inf), st.floats(min_value=0, max_value=4e9)),
    st.one_of(st.none(), text),
    st.one_of(st.none(), st.floats(min_value=0, max_value=4e9)),
    st.booleans(),
)


@given(
    stored_states,
    st.one_of(st.none(), st.uuids()),
    st.one_of(st.none(), st.floats(min_value=0, max_value=4e9)),
    st.sampled_from(["data", "amqp-value", "jms"]),
)
def test_the_specialised_encoder_writes_what_the_general_one_does(
    stored, token, locked_until, body_type
):
    """A message an SDK sent (nothing kept but its header's flags) goes out through a
    hand-specialised encoder: byte for byte the general encoder's output."""
    if body_type == "amqp-value":  # a body kept as its encoded sections
        stored.message.body = encode_message(Message(body=stored.message.body))
    stored.message.body_type = body_type
    general = to_amqp_general(stored, lock_token=token, locked_until=locked_until)
    assert to_amqp(stored, lock_token=token, locked_until=locked_until) == general


def test_expiry_is_written_when_finite():
    assert (
        decode_message(to_amqp(_stored(SbMessage(body=b"")))).properties.absolute_expiry_time
        is None
    )
    got = decode_message(to_amqp(_stored(SbMessage(body=b""), expires_at=T0 + 1)))
    assert got.properties.absolute_expiry_time == round((T0 + 1) * 1000)
    assert math.isinf(_stored(SbMessage()).expires_at)


@given(st.binary(max_size=80))
def test_garbage_is_a_decode_error_or_a_message(data):
    with contextlib.suppress(DecodeError):
        to_sb_message(data)


@given(
    messages, st.integers(min_value=0, max_value=10_000), st.integers(min_value=0, max_value=255)
)
def test_a_changed_byte_is_a_decode_error_or_a_message(message, where, byte):
    data = bytearray(encode_message(message))
    if data:
        data[where % len(data)] = byte
    with contextlib.suppress(DecodeError):
        to_sb_message(bytes(data))


def test_a_body_from_another_client_goes_out_as_data():
    got = decode_message(to_amqp(_stored(SbMessage(body=b"raw", body_type="text"))))
    assert (got.body, got.body_type) == ([b"raw"], "data")


def test_a_property_no_amqp_type_holds_goes_out_as_text():
    import decimal

    got = decode_message(
        to_amqp(_stored(SbMessage(body=b"", properties={"d": decimal.Decimal("1.5")})))
    )
    assert got.application_properties == {"d": "1.5"}


def test_dotnet_ticks_and_timestamps():
    from qmgr.amqp.message import timestamp
    from qmgr.sbamqp.message import dotnet_ticks

    assert dotnet_ticks(0) == 621355968000000000
    assert dotnet_ticks(1.5) == 621355968000000000 + 1500 * 10_000
    assert type(dotnet_ticks(1.0)) is Long
    assert timestamp(1.25) == Timestamp(1250) and type(timestamp(1.25)) is Timestamp
    # what the SDK computes from the ticks it is given (utils.utc_from_timestamp of ticks)
    ticks = dotnet_ticks(T0)
    assert dt.datetime(1, 1, 1, tzinfo=dt.UTC) + dt.timedelta(
        microseconds=ticks // 10
    ) == dt.datetime.fromtimestamp(T0, dt.UTC)
