"""A channel batch laid out by ``ChannelEncoder`` is the request the protobuf runtime makes of
the same items: the same bytes when no properties are carried (map entries aside, whose order
no encoder fixes, the same request once parsed), the same items refused for values the wire
cannot carry, and a publication encoded once for every peer and resend."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.routing import Purpose
from qmgr.core.message import Message
from qmgr.core.values import Int32, Properties, PropertyValue
from qmgr.node.cluster.items import Forwarded, Item
from qmgr.rpc.peer_convert import item_from_wire, item_to_wire
from qmgr.rpc.peer_wire import ChannelEncoder, varint
from qmgr.wire import cluster_pb2 as cpb

_text = st.text(max_size=12)
_values: st.SearchStrategy[PropertyValue] = st.one_of(
    _text, st.integers(-(2**40), 2**40), st.binary(max_size=4), st.booleans()
)
_props = st.dictionaries(_text.filter(lambda k: k != "MQTopicString"), _values, max_size=3)


@st.composite
def _messages(draw: st.DrawFn) -> Message:
    put_time = draw(st.sampled_from([0.0, 1.5, 1_700_000_000.123, -2.0]))
    expiry = draw(st.one_of(st.none(), st.floats(0.0, 1e6).map(lambda t: put_time + t)))
    return Message(
        draw(st.sampled_from(["", "AB" * 24, "é"])),
        draw(st.binary(max_size=300)),
        draw(_props),
        draw(st.sampled_from([True, False, None])),
        draw(st.sampled_from([0, 4, 9, -1, 2**31 - 1, 2**31, 2**63])),
        0.0,
        expiry,
        draw(st.sampled_from([b"", b"c" * 24])),
        put_time,
        draw(st.sampled_from([0, 3, -1, 2**40])),
        draw(st.sampled_from(["", "RQ"])),
        topic=draw(st.sampled_from(["", "Prices/Gold"])),
    )


@st.composite
def _items(draw: st.DrawFn) -> list[Item]:
    out: list[Item] = []
    epoch = draw(st.sampled_from([0, 1, 300, 2**40]))
    seq = draw(st.integers(0, 2**20))
    for _ in range(draw(st.integers(0, 6))):
        seq += draw(st.integers(1, 200))
        if draw(st.booleans()):
            out.append(Item((epoch, seq), proxy=(draw(_text), draw(st.booleans()))))
            continue
        fwd = Forwarded(
            draw(st.sampled_from(["Prices/Gold", "", "é/x"])),
            draw(_messages()),
            tuple(draw(st.lists(st.sampled_from(["PUB1", "HOST1"]), max_size=3))),
            draw(st.sampled_from([Purpose.ROUTE, Purpose.DELIVER])),
            draw(st.booleans()),
            retained_copy=draw(st.booleans()),
        )
        out.append(Item((epoch, seq), publication=fwd))
    return out


def _runtime(items: list[Item]) -> tuple[cpb.ChannelRequest, list[Item]]:
    request = cpb.ChannelRequest()
    out = request.batch.items
    bad: list[Item] = []
    for item in items:
        try:
            item_to_wire(item, out.add())
        except (ValueError, OverflowError, TypeError):
            del out[-1]
            bad.append(item)
    return request, bad


def _fresh(items: list[Item]) -> list[Item]:
    for item in items:
        if item.publication is not None:
            item.publication.wire = item.publication.encoded = None
    return items


@settings(max_examples=300, deadline=None)
@given(_items())
def test_a_batch_is_the_request_the_runtime_makes(items: list[Item]) -> None:
    expected, refused = _runtime(_fresh(items))
    data, bad = ChannelEncoder().batch(_fresh(items))
    assert [item for item, _ in bad] == refused
    if not expected.batch.items:
        assert data is None
        return
    assert data is not None
    got = cpb.ChannelRequest.FromString(data)
    assert got == expected
    if not any(i.publication is not None and i.publication.message.properties for i in items):
        assert data == expected.SerializeToString()


def test_a_publication_is_encoded_once_for_every_peer_and_resend() -> None:
    props: Properties = {"k": Int32(1), "s": "v"}
    msg = Message("AB" * 24, b"held", props, True, 4, put_time=1.0)
    fwd = Forwarded("Prices/Gold", msg, ("PUB1",), Purpose.DELIVER)
    enc = ChannelEncoder()
    first, _ = enc.batch([Item((1, 1), publication=fwd)])
    kept = fwd.encoded
    assert kept is not None
    second, _ = ChannelEncoder().batch([Item((1, 2), publication=fwd)])
    assert fwd.encoded is kept
    assert first is not None and second is not None
    a, b = (cpb.ChannelRequest.FromString(d).batch.items[0] for d in (first, second))
    assert a.publication == b.publication
    assert item_from_wire(b).publication.message == msg  # type: ignore[union-attr]


def test_a_received_publication_is_passed_on_as_it_came() -> None:
    msg = Message("AB" * 24, b"held", {"k": "v"}, True, 4, 2.0, 3.0, b"c", 1.0, 1, "RQ")
    request, _ = _runtime([Item((1, 1), publication=Forwarded("T", msg, ("A",), Purpose.ROUTE))])
    received = item_from_wire(request.batch.items[0]).publication
    assert received is not None
    hop = received.passed_on(("A", "B"), Purpose.DELIVER, "")
    data, _ = ChannelEncoder().batch([Item((2, 5), publication=hop)])
    assert data is not None
    out = cpb.ChannelRequest.FromString(data).batch.items[0].publication
    assert out.message == request.batch.items[0].publication.message
    assert list(out.route) == ["A", "B"] and out.purpose == cpb.DELIVER


@given(st.integers(0, 2**64 - 1))
def test_varint(n: int) -> None:
    assert cpb.ChannelAck.FromString(b"\x08" + varint(n)).epoch == n
