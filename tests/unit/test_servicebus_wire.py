"""Service Bus messages and entities through their wire shapes: nothing lost, nothing added."""

from __future__ import annotations

import math
import uuid

import pytest

from qmgr.client.sbwire import (
    SbCounts,
    info_from_wire,
    info_to_wire,
    message_from_wire,
    message_to_wire,
    stored_from_wire,
    stored_to_wire,
)
from qmgr.core.values import Int32
from qmgr.servicebus.errors import Code, ServiceBusError
from qmgr.servicebus.message import MessageState, SbMessage, Stored
from qmgr.wire import servicebus_pb2 as pb


def test_a_message_keeps_which_fields_are_set_and_typed_properties() -> None:
    m = SbMessage(
        body=b"\x00body",
        message_id="",  # set, and empty: not the same as unset
        session_id="s1",
        subject="label",
        time_to_live=30.0,
        scheduled_enqueue_time=1_700_000_000.0,
        properties={
            "i": Int32(1),
            "l": 2**40,
            "f": 0.5,
            "b": False,
            "s": "x",
            "y": b"\x01",
            "n": None,
        },
    )
    back = message_from_wire(message_to_wire(m, pb.SbMessage()))
    assert back == m
    assert isinstance(back.properties["i"], Int32)
    plain = message_from_wire(message_to_wire(SbMessage(), pb.SbMessage()))
    assert plain == SbMessage() and plain.message_id is None and plain.time_to_live is None


def test_an_unsupported_property_type_is_a_bad_argument() -> None:
    with pytest.raises(ServiceBusError) as info:
        message_to_wire(SbMessage(properties={"when": object()}), pb.SbMessage())
    assert info.value.code is Code.BAD_ARGUMENT and "'when'" in info.value.text


def test_a_stored_message_round_trips() -> None:
    s = Stored(
        SbMessage(body=b"x", message_id="m"),
        sequence_number=12,
        enqueued_time=1_700_000_000.25,
        expires_at=math.inf,
        state=MessageState.DEFERRED,
        delivery_count=3,
        lock_token=uuid.uuid4(),
        locked_until=1_700_000_060.0,
        enqueued_sequence_number=4,
        hop_count=2,
        dead_letter_source="t/Subscriptions/s",
    )
    assert stored_from_wire(stored_to_wire(s, pb.SbStoredMessage())) == s


def test_entity_info_round_trips() -> None:
    counts = SbCounts(active=3, dead_lettered=1, deferred=2, message_count=6, rule_count=2)
    wire = info_to_wire(
        "subscription",
        "audit",
        {"LockDuration": "PT1M", "RequiresSession": False},
        topic="events",
        counts=counts,
        times=(1.0, 2.0, 3.0),
    )
    info = info_from_wire(wire)
    assert (info.kind, info.name, info.topic, info.subscription) == (
        "subscription",
        "audit",
        "events",
        None,
    )
    assert info.properties == {"LockDuration": "PT1M", "RequiresSession": False}
    assert info.counts == counts and info.path == "events/Subscriptions/audit"
    shown = info.to_dict()
    assert shown["counts"]["rule_count"] == 2 and "subscription_count" not in shown["counts"]
    assert (shown["createdAt"], shown["updatedAt"], shown["accessedAt"]) == (1.0, 2.0, 3.0)
