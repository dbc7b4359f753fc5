"""The store's row codec and its group coalescing, as pure functions: binary headers keep
every field and property type, JSON headers of older rows still read, a damaged header says
which message it is, and a group leaves out exactly the messages it both adds and removes."""

from __future__ import annotations

from typing import Any

import pytest

from qmgr.core.message import Message
from qmgr.core.values import Int32, Properties
from qmgr.store.codec import (
    FORMAT_VERSION,
    HeaderError,
    decode_message,
    decode_properties,
    encode_header,
    encode_json_header,
    encode_properties,
)
from qmgr.store.sqlite import Op, runs, transient_messages

EVERY_KIND: Properties = {
    "i32": Int32(-(2**31)),
    "i64": 2**62,
    "neg": -5,
    "f": -0.25,
    "t": True,
    "fa": False,
    "s": "zürich ✓",
    "empty": "",
    "raw": b"\x00\xff",
    "n": None,
}


def _message(**changes: Any) -> Message:
    base = Message(
        "414d5120514d312020202020202020",
        b"\x00body",
        EVERY_KIND,
        True,
        7,
        expiry=1.8e9 + 0.5,
        correl_id=b"\x01" * 24,
        put_time=1.7e9 + 0.125,
        backout_count=3,
        reply_to_queue="REPLY.Q",
        topic="Price/Fruit/Apple",
        sub_user_data="user ✓",
        retained=True,
        sequence=42,
    )
    return base.copy(**changes)


@pytest.mark.parametrize(
    "msg",
    [
        _message(),
        _message(expiry=None, retained=False, properties={}, correl_id=b"", topic=""),
        _message(priority=-1, backout_count=2**40, expiry=0.0),
    ],
)
def test_a_binary_header_brings_every_field_back(msg: Message) -> None:
    header = encode_header(msg)
    assert isinstance(header, bytes) and header[0] == FORMAT_VERSION
    back = decode_message(msg.sequence, msg.message_id, msg.body, header)
    assert back == msg
    for name, value in back.properties.items():
        assert type(value) is type(msg.properties[name])


def test_a_shared_encoding_of_properties_gives_the_same_header() -> None:
    msg = _message()
    assert encode_header(msg, encode_properties(msg.properties)) == encode_header(msg)


def test_integers_beyond_64_bits_still_round_trip() -> None:
    props: Properties = {"big": 2**70, "small": -(2**70)}
    assert decode_properties(encode_properties(props)) == props


def test_a_json_header_of_an_older_row_reads_the_same() -> None:
    msg = _message()
    old = encode_json_header(msg)
    assert isinstance(old, str) and old.startswith("{")
    back = decode_message(msg.sequence, msg.message_id, msg.body, old)
    assert back == decode_message(msg.sequence, msg.message_id, msg.body, encode_header(msg))
    assert isinstance(back.properties["i32"], Int32)


@pytest.mark.parametrize(
    "header",
    [
        b"",
        bytes([FORMAT_VERSION + 1]) + bytes(60),
        encode_header(_message())[:-3],
        encode_header(_message()) + b"x",
        "{not json",
        '{"p": []}',
    ],
)
def test_a_damaged_header_is_a_clear_error_naming_the_message(header: bytes | str) -> None:
    with pytest.raises(HeaderError, match=r"message 9 \(m9\): unreadable header"):
        decode_message(9, "m9", b"", header)


def test_a_property_of_an_unsupported_type_is_refused() -> None:
    with pytest.raises(TypeError, match="property x: unsupported type list"):
        encode_properties({"x": [1]})  # type: ignore[dict-item]


def _add(seq: int) -> Op:
    return ("add", (seq, "Q", f"m{seq}", b"", b""))


def _del(seq: int) -> Op:
    return ("del", (seq,))


def test_a_message_added_and_removed_in_one_group_is_left_out() -> None:
    ops = [_add(11), _add(12), _del(11), ("save", ("queue", "Q", "{}")), _del(5)]
    skip, top, others = transient_messages(ops, written_seq=10)
    assert skip == {0, 2}  # 11: never written, so its removal goes too; 5 may be on disk
    assert top == 12 and others
    assert runs(ops, skip) == [
        ("add", [ops[1][1]]),
        ("save", [ops[3][1]]),
        ("del", [(5,)]),
    ]


def test_a_removal_of_a_sequence_that_may_be_on_disk_stays() -> None:
    # a message put back on its queue (re-added under its old sequence), then got again
    ops = [_del(7), _add(7), ("upd", (b"", 7)), _del(7)]
    skip, top, others = transient_messages(ops, written_seq=10)
    assert skip == {1} and top == 10 and others
    assert [kind for kind, _ in runs(ops, skip)] == ["del", "upd", "del"]


def test_every_add_of_a_sequence_goes_with_its_removal() -> None:
    ops = [_add(20), _add(20), _del(20), _add(20)]
    skip, top, others = transient_messages(ops, written_seq=10)
    assert skip == {0, 1, 2} and top == 20 and not others
    assert runs(ops, skip) == [("add", [ops[3][1]])]


def test_runs_keep_the_order_of_kinds() -> None:
    ops = [_add(1), _add(2), _del(0), _add(3)]
    assert [(k, len(rows)) for k, rows in runs(ops, set())] == [("add", 2), ("del", 1), ("add", 1)]
