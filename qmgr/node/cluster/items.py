"""What travels on a cluster channel: sequenced items carrying a publication or a proxy change.

Every item a node sends gets a key ``(epoch, seq)`` that only grows: ``epoch`` is the sending
node's incarnation (its store's start count, so it grows across restarts) and ``seq`` counts
items within it. The receiver remembers the highest key it applied per sender and drops any
item at or below it, so a batch resent after a reconnect is never delivered twice.

A persistent publication waiting on a channel is journaled on the channel's transmission queue
``SYSTEM.CLUSTER.TRANSMIT.<peer>`` as a copy (``Journal.copy_added``): the message as the channel
carries it (its wire form, serialized), the topic, and the routing data (``routing_text``). So
it comes back after a restart and is sent again (``item_from_copy``), and storing it never
decodes the message nor encodes a store header from one: a topic host passing a publication
on stores what it received, and the publishing node what it sends anyway.

Copies stored by earlier versions are whole messages (``item_from_stored`` reads them): the
publication with the topic in ``topic`` and the routing data in ``sub_user_data``, or, earlier
still, with the routing data in the ``qmgr.xmit`` property. A node upgraded with such items in
doubt sends them after its restart like any other.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cluster.channel import Key
from cluster.routing import Purpose
from qmgr.core.journal import StoredCopy
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
    "item_from_copy",
    "item_from_stored",
    "routing_text",
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
        """The same publication sent on by this node (wire form reused)."""
        return Forwarded(
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


@dataclass(slots=True)
class Item:
    """One sequenced channel item: a publication or a proxy change (topic, add?)."""

    key: Key
    publication: Forwarded | None = None
    proxy: tuple[str, bool] | None = None
    sent: bool = False  # handed to the transport at least once (in doubt until acknowledged)
    stored: int | None = None  # sequence of its copy on the transmission queue (persistent)
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


def routing_text(item: Item) -> str:
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


def _item(
    routing: str,
    topic: str,
    message: Message | None,
    stored: int,
    wire: Any = None,
    decode: Callable[[Any], Message] | None = None,
) -> Item:
    """The item whose routing data is ``routing`` (``routing_text``), its copy stored with
    sequence ``stored``."""
    try:
        epoch, seq, tail = routing.split(",", 2)
        route, purpose, retain, group, retained_copy = json.loads(tail)
        key = (int(epoch), int(seq))
        pub = Forwarded(
            topic,
            message,
            tuple(route),
            Purpose(purpose),
            bool(retain),
            group,
            wire,
            decode,
            True,
            bool(retained_copy),
        )
    except (ValueError, TypeError) as exc:
        raise ValueError(f"transmission-queue copy {stored}: unreadable routing data") from exc
    return Item(key, publication=pub, stored=stored)


def item_from_copy(copy: StoredCopy, wire: Any, decode: Callable[[Any], Message]) -> Item:
    """Rebuild a channel item from its copy on a transmission queue (after a restart): ``wire``
    is the copy's body read back into the channel's message, sent again as it is; ``decode``
    makes a ``Message`` of it only if this node needs one (to dead-letter it)."""
    return _item(copy.routing, copy.topic, None, copy.sequence, wire, decode)


def item_from_stored(msg: Message) -> Item:
    """Rebuild a channel item from a copy stored as a whole message by an earlier version (see
    the module docstring): routing data in ``sub_user_data``, or in the ``qmgr.xmit``
    property."""
    if XMIT_PROPERTY not in msg.properties:
        original = msg.copy(topic="", sub_user_data="")
        return _item(msg.sub_user_data, msg.topic, original, msg.sequence)
    props = dict(msg.properties)
    meta = json.loads(str(props.pop(XMIT_PROPERTY)))
    epoch, seq, topic, route, purpose, retain, group = meta[:7]
    retained_copy = bool(meta[7]) if len(meta) > 7 else False
    original = msg.copy(properties=props, topic="", sub_user_data="")
    pub = Forwarded(
        topic,
        original,
        tuple(route),
        Purpose(purpose),
        bool(retain),
        group,
        retained_copy=retained_copy,
    )
    return Item((int(epoch), int(seq)), publication=pub, stored=msg.sequence)
