"""Channel items and repository results to and from the wire (node-to-node traffic)."""

from __future__ import annotations

from cluster.repository import ApplyResult, ErrorCode, RepoError
from cluster.routing import Purpose
from qmgr.client.convert import value_from_wire, value_to_wire
from qmgr.core.message import MAX_PRIORITY, Message
from qmgr.core.values import Properties
from qmgr.node.cluster.items import Forwarded, Item
from qmgr.rpc.convert import message_to_wire, own_fields_to_wire
from qmgr.wire import cluster_pb2 as cpb
from qmgr.wire import messages_pb2 as mpb

_PURPOSE_FROM_WIRE = {cpb.ROUTE: Purpose.ROUTE, cpb.DELIVER: Purpose.DELIVER}

MAX_EXPIRY_MS = (2**31 - 1) * 100  # MQ's Expiry is an MQLONG in tenths of a second
MAX_PUT_TIME_MS = 253_402_300_799_999  # the end of year 9999


class ChannelInputError(ValueError):
    """Channel input that cannot be taken at all: the stream ends with INVALID_ARGUMENT."""


def message_problem(m: mpb.Message) -> tuple[str, str] | None:
    """Why a message received from a peer cannot be delivered (MQ reason name, text), if so:
    a forged or broken sender may send values a queue manager never accepts."""
    return _problem(m.priority, m.expiry_ms, m.put_time_ms, m.backout_count)


def _problem(
    priority: int, expiry_ms: int, put_time_ms: int, backout_count: int
) -> tuple[str, str] | None:
    if not 0 <= priority <= MAX_PRIORITY:
        return "MQRC_PRIORITY_ERROR", f"priority {priority} is not 0-9"
    if not 0 <= expiry_ms <= MAX_EXPIRY_MS:
        return "MQRC_EXPIRY_ERROR", f"expiry {expiry_ms} ms is out of range"
    if not 0 <= put_time_ms <= MAX_PUT_TIME_MS or backout_count < 0:
        return "MQRC_MD_ERROR", "put time or backout count out of range"
    return None


def message_from_peer(m: mpb.Message) -> Message:
    """A message as another queue manager accepted it: id, time, expiry and defaults kept.
    Values out of range (see ``message_problem``; such a message is only dead-lettered) are
    replaced by defaults. Each wire field is read once (every read costs a lookup)."""
    props: Properties = {}
    wire_props = m.properties
    if wire_props:
        props = {k: value_from_wire(v) for k, v in wire_props.items() if k != "MQTopicString"}
    put_time = min(max(m.put_time_ms, 0), MAX_PUT_TIME_MS) / 1000.0
    expiry_ms = m.expiry_ms
    if not 0 < expiry_ms <= MAX_EXPIRY_MS:
        expiry_ms = 0
    ttl = expiry_ms / 1000.0
    priority = m.priority
    return Message(
        m.message_id,
        m.body,
        props,
        m.persistence == mpb.PERSISTENT,
        priority if 0 <= priority <= MAX_PRIORITY else 0,
        ttl,
        put_time + ttl if expiry_ms > 0 else None,
        m.correl_id,
        put_time,
        0,
        m.reply_to_queue,
    )


def message_to_peer(msg: Message, out: mpb.Message) -> None:
    """``msg`` (a publication this queue manager accepted) into ``out`` for a peer: the fields
    ``message_from_peer`` reads, each written only when it is not the wire's default (every
    write costs a lookup). A message with publication data of a delivered copy (a topic) is
    written whole, as for an application."""
    if msg.topic:
        message_to_wire(msg, out)
        return
    out.message_id = msg.message_id
    out.body = msg.body
    if msg.properties:
        wire_props = out.properties
        for k, v in msg.properties.items():
            value_to_wire(v, wire_props[k])
    out.persistence = mpb.PERSISTENT if msg.persistent else mpb.NOT_PERSISTENT
    own_fields_to_wire(msg, out)
    if msg.reply_to_queue:
        out.reply_to_queue = msg.reply_to_queue


def item_from_wire(w: cpb.ChannelItem) -> Item:
    """A received channel item; raises ChannelInputError when it cannot be taken at all, and
    sets ``problem`` on a publication that cannot be delivered (it is dead-lettered). Read
    once per item forwarded or delivered: each field is read once, since every read of a
    wire field costs a lookup."""
    epoch, seq = w.epoch, w.seq
    if not (epoch or seq):
        raise ChannelInputError("a channel item without a key")
    kind = w.WhichOneof("body")
    if kind == "publication":
        p = w.publication
        purpose = _PURPOSE_FROM_WIRE.get(p.purpose)
        if purpose is None:
            raise ChannelInputError(f"item {epoch}.{seq}: unknown purpose {p.purpose}")
        topic = p.topic
        route = tuple(p.route)
        if not topic or not route:
            raise ChannelInputError(f"item {epoch}.{seq}: a publication without topic or route")
        m = p.message
        fwd = Forwarded(  # positional: a call with keywords costs more, once per item
            topic,
            None,
            route,
            purpose,
            p.retain,
            "",
            m,
            message_from_peer,
            m.persistence == mpb.PERSISTENT,
            p.retained_copy,
        )
        problem = _problem(m.priority, m.expiry_ms, m.put_time_ms, m.backout_count)
        return Item((epoch, seq), fwd, None, False, None, problem)
    if kind == "proxy":
        if not w.proxy.topic:
            raise ChannelInputError(f"item {epoch}.{seq}: a proxy change without a topic")
        return Item((epoch, seq), proxy=(w.proxy.topic, w.proxy.add))
    raise ChannelInputError(f"item {epoch}.{seq} carries nothing")


def items_from_wire(batch: cpb.ChannelBatch) -> list[Item]:
    """The items of a batch, whose keys must grow."""
    items = [item_from_wire(w) for w in batch.items]
    last = (-1, -1)
    for item in items:
        key = item.key
        if key <= last:
            raise ChannelInputError(f"keys {last} and {key} out of order in a batch")
        last = key
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
