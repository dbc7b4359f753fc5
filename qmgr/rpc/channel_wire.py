"""A cluster channel's batches written straight as protobuf bytes.

A batch carries up to hundreds of publications. Built with the protobuf runtime, each costs a
Python-level object per item and per message, a field assignment per value, and a copy of the
message for every further peer it goes to. This module writes the ``ChannelRequest`` bytes
itself: each publication's message is encoded once (``Forwarded.encoded``) and shared by the
items that carry it to several peers, and a publication received from a peer and passed on is
sent as the bytes of the message it came in. The route and purpose of the items of one route
are encoded once per batch. The bytes parse to the same ``ChannelRequest`` as the protobuf
runtime builds from the items (a property test checks it), and ``peer_convert.item_from_wire``
reads them; a value the wire cannot carry raises ``ValueError`` as the runtime would.
"""

from __future__ import annotations

from collections.abc import Sequence

from cluster.routing import Purpose
from qmgr.core.message import Message
from qmgr.node.cluster.items import Forwarded, Item
from qmgr.rpc.convert import expiry_ms
from qmgr.rpc.delivery_wire import shared_fields, text_field, varint
from qmgr.rpc.peer_convert import message_to_peer
from qmgr.wire import cluster_pb2 as cpb
from qmgr.wire import messages_pb2 as mpb

# ChannelRequest.batch, ChannelBatch.items; ChannelItem's fields
_BATCH, _ITEM = b"\x12", b"\x0a"
_EPOCH, _SEQ, _PUBLICATION, _PROXY = b"\x08", b"\x10", b"\x1a", b"\x22"
# ForwardedPublication's fields
_TOPIC, _MESSAGE, _ROUTE, _PURPOSE = b"\x0a", b"\x12", b"\x1a", b"\x20"
_RETAIN, _RETAINED_COPY = b"\x28\x01", b"\x30\x01"
# ProxyChange's fields
_PROXY_TOPIC, _ADD = b"\x0a", b"\x10\x01"
# Message's fields a copy has of its own (the shared ones: delivery_wire.shared_fields)
_PRIORITY, _EXPIRY, _CORREL, _PUT_TIME, _BACKOUT = b"\x28", b"\x30", b"\x3a", b"\x40", b"\x48"


def message_bytes(msg: Message) -> bytes:
    """``msg`` (a publication this queue manager accepted) as ``message_to_peer`` writes it."""
    if msg.topic:  # publication data of a delivered copy: written whole, as for an application
        out = mpb.Message()
        message_to_peer(msg, out)
        return out.SerializeToString()
    parts = [shared_fields(msg)]  # id, body, properties, persistence, reply-to queue
    if msg.priority:
        parts += (_PRIORITY, varint(msg.priority))
    if msg.expiry is not None:
        parts += (_EXPIRY, varint(expiry_ms(msg)))
    correl_id = msg.correl_id
    if correl_id:
        parts += (_CORREL, varint(len(correl_id)), correl_id)
    parts += (_PUT_TIME, varint(int(msg.put_time * 1000)))
    if msg.backout_count:
        parts += (_BACKOUT, varint(msg.backout_count))
    return b"".join(parts)


def _message(pub: Forwarded) -> bytes:
    """The publication's message, encoded once for every item that carries it."""
    data = pub.encoded
    if data is None:
        wire = pub.wire
        if isinstance(wire, mpb.Message):  # received from a peer: its own bytes again
            data = wire.SerializeToString()
        else:
            data = message_bytes(pub.message)
        pub.encoded = data
    return data


_PURPOSE_FIELDS = {
    Purpose.ROUTE: _PURPOSE + varint(cpb.ROUTE),
    Purpose.DELIVER: _PURPOSE + varint(cpb.DELIVER),
}


def _tail(pub: Forwarded) -> bytes:
    """A publication's route, purpose and flags (shared by the items of one route)."""
    parts = [text_field(_ROUTE, hop) for hop in pub.route]
    parts.append(_PURPOSE_FIELDS[pub.purpose])
    if pub.retain:
        parts.append(_RETAIN)
    if pub.retained_copy:
        parts.append(_RETAINED_COPY)
    return b"".join(parts)


def _item(item: Item, tails: dict[tuple[object, ...], bytes]) -> bytes:
    epoch, seq = item.key
    head = _EPOCH + varint(epoch) + _SEQ + varint(seq)
    pub = item.publication
    if pub is not None:
        key = (pub.route, pub.purpose, pub.retain, pub.retained_copy)
        tail = tails.get(key)
        if tail is None:
            tail = tails[key] = _tail(pub)
        message = _message(pub)
        body = b"".join(
            (
                text_field(_TOPIC, pub.topic),
                _MESSAGE,
                varint(len(message)),
                message,
                tail,
            )
        )
        return b"".join((head, _PUBLICATION, varint(len(body)), body))
    if item.proxy is not None:
        topic, add = item.proxy
        body = text_field(_PROXY_TOPIC, topic) + (_ADD if add else b"")
        return b"".join((head, _PROXY, varint(len(body)), body))
    return head


def encode_batch(items: Sequence[Item]) -> tuple[bytes | None, list[tuple[Item, Exception]]]:
    """The ``ChannelRequest`` carrying ``items`` as one batch (None when none can be
    encoded), and the items left out because they cannot be, with why."""
    tails: dict[tuple[object, ...], bytes] = {}
    parts: list[bytes] = []
    bad: list[tuple[Item, Exception]] = []
    for item in items:
        try:
            data = _item(item, tails)
        except (ValueError, OverflowError, TypeError) as exc:
            bad.append((item, exc))
            continue
        parts += (_ITEM, varint(len(data)), data)
    if not parts:
        return None, bad
    batch = b"".join(parts)
    return b"".join((_BATCH, varint(len(batch)), batch)), bad
