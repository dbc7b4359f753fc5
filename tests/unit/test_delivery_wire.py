"""Deliveries written as bytes (``qmgr.rpc.delivery_wire``) parse to the same ``Delivery`` as
the protobuf runtime builds with ``add_delivery``, for every kind of message a consumer gets:
with or without properties, topic, subscription user data, retained flag, expiry, CorrelId,
reply-to queue, backout count, negative or large numbers, and copies sharing a publication."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qmgr.core.message import Message, SharedEncoding
from qmgr.core.values import Int32
from qmgr.rpc.convert import add_delivery
from qmgr.rpc.delivery_wire import EncodedDelivery, varint
from qmgr.wire import messaging_pb2 as pb

texts = st.text(max_size=12)
properties = st.dictionaries(
    st.sampled_from(["a", "colour", "MQTopicString", "é"]),
    st.one_of(
        texts,
        st.integers(-(2**63), 2**63 - 1),
        st.booleans(),
        st.binary(max_size=4),
        st.floats(allow_nan=False),
        st.none(),
    ),
    max_size=3,
)


@st.composite
def messages(draw: st.DrawFn) -> Message:
    put_time = draw(st.floats(0, 4e9, allow_nan=False))
    ttl = draw(st.sampled_from([0.0, 0.0005, 5.0, 1e6]))
    props = draw(properties)
    return Message(
        draw(st.sampled_from(["", "0" * 48, "id-é"])),
        draw(st.binary(max_size=300)),
        {k: Int32(v) if type(v) is int and -(2**31) <= v < 2**31 else v for k, v in props.items()},
        draw(st.booleans()),
        draw(st.integers(-1, 9)),
        ttl,
        put_time + ttl if ttl else None,
        draw(st.binary(max_size=24)),
        put_time,
        draw(st.integers(0, 2**31 - 1)),
        draw(st.sampled_from(["", "REPLY.Q"])),
        draw(st.sampled_from(["", "price/eur", "é/ü"])),
        draw(st.sampled_from(["", "user data"])),
        draw(st.booleans()),
        draw(st.integers(0, 2**62)),
    )


def by_the_runtime(queue: str, msgs: list[Message]) -> pb.Delivery:
    delivery = pb.Delivery(queue=queue)
    for m in msgs:
        add_delivery(delivery.messages, m)
    delivery.size = 77
    return delivery


def as_bytes(queue: str, msgs: list[Message]) -> pb.Delivery:
    encoded = EncodedDelivery(queue, msgs)
    assert encoded.size == len(encoded.to_bytes(77)) - 2  # the size field: tag and one byte
    return pb.Delivery.FromString(encoded.to_bytes(77))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["", "SYSTEM.MANAGED.NDURABLE.X"]), st.lists(messages(), max_size=5))
def test_bytes_parse_to_the_delivery_the_runtime_builds(queue: str, msgs: list[Message]) -> None:
    assert as_bytes(queue, msgs) == by_the_runtime(queue, msgs)


@settings(max_examples=100, deadline=None)
@given(messages(), st.integers(2, 4))
def test_copies_of_one_publication_share_their_encoding(msg: Message, n: int) -> None:
    shared = SharedEncoding()
    copies = [
        Message(
            msg.message_id,
            msg.body,
            msg.properties,
            msg.persistent,
            i,
            msg.ttl,
            msg.expiry,
            bytes([i]) * 24,
            msg.put_time,
            0,
            msg.reply_to_queue,
            msg.topic,
            f"user {i}" if i % 2 else "",
            False,
            100 + i,
            shared,
        )
        for i in range(n)
    ]
    runtime = by_the_runtime("Q", copies)
    for m in copies:  # the runtime's encoding filled the cell: start again
        m.shared = SharedEncoding()
    assert as_bytes("Q", copies) == runtime


def test_dropping_the_last_message_gives_back_its_bytes() -> None:
    msgs = [Message(f"id{i}", b"x" * i, topic="t", put_time=1.0) for i in range(3)]
    encoded = EncodedDelivery("Q", msgs)
    whole = encoded.size
    taken = encoded.drop_last()
    assert encoded.size == whole - taken == EncodedDelivery("Q", msgs[:2]).size
    assert len(pb.Delivery.FromString(encoded.to_bytes(1)).messages) == 2


@given(st.integers(-(2**63), 2**64 - 1).filter(bool))
def test_varint_is_protobufs(n: int) -> None:
    wire = pb.Delivery(size=n % 2**64).SerializeToString()  # 0 is not written at all
    assert wire == b"\x28" + varint(n)


def test_a_property_out_of_int64_range_is_refused_as_the_runtime_refuses_it() -> None:
    msg = Message("0" * 48, b"x", {"big": 2**63}, False, 0, 0.0, None, b"", 1.0)
    with pytest.raises(ValueError):
        by_the_runtime("Q", [msg])
    with pytest.raises(ValueError):
        EncodedDelivery("Q", [msg])
