"""A retained copy a topic host sends for a proxy subscription stays marked as one on the wire
and on the transmission queue (so after a restart it is still not a new publication)."""

from __future__ import annotations

from cluster.routing import Purpose
from qmgr.core.message import Message
from qmgr.node.cluster.items import Forwarded, Item, item_from_stored, stored_copy
from qmgr.rpc.peer_convert import item_from_wire, item_to_wire
from qmgr.wire import cluster_pb2 as cpb


def _item(retained_copy: bool) -> Item:
    msg = Message("AB" * 24, b"held", {"k": 1}, True, 4, put_time=1.0)
    fwd = Forwarded(
        "Prices/Gold", msg, ("HOSTA1",), Purpose.DELIVER, True, retained_copy=retained_copy
    )
    return Item((3, 7), publication=fwd)


def test_retained_copy_mark_survives_the_transmission_queue() -> None:
    for mark in (True, False):
        back = item_from_stored(stored_copy(_item(mark), 11))
        assert back.publication is not None
        assert back.publication.retained_copy is mark and back.publication.retain
        assert back.publication.message.body == b"held" and back.key == (3, 7)


def test_retained_copy_mark_travels_on_the_wire() -> None:
    for mark in (True, False):
        out = cpb.ChannelItem()
        item_to_wire(_item(mark), out)
        back = item_from_wire(out)
        assert back.publication is not None and back.publication.retained_copy is mark


def test_a_stored_item_from_before_the_mark_is_a_plain_publication() -> None:
    stored = stored_copy(_item(True), 11)
    props = dict(stored.properties)
    meta = str(props["qmgr.xmit"])
    props["qmgr.xmit"] = meta[: meta.rindex(",")] + "]"  # the 7-field form
    back = item_from_stored(stored.copy(properties=props))
    assert back.publication is not None and not back.publication.retained_copy
