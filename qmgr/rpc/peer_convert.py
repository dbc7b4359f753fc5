"""Channel items and repository results to and from the wire (node-to-node traffic)."""

from __future__ import annotations

from cluster.repository import ApplyResult, ErrorCode, RepoError
from cluster.routing import Purpose
from qmgr.client.convert import value_from_wire
from qmgr.core.message import MAX_PRIORITY, Message
from qmgr.core.values import Properties
from qmgr.node.cluster.items import Forwarded, Item
from qmgr.rpc.convert import message_to_wire
from qmgr.wire import cluster_pb2 as cpb
from qmgr.wire import messages_pb2 as mpb

_PURPOSE_TO_WIRE = {Purpose.ROUTE: cpb.ROUTE, Purpose.DELIVER: cpb.DELIVER}
_PURPOSE_FROM_WIRE = {cpb.ROUTE: Purpose.ROUTE, cpb.DELIVER: Purpose.DELIVER}

MAX_EXPIRY_MS = (2**31 - 1) * 100  # MQ's Expiry is an MQLONG in tenths of a second
MAX_PUT_TIME_MS = 253_402_300_799_999  # the end of year 9999


class ChannelInputError(ValueError):
    """Channel input that cannot be taken at all: the stream ends with INVALID_ARGUMENT."""


def message_problem(m: mpb.Message) -> tuple[str, str] | None:
    """Why a message received from a peer cannot be delivered (MQ reason name, text), if so:
    a forged or broken sender may send values a queue manager never accepts."""
    if not 0 <= m.priority <= MAX_PRIORITY:
        return "MQRC_PRIORITY_ERROR", f"priority {m.priority} is not 0-9"
    if not 0 <= m.expiry_ms <= MAX_EXPIRY_MS:
        return "MQRC_EXPIRY_ERROR", f"expiry {m.expiry_ms} ms is out of range"
    if not 0 <= m.put_time_ms <= MAX_PUT_TIME_MS or m.backout_count < 0:
        return "MQRC_MD_ERROR", "put time or backout count out of range"
    return None


def message_from_peer(m: mpb.Message) -> Message:
    """A message as another queue manager accepted it: id, time, expiry and defaults kept.
    Values out of range (see ``message_problem``; such a message is only dead-lettered) are
    replaced by defaults."""
    props: Properties = {}
    if m.properties:
        props = {k: value_from_wire(v) for k, v in m.properties.items() if k != "MQTopicString"}
    put_time = min(max(m.put_time_ms, 0), MAX_PUT_TIME_MS) / 1000.0
    expiry_ms = m.expiry_ms if 0 < m.expiry_ms <= MAX_EXPIRY_MS else 0
    ttl = expiry_ms / 1000.0
    return Message(
        message_id=m.message_id,
        body=m.body,
        properties=props,
        persistent=m.persistence == mpb.PERSISTENT,
        priority=m.priority if 0 <= m.priority <= MAX_PRIORITY else 0,
        ttl=ttl,
        expiry=put_time + ttl if expiry_ms > 0 else None,
        correl_id=m.correl_id,
        put_time=put_time,
        reply_to_queue=m.reply_to_queue,
    )


def item_to_wire(item: Item, out: cpb.ChannelItem) -> None:
    out.epoch, out.seq = item.key
    if item.publication is not None:
        pub = item.publication
        wire = out.publication
        wire.topic = pub.topic
        if pub.wire is not None:
            wire.message.CopyFrom(pub.wire)
        else:
            message_to_wire(pub.message, wire.message)
        wire.route.extend(pub.route)
        wire.purpose = _PURPOSE_TO_WIRE[pub.purpose]
        wire.retain = pub.retain
        wire.retained_copy = pub.retained_copy
    elif item.proxy is not None:
        out.proxy.topic, out.proxy.add = item.proxy


def item_from_wire(w: cpb.ChannelItem) -> Item:
    """A received channel item; raises ChannelInputError when it cannot be taken at all, and
    sets ``problem`` on a publication that cannot be delivered (it is dead-lettered)."""
    key = (w.epoch, w.seq)
    if key == (0, 0):
        raise ChannelInputError("a channel item without a key")
    kind = w.WhichOneof("body")
    if kind == "publication":
        p = w.publication
        purpose = _PURPOSE_FROM_WIRE.get(p.purpose)
        if purpose is None:
            raise ChannelInputError(f"item {w.epoch}.{w.seq}: unknown purpose {p.purpose}")
        if not p.topic or not p.route:
            raise ChannelInputError(f"item {w.epoch}.{w.seq}: a publication without topic or route")
        fwd = Forwarded(
            p.topic,
            None,
            tuple(p.route),
            purpose,
            p.retain,
            wire=p.message,
            decode=message_from_peer,
            persistent=p.message.persistence == mpb.PERSISTENT,
            retained_copy=p.retained_copy,
        )
        return Item(key, publication=fwd, problem=message_problem(p.message))
    if kind == "proxy":
        if not w.proxy.topic:
            raise ChannelInputError(f"item {w.epoch}.{w.seq}: a proxy change without a topic")
        return Item(key, proxy=(w.proxy.topic, w.proxy.add))
    raise ChannelInputError(f"item {w.epoch}.{w.seq} carries nothing")


def items_from_wire(batch: cpb.ChannelBatch) -> list[Item]:
    """The items of a batch, whose keys must grow."""
    items = [item_from_wire(w) for w in batch.items]
    for a, b in zip(items, items[1:], strict=False):
        if b.key <= a.key:
            raise ChannelInputError(f"keys {a.key} and {b.key} out of order in a batch")
    return items


def result_to_wire(result: ApplyResult, revision: int) -> cpb.ProposeResponse:
    out = cpb.ProposeResponse(ok=result.ok, warnings=list(result.warnings), revision=revision)
    if result.error is not None:
        out.error_code = result.error.code.value
        out.reason = result.error.reason
        out.message = result.error.message
    return out


def result_from_wire(w: cpb.ProposeResponse) -> ApplyResult:
    error = None
    if not w.ok:
        try:
            code = ErrorCode(w.error_code)
        except ValueError:
            code = ErrorCode.COMMAND_FAILED
        error = RepoError(code, w.message)
    return ApplyResult(events=(), error=error, warnings=tuple(w.warnings))
