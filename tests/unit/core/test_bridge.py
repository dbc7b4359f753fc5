"""The pure side of bridges: definitions and the MQ <-> Service Bus message mapping."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from qmgr.core.bridge import (
    AMQP_HEADER,
    BridgeDef,
    check_topic,
    subscription_name,
    to_mq,
    to_servicebus,
)
from qmgr.core.errors import MQError
from qmgr.core.message import Message
from qmgr.core.values import Int32
from qmgr.servicebus.message import SbMessage, Stored


def _publication(**changes: object) -> Message:
    msg = Message(
        message_id="414243" + "0" * 42,
        body=b"payload",
        properties={
            "Region": "EU",
            "N": 7,
            "Price": 1.5,
            "Hot": True,
            "Raw": b"\x01",
            "Gone": None,
        },
        persistent=True,
        topic="Prices/Fruit",
        reply_to_queue="REPLY.Q",
    )
    return msg.copy(**changes)


def test_mq_to_servicebus_maps_body_properties_topic_and_id() -> None:
    sb = to_servicebus(_publication(), now=100.0)
    assert sb.body == b"payload" and sb.body_type == "data"
    assert sb.subject == "Prices/Fruit"
    assert sb.properties == {
        "Region": "EU",
        "N": 7,
        "Price": 1.5,
        "Hot": True,
        "Raw": b"\x01",
        "MQTopicString": "Prices/Fruit",
    }
    assert sb.message_id == "414243" + "0" * 42
    assert sb.reply_to == "REPLY.Q"
    assert sb.session_id is None and sb.time_to_live is None
    assert sb.extra[AMQP_HEADER]["durable"] is True


def test_the_message_id_is_the_same_for_every_copy_of_one_publication() -> None:
    first = to_servicebus(_publication(sequence=5), now=1.0)
    again = to_servicebus(_publication(sequence=99, backout_count=1), now=2.0)
    assert first.message_id == again.message_id


def test_non_persistent_is_not_durable_and_remaining_ttl_is_kept() -> None:
    sb = to_servicebus(_publication(persistent=False, expiry=130.0), now=100.0)
    assert sb.extra[AMQP_HEADER]["durable"] is False
    assert sb.time_to_live == pytest.approx(30.0)
    late = to_servicebus(_publication(expiry=99.0), now=100.0)
    assert late.time_to_live is not None and late.time_to_live > 0


@pytest.mark.parametrize(
    ("value", "session"),
    [
        ("p1", "p1"),
        (42, "42"),
        (True, "true"),
        (b"\xab", "ab"),
        (None, None),
        ("x" * 200, "x" * 128),
    ],
)
def test_sessprop_value_becomes_the_session_id(value: object, session: str | None) -> None:
    msg = _publication(properties={"LoadPublisher": value})
    assert to_servicebus(msg, sessprop="LoadPublisher", now=0.0).session_id == session


def test_a_missing_sessprop_property_sends_without_a_session() -> None:
    assert to_servicebus(_publication(), sessprop="Nope", now=0.0).session_id is None


def _stored(sb: SbMessage, **changes: object) -> Stored:
    stored = Stored(sb, sequence_number=12, enqueued_time=1_700_000_000.0)
    for k, v in changes.items():
        setattr(stored, k, v)
    return stored


def test_servicebus_to_mq_maps_properties_and_system_properties() -> None:
    when = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    sb = SbMessage(
        body=b"order",
        message_id="o1",
        correlation_id="c1",
        session_id="s1",
        subject="NewOrder",
        reply_to="replies",
        properties={
            "Customer": "c1",
            "Amount": Int32(5),
            "When": when,
            "Wait": dt.timedelta(seconds=90),
            "Huge": 2**70,
            "bad-name": 1,
            "MQReserved": "x",
            "MQTopicString": "Somewhere/Else",
            "NServiceBus.EnclosedMessageTypes": "Orders.Placed",
        },
    )
    inbound = to_mq(_stored(sb), now=0.0)
    msg = inbound.message
    assert msg.body == b"order" and msg.persistent is True and msg.message_id == ""
    assert msg.reply_to_queue == "replies" and msg.ttl == 0.0
    assert msg.properties == {
        "Customer": "c1",
        "Amount": 5,
        "When": when.isoformat(),
        "Wait": 90.0,
        "Huge": str(2**70),
        "NServiceBus.EnclosedMessageTypes": "Orders.Placed",
        "SbMessageId": "o1",
        "SbCorrelationId": "c1",
        "SbSessionId": "s1",
        "SbSubject": "NewOrder",
        "SbSequenceNumber": 12,
        "SbEnqueuedTime": 1_700_000_000.0,
    }
    assert inbound.dropped == ("bad-name", "MQReserved")


def test_servicebus_expiry_becomes_the_remaining_time_to_live() -> None:
    stored = _stored(SbMessage(body=b"x"), expires_at=160.0)
    assert to_mq(stored, now=100.0).message.ttl == pytest.approx(60.0)
    assert to_mq(_stored(SbMessage(body=b"x"), expires_at=math.inf), now=0.0).message.ttl == 0.0


def test_definitions_round_trip_and_name_their_subscription() -> None:
    bridge = BridgeDef("B1", "TOSB", "Prices/#", "prices", "LoadPublisher", "d", 1.0, 2.0)
    assert BridgeDef.from_dict(bridge.to_dict()) == bridge
    assert BridgeDef.from_dict({**bridge.to_dict(), "future": 1}) == bridge
    assert bridge.subscription == subscription_name("B1") == "SYSTEM.BRIDGE.B1"
    with pytest.raises(MQError):
        BridgeDef("B2", "SIDEWAYS", "A", "q")  # type: ignore[arg-type]


def test_a_fromsb_bridge_publishes_on_a_topic_without_wildcards() -> None:
    check_topic(BridgeDef("B", "TOSB", "A/#", "t"))
    check_topic(BridgeDef("B", "FROMSB", "A/B#", "q"))  # '#' mixed into a level is a literal
    for topic in ("A/#", "+/B", "#"):
        with pytest.raises(MQError) as err:
            check_topic(BridgeDef("B", "FROMSB", topic, "q"))
        assert err.value.reason_name == "MQRC_TOPIC_STRING_ERROR"
