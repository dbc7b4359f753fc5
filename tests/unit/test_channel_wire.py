"""A channel batch written as bytes (``qmgr.rpc.channel_wire``) parses to the same
``ChannelRequest`` as the protobuf runtime builds (``runtime_item``, the mapping written with
the runtime's fields), for every kind of item
a node sends: publications accepted here (with or without properties of every kind, expiry,
CorrelId, reply-to queue, backout count, a delivered copy's topic), publications received from
a peer and passed on, routes, purposes, retained publications and retained copies, and proxy
changes; an item the wire cannot carry is left out of the batch, as before."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.routing import Purpose
from qmgr.core.message import Message
from qmgr.node.cluster.items import Forwarded, Item
from qmgr.rpc.channel_wire import encode_batch
from qmgr.rpc.peer_convert import message_from_peer, message_to_peer
from qmgr.wire import cluster_pb2 as cpb
from qmgr.wire import messages_pb2 as mpb
from tests.unit.test_delivery_wire import messages

# what an item is made of: (key, topic, message, route, purpose, retain, retained_copy,
# received) for a publication, (key, topic, add) for a proxy change
publication = st.tuples(
    st.sampled_from(["Prices/Gold", "é/ü"]),
    messages(),
    st.sampled_from([("PUB1",), ("PUB1", "HOST1"), ("Q" * 48,)]),
    st.sampled_from([Purpose.ROUTE, Purpose.DELIVER]),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
proxy = st.tuples(st.sampled_from(["Prices/#", "a"]), st.booleans())


def build(spec: list[tuple[Any, ...]]) -> list[Item]:
    """Fresh items (encoding caches a publication's form in it) sharing nothing."""
    items = []
    forwarded: dict[int, Forwarded] = {}
    for i, part in enumerate(spec):
        key = (3, 100 + i * 300)  # one- and two-byte sequence numbers
        if len(part) == 2:
            items.append(Item(key, proxy=part))
            continue
        topic, msg, route, purpose, retain, retained_copy, received = part
        msg = msg.copy()
        if received:  # as a host holds it: the peer's wire form, not decoded
            wire = mpb.Message()
            message_to_peer(msg, wire)
            fwd = Forwarded(
                topic,
                None,
                route,
                purpose,
                retain,
                "",
                wire,
                message_from_peer,
                msg.persistent,
                retained_copy,
            )
        else:
            fwd = Forwarded(topic, msg, route, purpose, retain, retained_copy=retained_copy)
        # the next item carries the same publication to another peer, as a fan-out does
        shared = forwarded.get(i - 1)
        if shared is not None and i % 3 == 0:
            fwd = shared
        forwarded[i] = fwd
        items.append(Item(key, publication=fwd))
    return items


PURPOSES = {Purpose.ROUTE: cpb.ROUTE, Purpose.DELIVER: cpb.DELIVER}


def runtime_item(item: Item, out: cpb.ChannelItem) -> None:
    """``item`` into ``out`` with the protobuf runtime: the form the receiver parses."""
    out.epoch, out.seq = item.key
    pub = item.publication
    if pub is not None:
        wire = out.publication
        wire.topic = pub.topic
        if isinstance(pub.wire, mpb.Message):
            wire.message.CopyFrom(pub.wire)
        else:
            message_to_peer(pub.message, wire.message)
        wire.route.extend(pub.route)
        wire.purpose = PURPOSES[pub.purpose]
        wire.retain = pub.retain
        wire.retained_copy = pub.retained_copy
    elif item.proxy is not None:
        out.proxy.topic, out.proxy.add = item.proxy


def by_the_runtime(items: list[Item]) -> tuple[cpb.ChannelRequest, list[Item]]:
    request = cpb.ChannelRequest()
    bad = []
    for item in items:
        out = request.batch.items.add()
        try:
            runtime_item(item, out)
        except (ValueError, OverflowError, TypeError):
            del request.batch.items[-1]
            bad.append(item)
    return request, bad


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(publication, proxy), min_size=1, max_size=6))
def test_a_batch_as_bytes_parses_to_the_request_the_runtime_builds(
    spec: list[tuple[Any, ...]],
) -> None:
    expected, refused = by_the_runtime(build(spec))
    items = build(spec)
    data, bad = encode_batch(items)
    assert [items.index(item) for item, _ in bad] == [
        i for i, item in enumerate(build(spec)) if item.key in {r.key for r in refused}
    ]
    if data is None:
        assert not expected.batch.items
    else:
        assert cpb.ChannelRequest.FromString(data) == expected


def test_an_item_the_wire_cannot_carry_is_left_out_with_its_error() -> None:
    good = Message("AB" * 24, b"x", {"n": 1}, False, 0, put_time=1.0)
    big = good.copy(properties={"n": 2**63})
    items = [
        Item((1, 1), publication=Forwarded("T", good, ("PUB1",), Purpose.DELIVER)),
        Item((1, 2), publication=Forwarded("T", big, ("PUB1",), Purpose.DELIVER)),
        Item((1, 3), proxy=("T", True)),
    ]
    data, bad = encode_batch(items)
    assert [(item.key, type(exc)) for item, exc in bad] == [((1, 2), ValueError)]
    assert data is not None
    assert [i.seq for i in cpb.ChannelRequest.FromString(data).batch.items] == [1, 3]
    data, bad = encode_batch(items[1:2])
    assert data is None and [item.key for item, _ in bad] == [(1, 2)]
