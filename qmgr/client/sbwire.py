"""Service Bus messages and entities to and from their wire shapes (client and node alike)."""

from __future__ import annotations

import datetime as dt
import json
import math
import uuid
from dataclasses import dataclass, field, fields
from typing import Any

from qmgr.client.convert import value_from_wire, value_to_wire
from qmgr.servicebus.errors import bad
from qmgr.servicebus.message import MessageState, SbMessage, Stored
from qmgr.wire import servicebus_pb2 as pb

KINDS = {
    "queue": pb.SB_QUEUE,
    "topic": pb.SB_TOPIC,
    "subscription": pb.SB_SUBSCRIPTION,
    "rule": pb.SB_RULE,
}
KIND_NAMES = {v: k for k, v in KINDS.items()}

# the optional system properties (strings, and the TTL and scheduled time as numbers)
_OPTIONAL = tuple(
    f.name
    for f in fields(SbMessage)
    if f.name not in ("body", "body_type", "properties")
    and f.name in pb.SbMessage.DESCRIPTOR.fields_by_name
)
_STATES = {
    MessageState.ACTIVE: pb.SB_ACTIVE,
    MessageState.DEFERRED: pb.SB_DEFERRED,
    MessageState.SCHEDULED: pb.SB_SCHEDULED,
}
_STATE_NAMES = {v: k for k, v in _STATES.items()}


def message_to_wire(m: SbMessage, out: pb.SbMessage, *, strict: bool = True) -> pb.SbMessage:
    """``strict``: a property value the wire has no type for (a date, time span or GUID) is
    refused (a message to send); otherwise it travels as its text (a message the namespace
    holds, which a rule action may have given such a value: refusing it would lose it)."""
    out.body = m.body
    if m.body_type != "data":
        out.body_type = m.body_type
    for name in _OPTIONAL:
        value = getattr(m, name)
        if value is not None:
            setattr(out, name, value)
    for key, value in m.properties.items():
        if value is not None and not isinstance(value, bool | int | float | str | bytes):
            if not strict:
                value = value.isoformat() if isinstance(value, dt.datetime) else str(value)
            else:
                raise bad(
                    f"application property {key!r}: {type(value).__name__} is not a supported "
                    "type (string, integer, float, boolean, bytes or null)"
                )
        value_to_wire(value, out.properties[key])
    return out


def message_from_wire(m: pb.SbMessage) -> SbMessage:
    out = SbMessage(body=bytes(m.body), body_type=m.body_type or "data")
    for name in _OPTIONAL:
        if m.HasField(name):  # type: ignore[arg-type]
            setattr(out, name, getattr(m, name))
    out.properties = {k: value_from_wire(v) for k, v in m.properties.items()}
    return out


def stored_to_wire(s: Stored, out: pb.SbStoredMessage) -> pb.SbStoredMessage:
    message_to_wire(s.message, out.message, strict=False)
    out.sequence_number = s.sequence_number
    out.enqueued_time = s.enqueued_time
    out.expires_at = 0.0 if math.isinf(s.expires_at) else s.expires_at
    out.state = _STATES[s.state]
    out.delivery_count = s.delivery_count
    if s.lock_token is not None:
        out.lock_token = str(s.lock_token)
        out.locked_until = s.locked_until
    out.enqueued_sequence_number = s.enqueued_sequence_number
    out.hop_count = s.hop_count
    if s.dead_letter_source:
        out.dead_letter_source = s.dead_letter_source
    return out


def stored_from_wire(m: pb.SbStoredMessage) -> Stored:
    return Stored(
        message=message_from_wire(m.message),
        sequence_number=m.sequence_number,
        enqueued_time=m.enqueued_time,
        expires_at=m.expires_at or math.inf,
        state=_STATE_NAMES[m.state],
        delivery_count=m.delivery_count,
        lock_token=uuid.UUID(m.lock_token) if m.lock_token else None,
        locked_until=m.locked_until,
        enqueued_sequence_number=m.enqueued_sequence_number,
        hop_count=m.hop_count,
        dead_letter_source=m.dead_letter_source or None,
    )


@dataclass
class SbCounts:
    """Runtime counts of a queue, topic or subscription (Service Bus's ``CountDetails``)."""

    active: int = 0
    dead_lettered: int = 0
    scheduled: int = 0
    transfer: int = 0
    transfer_dead_letter: int = 0
    size_bytes: int = 0
    subscription_count: int = 0  # topics
    deferred: int = 0
    message_count: int = 0  # every message held: active, deferred, scheduled, dead-lettered
    rule_count: int = 0  # subscriptions


@dataclass
class SbEntityInfo:
    """A queue, topic, subscription or rule as the node holds it: ``properties`` under their
    documented names (durations ISO 8601), as in Config.json; runtime counts for entities
    that hold messages."""

    kind: str  # queue | topic | subscription | rule
    name: str
    topic: str | None = None
    subscription: str | None = None
    properties: dict[str, Any] = field(default_factory=dict)
    counts: SbCounts = field(default_factory=SbCounts)
    created_at: float = 0.0
    updated_at: float = 0.0
    accessed_at: float = 0.0

    @property
    def path(self) -> str:
        if self.kind == "subscription":
            return f"{self.topic}/Subscriptions/{self.name}"
        if self.kind == "rule":
            return f"{self.topic}/Subscriptions/{self.subscription}/Rules/{self.name}"
        return self.name

    def to_dict(self) -> dict[str, Any]:
        """The JSON form the CLI prints."""
        out: dict[str, Any] = {"kind": self.kind, "name": self.name}
        if self.topic is not None:
            out["topic"] = self.topic
        if self.subscription is not None:
            out["subscription"] = self.subscription
        out["properties"] = self.properties
        if self.kind != "rule":
            counts = vars(self.counts).copy()
            if self.kind != "topic":
                del counts["subscription_count"]
            if self.kind != "subscription":
                del counts["rule_count"]
            out["counts"] = counts
            out["createdAt"] = self.created_at
            out["updatedAt"] = self.updated_at
            out["accessedAt"] = self.accessed_at
        return out


def ref(kind: str, name: str, topic: str | None = None, subscription: str | None = None) -> Any:
    return pb.SbEntityRef(
        kind=KINDS[kind], name=name, topic=topic or "", subscription=subscription or ""
    )


def info_to_wire(
    kind: str,
    name: str,
    properties: dict[str, Any],
    *,
    topic: str | None = None,
    subscription: str | None = None,
    counts: SbCounts | None = None,
    times: tuple[float, float, float] = (0.0, 0.0, 0.0),
) -> pb.SbEntity:
    out = pb.SbEntity(ref=ref(kind, name, topic, subscription))
    out.properties_json = json.dumps(properties, separators=(",", ":"))
    if counts is not None:
        for key, value in vars(counts).items():
            setattr(out.counts, key, int(value))
    out.created_at, out.updated_at, out.accessed_at = times
    return out


def info_from_wire(e: pb.SbEntity) -> SbEntityInfo:
    kind = KIND_NAMES.get(e.ref.kind, "queue")
    return SbEntityInfo(
        kind=kind,
        name=e.ref.name,
        topic=e.ref.topic or None,
        subscription=e.ref.subscription or None,
        properties=json.loads(e.properties_json) if e.properties_json else {},
        counts=SbCounts(**{f: getattr(e.counts, f) for f in vars(SbCounts())}),
        created_at=e.created_at,
        updated_at=e.updated_at,
        accessed_at=e.accessed_at,
    )
