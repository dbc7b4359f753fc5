"""What travels on a cluster channel: sequenced items carrying a publication or a proxy change.

Every item a node sends gets a key ``(epoch, seq)`` that only grows: ``epoch`` is the sending
node's incarnation (its store's start count, so it grows across restarts) and ``seq`` counts
items within it. The receiver remembers the highest key it applied per sender and drops any
item at or below it, so a batch resent after a reconnect is never delivered twice.

A persistent publication waiting on a channel is journaled as a message on the channel's
transmission queue ``SYSTEM.CLUSTER.TRANSMIT.<peer>`` with its routing data beside it (see
``stored_copy``), so it comes back after a restart and is sent again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cluster.channel import Key
from cluster.routing import Purpose
from qmgr.core.message import Message
from qmgr.core.values import Properties

XMITQ_PREFIX = "SYSTEM.CLUSTER.TRANSMIT."
XMIT_PROPERTY = "qmgr.xmit"
_META = json.JSONEncoder(separators=(",", ":"))  # one encoder, not one per json.dumps call
ROUTE_PROPERTY = "qmgr.route"
"""Property on delivered copies of a publication that came through the cluster: the queue
managers it passed through, origin first, this one last (comma-separated)."""

__all__ = [
    "ROUTE_PROPERTY",
    "XMITQ_PREFIX",
    "XMIT_PROPERTY",
    "Forwarded",
    "Item",
    "Key",
    "item_from_stored",
    "stored_copy",
    "xmitq",
]


def xmitq(peer: str) -> str:
    return XMITQ_PREFIX + peer


_ROUTE_ONLY: dict[str, Properties] = {}  # route text -> properties holding only it
_ROUTE_ONLY_MAX = 4096


def _route_only(route_text: str) -> Properties:
    """The properties of a delivered publication that had none: only ``ROUTE_PROPERTY``. One
    dict per route, shared by the messages that came that way (properties are never changed
    in place), so the store encodes it once for a run of them instead of once each."""
    props = _ROUTE_ONLY.get(route_text)
    if props is None:
        if len(_ROUTE_ONLY) >= _ROUTE_ONLY_MAX:
            _ROUTE_ONLY.clear()
        props = _ROUTE_ONLY[route_text] = {ROUTE_PROPERTY: route_text}
    return props


class Forwarded:
    """A publication sent to (or received from) a peer.

    A publication received from a peer keeps its wire form: a host that only passes it on
    sends that form again and never decodes the message (``message`` decodes on first use).
    One published here is encoded for the first peer it is sent to and keeps that form too, so
    the copies for the other peers (which share this object) copy it instead of encoding the
    message again.
    """

    __slots__ = (
        "topic",
        "route",
        "purpose",
        "retain",
        "group",
        "retained_copy",
        "persistent",
        "wire",
        "encoded",
        "_msg",
        "_decode",
    )

    def __init__(
        self,
        topic: str,
        message: Message | None,
        route: tuple[str, ...],
        purpose: Purpose,
        retain: bool = False,
        group: str = "",
        wire: Any = None,
        decode: Callable[[Any], Message] | None = None,
        persistent: bool | None = None,
        retained_copy: bool = False,
    ) -> None:
        self.topic = topic
        self.route = route
        self.purpose = purpose
        self.retain = retain
        self.group = group  # the clustered topic object (for re-driving to another host)
        # a retained publication sent by a topic host for a new proxy subscription, not a new
        # publication: it goes only to the receiver's subscriptions that do not have it yet
        self.retained_copy = retained_copy
        self.wire = wire
        self.encoded: bytes | None = None  # the message as sent on a channel, once encoded
        self._msg = message
        self._decode = decode
        if persistent is None:
            persistent = bool(message.persistent) if message is not None else False
        self.persistent = persistent

    @property
    def message(self) -> Message:
        if self._msg is None:
            assert self._decode is not None
            self._msg = self._decode(self.wire)
        return self._msg

    def delivered(self, route_text: str) -> Message:
        """The message delivered here: the publication with ``ROUTE_PROPERTY`` set to
        ``route_text``. One not decoded yet is decoded into it directly (one message and one
        property dict, not a decoded message and then a changed copy of it)."""
        if self._msg is None and self._decode is not None:
            msg = self._decode(self.wire)  # a message of its own: changed in place
            props = msg.properties
            msg.properties = (
                {**props, ROUTE_PROPERTY: route_text} if props else _route_only(route_text)
            )
            return msg
        msg = self.message
        props = msg.properties
        return msg.with_properties(
            {**props, ROUTE_PROPERTY: route_text} if props else _route_only(route_text)
        )

    def passed_on(self, route: tuple[str, ...], purpose: Purpose, group: str) -> Forwarded:
        """The same publication sent on by this node (wire form and encoding reused)."""
        passed = Forwarded(
            self.topic,
            self._msg,
            route,
            purpose,
            self.retain,
            group,
            wire=self.wire,
            decode=self._decode,
            persistent=self.persistent,
            retained_copy=self.retained_copy,
        )
        passed.encoded = self.encoded
        return passed


@dataclass(slots=True)
class Item:
    """One sequenced channel item: a publication or a proxy change (topic, add?)."""

    key: Key
    publication: Forwarded | None = None
    proxy: tuple[str, bool] | None = None
    sent: bool = False  # handed to the transport at least once (in doubt until acknowledged)
    stored: Message | None = field(default=None, repr=False)  # journaled copy on the xmitq
    # why a received item cannot be delivered: (MQRC reason name, text); it is dead-lettered
    problem: tuple[str, str] | None = None

    @property
    def persistent(self) -> bool:
        return self.stored is not None

    @property
    def counts(self) -> bool:
        return self.publication is not None


_Tail = tuple[tuple[str, ...], str, bool, str, bool]
_TAILS: dict[_Tail, str] = {}  # the routing data items share, encoded once
_TAILS_MAX = 4096


def _routing_text(item: Item) -> str:
    """The routing data of a publication item as stored: ``epoch,seq,`` then the JSON list
    ``[route, purpose, retain, group, retained_copy]``, which the items of one route share
    (encoded once, not once per item)."""
    pub = item.publication
    assert pub is not None
    key = (pub.route, pub.purpose.value, pub.retain, pub.group, pub.retained_copy)
    tail = _TAILS.get(key)
    if tail is None:
        if len(_TAILS) >= _TAILS_MAX:
            _TAILS.clear()
        tail = _TAILS[key] = _META.encode([list(key[0]), *key[1:]])
    return f"{item.key[0]},{item.key[1]},{tail}"


def stored_copy(item: Item, sequence: int) -> Message:
    """The message journaled on the transmission queue for a persistent publication item: the
    publication itself (its properties shared, not copied, so the store encodes them once for
    all the copies of a publication) with the topic string in ``topic`` and the routing data
    in ``sub_user_data`` (a transmission-queue copy has no subscriber). A publication received
    from a peer and not decoded here is decoded into the stored copy itself, nothing else."""
    pub = item.publication
    assert pub is not None
    if pub._msg is None and pub._decode is not None:
        stored = pub._decode(pub.wire)  # a message of its own: set in place
    else:
        msg = pub.message
        stored = msg.with_properties(msg.properties)
    stored.sequence = sequence
    stored.topic = pub.topic
    stored.sub_user_data = _routing_text(item)
    return stored


def item_from_stored(msg: Message) -> Item:
    """Rebuild a channel item from its journaled copy (after a restart); a copy stored before
    the routing data moved out of the properties carries it in the ``qmgr.xmit`` property."""
    if XMIT_PROPERTY in msg.properties:
        props = dict(msg.properties)
        meta = json.loads(str(props.pop(XMIT_PROPERTY)))
        epoch, seq, topic, route, purpose, retain, group = meta[:7]
        retained_copy = bool(meta[7]) if len(meta) > 7 else False
    else:
        props = msg.properties
        epoch, seq, tail = msg.sub_user_data.split(",", 2)
        route, purpose, retain, group, retained_copy = json.loads(tail)
        topic = msg.topic
    original = msg.copy(properties=props, topic="", sub_user_data="")
    pub = Forwarded(
        topic,
        original,
        tuple(route),
        Purpose(purpose),
        bool(retain),
        group,
        retained_copy=bool(retained_copy),
    )
    return Item((int(epoch), int(seq)), publication=pub, stored=msg)
