"""What travels on a cluster channel: sequenced items carrying a publication or a proxy change.

Every item a node sends gets a key ``(epoch, seq)`` that only grows: ``epoch`` is the sending
node's incarnation (its store's start count, so it grows across restarts) and ``seq`` counts
items within it. The receiver remembers the highest key it applied per sender and drops any
item at or below it, so a batch resent after a reconnect is never delivered twice.

A persistent publication waiting on a channel is journaled as a message on the channel's
transmission queue ``SYSTEM.CLUSTER.TRANSMIT.<peer>`` with its routing data in one property, so
it comes back after a restart and is sent again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cluster.channel import Key
from cluster.routing import Purpose
from qmgr.core.message import Message

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


class Forwarded:
    """A publication sent to (or received from) a peer.

    A publication received from a peer keeps its wire form: a host that only passes it on
    sends that form again and never decodes the message (``message`` decodes on first use).
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
        *,
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
    stored: Message | None = field(default=None, repr=False)  # journaled copy on the xmitq
    # why a received item cannot be delivered: (MQRC reason name, text); it is dead-lettered
    problem: tuple[str, str] | None = None

    @property
    def persistent(self) -> bool:
        return self.stored is not None

    @property
    def counts(self) -> bool:
        return self.publication is not None


def stored_copy(item: Item, sequence: int) -> Message:
    """The message journaled on the transmission queue for a persistent publication item."""
    pub = item.publication
    assert pub is not None
    meta = [
        item.key[0],
        item.key[1],
        pub.topic,
        list(pub.route),
        pub.purpose.value,
        pub.retain,
        pub.group,
        pub.retained_copy,
    ]
    props = dict(pub.message.properties)
    props[XMIT_PROPERTY] = _META.encode(meta)
    # once per persistent item sent: with_properties and two fields set, not copy()'s
    # generic replace (half the cost of this function)
    stored = pub.message.with_properties(props)
    stored.sequence = sequence
    stored.topic = ""
    return stored


def item_from_stored(msg: Message) -> Item:
    """Rebuild a channel item from its journaled copy (after a restart)."""
    props = dict(msg.properties)
    meta = json.loads(str(props.pop(XMIT_PROPERTY)))
    epoch, seq, topic, route, purpose, retain, group = meta[:7]
    retained_copy = bool(meta[7]) if len(meta) > 7 else False
    original = msg.copy(properties=props)
    pub = Forwarded(
        topic,
        original,
        tuple(route),
        Purpose(purpose),
        bool(retain),
        group,
        retained_copy=retained_copy,
    )
    return Item((int(epoch), int(seq)), publication=pub, stored=msg)
