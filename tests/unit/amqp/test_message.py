"""Message sections: encoding and decoding, and what malformed input gives (``DecodeError``)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qmgr.amqp.message import Header, Message, Properties, decode_message, encode_message
from qmgr.amqp.types import DecodeError, Int, Symbol, encode


def test_sections_round_trip():
    m = Message(
        header=Header(durable=True, priority=7, ttl=60000, delivery_count=2),
        delivery_annotations={Symbol("x-opt-lock-token"): uuid.UUID(int=1)},
        message_annotations={Symbol("x-opt-partition-key"): "p"},
        properties=Properties(message_id="m1", to="q", group_id="s", absolute_expiry_time=5),
        application_properties={"a": Int(1), "b": "x"},
        body=[b"one", b"two"],
        body_type="data",
        footer={Symbol("f"): 1},
    )
    assert decode_message(encode_message(m)) == m
    for body, kind in [([[1, "a"], []], "sequence"), ({"k": [1]}, "value"), (None, "value")]:
        m = Message(body=body, body_type=kind)
        assert decode_message(encode_message(m)) == m


def test_no_body_is_an_empty_data_body():
    assert decode_message(b"") == Message(body=[], body_type="data")


@pytest.mark.parametrize(
    "sections",
    [
        [(0x73, []), (0x70, [])],  # properties before header
        [(0x70, []), (0x70, [])],  # header twice
        [(0x75, b"a"), (0x77, 1)],  # data then value
        [(0x77, 1), (0x77, 2)],  # two values
        [(0x72, "not a map")],
        [(0x75, "not binary")],
        [(0x76, "not a list")],
        [(0x99, [])],  # not a section
        [(0x73, ["id", "not binary user-id"])],
    ],
)
def test_bad_sections_are_decode_errors(sections):
    from qmgr.amqp.types import Described, ULong

    data = b"".join(encode(Described(ULong(code), value)) for code, value in sections)
    with pytest.raises(DecodeError):
        decode_message(data)


def test_a_value_that_is_not_a_section():
    with pytest.raises(DecodeError):
        decode_message(encode("plain"))


annotation_keys = st.text(alphabet="abcx-", min_size=1, max_size=10).map(Symbol)
plain_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**31), 2**31 - 1),
    st.text(max_size=20),
    st.binary(max_size=20),
)
messages = st.builds(
    Message,
    header=st.one_of(st.none(), st.builds(Header, durable=st.booleans(), priority=st.integers(0, 255),
                                          ttl=st.one_of(st.none(), st.integers(0, 2**32 - 1)),
                                          delivery_count=st.integers(0, 2**32 - 1))),
    delivery_annotations=st.one_of(st.none(), st.dictionaries(annotation_keys, plain_values, max_size=3)),
    message_annotations=st.one_of(st.none(), st.dictionaries(annotation_keys, plain_values, max_size=3)),
    properties=st.one_of(st.none(), st.builds(Properties, message_id=st.one_of(st.none(), st.text(max_size=10), st.uuids()),
                                              group_id=st.one_of(st.none(), st.text(max_size=10)),
                                              creation_time=st.one_of(st.none(), st.integers(0, 2**40)))),
    application_properties=st.one_of(st.none(), st.dictionaries(st.text(max_size=10), plain_values, max_size=4)),
    footer=st.one_of(st.none(), st.dictionaries(annotation_keys, plain_values, max_size=2)),
).flatmap(
    lambda m: st.one_of(
        st.lists(st.binary(max_size=50), min_size=1, max_size=3).map(lambda b: _with_body(m, b, "data")),
        st.lists(st.lists(plain_values, max_size=3), min_size=1, max_size=3).map(lambda b: _with_body(m, b, "sequence")),
        plain_values.map(lambda b: _with_body(m, b, "value")),
    )
)  # fmt: skip


def _with_body(m: Message, body, kind: str) -> Message:
    m.body, m.body_type = body, kind
    return m


@given(messages)
def test_any_message_round_trips(message):
    assert decode_message(encode_message(message)) == message


@given(messages, st.integers(min_value=0, max_value=400))
def test_truncated_messages_are_decode_errors(message, cut):
    data = encode_message(message)
    if 0 < cut < len(data):
        try:
            shorter = decode_message(data[:cut])
        except DecodeError:
            return
        # a cut between two sections leaves the sections before it, and nothing else
        assert encode_message(shorter) == data[:cut]


def test_message_ids_of_every_kind():
    from qmgr.amqp.types import ULong

    for given_id, expected in [
        ("s", "s"),
        (7, ULong(7)),
        (uuid.UUID(int=3), uuid.UUID(int=3)),
        (b"\x01", b"\x01"),
    ]:
        back = decode_message(
            encode_message(
                Message(properties=Properties(message_id=given_id), body=[b""], body_type="data")
            )
        )
        assert back.properties.message_id == expected and type(back.properties.message_id) is type(
            expected
        )
    with pytest.raises(DecodeError):
        decode_message(
            encode_message(
                Message(properties=Properties(message_id=1.5), body=[b""], body_type="data")
            )
        )
