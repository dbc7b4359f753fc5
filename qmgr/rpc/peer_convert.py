"""Channel items and repository results to and from the wire (node-to-node traffic)."""

from __future__ import annotations

from cluster.repository import ApplyResult, ErrorCode, RepoError
from cluster.routing import Purpose
from qmgr.client.convert import value_from_wire
from qmgr.core.message import Message
from qmgr.core.values import Properties
from qmgr.node.cluster.items import Forwarded, Item
from qmgr.rpc.convert import message_to_wire
from qmgr.wire import cluster_pb2 as cpb
from qmgr.wire import messages_pb2 as mpb

_PURPOSE_TO_WIRE = {Purpose.ROUTE: cpb.ROUTE, Purpose.DELIVER: cpb.DELIVER}
_PURPOSE_FROM_WIRE = {cpb.ROUTE: Purpose.ROUTE, cpb.DELIVER: Purpose.DELIVER}


def message_from_peer(m: mpb.Message) -> Message:
    """A message as another queue manager accepted it: id, time, expiry and defaults kept."""
    props: Properties = {}
    if m.properties:
        props = {k: value_from_wire(v) for k, v in m.properties.items() if k != "MQTopicString"}
    put_time = m.put_time_ms / 1000.0
    ttl = m.expiry_ms / 1000.0
    return Message(
        message_id=m.message_id,
        body=m.body,
        properties=props,
        persistent=m.persistence == mpb.PERSISTENT,
        priority=m.priority,
        ttl=ttl,
        expiry=put_time + ttl if m.expiry_ms > 0 else None,
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
    elif item.proxy is not None:
        out.proxy.topic, out.proxy.add = item.proxy


def item_from_wire(w: cpb.ChannelItem) -> Item:
    key = (w.epoch, w.seq)
    kind = w.WhichOneof("body")
    if kind == "publication":
        p = w.publication
        purpose = _PURPOSE_FROM_WIRE.get(p.purpose, Purpose.ROUTE)
        fwd = Forwarded(
            p.topic,
            None,
            tuple(p.route),
            purpose,
            p.retain,
            wire=p.message,
            decode=message_from_peer,
            persistent=p.message.persistence == mpb.PERSISTENT,
        )
        return Item(key, publication=fwd)
    if kind == "proxy":
        return Item(key, proxy=(w.proxy.topic, w.proxy.add))
    return Item(key)


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
