"""The direct reader of sent messages (``to_sb_message``'s fast path) against the general decoder.

Whatever the bytes, ``to_sb_message`` and ``to_sb_message_general`` give the same message, with
the same types in it, or both raise ``DecodeError``; ``split_batch`` gives the parts the general
decoder finds. The shapes the SDK writes are read directly (not handed to the general decoder).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import math
import uuid
from typing import Any

import pytest
from azure.servicebus import ServiceBusMessage
from azure.servicebus.amqp import AmqpAnnotatedMessage, AmqpMessageBodyType
from hypothesis import given
from hypothesis import strategies as st

from qmgr.amqp.message import Header, Message, Properties, decode_message, encode_message
from qmgr.amqp.types import (
    Array,
    Byte,
    Char,
    Decimal32,
    Decimal64,
    Decimal128,
    DecodeError,
    Described,
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
)
from qmgr.core.values import Int32
from qmgr.sbamqp.message import (
    DATETIME_OFFSET,
    PARTITION_KEY,
    SCHEDULED_ENQUEUE_TIME,
    SEQUENCE_NUMBER,
    TIMESPAN,
    URI,
    _plain,
    _read,
    encode_batch,
    split_batch,
    to_amqp,
    to_sb_message,
    to_sb_message_general,
)
from qmgr.servicebus.message import MessageState, SbMessage, Stored
from tests.unit.sbamqp.test_message import T0, every_field_message, sdk_batch, sdk_bytes


def typed(v: Any) -> Any:
    """``v`` with the type of everything in it, so equal values of other types differ."""
    if isinstance(v, dict):
        return ("dict", [(typed(k), typed(x)) for k, x in v.items()])
    if isinstance(v, list | tuple):
        return (type(v).__name__, [typed(x) for x in v])
    if isinstance(v, float) and math.isnan(v):
        return (type(v).__name__, "nan")
    return (type(v).__name__, v)


def shape(sb: SbMessage) -> list[Any]:
    return [(f.name, typed(getattr(sb, f.name))) for f in dataclasses.fields(sb)]


def outcome(read: Any, data: bytes) -> Any:
    try:
        return read(data)
    except DecodeError:
        return DecodeError


def assert_same(data: bytes) -> None:
    """The direct reader and the general decoder agree on ``data``."""
    fast = outcome(to_sb_message, data)
    general = outcome(to_sb_message_general, data)
    if fast is DecodeError or general is DecodeError:
        assert fast is general
    else:
        assert shape(fast) == shape(general)
    parts = outcome(split_batch, data)
    outer = outcome(decode_message, data)
    if outer is DecodeError or outer.body_type != "data":
        assert parts is DecodeError
    else:
        assert parts == [bytes(b) for b in outer.body]


# what the SDK sends of each type it has (None included)
SDK_PROPERTIES: Any = {"n": 5, "s": "x", "f": 1.5, "flag": True, "b": b"r", "z": None,
                       "t": dt.datetime.fromtimestamp(T0, dt.UTC)}  # fmt: skip
SDK_MESSAGES: list[ServiceBusMessage] = [
    ServiceBusMessage("x" * 100),
    ServiceBusMessage(b""),
    ServiceBusMessage("x" * 300, session_id="s"),
    every_field_message(SDK_PROPERTIES),
]


@pytest.mark.parametrize("sent", SDK_MESSAGES)
def test_what_the_sdk_sends_is_read_directly(sent):
    data = sdk_bytes(sent)
    assert _read(data) is not None
    assert_same(data)


@pytest.mark.parametrize("body", ["x" * 100, "", "y" * 300])
def test_a_message_with_only_its_id_set_is_read_from_a_few_bytes(body):
    data = bytes(sdk_bytes(ServiceBusMessage(body)))
    read = _plain(data)
    assert read is not None
    assert shape(read) == shape(to_sb_message_general(data))


def test_an_sdk_batch_is_split_directly():
    data = sdk_batch(SDK_MESSAGES)
    assert _read(data) is not None
    parts = split_batch(data)
    assert parts == [bytes(b) for b in decode_message(data).body]
    for part, sent in zip(parts, SDK_MESSAGES, strict=True):
        assert _read(part) is not None
        assert to_sb_message(part).body == b"".join(sent.raw_amqp_message.body)


@pytest.mark.parametrize(
    "body_type,body",
    [
        (AmqpMessageBodyType.VALUE, {"k": [1, "two"]}),
        (AmqpMessageBodyType.SEQUENCE, [[1, 2], ["a"]]),
        (AmqpMessageBodyType.DATA, [b"one", b"two"]),
    ],
)
def test_other_bodies_read_as_the_general_decoder_reads_them(body_type, body):
    kwargs = {
        AmqpMessageBodyType.VALUE: "value_body",
        AmqpMessageBodyType.SEQUENCE: "sequence_body",
        AmqpMessageBodyType.DATA: "data_body",
    }
    data = sdk_bytes(AmqpAnnotatedMessage(**{kwargs[body_type]: body}))
    assert_same(data)
    assert to_sb_message(data).body_type != "data"


# application property values of every AMQP type
EVERY_TYPE: dict[str, Any] = {
    "null": None,
    "true": True,
    "false": False,
    "ubyte": UByte(7),
    "ushort": UShort(700),
    "uint0": UInt(0),
    "uint8": UInt(7),
    "uint": UInt(70_000),
    "ulong0": ULong(0),
    "ulong8": ULong(7),
    "ulong": ULong(2**64 - 1),
    "byte": Byte(-7),
    "short": Short(-700),
    "int8": Int(-7),
    "int": Int(-70_000),
    "long8": Long(-7),
    "long": Long(-(2**63)),
    "float": Float(1.5),
    "double": 2.25,
    "nan": math.nan,
    "decimal32": Decimal32(b"\x00" * 4),
    "decimal64": Decimal64(b"\x01" * 8),
    "decimal128": Decimal128(b"\x02" * 16),
    "char": Char("é"),
    "timestamp": Timestamp(1_750_000_000_123),
    "uuid": uuid.UUID(int=5),
    "binary": b"\x00\xff",
    "long binary": b"b" * 300,
    "string": "text",
    "long string": "s" * 300,
    "symbol": Symbol("sym"),
    "long symbol": Symbol("y" * 300),
    "list": [1, "a"],
    "map": {"k": 1},
    "array": Array([Symbol("a")], Symbol),
    "timespan": Described(TIMESPAN, Long(10_000_000)),
    "uri": Described(URI, "http://x/"),
    "datetime-offset": Described(DATETIME_OFFSET, Long(638_000_000_000_000_000)),
    "other described": Described(Symbol("x:y"), 5),
}


@pytest.mark.parametrize("name", list(EVERY_TYPE))
def test_application_properties_of_every_type(name):
    m = Message(application_properties={name: EVERY_TYPE[name]}, body=[b"b"], body_type="data")
    data = encode_message(m)
    assert_same(data)
    assert name in to_sb_message(data).properties


def test_all_of_them_at_once_and_under_symbol_keys():
    for keys in (str, Symbol):
        m = Message(
            application_properties={keys(k): v for k, v in list(EVERY_TYPE.items())[:16]},
            body=[b"b"],
            body_type="data",
        )
        assert_same(encode_message(m))


def test_more_properties_than_the_reader_takes_are_read_as_before():
    m = Message(
        application_properties={f"k{i}": i for i in range(40)}, body=[b""], body_type="data"
    )
    assert_same(encode_message(m))
    assert len(to_sb_message(encode_message(m)).properties) == 40


@pytest.mark.parametrize(
    "value",
    [
        Timestamp(2**62),
        Described(DATETIME_OFFSET, Long(2**62)),
    ],
)
def test_a_time_beyond_pythons_range_is_a_decode_error(value):
    data = encode_message(
        Message(application_properties={"t": value}, body=[b""], body_type="data")
    )
    for read in (to_sb_message, to_sb_message_general):
        with pytest.raises(DecodeError, match="out of range"):
            read(data)


def test_annotations_header_and_kept_properties():
    m = Message(
        header=Header(durable=True, priority=9, ttl=5000, first_acquirer=True, delivery_count=3),
        delivery_annotations={Symbol("x-d"): 1},
        message_annotations={
            SCHEDULED_ENQUEUE_TIME: Timestamp(1_750_000_000_000),
            PARTITION_KEY: "pk",
            SEQUENCE_NUMBER: Long(5),
        },
        properties=Properties(
            message_id="id",
            user_id=b"u",
            to="t",
            subject="s",
            reply_to="r",
            correlation_id="c",
            content_type="ct",
            content_encoding="gzip",
            absolute_expiry_time=1,
            creation_time=2,
            group_id="g",
            group_sequence=3,
            reply_to_group_id="rg",
        ),
        body=[b"x"],
        body_type="data",
        footer={Symbol("f"): "v"},
    )
    data = encode_message(m)
    assert _read(data) is not None
    assert_same(data)
    sb = to_sb_message(data)
    assert sb.extra["amqp-header"] == {"durable": True, "priority": 9, "first_acquirer": True}
    assert set(sb.extra) == {"amqp-header", "amqp-properties", "amqp-footer"}
    # other annotations, identifiers that are not strings: as the general decoder keeps them
    m.message_annotations = {Symbol("x-other"): [1]}
    m.properties = Properties(message_id=uuid.UUID(int=1), correlation_id=ULong(5))
    assert_same(encode_message(m))


# --- hypothesis: any message, and any damage to one ------------------------------------------

keys = st.one_of(
    st.text(alphabet="abcx-", min_size=1, max_size=10).map(Symbol),
    st.sampled_from([SCHEDULED_ENQUEUE_TIME, PARTITION_KEY, SEQUENCE_NUMBER]),
    st.just("x-opt-partition-key"),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**31), 2**31 - 1).map(Int),
    st.integers(-(2**63), 2**63 - 1).map(Long),
    st.integers(0, 2**64 - 1).map(ULong),
    st.integers(0, 255).map(UByte),
    st.integers(-(2**15), 2**15 - 1).map(Short),
    st.integers(-(2**40), 2**40).map(Timestamp),
    st.floats(allow_nan=False, width=32).map(Float) | st.floats(allow_nan=False),
    st.text(max_size=20),
    st.text(alphabet="abc", max_size=5).map(Symbol),
    st.binary(max_size=20),
    st.uuids(),
)
values = st.one_of(scalars, st.lists(scalars, max_size=2), st.characters().map(Char))
texts = st.one_of(st.none(), st.text(max_size=10))
ids = st.one_of(texts, st.uuids(), st.integers(0, 2**64 - 1).map(ULong), st.binary(max_size=4))
maybe_int = st.one_of(st.none(), st.integers(0, 2**32 - 1))
properties = st.builds(
    Properties,
    message_id=ids,
    user_id=st.one_of(st.none(), st.binary(max_size=4)),
    to=texts,
    subject=texts,
    reply_to=texts,
    correlation_id=ids,
    content_type=st.one_of(st.none(), st.text(alphabet="abc/", max_size=8)),
    content_encoding=st.one_of(st.none(), st.text(alphabet="abc", max_size=8)),
    absolute_expiry_time=st.one_of(st.none(), st.integers(0, 2**40)),
    creation_time=st.one_of(st.none(), st.integers(0, 2**40)),
    group_id=texts,
    group_sequence=maybe_int,
    reply_to_group_id=texts,
)
headers = st.builds(
    Header,
    durable=st.booleans(),
    priority=st.integers(0, 255),
    ttl=maybe_int,
    first_acquirer=st.booleans(),
    delivery_count=st.integers(0, 2**32 - 1),
)
messages = st.builds(
    Message,
    header=st.one_of(st.none(), headers),
    delivery_annotations=st.one_of(st.none(), st.dictionaries(keys, values, max_size=2)),
    message_annotations=st.one_of(st.none(), st.dictionaries(keys, values, max_size=4)),
    properties=st.one_of(st.none(), properties),
    application_properties=st.one_of(
        st.none(), st.dictionaries(st.text(max_size=8) | keys, values, max_size=6)
    ),
    footer=st.one_of(st.none(), st.dictionaries(keys, values, max_size=2)),
).flatmap(
    lambda m: st.one_of(
        st.lists(st.binary(max_size=300), max_size=3).map(lambda b: _body(m, b, "data")),
        st.lists(st.lists(scalars, max_size=3), min_size=1, max_size=2).map(
            lambda b: _body(m, b, "sequence")
        ),
        values.map(lambda b: _body(m, b, "value")),
    )
)


def _body(m: Message, body: Any, kind: str) -> Message:
    return dataclasses.replace(m, body=body, body_type=kind)


@given(messages)
def test_any_message_reads_as_the_general_decoder_reads_it(message):
    assert_same(encode_message(message))


@given(st.lists(st.binary(max_size=200), max_size=4))
def test_any_batch_splits_as_before(parts):
    data = encode_batch(parts)
    assert _read(data) is not None
    assert split_batch(data) == parts


@given(messages, st.integers(min_value=0, max_value=2_000), st.integers(0, 255))
def test_a_changed_byte_reads_as_the_general_decoder_reads_it(message, where, byte):
    data = bytearray(encode_message(message))
    if data:
        data[where % len(data)] = byte
    assert_same(bytes(data))


@given(messages, st.integers(min_value=0, max_value=2_000))
def test_a_truncated_message_reads_as_the_general_decoder_reads_it(message, cut):
    data = encode_message(message)
    assert_same(data[: cut % (len(data) + 1)])


@given(st.binary(max_size=120))
def test_garbage_reads_as_the_general_decoder_reads_it(data):
    assert_same(data)


@given(st.sampled_from(SDK_MESSAGES), st.integers(0, 2_000), st.integers(0, 255))
def test_a_changed_byte_of_an_sdk_message(sent, where, byte):
    data = bytearray(sdk_bytes(sent))
    data[where % len(data)] = byte
    assert_same(bytes(data))


def test_what_a_receiver_gets_reads_back_alike():
    sb = SbMessage(
        body=b"b",
        message_id="m",
        session_id="s",
        time_to_live=3.0,
        scheduled_enqueue_time=T0,
        partition_key="s",
        properties={"i": Int32(1), "l": 2, "t": dt.datetime.fromtimestamp(T0, dt.UTC)},
        extra={"amqp-header": {"durable": True, "priority": 4, "first_acquirer": False}},
    )
    stored = Stored(sb, sequence_number=3, enqueued_time=T0, state=MessageState.ACTIVE)
    data = to_amqp(stored, lock_token=uuid.UUID(int=9), locked_until=T0 + 30)
    assert _read(data) is not None
    assert_same(data)
    back = to_sb_message(data)
    assert back.properties == sb.properties and back.extra == sb.extra
    with contextlib.suppress(KeyError):
        del back.extra["amqp-properties"]  # the expiry the broker wrote
    assert (back.time_to_live, back.scheduled_enqueue_time, back.partition_key) == (3.0, T0, "s")
