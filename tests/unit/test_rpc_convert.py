"""Messages as the Messaging service encodes them for consumers (``qmgr.rpc.convert``)."""

from __future__ import annotations

import pytest

from qmgr.core.message import Message, SharedEncoding
from qmgr.core.values import Int32, Properties
from qmgr.rpc.convert import add_delivery, message_from_wire, message_to_wire
from qmgr.wire import messages_pb2 as mpb
from qmgr.wire import messaging_pb2 as pb

PROPS: Properties = {"i": Int32(-3), "l": 2**40, "s": "é", "b": b"\x01", "f": 0.5, "n": None}


def _copies(props: Properties, topic: str, user_data: str, retained: bool) -> list[Message]:
    """Three copies of one publication, as the publish/subscribe engine makes them."""
    shared = SharedEncoding()
    out = []
    for i in range(3):
        msg = Message("0A" * 24, b"body", props, True, 4, 3.0, 1_700_000_003.25, b"c" * 24)
        msg.put_time, msg.backout_count, msg.reply_to_queue = 1_700_000_000.5, i, "RQ"
        msg.topic, msg.sub_user_data, msg.retained = topic, user_data, retained
        msg.sequence, msg.shared = 10 + i, shared
        out.append(msg)
    return out


@pytest.mark.parametrize("props", [{}, PROPS])
@pytest.mark.parametrize("topic", ["", "Prices/Gold"])
@pytest.mark.parametrize(("user_data", "retained"), [("", False), ("u", True)])
def test_every_copy_is_encoded_as_the_whole_message(
    props: Properties, topic: str, user_data: str, retained: bool
) -> None:
    delivery = pb.Delivery(queue="Q")
    for msg in _copies(props, topic, user_data, retained):
        encoded = add_delivery(delivery.messages, msg)
        assert encoded == message_to_wire(msg, mpb.Message())
    assert len(delivery.messages) == 3
    back = pb.Delivery.FromString(delivery.SerializeToString())
    assert [m.sequence for m in back.messages] == [10, 11, 12]
    assert [m.backout_count for m in back.messages] == [0, 1, 2]


def test_a_copy_carries_the_publication_properties() -> None:
    (msg, *_) = _copies({"k": "v"}, "Prices/Gold", "u", True)
    encoded = add_delivery(pb.Delivery().messages, msg)
    assert dict(encoded.properties) == {
        "k": mpb.Value(string_value="v"),
        "MQTopicString": mpb.Value(string_value="Prices/Gold"),
        "MQSubUserData": mpb.Value(string_value="u"),
        "MQIsRetained": mpb.Value(bool_value=True),
    }
    assert encoded.topic == "Prices/Gold" and encoded.expiry_ms == 2750


def test_an_application_message_decodes_to_its_fields() -> None:
    wire = mpb.Message(
        message_id="0B" * 24,
        body=b"x",
        persistence=mpb.PERSISTENT,
        priority=-1,
        expiry_ms=1500,
        correl_id=b"c",
        reply_to_queue="RQ",
        topic="ignored",
        sequence=99,
    )
    wire.properties["k"].int32_value = 7
    msg = message_from_wire(wire)
    assert msg == Message("0B" * 24, b"x", {"k": Int32(7)}, True, -1, 1.5, None, b"c", 0.0, 0, "RQ")
    plain = message_from_wire(mpb.Message(persistence=mpb.PERSISTENCE_AS_DEFAULT))
    assert plain.persistent is None and plain.ttl == 0.0 and plain.properties == {}
