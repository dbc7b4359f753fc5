"""The Admin service's Service Bus calls: the node's namespace managed over gRPC.

Each call is checked and run by the namespace (which changes nothing when it refuses); what it
changed is committed before the answer (``durable``), so an acknowledged create, update, delete
or send survives the node being killed. A ``ServiceBusError`` is translated to its gRPC status
with the Service Bus code by the error boundary (``qmgr.rpc.errors``).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from qmgr.client.sbwire import (
    KIND_NAMES,
    SbCounts,
    info_to_wire,
    message_from_wire,
    stored_to_wire,
)
from qmgr.node.runtime import NodeRuntime
from qmgr.node.servicebus import ServiceBusHost
from qmgr.servicebus.entities import (
    QueueProperties,
    RuleProperties,
    SubscriptionProperties,
    TopicProperties,
)
from qmgr.servicebus.errors import Code, ServiceBusError, bad
from qmgr.servicebus.namespace import (
    Namespace,
    QueueInfo,
    ReceiveMode,
    RuleInfo,
    SubscriptionInfo,
    TopicInfo,
)
from qmgr.wire import servicebus_pb2 as pb

Info = QueueInfo | TopicInfo | SubscriptionInfo | RuleInfo
Context = Any

MAX_BATCH = 5000  # messages one send, peek or receive may carry


def entity_to_wire(info: Info) -> pb.SbEntity:
    if isinstance(info, RuleInfo):
        return info_to_wire(
            "rule",
            info.name,
            info.properties.to_dict(),
            topic=info.topic,
            subscription=info.subscription,
            times=(info.created_at, info.updated_at, 0.0),
        )
    counts = SbCounts(
        scheduled=info.scheduled,
        transfer=info.transfer,
        size_bytes=info.size_bytes,
        message_count=info.scheduled,
    )
    topic = None
    if isinstance(info, TopicInfo):
        kind = "topic"
        counts.subscription_count = info.subscription_count
    else:  # a queue or subscription holds messages
        kind = "queue" if isinstance(info, QueueInfo) else "subscription"
        counts.active = info.active
        counts.dead_lettered = info.dead_lettered
        counts.deferred = info.deferred
        counts.message_count = info.total
        if isinstance(info, SubscriptionInfo):
            topic = info.topic
            counts.rule_count = info.rule_count
    times = (info.created_at, info.updated_at, info.accessed_at)
    return info_to_wire(
        kind, info.name, info.properties.to_dict(), topic=topic, counts=counts, times=times
    )


def _object(text: str, where: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise bad(f"not valid JSON: {exc.msg}", where=where, position=exc.pos) from None
    if not isinstance(data, dict):
        raise bad(f"expected a JSON object of properties, got {type(data).__name__}", where=where)
    return data


def _kind(ref: pb.SbEntityRef) -> str:
    kind = KIND_NAMES.get(ref.kind)
    if kind is None:
        raise bad("the kind of entity (queue, topic, subscription or rule) is missing")
    if kind in ("subscription", "rule") and not ref.topic:
        raise bad(f"a {kind} needs its topic")
    if kind == "rule" and not ref.subscription:
        raise bad("a rule needs its subscription")
    return kind


def _rule(text: str, where: str = "") -> RuleProperties:
    data = _object(text, where)
    if not data:
        raise bad("a rule needs its properties (FilterType and its filter)", where=where)
    return RuleProperties.from_dict(data, where)


def _token(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise bad(f"lock token {text!r} is not a UUID", where="lock_token") from None


def _count(value: int, what: str) -> int:
    if not 1 <= value <= MAX_BATCH:
        raise bad(f"{what} must be 1-{MAX_BATCH}, got {value}", where=what)
    return value


class ServiceBusAdminCalls:
    """Mixed into the Admin servicer (``self.rt`` is the node's runtime)."""

    rt: NodeRuntime

    def _host(self) -> ServiceBusHost:
        host = self.rt.servicebus
        if host is None:
            raise ServiceBusError(
                Code.INVALID_OPERATION,
                f"queue manager {self.rt.config.name} hosts no Service Bus namespace (start it "
                "with --servicebus or --servicebus-config)",
            )
        return host

    @property
    def _ns(self) -> Namespace:
        return self._host().namespace

    async def _done(self) -> None:
        """After a change: the timer looks again, and the change is committed."""
        self._host().changed()
        await self.rt.durable()

    # -- management -------------------------------------------------------------------------

    async def SbCreate(self, request: pb.SbEntityRequest, context: Context) -> pb.SbEntity:
        ns, ref = self._ns, request.ref
        kind = _kind(ref)
        props = _object(request.properties_json, "properties")
        info: Info
        if kind == "queue":
            info = ns.create_queue(ref.name, QueueProperties.from_dict(props))
        elif kind == "topic":
            info = ns.create_topic(ref.name, TopicProperties.from_dict(props))
        elif kind == "subscription":
            rule = None
            if request.rule_name or request.rule_json:
                rule = (request.rule_name, _rule(request.rule_json, "rule"))
            info = ns.create_subscription(
                ref.topic, ref.name, SubscriptionProperties.from_dict(props), rule=rule
            )
        else:
            info = ns.create_rule(
                ref.topic, ref.subscription, ref.name, _rule(request.properties_json)
            )
        await self._done()
        return entity_to_wire(info)

    async def SbUpdate(self, request: pb.SbEntityRequest, context: Context) -> pb.SbEntity:
        ns, ref = self._ns, request.ref
        kind = _kind(ref)
        info: Info
        if kind == "rule":
            rule = _rule(request.properties_json)
            info = ns.update_rule(ref.topic, ref.subscription, ref.name, rule)
        else:
            changes = _object(request.properties_json, "properties")
            if kind == "queue":
                queue = ns.get_queue(ref.name)
                info = ns.update_queue(ref.name, queue.properties.with_changes(changes))
            elif kind == "topic":
                topic = ns.get_topic(ref.name)
                info = ns.update_topic(ref.name, topic.properties.with_changes(changes))
            else:
                sub = ns.get_subscription(ref.topic, ref.name)
                new = sub.properties.with_changes(changes)
                info = ns.update_subscription(ref.topic, ref.name, new)
        await self._done()
        return entity_to_wire(info)

    async def SbGet(self, request: pb.SbEntityRef, context: Context) -> pb.SbEntity:
        ns = self._ns
        kind = _kind(request)
        info: Info
        if kind == "queue":
            info = ns.get_queue(request.name)
        elif kind == "topic":
            info = ns.get_topic(request.name)
        elif kind == "subscription":
            info = ns.get_subscription(request.topic, request.name)
        else:
            info = ns.get_rule(request.topic, request.subscription, request.name)
        return entity_to_wire(info)

    async def SbDelete(self, request: pb.SbEntityRef, context: Context) -> pb.SbDeleted:
        ns = self._ns
        kind = _kind(request)
        if kind == "queue":
            ns.delete_queue(request.name)
        elif kind == "topic":
            ns.delete_topic(request.name)
        elif kind == "subscription":
            ns.delete_subscription(request.topic, request.name)
        else:
            ns.delete_rule(request.topic, request.subscription, request.name)
        await self._done()
        return pb.SbDeleted()

    async def SbList(self, request: pb.SbListRequest, context: Context) -> pb.SbEntityList:
        ns = self._ns
        kind = _kind(
            pb.SbEntityRef(
                kind=request.kind, topic=request.topic, subscription=request.subscription
            )
        )
        infos: list[Any]
        if kind == "queue":
            infos = ns.list_queues()
        elif kind == "topic":
            infos = ns.list_topics()
        elif kind == "subscription":
            infos = ns.list_subscriptions(request.topic)
        else:
            infos = ns.list_rules(request.topic, request.subscription)
        return pb.SbEntityList(entities=[entity_to_wire(i) for i in infos])

    async def SbImport(self, request: pb.SbImportRequest, context: Context) -> pb.SbImportResponse:
        changes = self._host().apply_text(request.config_json)
        await self._done()
        return pb.SbImportResponse(changes=changes)

    async def SbExport(self, request: pb.SbExportRequest, context: Context) -> pb.SbExportResponse:
        return pb.SbExportResponse(config_json=self._host().export_config())

    # -- messages ---------------------------------------------------------------------------

    async def SbSend(self, request: pb.SbSendRequest, context: Context) -> pb.SbSendResponse:
        ns = self._ns
        _count(len(request.messages), "messages")
        messages = [message_from_wire(m) for m in request.messages]
        numbers = ns.send(request.path, messages)
        await self._done()
        return pb.SbSendResponse(sequence_numbers=numbers)

    async def SbPeek(self, request: pb.SbPeekRequest, context: Context) -> pb.SbMessages:
        found = self._ns.peek(
            request.path,
            request.from_sequence,
            _count(request.max_count, "max_count"),
            session=request.session or None,
        )
        out = pb.SbMessages()
        for stored in found:
            stored_to_wire(stored, out.messages.add())
        return out

    async def SbReceive(self, request: pb.SbReceiveRequest, context: Context) -> pb.SbMessages:
        mode = (
            ReceiveMode.RECEIVE_AND_DELETE
            if request.mode == pb.SB_RECEIVE_AND_DELETE
            else ReceiveMode.PEEK_LOCK
        )
        session = request.session if request.HasField("session") else None
        if request.deferred:
            _count(len(request.deferred), "deferred")
            got = self._ns.receive_deferred(request.path, list(request.deferred), mode, session)
        else:
            count = _count(request.max_count, "max_count")
            got = self._ns.receive(request.path, count, mode, session=session)
        await self._done()
        out = pb.SbMessages()
        for stored in got:
            stored_to_wire(stored, out.messages.add())
        return out

    async def SbSettle(self, request: pb.SbSettleRequest, context: Context) -> pb.SbSettleResponse:
        ns, path, token = self._ns, request.path, _token(request.lock_token)
        how = request.settlement
        locked_until = 0.0
        if how == pb.SB_COMPLETE:
            ns.complete(path, token)
        elif how == pb.SB_ABANDON:
            ns.abandon(path, token)
        elif how == pb.SB_DEFER:
            ns.defer(path, token)
        elif how == pb.SB_DEAD_LETTER:
            ns.dead_letter(
                path,
                token,
                reason=request.dead_letter_reason or None,
                description=request.dead_letter_description or None,
            )
        elif how == pb.SB_RENEW_LOCK:
            locked_until = ns.renew_lock(path, token)
        else:
            raise bad(f"unknown settlement {how}", where="settlement")
        await self._done()
        return pb.SbSettleResponse(locked_until=locked_until)

    async def SbSession(
        self, request: pb.SbSessionRequest, context: Context
    ) -> pb.SbSessionResponse:
        ns, path, op = self._ns, request.path, request.op
        session = request.session_id if request.HasField("session_id") else None
        out = pb.SbSessionResponse()
        if op == pb.SB_SESSION_LIST:
            out.session_ids.extend(ns.list_sessions(path))
            return out
        if op == pb.SB_SESSION_ACCEPT:
            lock = ns.accept_session(path, session)
            if lock is not None:
                out.session_id = lock.session_id
                out.lock_token = str(lock.lock_token)
                out.locked_until = lock.locked_until
            await self._done()
            return out
        if session is None:
            raise bad("the session id is missing", where="session_id")
        if op == pb.SB_SESSION_RELEASE:
            ns.release_session(path, session)
        elif op == pb.SB_SESSION_RENEW:
            out.locked_until = ns.renew_session_lock(path, session)
        elif op == pb.SB_SESSION_GET_STATE:
            state = ns.get_session_state(path, session)
            if state is not None:
                out.state = state
            return out
        elif op == pb.SB_SESSION_SET_STATE:
            ns.set_session_state(
                path, session, request.state if request.HasField("state") else None
            )
        else:
            raise bad(f"unknown session operation {op}", where="op")
        await self._done()
        return out

    async def SbCancelScheduled(
        self, request: pb.SbCancelRequest, context: Context
    ) -> pb.SbDeleted:
        _count(len(request.sequence_numbers), "sequence_numbers")
        self._ns.cancel_scheduled(request.path, list(request.sequence_numbers))
        await self._done()
        return pb.SbDeleted()
