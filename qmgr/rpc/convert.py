"""Domain messages to and from wire messages."""

from __future__ import annotations

from qmgr.client.convert import value_from_wire, value_to_wire
from qmgr.core.message import Message
from qmgr.core.values import Properties
from qmgr.wire import messages_pb2 as pb

_PERSISTENCE = {pb.PERSISTENT: True, pb.NOT_PERSISTENT: False}


def message_from_wire(m: pb.Message) -> Message:
    props: Properties = {}
    if m.properties:
        props = {k: value_from_wire(v) for k, v in m.properties.items()}
    return Message(
        message_id=m.message_id,
        body=m.body,
        properties=props,
        persistent=_PERSISTENCE.get(m.persistence),
        priority=m.priority,
        ttl=m.expiry_ms / 1000.0,
        correl_id=m.correl_id,
        reply_to_queue=m.reply_to_queue,
    )


def message_to_wire(msg: Message, out: pb.Message) -> None:
    out.message_id = msg.message_id
    out.body = msg.body
    props = msg.publication_properties()
    if props:
        wire_props = out.properties
        for k, v in props.items():
            value_to_wire(v, wire_props[k])
    out.persistence = pb.PERSISTENT if msg.persistent else pb.NOT_PERSISTENT
    out.priority = msg.priority
    if msg.expiry is not None:
        out.expiry_ms = max(1, int((msg.expiry - msg.put_time) * 1000))
    out.correl_id = msg.correl_id
    out.put_time_ms = int(msg.put_time * 1000)
    out.backout_count = msg.backout_count
    out.reply_to_queue = msg.reply_to_queue
    out.topic = msg.topic
    out.sequence = msg.sequence
