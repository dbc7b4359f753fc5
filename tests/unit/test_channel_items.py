"""Channel items on the wire and on the transmission queue.

A retained copy a topic host sends for a proxy subscription stays marked as one on the wire and
on the transmission queue (so after a restart it is still not a new publication). A persistent
item is stored as a copy of its wire form: the publishing node stores what it sends, a topic
host what it received (never decoding it), the copies of one publication for several peers
share one serialization, and a copy comes back as an item that puts the same publication on
the wire. Copies stored by earlier versions as whole messages (routing data in
``sub_user_data``, or earlier in a property) still load, beside new ones.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.routing import Purpose
from qmgr.core.journal import Journal, NullJournal, StoredCopy
from qmgr.core.message import Message
from qmgr.core.values import Int32, Properties
from qmgr.node.cluster.items import XMIT_PROPERTY, Forwarded, Item, routing_text
from qmgr.node.cluster.outbound import ChannelManager, Identity
from qmgr.rpc.peer_client import Dialer
from qmgr.rpc.peer_convert import (
    item_from_wire,
    item_to_wire,
    message_from_peer,
    message_to_peer,
    stored_item,
)
from qmgr.store.sqlite import SqliteStore
from qmgr.wire import cluster_pb2 as cpb
from qmgr.wire import messages_pb2 as mpb

XMITQ = "SYSTEM.CLUSTER.TRANSMIT."


class _Copies(NullJournal):
    """A journal that keeps the copies added, as the store gives them back."""

    def __init__(self) -> None:
        self.copies: list[tuple[str, StoredCopy]] = []

    def copy_added(
        self, queue: str, sequence: int, message_id: str, body: bytes, topic: str, routing: str
    ) -> None:
        self.copies.append((queue, StoredCopy(sequence, message_id, body, topic, routing)))


def _manager(journal: Journal, *peers: str, epoch: int = 3, first: int = 1) -> ChannelManager:
    """Channels that queue items and send nothing (stopped: no task of their own); the copies
    stored get sequences from ``first`` on."""
    seq = iter(range(first, 1_000_000))
    manager = ChannelManager(
        Identity("HOST1", "127.0.0.1:1", "C"),
        journal,
        epoch,
        lambda: next(seq),
        lambda peer: None,
        lambda peer: (),
        lambda peer, status, reason: None,
        _never,
        lambda peer, item, reason, text: None,
        cast(Dialer, None),
    )
    for peer in peers:
        manager.channel(peer).stopped = True
    return manager


async def _never() -> None:
    raise AssertionError("nothing is committed here")


def _on_wire(item: Item) -> cpb.ChannelItem:
    out = cpb.ChannelItem()
    item_to_wire(item, out)
    return out


def _fwd(retained_copy: bool = False) -> Forwarded:
    msg = Message("AB" * 24, b"held", {"k": 1}, True, 4, put_time=1.0)
    return Forwarded(
        "Prices/Gold", msg, ("HOSTA1",), Purpose.DELIVER, True, retained_copy=retained_copy
    )


def _item(retained_copy: bool) -> Item:
    return Item((3, 7), publication=_fwd(retained_copy))


def _legacy(item: Item, sequence: int, fields: int) -> Message:
    """A copy as the earliest versions stored it: the routing data in a property."""
    pub = item.publication
    assert pub is not None
    meta = [*item.key, pub.topic, list(pub.route), pub.purpose.value, pub.retain, pub.group]
    meta += [pub.retained_copy]
    props = {**pub.message.properties, XMIT_PROPERTY: json.dumps(meta[:fields])}
    return pub.message.copy(properties=props, sequence=sequence, topic="")


def _previous_form(item: Item, sequence: int) -> Message:
    """A copy as the version before the wire form stored it: the whole publication with the
    topic in ``topic`` and the routing data in ``sub_user_data``."""
    pub = item.publication
    assert pub is not None
    return pub.message.copy(sequence=sequence, topic=pub.topic, sub_user_data=routing_text(item))


def test_retained_copy_mark_survives_the_transmission_queue() -> None:
    for mark in (True, False):
        journal = _Copies()
        sent = _manager(journal, "SUB1").send_publication("SUB1", _fwd(mark))
        [(queue, copy)] = journal.copies
        back = stored_item(copy)
        assert queue == XMITQ + "SUB1" and back.key == sent.key and back.stored == sent.stored
        assert back.publication is not None
        assert back.publication.retained_copy is mark and back.publication.retain
        assert back.publication.message.body == b"held"


def test_retained_copy_mark_travels_on_the_wire() -> None:
    for mark in (True, False):
        back = item_from_wire(_on_wire(_item(mark)))
        assert back.publication is not None and back.publication.retained_copy is mark


def test_a_stored_item_from_before_the_mark_is_a_plain_publication() -> None:
    back = stored_item(_legacy(_item(True), 11, 7))
    assert back.publication is not None and not back.publication.retained_copy


def test_a_stored_item_of_the_earliest_form_loads() -> None:
    item = _item(True)
    back = stored_item(_legacy(item, 11, 8))
    assert back.key == (3, 7) and back.stored == 11 and back.publication is not None
    pub = back.publication
    assert (pub.topic, pub.route, pub.purpose, pub.retain, pub.retained_copy) == (
        "Prices/Gold",
        ("HOSTA1",),
        Purpose.DELIVER,
        True,
        True,
    )
    assert pub.message.properties == {"k": 1}
    assert _on_wire(back) == _on_wire(item)


def test_a_publication_published_here_is_encoded_once_for_its_copies_and_channels() -> None:
    props: Properties = {"k": 1, "n": Int32(5), "s": "x,y", "b": b"\x00", "f": 1.5, "t": True}
    props["z"] = None
    msg = Message("CD" * 24, b"body", props, True, 3, ttl=5.0, expiry=6.0, put_time=1.0)
    msg.correl_id, msg.reply_to_queue = b"c" * 24, "REPLY.Q"
    fwd = Forwarded("Prices/a,b [x]", msg, ("PUB1",), Purpose.ROUTE, False, "PRICES")
    journal = _Copies()
    manager = _manager(journal, "HOST1", "HOST2")
    items = [manager.send_publication(peer, fwd) for peer in ("HOST1", "HOST2")]
    expected = mpb.Message()
    message_to_peer(msg, expected)
    assert fwd.wire == expected and fwd.message is msg  # encoded once, kept for the channel
    (_, first), (_, second) = journal.copies
    assert first.body is second.body and first.message_id == msg.message_id
    assert [c.sequence for _, c in journal.copies] == [i.stored for i in items]
    for item, (_, copy) in zip(items, journal.copies, strict=True):
        back = stored_item(copy)
        assert back.key == item.key and back.publication is not None
        pub = back.publication
        assert (pub.topic, pub.route, pub.purpose, pub.retain, pub.group) == (
            "Prices/a,b [x]",
            ("PUB1",),
            Purpose.ROUTE,
            False,
            "PRICES",
        )
        assert _on_wire(back) == _on_wire(item)
        assert pub.message == message_from_peer(expected)


def test_a_publication_received_from_a_peer_is_stored_from_its_wire_form() -> None:
    received = item_from_wire(_on_wire(_item(False)))
    assert received.publication is not None
    journal = _Copies()
    manager = _manager(journal, "SUB1", "SUB2")
    sent = [
        manager.send_publication(
            peer, received.publication.passed_on(("HOSTA1", "HOSTB1"), Purpose.DELIVER, "")
        )
        for peer in ("SUB1", "SUB2")
    ]
    for item in sent:
        assert item.publication is not None and item.publication._msg is None  # not decoded
    (_, first), (_, second) = journal.copies
    assert first.body is second.body  # serialized once for both
    assert first.body == received.publication.wire.SerializeToString()
    for item, (_, copy) in zip(sent, journal.copies, strict=True):
        back = stored_item(copy)
        assert back.publication is not None
        assert back.publication.message.properties == {"k": 1}
        assert back.publication.route == ("HOSTA1", "HOSTB1") and back.key == item.key
        assert _on_wire(back) == _on_wire(item)


def test_a_non_persistent_publication_stores_nothing() -> None:
    journal = _Copies()
    msg = Message("AB" * 24, b"np", {}, False)
    item = _manager(journal, "SUB1").send_publication(
        "SUB1", Forwarded("T", msg, ("PUB1",), Purpose.DELIVER)
    )
    assert journal.copies == [] and item.stored is None and not item.persistent


def test_rows_of_every_form_come_back_from_the_store(tmp_path: Path) -> None:
    """A node upgraded with items of the earlier forms on a transmission queue, and new items
    beside them: every one loads as the item it was."""
    queue = XMITQ + "SUB1"
    msg = Message("EF" * 24, b"body", {"k": Int32(2), "s": "v"}, True, 5, put_time=2.0)
    oldest = Item((1, 4), publication=_fwd())
    previous = Item(
        (2, 5), Forwarded("Prices/Gold", msg, ("PUB1", "HOST1"), Purpose.DELIVER, True, "PRICES")
    )
    store = SqliteStore(tmp_path)
    store.message_added(queue, _legacy(oldest, 1, 8))
    store.message_added(queue, _previous_form(previous, 2))
    manager = _manager(store, "SUB1", epoch=4, first=3)
    fresh = [
        manager.send_publication("SUB1", Forwarded("Prices/Gold", msg, ("PUB1",), p))
        for p in Purpose
    ]
    store.commit(store.take()[0])
    store.close()
    store = SqliteStore(tmp_path)
    loaded = store.load()
    store.close()
    assert [(q, m.sequence) for q, m in loaded.messages] == [(queue, 1), (queue, 2)]
    assert [(q, c.sequence) for q, c in loaded.copies] == [(queue, 3), (queue, 4)]
    rows = [stored for _, stored in loaded.messages] + [copy for _, copy in loaded.copies]
    back = [stored_item(row) for row in rows]
    assert [(i.key, i.stored) for i in back] == [
        ((1, 4), 1),
        ((2, 5), 2),
        (fresh[0].key, 3),
        (fresh[1].key, 4),
    ]
    for restored, original in zip(back, [oldest, previous, *fresh], strict=True):
        assert _on_wire(restored) == _on_wire(original)
    assert back[1].publication is not None and back[1].publication.group == "PRICES"
    assert back[1].publication.message == msg.copy(sequence=2)


def test_a_damaged_copy_is_a_clear_error_naming_it() -> None:
    journal = _Copies()
    _manager(journal, "SUB1").send_publication("SUB1", _fwd())
    [(_, copy)] = journal.copies
    with pytest.raises(ValueError, match=f"transmission-queue copy {copy.sequence}"):
        stored_item(StoredCopy(copy.sequence, "m", b"\xff\xff", copy.topic, copy.routing))
    with pytest.raises(ValueError, match=f"transmission-queue copy {copy.sequence}: unreadable"):
        stored_item(StoredCopy(copy.sequence, "m", copy.body, copy.topic, "1,2,[nope"))


_text = st.text(max_size=30)
_props = st.dictionaries(
    st.text(min_size=1, max_size=10),
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.integers(-(2**31), 2**31 - 1).map(Int32)
    | st.floats(allow_nan=False)
    | st.binary(max_size=20)
    | _text,
    max_size=5,
)


@settings(max_examples=150, deadline=None)
@given(
    topic=st.text(min_size=1, max_size=30),
    body=st.binary(max_size=60),
    props=_props,
    priority=st.integers(0, 9),
    ttl=st.integers(0, 10_000),
    correl=st.binary(max_size=24),
    reply_to=_text,
    route=st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=4),
    purpose=st.sampled_from(list(Purpose)),
    retain=st.booleans(),
    group=_text,
    retained_copy=st.booleans(),
    received=st.booleans(),
)
def test_any_persistent_publication_comes_back_from_its_copy_as_it_was_sent(
    topic: str,
    body: bytes,
    props: Properties,
    priority: int,
    ttl: int,
    correl: bytes,
    reply_to: str,
    route: list[str],
    purpose: Purpose,
    retain: bool,
    group: str,
    retained_copy: bool,
    received: bool,
) -> None:
    msg = Message("AB" * 24, body, props, True, priority, ttl / 10, None, correl, 1.5)
    msg.reply_to_queue = reply_to
    if ttl:
        msg.expiry = msg.put_time + msg.ttl
    fwd = Forwarded(topic, msg, tuple(route), purpose, retain, group, retained_copy=retained_copy)
    if received:  # a topic host passing on what it received
        got = item_from_wire(_on_wire(Item((1, 1), publication=fwd))).publication
        assert got is not None
        fwd = got.passed_on(tuple(route), purpose, group)
    journal = _Copies()
    item = _manager(journal, "SUB1").send_publication("SUB1", fwd)
    [(_, copy)] = journal.copies
    back = stored_item(copy)
    assert back.key == item.key and back.stored == item.stored and back.persistent
    assert _on_wire(back) == _on_wire(item)
    assert back.publication is not None
    assert back.publication.message == message_from_peer(_on_wire(item).publication.message)
