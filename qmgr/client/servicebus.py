"""Managing the Service Bus namespace a node hosts (``qmgr start --servicebus``).

    with QueueManagerClient("127.0.0.1:1414") as qm:
        sb = qm.servicebus
        sb.create_queue("orders", {"MaxDeliveryCount": 5, "LockDuration": "PT30S"})
        sb.create_topic("events")
        sb.create_subscription("events", "audit")
        sb.create_rule("events", "audit", "big", {"FilterType": "Sql",
                                                  "SqlFilter": {"SqlExpression": "size > 10"}})
        print(sb.get_queue("orders").counts.active)

Properties are given and returned under their documented names (Config.json's ``Properties``,
the management API's ``QueueDescription``): durations as ISO 8601 (``PT30S``) or seconds. An
update changes only the properties it names. Rules take Config.json's rule form
(``FilterType``, ``SqlFilter``/``CorrelationFilter``, ``Action``).

Failures raise :class:`ServiceBusClientError` with the Service Bus code
(``MessagingEntityNotFound``, ``BadArgument``...), what was wrong (``where``) and, for a filter
syntax error, its ``position``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from qmgr.client.sbwire import (
    KINDS,
    SbCounts,
    SbEntityInfo,
    info_from_wire,
    message_to_wire,
    ref,
    stored_from_wire,
)
from qmgr.servicebus.message import SbMessage, Stored
from qmgr.servicebus.namespace import SessionLock
from qmgr.wire import servicebus_pb2 as pb

__all__ = ["SbCounts", "SbEntityInfo", "SbMessage", "ServiceBusAdmin", "SessionLock", "Stored"]

Call = Callable[[Any, Any], Any]
Properties = Mapping[str, Any]

RECEIVE_MODES = {"peek_lock": pb.SB_PEEK_LOCK, "receive_and_delete": pb.SB_RECEIVE_AND_DELETE}


def _json(data: Mapping[str, Any] | None) -> str:
    return json.dumps(dict(data), separators=(",", ":")) if data else ""


class ServiceBusAdmin:
    """The Service Bus calls of one client (``QueueManagerClient.servicebus``)."""

    def __init__(self, call: Call, admin: Any) -> None:
        self._call = call
        self._admin = admin

    # -- generic ----------------------------------------------------------------------------

    def _entity(self, method: str, request: Any) -> SbEntityInfo:
        return info_from_wire(self._call(getattr(self._admin, method), request))

    def _create(
        self,
        kind: str,
        name: str,
        properties: Properties | None,
        topic: str | None = None,
        subscription: str | None = None,
        rule: tuple[str, Properties] | None = None,
    ) -> SbEntityInfo:
        request = pb.SbEntityRequest(
            ref=ref(kind, name, topic, subscription), properties_json=_json(properties)
        )
        if rule is not None:
            request.rule_name, request.rule_json = rule[0], _json(rule[1])
        return self._entity("SbCreate", request)

    def _update(
        self,
        kind: str,
        name: str,
        properties: Properties,
        topic: str | None = None,
        subscription: str | None = None,
    ) -> SbEntityInfo:
        request = pb.SbEntityRequest(
            ref=ref(kind, name, topic, subscription), properties_json=_json(properties)
        )
        return self._entity("SbUpdate", request)

    def get_entity(
        self, kind: str, name: str, topic: str | None = None, subscription: str | None = None
    ) -> SbEntityInfo:
        """``kind`` is ``queue``, ``topic``, ``subscription`` or ``rule``."""
        return self._entity("SbGet", ref(kind, name, topic, subscription))

    def delete_entity(
        self, kind: str, name: str, topic: str | None = None, subscription: str | None = None
    ) -> None:
        self._call(self._admin.SbDelete, ref(kind, name, topic, subscription))

    def list_entities(
        self, kind: str, topic: str | None = None, subscription: str | None = None
    ) -> list[SbEntityInfo]:
        request = pb.SbListRequest(
            kind=KINDS[kind], topic=topic or "", subscription=subscription or ""
        )
        resp = self._call(self._admin.SbList, request)
        return [info_from_wire(e) for e in resp.entities]

    # -- queues -----------------------------------------------------------------------------

    def create_queue(self, name: str, properties: Properties | None = None) -> SbEntityInfo:
        return self._create("queue", name, properties)

    def update_queue(self, name: str, properties: Properties) -> SbEntityInfo:
        return self._update("queue", name, properties)

    def get_queue(self, name: str) -> SbEntityInfo:
        return self.get_entity("queue", name)

    def delete_queue(self, name: str) -> None:
        self.delete_entity("queue", name)

    def list_queues(self) -> list[SbEntityInfo]:
        return self.list_entities("queue")

    # -- topics -----------------------------------------------------------------------------

    def create_topic(self, name: str, properties: Properties | None = None) -> SbEntityInfo:
        return self._create("topic", name, properties)

    def update_topic(self, name: str, properties: Properties) -> SbEntityInfo:
        return self._update("topic", name, properties)

    def get_topic(self, name: str) -> SbEntityInfo:
        return self.get_entity("topic", name)

    def delete_topic(self, name: str) -> None:
        self.delete_entity("topic", name)

    def list_topics(self) -> list[SbEntityInfo]:
        return self.list_entities("topic")

    # -- subscriptions ----------------------------------------------------------------------

    def create_subscription(
        self,
        topic: str,
        name: str,
        properties: Properties | None = None,
        *,
        rule: tuple[str, Properties] | None = None,
    ) -> SbEntityInfo:
        """A subscription gets the ``$Default`` rule (true filter) unless ``rule`` (name,
        Config.json rule properties) is given."""
        return self._create("subscription", name, properties, topic, rule=rule)

    def update_subscription(self, topic: str, name: str, properties: Properties) -> SbEntityInfo:
        return self._update("subscription", name, properties, topic)

    def get_subscription(self, topic: str, name: str) -> SbEntityInfo:
        return self.get_entity("subscription", name, topic)

    def delete_subscription(self, topic: str, name: str) -> None:
        self.delete_entity("subscription", name, topic)

    def list_subscriptions(self, topic: str) -> list[SbEntityInfo]:
        return self.list_entities("subscription", topic)

    # -- rules ------------------------------------------------------------------------------

    def create_rule(
        self, topic: str, subscription: str, name: str, rule: Properties
    ) -> SbEntityInfo:
        """``rule``: ``{"FilterType": "Sql", "SqlFilter": {"SqlExpression": "..."},
        "Action": {"SqlExpression": "..."}}`` or ``{"FilterType": "Correlation",
        "CorrelationFilter": {"Label": "x", "Properties": {"k": "v"}}}``."""
        return self._create("rule", name, rule, topic, subscription)

    def update_rule(
        self, topic: str, subscription: str, name: str, rule: Properties
    ) -> SbEntityInfo:
        """Replaces the rule's filter and action."""
        return self._update("rule", name, rule, topic, subscription)

    def get_rule(self, topic: str, subscription: str, name: str) -> SbEntityInfo:
        return self.get_entity("rule", name, topic, subscription)

    def delete_rule(self, topic: str, subscription: str, name: str) -> None:
        self.delete_entity("rule", name, topic, subscription)

    def list_rules(self, topic: str, subscription: str) -> list[SbEntityInfo]:
        return self.list_entities("rule", topic, subscription)

    # -- Config.json ------------------------------------------------------------------------

    def import_config(self, config: str | Mapping[str, Any]) -> list[str]:
        """Apply an emulator Config.json (its text or the parsed object) to the node's
        namespace: entities are created or updated to match (running it twice changes nothing
        the second time). Returns what changed, one line each."""
        text = config if isinstance(config, str) else json.dumps(config)
        resp = self._call(self._admin.SbImport, pb.SbImportRequest(config_json=text))
        return list(resp.changes)

    def export_config(self) -> dict[str, Any]:
        """The namespace as a Config.json object (``import_config`` of it changes nothing)."""
        resp = self._call(self._admin.SbExport, pb.SbExportRequest())
        data: dict[str, Any] = json.loads(resp.config_json)
        return data

    # -- messages ---------------------------------------------------------------------------

    def send(self, path: str, messages: Sequence[SbMessage | bytes | str]) -> list[int]:
        """Send to a queue or topic (the whole batch is checked first); acknowledged once the
        messages are committed. Returns the sequence numbers the namespace reports."""
        request = pb.SbSendRequest(path=path)
        for m in messages:
            if isinstance(m, str):
                m = SbMessage(body=m.encode())
            elif isinstance(m, bytes):
                m = SbMessage(body=m)
            message_to_wire(m, request.messages.add())
        resp = self._call(self._admin.SbSend, request)
        return list(resp.sequence_numbers)

    def peek(
        self, path: str, from_sequence: int = 0, max_count: int = 100, session: str | None = None
    ) -> list[Stored]:
        """Look at messages without locking them (active, deferred and scheduled, with their
        state), from a sequence number on; ``path`` may name a ``$DeadLetterQueue``."""
        request = pb.SbPeekRequest(
            path=path, from_sequence=from_sequence, max_count=max_count, session=session or ""
        )
        return [stored_from_wire(m) for m in self._call(self._admin.SbPeek, request).messages]

    def receive(
        self,
        path: str,
        max_count: int = 1,
        mode: str = "peek_lock",
        *,
        session: str | None = None,
    ) -> list[Stored]:
        """Receive (``peek_lock`` or ``receive_and_delete``); locked messages carry their
        ``lock_token`` for :meth:`complete` and the other settlements. A session-enabled
        entity needs ``session``, accepted first with :meth:`accept_session`."""
        if mode not in RECEIVE_MODES:
            raise ValueError(f"mode must be one of {', '.join(RECEIVE_MODES)}, got {mode!r}")
        request = pb.SbReceiveRequest(path=path, max_count=max_count, mode=RECEIVE_MODES[mode])
        if session is not None:
            request.session = session
        return [stored_from_wire(m) for m in self._call(self._admin.SbReceive, request).messages]

    def receive_deferred(
        self,
        path: str,
        sequence_numbers: Sequence[int],
        mode: str = "peek_lock",
        *,
        session: str | None = None,
    ) -> list[Stored]:
        """Receive deferred messages by their sequence numbers (each must be deferred)."""
        if mode not in RECEIVE_MODES:
            raise ValueError(f"mode must be one of {', '.join(RECEIVE_MODES)}, got {mode!r}")
        request = pb.SbReceiveRequest(
            path=path, mode=RECEIVE_MODES[mode], deferred=list(sequence_numbers)
        )
        if session is not None:
            request.session = session
        return [stored_from_wire(m) for m in self._call(self._admin.SbReceive, request).messages]

    def cancel_scheduled(self, path: str, sequence_numbers: Sequence[int]) -> None:
        """Cancel scheduled messages of a queue or topic (each must still be scheduled)."""
        request = pb.SbCancelRequest(path=path, sequence_numbers=list(sequence_numbers))
        self._call(self._admin.SbCancelScheduled, request)

    def _settle(self, path: str, token: uuid.UUID | str, how: Any, **extra: str) -> float:
        request = pb.SbSettleRequest(path=path, lock_token=str(token), settlement=how, **extra)
        return float(self._call(self._admin.SbSettle, request).locked_until)

    def complete(self, path: str, lock_token: uuid.UUID | str) -> None:
        self._settle(path, lock_token, pb.SB_COMPLETE)

    def abandon(self, path: str, lock_token: uuid.UUID | str) -> None:
        self._settle(path, lock_token, pb.SB_ABANDON)

    def defer(self, path: str, lock_token: uuid.UUID | str) -> None:
        self._settle(path, lock_token, pb.SB_DEFER)

    def dead_letter(
        self,
        path: str,
        lock_token: uuid.UUID | str,
        reason: str | None = None,
        description: str | None = None,
    ) -> None:
        self._settle(
            path,
            lock_token,
            pb.SB_DEAD_LETTER,
            dead_letter_reason=reason or "",
            dead_letter_description=description or "",
        )

    def renew_lock(self, path: str, lock_token: uuid.UUID | str) -> float:
        """Returns the new locked-until time (seconds since the epoch)."""
        return self._settle(path, lock_token, pb.SB_RENEW_LOCK)

    # -- sessions ---------------------------------------------------------------------------

    def _session(self, path: str, op: Any, session_id: str | None = None, **extra: Any) -> Any:
        request = pb.SbSessionRequest(path=path, op=op, **extra)
        if session_id is not None:
            request.session_id = session_id
        return self._call(self._admin.SbSession, request)

    def list_sessions(self, path: str) -> list[str]:
        """The sessions of a session-enabled queue or subscription with messages or a state."""
        return list(self._session(path, pb.SB_SESSION_LIST).session_ids)

    def accept_session(self, path: str, session_id: str | None = None) -> SessionLock | None:
        """Lock ``session_id``, or the next session with available messages (None when there
        is none now)."""
        resp = self._session(path, pb.SB_SESSION_ACCEPT, session_id)
        if not resp.HasField("session_id"):
            return None
        return SessionLock(resp.session_id, uuid.UUID(resp.lock_token), resp.locked_until)

    def release_session(self, path: str, session_id: str) -> None:
        self._session(path, pb.SB_SESSION_RELEASE, session_id)

    def renew_session_lock(self, path: str, session_id: str) -> float:
        return float(self._session(path, pb.SB_SESSION_RENEW, session_id).locked_until)

    def get_session_state(self, path: str, session_id: str) -> bytes | None:
        resp = self._session(path, pb.SB_SESSION_GET_STATE, session_id)
        return bytes(resp.state) if resp.HasField("state") else None

    def set_session_state(self, path: str, session_id: str, state: bytes | None) -> None:
        """Set (None clears) the state of a session held with :meth:`accept_session`."""
        extra = {"state": state} if state is not None else {}
        self._session(path, pb.SB_SESSION_SET_STATE, session_id, **extra)
