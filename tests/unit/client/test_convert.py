"""The SDK's conversions: publications encoded by a stream publisher's batch must encode
exactly as the general path does, and deliveries read through the consumer's view of the
schema must give the same messages as the generated classes do."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qmgr.client import convert, pubwire
from qmgr.client.types import Int32, OutgoingMessage
from qmgr.core.values import INT64_MAX, INT64_MIN, PropertyValue
from qmgr.wire import messages_pb2, messaging_pb2

property_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(INT64_MIN, INT64_MAX),
    st.integers(-(2**31), 2**31 - 1).map(Int32),
    st.floats(allow_nan=False),
    st.binary(max_size=40),
    st.text(max_size=40),
)
properties = st.dictionaries(st.text(min_size=1, max_size=12), property_values, max_size=4)


Body = bytes | str | OutgoingMessage
Props = dict[str, PropertyValue] | None


def general(topic: str, body: Body, props: Props, persistent: bool | None, retain: bool) -> bytes:
    out = messaging_pb2.Publication()
    convert.publication(topic, convert.outgoing(body, props, persistent), retain, False, out)
    return out.SerializeToString(deterministic=True)


def direct(topic: str, body: Body, props: Props, persistent: bool | None, retain: bool) -> bytes:
    batch = pubwire.BatchEncoder()
    batch.add(topic, body, props, persistent, retain)
    request = messaging_pb2.PublishRequest.FromString(batch.request(0))
    assert len(request.publications) == 1
    return request.publications[0].SerializeToString(deterministic=True)


@settings(max_examples=200, deadline=None)
@given(
    topic=st.text(min_size=1, max_size=20),
    body=st.one_of(st.binary(max_size=50), st.text(max_size=20)),
    props=st.one_of(st.none(), properties),
    persistent=st.one_of(st.none(), st.booleans()),
    retain=st.booleans(),
)
def test_a_publication_filled_in_directly_encodes_as_the_general_path(
    topic: str, body: bytes | str, props: Props, persistent: bool | None, retain: bool
) -> None:
    assert direct(topic, body, props, persistent, retain) == general(
        topic, body, props, persistent, retain
    )


def test_an_outgoing_message_keeps_its_own_fields() -> None:
    msg = OutgoingMessage(b"b", {"k": 1}, True, 7, 500, b"c", "ab" * 24, "REPLY.Q")
    assert direct("t", msg, None, None, False) == general("t", msg, None, None, False)


@pytest.mark.parametrize("bad", [{"": "x"}, {"k": 2**70}, {"k": object()}])
def test_a_property_that_cannot_be_carried_leaves_the_batch_as_it_was(
    bad: dict[str, PropertyValue],
) -> None:
    batch, alone = pubwire.BatchEncoder(), pubwire.BatchEncoder()
    for encoder in (batch, alone):
        encoder.add("t", b"first", None, None, False)
    with pytest.raises(ValueError):
        batch.add("t", b"second", bad, False, False)
    assert batch.request(3) == alone.request(3)


def wire_message(props: dict[str, PropertyValue], **fields: object) -> messages_pb2.Message:
    m = messages_pb2.Message(**fields)  # type: ignore[arg-type]
    for k, v in props.items():
        convert.value_to_wire(v, m.properties[k])
    return m


@settings(max_examples=200, deadline=None)
@given(
    messages=st.lists(
        st.tuples(
            properties,
            st.binary(max_size=30),
            st.sampled_from([0, messages_pb2.PERSISTENT, messages_pb2.NOT_PERSISTENT]),
            st.integers(-1, 9),
            st.integers(0, 2**40),
            st.text(max_size=10),
        ),
        max_size=5,
    )
)
def test_a_delivery_read_through_the_view_gives_the_same_messages(
    messages: list[tuple[dict[str, PropertyValue], bytes, int, int, int, str]],
) -> None:
    delivery = messaging_pb2.Delivery(subscription="S", sub_id="ID", queue="Q", size=10)
    for i, (props, body, persistence, priority, number, text) in enumerate(messages):
        delivery.messages.append(
            wire_message(
                props,
                message_id=f"{i:048x}",
                body=body,
                persistence=persistence,
                priority=priority,
                correl_id=body[:24],
                put_time_ms=number,
                backout_count=i,
                topic=text,
                sequence=number + 1,
                expiry_ms=number // 2,
                reply_to_queue=text,
            )
        )
    wire = convert.WireDelivery(delivery.SerializeToString())
    assert (wire.subscription, wire.sub_id, wire.queue, wire.size) == ("S", "ID", "Q", 10)
    expected = [convert.from_wire(m, 12.5) for m in delivery.messages]
    assert_same_messages(convert.received(wire.view.messages, 12.5), expected)
    assert_same_messages(convert.delivered(wire, 12.5), expected)


def assert_same_messages(
    got: list[convert.ReceivedMessage], expected: list[convert.ReceivedMessage]
) -> None:
    assert got == expected
    for g, e in zip(got, expected, strict=True):  # Int32 stays Int32, bool stays bool
        assert [type(v) for v in g.properties.values()] == [
            type(e.properties[k]) for k in g.properties
        ]
    assert len({id(g.properties) for g in got}) == len(got)  # each a dict of its own


# a message's fields, drawn from few values so that messages often share them (and the
# delivery is read by columns) or have them only in part (and it is not)
FIELD_VALUES: dict[str, st.SearchStrategy[object]] = {
    "message_id": st.sampled_from(["", "a" * 48, "b" * 48]),
    "body": st.binary(max_size=8),
    "persistence": st.sampled_from([0, messages_pb2.PERSISTENT, messages_pb2.NOT_PERSISTENT]),
    "priority": st.integers(-1, 2),
    "expiry_ms": st.integers(0, 2),
    "correl_id": st.sampled_from([b"", b"c" * 24]),
    "put_time_ms": st.integers(0, 2**40),
    "backout_count": st.integers(0, 2),
    "reply_to_queue": st.sampled_from(["", "R"]),
    "topic": st.sampled_from(["", "a/b", "\u00e9/c"]),
    "sequence": st.integers(0, 2**62),
}
few_properties: st.SearchStrategy[dict[str, PropertyValue]] = st.dictionaries(
    st.sampled_from(["k", "MQTopicString", "n"]),
    st.one_of(st.sampled_from(["v", "a/b"]), st.just(Int32(1)), st.just(1), st.just(True)),
    max_size=3,
)


@st.composite
def deliveries(draw: st.DrawFn) -> messaging_pb2.Delivery:
    """Deliveries whose messages have each field (and their properties) absent, alike, each
    their own, or (some deliveries) in some messages only."""
    count = draw(st.integers(0, 3 * convert.COLUMNS_FROM))
    rows: list[dict[str, object]] = [{} for _ in range(count)]
    # "own": each message a value of its own, not the default; "any": maybe the default
    hows = ["absent", "alike", "own"] + (["any"] if draw(st.booleans()) else [])
    for name, values in FIELD_VALUES.items():
        how = draw(st.sampled_from(hows))
        alike = draw(values)
        for row in rows:
            if how == "alike":
                row[name] = alike
            elif how != "absent":
                row[name] = draw(values.filter(bool) if how == "own" else values)
    how = draw(st.sampled_from(["none", "alike", "own"]))
    alike_props: dict[str, PropertyValue] = draw(st.one_of(properties, few_properties))
    delivery = messaging_pb2.Delivery(size=count)
    for row in rows:
        props: dict[str, PropertyValue] = (
            {} if how == "none" else alike_props if how == "alike" else draw(few_properties)
        )
        delivery.messages.append(wire_message(props, **row))
    return delivery


@settings(max_examples=300, deadline=None)
@given(delivery=deliveries())
def test_a_delivery_read_by_columns_gives_the_same_messages(
    delivery: messaging_pb2.Delivery,
) -> None:
    expected = [convert.from_wire(m, 3.0) for m in delivery.messages]
    got = convert.delivered(convert.WireDelivery(delivery.SerializeToString()), 3.0)
    assert_same_messages(got, expected)


def test_a_delivery_of_alike_messages_is_read_by_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    count = convert.COLUMNS_FROM
    delivery = messaging_pb2.Delivery(
        messages=[
            wire_message(
                {"MQTopicString": "a/b", "n": Int32(i % 2)},
                message_id=f"{i:048x}",
                body=b"x" * (i + 1),
                persistence=messages_pb2.PERSISTENT,
                put_time_ms=1000 + i,
                sequence=i + 1,
            )
            for i in range(count)
        ]
    )
    expected = [convert.from_wire(m, 1.0) for m in delivery.messages]

    def one_by_one(messages: object, received_at: float) -> list[convert.ReceivedMessage]:
        raise AssertionError("read one by one")

    monkeypatch.setattr(convert, "received", one_by_one)
    wire = convert.WireDelivery(delivery.SerializeToString())
    assert_same_messages(convert.delivered(wire, 1.0), expected)  # properties each their own
    for m in delivery.messages:
        del m.properties["n"]
    wire = convert.WireDelivery(delivery.SerializeToString())
    assert convert.delivered(wire, 1.0) == [convert.from_wire(m, 1.0) for m in delivery.messages]


def test_property_entries_are_cached_up_to_a_size() -> None:
    small = wire_message({"MQTopicString": "a/b"})
    large = wire_message({"big": "x" * (convert.ENTRY_CACHE_BYTES + 1)})
    delivery = messaging_pb2.Delivery(messages=[small, small, large])
    view = convert.DeliveryView.FromString(delivery.SerializeToString())
    first = convert.received(view.messages, 0.0)
    assert [m.properties for m in first] == [
        {"MQTopicString": "a/b"},
        {"MQTopicString": "a/b"},
        {"big": "x" * (convert.ENTRY_CACHE_BYTES + 1)},
    ]
    first[0].properties["changed"] = 1  # each message has a dict of its own
    assert first[1].properties == {"MQTopicString": "a/b"}
    assert convert.received(view.messages, 0.0)[0].properties == {"MQTopicString": "a/b"}
    assert all(len(raw) <= convert.ENTRY_CACHE_BYTES for raw in convert._ENTRY_CACHE)


def test_the_entry_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(convert, "ENTRY_CACHE_SIZE", 8)
    for i in range(50):
        delivery = messaging_pb2.Delivery(messages=[wire_message({"n": i})])
        view = convert.DeliveryView.FromString(delivery.SerializeToString())
        assert convert.received(view.messages, 0.0)[0].properties == {"n": i}
        assert len(convert._ENTRY_CACHE) <= 8


@pytest.mark.parametrize("values", [["a/b"] * 9, ["a/b"] * 8 + ["a/c"], ["a/c"] + ["a/b"] * 8])
def test_one_property_is_alike_only_when_every_message_has_it_the_same(values: list[str]) -> None:
    delivery = messaging_pb2.Delivery(
        messages=[wire_message({"MQTopicString": v}, sequence=i + 1) for i, v in enumerate(values)]
    )
    wire = convert.WireDelivery(delivery.SerializeToString())
    alike = len(set(values)) == 1
    assert wire.properties == ({"MQTopicString": "a/b"} if alike else None)
    got = convert.delivered(wire, 2.0)
    assert_same_messages(got, [convert.from_wire(m, 2.0) for m in delivery.messages])
