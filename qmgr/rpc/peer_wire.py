"""A cluster channel's batch encoded as the bytes of its ``ChannelRequest``.

Building a ``ChannelItem`` object per publication (setting its fields one call at a time,
then walking them all again to serialize the request) was most of what a sending channel
cost its node per publication. A publication's bytes are laid out here instead: what comes
before and after its message depends only on its topic and routing data (made once per
route and kept), its message is encoded once (and kept on the publication, so the copies for
other peers and a resend after a reconnect reuse it), and only the key is new per item. The
usual message (a publication this node accepted: id, body, text-free small fields) is laid
out field by field; one with properties has them encoded by the runtime once per property
set, and anything unusual (a delivered copy with a topic, values out of the plain ranges) is
built by ``peer_convert`` and serialized by the runtime, which raises on values the wire
cannot carry. The bytes are those the runtime makes of the same request (property map
entries aside, whose order no encoder fixes); the unit tests compare both.
"""

from __future__ import annotations

from collections.abc import Sequence

from cluster.routing import Purpose
from qmgr.client import pubwire
from qmgr.client.convert import value_to_wire
from qmgr.core.message import Message
from qmgr.core.values import Properties
from qmgr.node.cluster.items import Forwarded, Item
from qmgr.rpc.peer_convert import PURPOSE_TO_WIRE, item_to_wire, message_to_peer
from qmgr.wire import cluster_pb2 as cpb
from qmgr.wire import messages_pb2 as mpb

CACHE_SIZE = 1024  # routes and property sets kept (each cache starts again when full)

_REQUEST_BATCH = b"\x12"  # ChannelRequest.batch
_BATCH_ITEM = b"\x0a"  # ChannelBatch.items
_ITEM_EPOCH, _ITEM_SEQ, _ITEM_PUBLICATION = b"\x08", b"\x10", b"\x1a"
_PUB_TOPIC, _PUB_MESSAGE, _PUB_ROUTE = b"\x0a", b"\x12", b"\x1a"
_PUB_PURPOSE, _PUB_RETAIN, _PUB_RETAINED_COPY = b"\x20", b"\x28", b"\x30"
_PERSISTENT = b"\x20" + bytes([mpb.PERSISTENT])
_NOT_PERSISTENT = b"\x20" + bytes([mpb.NOT_PERSISTENT])
_PLAIN_MAX = 2**31 - 1  # int32 fields laid out here only from 0 to this (else the runtime)
_TIME_MAX = 2**63 - 1


def varint(n: int) -> bytes:
    """``n`` (not negative) as a protobuf varint: lengths and sequence numbers mostly fit one
    or two bytes, made without a loop."""
    if n < 0x80:
        return bytes((n,))
    if n < 0x4000:
        return bytes((n & 0x7F | 0x80, n >> 7))
    return pubwire.varint(n)


def _field(key: bytes, data: bytes) -> bytes:
    return key + varint(len(data)) + data


_Route = tuple[str, tuple[str, ...], bool, bool, bool]  # the purpose: ROUTE or not
_ROUTE = Purpose.ROUTE


class ChannelEncoder:
    """Encodes the batches of one channel (its caches live as long as the connection)."""

    def __init__(self) -> None:
        # (topic, route, purpose, retain, retained copy) -> (topic field, fields after the
        # message)
        self._routes: dict[_Route, tuple[bytes, bytes]] = {}
        self._props: Properties | None = None  # the property set last encoded, and its bytes
        self._props_bytes = b""
        self._put_ms = -1  # the put time last encoded (publications of a burst share it)
        self._put_bytes = b""
        self._epoch = -1  # the key's epoch last encoded (a channel's items share it), its field
        self._epoch_bytes = b""

    def batch(self, items: Sequence[Item]) -> tuple[bytes | None, list[tuple[Item, Exception]]]:
        """The request carrying ``items`` (None: none could be encoded) and the items left out
        because their values cannot be carried. Every piece is appended to one list, its
        enclosing lengths worked out from the pieces' lengths, and joined once."""
        parts: list[bytes] = []
        bad: list[tuple[Item, Exception]] = []
        routes = self._routes
        for item in items:
            pub = item.publication
            try:
                epoch, seq = item.key
                if epoch != self._epoch:
                    self._epoch = epoch
                    self._epoch_bytes = _ITEM_EPOCH + varint(epoch) if epoch else b""
                key = self._epoch_bytes + _ITEM_SEQ + varint(seq) if seq else self._epoch_bytes
                if pub is None:  # a proxy change: rare, the runtime's way
                    out = cpb.ChannelItem()
                    item_to_wire(item, out)
                    data = out.SerializeToString()
                    parts += (_BATCH_ITEM, varint(len(data)), data)
                    continue
                message = pub.encoded
                if message is None:
                    message = pub.encoded = self._message(pub)
            except (ValueError, OverflowError, TypeError) as exc:
                bad.append((item, exc))
                continue
            # the purpose as a bool: an enum member hashes in Python, the bool does not
            route = (pub.topic, pub.route, pub.purpose is _ROUTE, pub.retain, pub.retained_copy)
            around = routes.get(route)
            if around is None:
                around = self._route(route)
            topic, tail = around
            size = len(message)
            size_bytes = varint(size)
            body = len(topic) + 1 + len(size_bytes) + size + len(tail)
            body_bytes = varint(body)
            whole = len(key) + 1 + len(body_bytes) + body
            parts += (
                _BATCH_ITEM,
                varint(whole),
                key,
                _ITEM_PUBLICATION,
                body_bytes,
                topic,
                _PUB_MESSAGE,
                size_bytes,
                message,
                tail,
            )
        if not parts:
            return None, bad
        batch = b"".join(parts)
        return _REQUEST_BATCH + varint(len(batch)) + batch, bad

    def _route(self, route: _Route) -> tuple[bytes, bytes]:
        topic, hops, to_host, retain, retained_copy = route
        out = cpb.ForwardedPublication(
            route=hops,
            purpose=PURPOSE_TO_WIRE[Purpose.ROUTE if to_host else Purpose.DELIVER],
            retain=retain,
            retained_copy=retained_copy,
        )
        around = (_field(_PUB_TOPIC, topic.encode()) if topic else b"", out.SerializeToString())
        if len(self._routes) >= CACHE_SIZE:
            self._routes.clear()
        self._routes[route] = around
        return around

    def _message(self, pub: Forwarded) -> bytes:
        """The bytes of ``pub``'s message as a peer reads it."""
        if pub.wire is not None:  # received from a peer: its wire form again
            return bytes(pub.wire.SerializeToString())
        msg = pub.message
        plain = self._plain(msg)
        if plain is not None:
            return plain
        out = mpb.Message()
        message_to_peer(msg, out)
        return bytes(out.SerializeToString())

    def _plain(self, msg: Message) -> bytes | None:
        """``msg`` laid out field by field, or None when it is not the usual kind."""
        if msg.topic:
            return None
        message_id, body = msg.message_id, msg.body
        if type(message_id) is not str or type(body) is not bytes:
            return None
        priority, backout = msg.priority, msg.backout_count
        if not (0 <= priority <= _PLAIN_MAX and 0 <= backout <= _PLAIN_MAX):
            return None
        parts = [_field(b"\x0a", message_id.encode()) if message_id else b""]
        if body:
            parts += (b"\x12", varint(len(body)), body)
        props = msg.properties
        if props:
            if props is not self._props:
                wire = mpb.Message()
                entries = wire.properties
                for name, value in props.items():
                    value_to_wire(value, entries[name])
                self._props_bytes = wire.SerializeToString()
                self._props = props
            parts.append(self._props_bytes)
        parts.append(_PERSISTENT if msg.persistent else _NOT_PERSISTENT)
        if priority:
            parts += (b"\x28", varint(priority))
        if msg.expiry is not None:
            expiry_ms = max(1, int((msg.expiry - msg.put_time) * 1000))
            if expiry_ms > _TIME_MAX:
                return None
            parts += (b"\x30", varint(expiry_ms))
        if msg.correl_id:
            if type(msg.correl_id) is not bytes:
                return None
            parts.append(_field(b"\x3a", msg.correl_id))
        put_ms = int(msg.put_time * 1000)
        if put_ms:
            if not 0 < put_ms <= _TIME_MAX:
                return None
            if put_ms != self._put_ms:
                self._put_ms, self._put_bytes = put_ms, b"\x40" + varint(put_ms)
            parts.append(self._put_bytes)
        if backout:
            parts += (b"\x48", varint(backout))
        if msg.reply_to_queue:
            parts.append(_field(b"\x52", msg.reply_to_queue.encode()))
        return b"".join(parts)
