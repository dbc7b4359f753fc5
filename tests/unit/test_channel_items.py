"""A retained copy a topic host sends for a proxy subscription stays marked as one on the wire
and on the transmission queue (so after a restart it is still not a new publication); a stored
transmission-queue copy keeps the publication's properties as they are and comes back as the
same item, and copies stored in the earlier form (routing data in a property) still load."""

from __future__ import annotations

import json
from pathlib import Path

from cluster.routing import Purpose
from qmgr.core.message import Message
from qmgr.core.values import Int32, Properties
from qmgr.node.cluster.items import (
    XMIT_PROPERTY,
    Forwarded,
    Item,
    item_from_stored,
    stored_copy,
)
from qmgr.rpc.channel_wire import encode_batch
from qmgr.rpc.peer_convert import item_from_wire
from qmgr.wire import cluster_pb2 as cpb


def _item(retained_copy: bool) -> Item:
    msg = Message("AB" * 24, b"held", {"k": 1}, True, 4, put_time=1.0)
    fwd = Forwarded(
        "Prices/Gold", msg, ("HOSTA1",), Purpose.DELIVER, True, retained_copy=retained_copy
    )
    return Item((3, 7), publication=fwd)


def _on_wire(item: Item) -> cpb.ChannelItem:
    """``item`` as a channel batch carries it to the peer."""
    data, bad = encode_batch([item])
    assert data is not None and not bad
    return cpb.ChannelRequest.FromString(data).batch.items[0]


def _legacy(item: Item, sequence: int, fields: int) -> Message:
    """A stored copy as written before the routing data left the properties."""
    pub = item.publication
    assert pub is not None
    meta = [*item.key, pub.topic, list(pub.route), pub.purpose.value, pub.retain, pub.group]
    meta += [pub.retained_copy]
    props = {**pub.message.properties, XMIT_PROPERTY: json.dumps(meta[:fields])}
    return pub.message.copy(properties=props, sequence=sequence, topic="")


def test_retained_copy_mark_survives_the_transmission_queue() -> None:
    for mark in (True, False):
        back = item_from_stored(stored_copy(_item(mark), 11))
        assert back.publication is not None
        assert back.publication.retained_copy is mark and back.publication.retain
        assert back.publication.message.body == b"held" and back.key == (3, 7)


def test_retained_copy_mark_travels_on_the_wire() -> None:
    for mark in (True, False):
        back = item_from_wire(_on_wire(_item(mark)))
        assert back.publication is not None and back.publication.retained_copy is mark


def test_a_stored_item_from_before_the_mark_is_a_plain_publication() -> None:
    back = item_from_stored(_legacy(_item(True), 11, 7))
    assert back.publication is not None and not back.publication.retained_copy


def test_a_stored_item_of_the_earlier_form_loads() -> None:
    item = _item(True)
    back = item_from_stored(_legacy(item, 11, 8))
    assert back.key == (3, 7) and back.publication is not None
    pub = back.publication
    assert (pub.topic, pub.route, pub.purpose, pub.retain, pub.retained_copy) == (
        "Prices/Gold",
        ("HOSTA1",),
        Purpose.DELIVER,
        True,
        True,
    )
    assert pub.message.properties == {"k": 1}


def test_the_stored_copy_shares_the_properties_and_comes_back_unchanged() -> None:
    props: Properties = {"k": 1, "n": Int32(5), "s": "x,y", "b": b"\x00", "f": 1.5, "t": True}
    props["z"] = None
    msg = Message("CD" * 24, b"body", props, True, 3, ttl=5.0, expiry=6.0, put_time=1.0)
    msg.correl_id, msg.reply_to_queue = b"c" * 24, "REPLY.Q"
    route = ("PUB1", "HOST1")
    fwd = Forwarded("Prices/a,b [x]", msg, route, Purpose.ROUTE, False, "PRICES")
    stored = stored_copy(Item((9, 12), publication=fwd), 40)
    assert stored.properties is props and stored.sequence == 40
    back = item_from_stored(stored)
    assert back.key == (9, 12) and back.stored is stored and back.publication is not None
    pub = back.publication
    assert (pub.topic, pub.route, pub.purpose, pub.retain, pub.group) == (
        "Prices/a,b [x]",
        route,
        Purpose.ROUTE,
        False,
        "PRICES",
    )
    assert pub.message == msg.copy(sequence=40)


def test_a_publication_received_from_a_peer_is_stored_from_its_wire_form() -> None:
    received = item_from_wire(_on_wire(_item(False)))
    assert received.publication is not None
    passed = received.publication.passed_on(("HOSTA1", "HOSTB1"), Purpose.DELIVER, "")
    stored = stored_copy(Item((4, 1), publication=passed), 3)
    assert passed._msg is None  # not decoded for the transmission queue
    back = item_from_stored(stored)
    assert back.publication is not None
    assert back.publication.message.properties == {"k": 1}
    assert back.publication.route == ("HOSTA1", "HOSTB1") and back.key == (4, 1)


def test_a_stored_copy_comes_back_from_the_store(tmp_path: Path) -> None:
    from qmgr.store.sqlite import SqliteStore

    msg = Message("EF" * 24, b"body", {"k": Int32(2), "s": "v"}, True, 5, put_time=2.0)
    fwd = Forwarded("Prices/Gold", msg, ("PUB1", "HOST1"), Purpose.DELIVER, True, "PRICES")
    store = SqliteStore(tmp_path)
    store.message_added("SYSTEM.CLUSTER.TRANSMIT.SUB1", stored_copy(Item((2, 5), fwd), 8))
    store.commit(store.take()[0])
    store.close()
    store = SqliteStore(tmp_path)
    [(queue, loaded)] = store.load().messages
    store.close()
    back = item_from_stored(loaded)
    assert queue == "SYSTEM.CLUSTER.TRANSMIT.SUB1" and back.key == (2, 5)
    assert back.publication is not None and back.publication.group == "PRICES"
    assert back.publication.message == msg.copy(sequence=8)


def test_a_message_reaches_a_peer_as_written_for_an_application() -> None:
    from qmgr.rpc.convert import message_to_wire
    from qmgr.rpc.peer_convert import message_from_peer, message_to_peer
    from qmgr.wire import messages_pb2 as mpb

    props: Properties = {"i": Int32(-3), "l": 2**40, "s": "é", "b": b"\x01", "f": 0.5}
    props["n"] = None
    plain = Message("01" * 24, b"", {}, False, 0, put_time=1.5)
    full = Message("02" * 24, b"x" * 10, props, True, 7, 2.0, 3.5, b"c" * 24, 1.5, 2, "RQ")
    delivered = full.copy(topic="Prices/Gold", sub_user_data="u", retained=True)
    for msg in (plain, full, delivered):
        lean, whole = mpb.Message(), mpb.Message()
        message_to_peer(msg, lean)
        message_to_wire(msg, whole)
        assert message_from_peer(lean) == message_from_peer(whole)


def test_a_publication_sent_to_several_peers_is_encoded_once() -> None:
    msg = Message("AB" * 24, b"held", {"k": 1}, True, 4, put_time=1.0)
    fwd = Forwarded("Prices/Gold", msg, ("PUB1",), Purpose.DELIVER)
    first = _on_wire(Item((1, 1), publication=fwd))
    encoded = fwd.encoded
    assert encoded is not None and fwd.message is msg  # kept, not decoded again
    second = _on_wire(Item((1, 2), publication=fwd))
    assert fwd.encoded is encoded
    assert first.publication == second.publication
    assert item_from_wire(second).publication.message == msg  # type: ignore[union-attr]
    passed = fwd.passed_on(("PUB1", "HOST1"), Purpose.DELIVER, "")
    assert passed.encoded is encoded  # a host sends on the bytes it has
