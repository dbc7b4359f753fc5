"""Domain messages to and from wire messages, and the validation of what applications send.

Every message and request field an application controls is checked here, where it enters, with
MQ's reason codes (see ``qmgr.core.limits``); ``QueueManager.accept`` checks the message fields
again as the last line of defence.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.internal.containers import MessageMap, RepeatedCompositeFieldContainer

from qmgr.client.convert import value_from_wire, value_to_wire
from qmgr.core import limits
from qmgr.core.errors import MQError
from qmgr.core.message import MAX_PRIORITY, Message
from qmgr.core.values import Properties
from qmgr.wire import messages_pb2 as pb

_PERSISTENCE = {pb.PERSISTENCE_AS_DEFAULT: None, pb.PERSISTENT: True, pb.NOT_PERSISTENT: False}


def check_message(m: pb.Message) -> None:
    """Raise MQError with MQ's reason if a field of an application's message is invalid."""
    _check_fields(m.priority, m.expiry_ms, m.persistence, m.properties, m.reply_to_queue)


def _check_fields(
    priority: int, expiry_ms: int, persistence: int, properties: Any, reply_to_queue: str
) -> None:
    limits.check_priority(priority)
    if not 0 <= expiry_ms <= limits.MAX_TTL_MS:
        raise MQError(
            "MQRC_EXPIRY_ERROR",
            f"expiry_ms {expiry_ms} is not 0 (unlimited) or 1-{limits.MAX_TTL_MS}",
        )
    if persistence not in _PERSISTENCE:
        raise MQError("MQRC_PERSISTENCE_ERROR", f"persistence {persistence} is not valid")
    for k in properties:
        limits.check_property_name(k)
    if reply_to_queue:
        limits.check_object_name(reply_to_queue, "reply-to queue")


def message_from_wire(m: pb.Message, *, check: bool = False) -> Message:
    """An application's message. Its fields have passed ``check_message`` (``check_request``
    for a unary request), or are checked here with ``check`` (a request stream's message).
    Every publication passes here, so each field is read once and the message built
    positionally."""
    props = m.properties
    expiry_ms = m.expiry_ms
    persistence = m.persistence
    priority = m.priority
    reply_to_queue = m.reply_to_queue
    if check and (
        props
        or reply_to_queue
        or not limits.PRIORITY_AS_DEFAULT <= priority <= MAX_PRIORITY
        or not 0 <= expiry_ms <= limits.MAX_TTL_MS
        or persistence not in _PERSISTENCE
    ):  # the common message (no properties, no reply-to queue, valid fields) passes here
        _check_fields(priority, expiry_ms, persistence, props, reply_to_queue)
    return Message(
        m.message_id,
        m.body,
        {k: value_from_wire(v) for k, v in props.items()} if props else {},
        _PERSISTENCE[persistence],
        priority,
        expiry_ms / 1000.0 if expiry_ms else 0.0,
        None,
        m.correl_id,
        0.0,
        0,
        reply_to_queue,
    )


def _check_count(request: Any, field: str) -> None:
    value = getattr(request, field)
    if not 0 <= value <= limits.MAX_BATCH:
        raise MQError("MQRC_OPTIONS_ERROR", f"{field} {value} is not 0-{limits.MAX_BATCH}")


def check_request(request: Any) -> None:
    """Validate an application's Messaging request before any handler sees it: names, topic
    strings, batch sizes and every message it carries. Other services' requests pass."""
    if not request.DESCRIPTOR.file.name.endswith("messaging.proto"):
        return
    fields = request.DESCRIPTOR.fields_by_name
    if "queue" in fields:
        limits.check_object_name(request.queue)
    if "destination" in fields:
        limits.check_object_name(request.destination)
    if "topic" in fields:
        limits.check_topic_string(request.topic)
    if "name" in fields:
        limits.check_sub_name(request.name)
    for field in ("max_messages", "max_batch"):
        if field in fields:
            _check_count(request, field)
    if "wait_ms" in fields and request.wait_ms < 0:
        raise MQError("MQRC_OPTIONS_ERROR", f"wait_ms {request.wait_ms} is negative")
    if "messages" in fields:
        limits.check_batch(len(request.messages))
        for m in request.messages:
            check_message(m)
    if "publications" in fields:
        limits.check_batch(len(request.publications), "publications")
        for p in request.publications:
            limits.check_topic_string(p.topic)
            check_message(p.message)


def check_stream_request(request: Any) -> None:
    """Validate one request of an application's request stream: its batch size (its messages
    are checked as each is applied, so a bad one fails its own batch, not the stream)."""
    if not request.DESCRIPTOR.file.name.endswith("messaging.proto"):
        return
    fields = request.DESCRIPTOR.fields_by_name
    if "publications" in fields:
        limits.check_batch(len(request.publications), "publications")
    if "messages" in fields:
        limits.check_batch(len(request.messages))


def message_to_wire(msg: Message, out: pb.Message) -> pb.Message:
    out.message_id = msg.message_id
    out.body = msg.body
    props = msg.publication_properties()
    if props:
        _properties_to_wire(props, out.properties)
    out.persistence = pb.PERSISTENT if msg.persistent else pb.NOT_PERSISTENT
    out.priority = msg.priority
    out.expiry_ms = expiry_ms(msg)
    out.correl_id = msg.correl_id
    out.put_time_ms = int(msg.put_time * 1000)
    out.backout_count = msg.backout_count
    out.reply_to_queue = msg.reply_to_queue
    out.topic = msg.topic
    out.sequence = msg.sequence
    return out


def _properties_to_wire(props: Properties, out: MessageMap[str, pb.Value]) -> None:
    """``props`` into a message's wire map; text, the usual kind, is set directly (it is the
    last kind ``value_to_wire`` tries)."""
    for k, v in props.items():
        if type(v) is str:
            out[k].string_value = v
        else:
            value_to_wire(v, out[k])


def shared_to_wire(msg: Message) -> bytes:
    """The fields every copy of a publication has alike: id, body, the publication's
    properties with MQTopicString, persistence, reply-to queue and topic."""
    out = pb.Message(
        message_id=msg.message_id,
        body=msg.body,
        persistence=pb.PERSISTENT if msg.persistent else pb.NOT_PERSISTENT,
        reply_to_queue=msg.reply_to_queue,
        topic=msg.topic,
    )
    wire_props = out.properties
    _properties_to_wire(msg.properties, wire_props)
    if msg.topic:
        wire_props["MQTopicString"].string_value = msg.topic
    return out.SerializeToString()


def own_fields_to_wire(msg: Message, out: pb.Message) -> None:
    """The fields a copy does not share with the other copies of its publication (priority,
    expiry, CorrelId, put time, backout count), each written only when it is not the wire's
    default, into ``out``, which has them at their defaults."""
    if msg.priority:
        out.priority = msg.priority
    if msg.expiry is not None:
        out.expiry_ms = expiry_ms(msg)
    if msg.correl_id:
        out.correl_id = msg.correl_id
    out.put_time_ms = int(msg.put_time * 1000)
    if msg.backout_count:
        out.backout_count = msg.backout_count


_TOPIC_FIELDS: dict[str, bytes] = {}  # topic string -> its encoded topic and MQTopicString
_TOPIC_FIELDS_LIMIT = 10_000


def topic_fields(topic: str) -> bytes:
    """A message's ``topic`` field and MQTopicString property, encoded once per topic
    string (merged into each copy: one call, where filling the map costs several)."""
    data = _TOPIC_FIELDS.get(topic)
    if data is None:
        if len(_TOPIC_FIELDS) >= _TOPIC_FIELDS_LIMIT:
            _TOPIC_FIELDS.clear()
        fields = pb.Message(topic=topic)
        fields.properties["MQTopicString"].string_value = topic
        data = _TOPIC_FIELDS[topic] = fields.SerializeToString()
    return data


def expiry_ms(msg: Message) -> int:
    """The time ``msg`` has left to live, as the wire counts it (0: unlimited)."""
    if msg.expiry is None:
        return 0
    return max(1, int((msg.expiry - msg.put_time) * 1000))


def add_delivery(out: RepeatedCompositeFieldContainer[pb.Message], msg: Message) -> pb.Message:
    """``msg`` appended to ``out`` for a consumer, made by one constructor call with its
    scalar fields (setting them one at a time costs a call each, for every message
    delivered). The copies of one publication (``msg.shared``) share one encoding of what
    they have alike, made when the second copy is encoded (a publication with one copy costs
    no more than one message): a later copy merges it and sets only its own fields."""
    shared = msg.shared
    topic = msg.topic
    if shared is not None and topic:
        data = shared.data
        if data is None and shared.used:
            data = shared.data = shared_to_wire(msg)
        if data is not None:
            copy = _add_copy(out, msg)
            copy.MergeFromString(data)
            _add_copy_properties(msg, copy)
            return copy
        shared.used = True
    copy = _add_copy(out, msg)
    copy.message_id = msg.message_id
    copy.body = msg.body
    copy.persistence = pb.PERSISTENT if msg.persistent else pb.NOT_PERSISTENT
    if msg.reply_to_queue:
        copy.reply_to_queue = msg.reply_to_queue
    if msg.properties:
        _properties_to_wire(msg.properties, copy.properties)
    if topic:
        copy.MergeFromString(topic_fields(topic))
        _add_copy_properties(msg, copy)
    return copy


def _add_copy(out: RepeatedCompositeFieldContainer[pb.Message], msg: Message) -> pb.Message:
    """A new message in ``out`` with the fields that are ``msg``'s own as a copy."""
    return out.add(
        priority=msg.priority,
        expiry_ms=expiry_ms(msg),
        correl_id=msg.correl_id,
        put_time_ms=int(msg.put_time * 1000),
        backout_count=msg.backout_count,
        sequence=msg.sequence,
    )


def _add_copy_properties(msg: Message, copy: pb.Message) -> None:
    """The publication properties a copy may have of its own: MQSubUserData, MQIsRetained."""
    if msg.sub_user_data:
        copy.properties["MQSubUserData"].string_value = msg.sub_user_data
    if msg.retained:
        copy.properties["MQIsRetained"].bool_value = True
