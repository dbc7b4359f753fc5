"""Service Bus ``$management`` request/response operations over a ``Namespace``.

A client sends a request on the sender link of ``<entity>/$management``: application property
``operation`` (``com.microsoft:renew-lock``, ...), an AMQP-value body holding a map with string
keys, and a ``message-id``. The answer goes back on the node's receiver link: application
properties ``statusCode`` (int), ``statusDescription`` and, on failure, ``errorCondition`` (a
symbol the SDK turns into its exception class: ``_common/mgmt_handlers.py`` and
``_transport/_pyamqp_transport.py`` ``_ERROR_CODE_TO_ERROR_MAPPING`` in azure-servicebus
7.15.0), an AMQP-value map body, and ``correlation-id`` = the request's ``message-id``.

``handle(namespace, entity_path, request, now)`` returns the answer; ``respond(namespace,
entity_path, request)`` returns it in a ``Reply`` whose ``changed`` says that the request may
have changed state (the driver then calls ``runtime.servicebus.changed()`` and awaits
durability before it sends the answer). Pure: no I/O, and the time is the namespace's own clock
(the one it settles locks and schedules by), so the answer agrees with the state it describes.

Operations (reference ``docs/servicebus-amqp.md`` §F): renew-lock, update-disposition,
receive-by-sequence-number, peek-message, schedule-message, cancel-scheduled-message,
get-session-state, set-session-state, renew-session-lock, get-message-sessions, and the rule
operations add-rule, remove-rule and enumerate-rules (used by the .NET rule manager; the Python
SDK manages rules over HTTP), whose shapes follow Microsoft's "request-response operations" page:
add-rule takes a ``rule-description`` map (``sql-filter``/``correlation-filter`` maps,
``sql-rule-action``), enumerate-rules answers described lists (rule description
0x0000013700000004: filter, action, name, created time). get-message-sessions does not apply
``last-updated-time``: the namespace keeps no time per session state, so it lists the sessions
with messages or a state.

Statuses: 200 with a body; 204 when peek, deferred receive, session listing or rule listing
find nothing (the SDK reads that as an empty list); a refused operation gets the ``Code``'s
HTTP status and its condition (:mod:`qmgr.sbamqp.conditions`) (lock lost, message not found, entity not
found, ...); a malformed request 400 ``com.microsoft:argument-error``; an unknown operation
400 ``amqp:not-implemented``; an unexpected failure 500 ``amqp:internal-error``, so one bad
request never takes the client's connection down.

Written by hand because no library implements the server side of Microsoft's management
dialect; the encodings are ``qmgr.amqp``'s.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from qmgr.amqp.message import Message, Properties, timestamp
from qmgr.amqp.types import Array, DecodeError, Described, Int, Long, Symbol, Timestamp, ULong
from qmgr.sbamqp.conditions import (
    ARGUMENT_ERROR,
    INTERNAL_ERROR,
    NOT_ALLOWED,
    NOT_IMPLEMENTED,
    VENDOR,
    condition_of,
)
from qmgr.sbamqp.message import to_amqp, to_amqp_value, to_sb_message, to_sb_value
from qmgr.servicebus.entities import FilterType, RuleProperties
from qmgr.servicebus.errors import ServiceBusError
from qmgr.servicebus.message import SbMessage, Stored
from qmgr.servicebus.names import EntityPath
from qmgr.servicebus.namespace import Namespace, ReceiveMode, RuleInfo

RENEW_LOCK = VENDOR + "renew-lock"
UPDATE_DISPOSITION = VENDOR + "update-disposition"
RECEIVE_BY_SEQUENCE_NUMBER = VENDOR + "receive-by-sequence-number"
PEEK_MESSAGE = VENDOR + "peek-message"
SCHEDULE_MESSAGE = VENDOR + "schedule-message"
CANCEL_SCHEDULED_MESSAGE = VENDOR + "cancel-scheduled-message"
GET_SESSION_STATE = VENDOR + "get-session-state"
SET_SESSION_STATE = VENDOR + "set-session-state"
RENEW_SESSION_LOCK = VENDOR + "renew-session-lock"
GET_MESSAGE_SESSIONS = VENDOR + "get-message-sessions"
ADD_RULE = VENDOR + "add-rule"
REMOVE_RULE = VENDOR + "remove-rule"
ENUMERATE_RULES = VENDOR + "enumerate-rules"

# receiver-settle-mode of receive-by-sequence-number (AMQP rcv-settle-mode: first, second)
_SETTLE_MODES = {0: ReceiveMode.RECEIVE_AND_DELETE, 1: ReceiveMode.PEEK_LOCK}

_DISPOSITIONS = ("completed", "abandoned", "defered", "suspended")


@dataclass(slots=True)
class Reply:
    """The answer to send, and whether the request may have changed the namespace (then the
    driver wakes the namespace timer and awaits durability before sending it)."""

    message: Message
    changed: bool = False
    status: int = 200
    condition: str | None = None


class _Refused(Exception):
    """A request that is malformed or not supported: answered with this status and condition."""

    def __init__(self, status: int, condition: str, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.condition = condition
        self.text = text


def _arg(text: str) -> _Refused:
    return _Refused(400, ARGUMENT_ERROR, text)


@dataclass(slots=True)
class _Answer:
    body: dict[str, Any] = field(default_factory=dict)
    status: int = 200


# --- the request body -------------------------------------------------------------------------


def _field(body: Mapping[str, Any], name: str, required: bool = True) -> Any:
    if name not in body:
        if required:
            raise _arg(f"the request has no '{name}'")
        return None
    return body[name]


def _int(body: Mapping[str, Any], name: str, required: bool = True) -> int | None:
    v = _field(body, name, required)
    if v is None and not required:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise _arg(f"'{name}' must be an integer, got {type(v).__name__}")
    return int(v)


# Python's SDK reads an empty array without its element constructor and rhea (the JavaScript
# SDK's AMQP library) with it, so no encoding of an empty array reads right in both: a request
# whose answer would be an empty array is refused instead.
_EMPTY = "'{}' must hold at least one element"


def _ints(body: Mapping[str, Any], name: str) -> list[int]:
    v = _field(body, name)
    if not isinstance(v, list) or not all(
        isinstance(x, int) and not isinstance(x, bool) for x in v
    ):
        raise _arg(f"'{name}' must be an array of longs")
    return [int(x) for x in v]


def _tokens(body: Mapping[str, Any]) -> list[uuid.UUID]:
    v = _field(body, "lock-tokens")
    if not isinstance(v, list) or not all(isinstance(x, uuid.UUID) for x in v):
        raise _arg("'lock-tokens' must be an array of uuids")
    if not v:
        raise _arg(_EMPTY.format("lock-tokens"))
    return list(v)


def _text(body: Mapping[str, Any], name: str, required: bool = True) -> str | None:
    v = _field(body, name, required)
    if v is None and not required:
        return None
    if not isinstance(v, str):
        raise _arg(f"'{name}' must be a string, got {type(v).__name__}")
    return str(v)


def _session(body: Mapping[str, Any]) -> str | None:
    return _text(body, "session-id", required=False)


def _received(stored: Stored, *, locked: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    if locked and stored.lock_token is not None:
        entry["lock-token"] = stored.lock_token
        payload = to_amqp(stored, locked_until=stored.locked_until)
    else:
        payload = to_amqp(stored)
    entry["message"] = payload
    return entry


# --- the operations ---------------------------------------------------------------------------


def _renew_lock(ns: Namespace, path: str, body: Mapping[str, Any]) -> _Answer:
    tokens = _tokens(body)
    expirations = [timestamp(ns.renew_lock(path, t)) for t in tokens]
    return _Answer({"expirations": Array(expirations, Timestamp)})


def _update_disposition(ns: Namespace, path: str, body: Mapping[str, Any]) -> _Answer:
    status = _text(body, "disposition-status")
    if status not in _DISPOSITIONS:
        raise _arg(
            f"'disposition-status' must be one of {', '.join(_DISPOSITIONS)}, got {status!r}"
        )
    tokens = _tokens(body)
    reason = _text(body, "deadletter-reason", required=False)
    description = _text(body, "deadletter-description", required=False)
    modify = _field(body, "properties-to-modify", required=False)
    if modify is not None and not isinstance(modify, dict):
        raise _arg("'properties-to-modify' must be a map")
    props = {str(k): to_sb_value(v) for k, v in modify.items()} if modify else None
    for token in tokens:
        if status == "completed":
            ns.complete(path, token)
        elif status == "abandoned":
            ns.abandon(path, token, props)
        elif status == "defered":
            ns.defer(path, token, props)
        else:
            ns.dead_letter(path, token, reason or None, description or None, props)
    return _Answer()


def _receive_by_sequence_number(
    ns: Namespace, path: str, body: Mapping[str, Any], holder: uuid.UUID | None = None
) -> _Answer:
    numbers = _ints(body, "sequence-numbers")
    raw_mode = _int(body, "receiver-settle-mode", required=False)
    mode = _SETTLE_MODES.get(1 if raw_mode is None else raw_mode)
    if mode is None:
        raise _arg(f"'receiver-settle-mode' must be 0 or 1, got {raw_mode}")
    got = ns.receive_deferred(path, numbers, mode, session=_session(body), holder=holder)
    if not got:
        return _Answer(status=204)
    locked = mode is ReceiveMode.PEEK_LOCK
    return _Answer({"messages": [_received(s, locked=locked) for s in got]})


def _peek(ns: Namespace, path: str, body: Mapping[str, Any]) -> _Answer:
    start = _int(body, "from-sequence-number")
    count = _int(body, "message-count")
    assert start is not None and count is not None
    if count < 1:
        raise _arg(f"'message-count' must be at least 1, got {count}")
    got = ns.peek(path, max(start, 1), count, session=_session(body))
    if not got:
        return _Answer(status=204)
    return _Answer({"messages": [{"message": to_amqp(s)} for s in got]})


def _schedule(ns: Namespace, path: str, body: Mapping[str, Any]) -> _Answer:
    entries = _field(body, "messages")
    if not isinstance(entries, list) or not entries:
        raise _arg("'messages' must be a non-empty list")
    messages: list[SbMessage] = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise _arg("each scheduled message must be a map")
        payload = _field(entry, "message")
        if not isinstance(payload, bytes):
            raise _arg("'message' must be binary")
        message_id = _text(entry, "message-id", required=False)
        try:
            sb = to_sb_message(payload, message_id or uuid.uuid4().hex)  # stamped as on send
        except DecodeError as e:
            raise _arg(f"a scheduled message does not decode: {e}") from None
        if sb.scheduled_enqueue_time is None:
            raise _arg("a scheduled message has no x-opt-scheduled-enqueue-time")
        session_id = _text(entry, "session-id", required=False)
        if sb.session_id is None and session_id is not None:
            sb.session_id = session_id
        partition_key = _text(entry, "partition-key", required=False)
        if sb.partition_key is None and partition_key is not None:
            sb.partition_key = partition_key
        messages.append(sb)
    # one call per run of the same time (the SDK schedules a list for one time: one call)
    numbers: list[int] = []
    i = 0
    while i < len(messages):
        at = messages[i].scheduled_enqueue_time
        j = i
        while j < len(messages) and messages[j].scheduled_enqueue_time == at:
            j += 1
        assert at is not None
        numbers += ns.schedule(path, messages[i:j], at)
        i = j
    return _Answer({"sequence-numbers": Array([Long(n) for n in numbers], Long)})


def _cancel_scheduled(ns: Namespace, path: str, body: Mapping[str, Any]) -> _Answer:
    ns.cancel_scheduled(path, _ints(body, "sequence-numbers"))
    return _Answer()


def _required_session(body: Mapping[str, Any]) -> str:
    sid = _text(body, "session-id")
    assert sid is not None
    return sid


def _get_session_state(
    ns: Namespace, path: str, body: Mapping[str, Any], holder: uuid.UUID | None = None
) -> _Answer:
    state = ns.get_session_state(path, _required_session(body), holder)
    return _Answer({"session-state": state})


def _set_session_state(
    ns: Namespace, path: str, body: Mapping[str, Any], holder: uuid.UUID | None = None
) -> _Answer:
    sid = _required_session(body)
    if "session-state" not in body:
        raise _arg("the request has no 'session-state'")
    state = body["session-state"]
    if state is not None and not isinstance(state, bytes):
        raise _arg(f"'session-state' must be binary or null, got {type(state).__name__}")
    ns.set_session_state(path, sid, state, holder)
    return _Answer()


def _renew_session_lock(
    ns: Namespace, path: str, body: Mapping[str, Any], holder: uuid.UUID | None = None
) -> _Answer:
    until = ns.renew_session_lock(path, _required_session(body), holder)
    return _Answer({"expiration": timestamp(until)})


def _get_message_sessions(ns: Namespace, path: str, body: Mapping[str, Any]) -> _Answer:
    skip = _int(body, "skip", required=False) or 0
    top = _int(body, "top", required=False)
    if skip < 0 or (top is not None and top < 0):
        raise _arg("'skip' and 'top' must not be negative")
    ids = ns.list_sessions(path)[skip:]
    if top is not None:
        ids = ids[:top]
    if not ids:
        return _Answer(status=204)
    return _Answer({"skip": Int(skip + len(ids)), "sessions-ids": Array(ids, str)})


# --- rules (the .NET rule manager; described types from Microsoft's request-response page) ----

RULE_DESCRIPTION = 0x0000013700000004
EMPTY_ACTION = 0x0000013700000005
SQL_FILTER = 0x0000013700000006  # also the SQL rule action's descriptor
SQL_ACTION = 0x0000013700000006
TRUE_FILTER = 0x0000013700000007
FALSE_FILTER = 0x0000013700000008
CORRELATION_FILTER = 0x0000013700000009
_COMPATIBILITY_LEVEL = 20

# correlation-filter map keys and list positions, and the namespace's names for them
_CORRELATION_KEYS = (
    ("correlation-id", "CorrelationId"),
    ("message-id", "MessageId"),
    ("to", "To"),
    ("reply-to", "ReplyTo"),
    ("label", "Label"),
    ("session-id", "SessionId"),
    ("reply-to-session-id", "ReplyToSessionId"),
    ("content-type", "ContentType"),
)


def _subscription(path: str) -> tuple[str, str]:
    p = EntityPath.parse(path)
    if p.subscription is None or p.dlq:
        raise _Refused(400, NOT_ALLOWED, f"rules belong to subscriptions; '{path}' is not one")
    return p.entity, p.subscription


def _rule_name(body: Mapping[str, Any]) -> str:
    name = _text(body, "rule-name")
    assert name is not None
    return name


def _expression(value: Any, what: str) -> str:
    if not isinstance(value, dict) or not isinstance(value.get("expression"), str):
        raise _arg(f"'{what}' must be a map with a string 'expression'")
    return str(value["expression"])


def _rule_properties(description: Any) -> RuleProperties:
    if not isinstance(description, dict) or not all(isinstance(k, str) for k in description):
        raise _arg("'rule-description' must be a map with string keys")
    filters = [
        k
        for k in ("sql-filter", "correlation-filter", "true-filter", "false-filter")
        if description.get(k) is not None
    ]
    if len(filters) > 1:
        raise _arg(f"a rule has one filter, got {', '.join(filters)}")
    raw_action = description.get("sql-rule-action")
    action = None if raw_action is None else _expression(raw_action, "sql-rule-action")
    kind = filters[0] if filters else "true-filter"
    if kind == "sql-filter":
        sql = _expression(description["sql-filter"], "sql-filter")
        return RuleProperties(filter_type=FilterType.SQL, sql=sql, action=action)
    if kind == "correlation-filter":
        raw = description["correlation-filter"]
        if not isinstance(raw, dict):
            raise _arg("'correlation-filter' must be a map")
        correlation: dict[str, str] = {}
        for wire, name in _CORRELATION_KEYS:
            v = raw.get(wire)
            if v is not None:
                if not isinstance(v, str):
                    raise _arg(f"correlation-filter '{wire}' must be a string")
                correlation[name] = str(v)
        props = raw.get("properties") or {}
        if not isinstance(props, dict):
            raise _arg("correlation-filter 'properties' must be a map")
        return RuleProperties(
            filter_type=FilterType.CORRELATION,
            correlation=correlation,
            properties={str(k): to_sb_value(v) for k, v in props.items()},
            action=action,
        )
    filter_type = FilterType.TRUE if kind == "true-filter" else FilterType.FALSE
    return RuleProperties(filter_type=filter_type, action=action)


def _add_rule(ns: Namespace, path: str, body: Mapping[str, Any]) -> _Answer:
    topic, sub = _subscription(path)
    name = _rule_name(body)
    ns.create_rule(topic, sub, name, _rule_properties(_field(body, "rule-description")))
    return _Answer()


def _remove_rule(ns: Namespace, path: str, body: Mapping[str, Any]) -> _Answer:
    topic, sub = _subscription(path)
    ns.delete_rule(topic, sub, _rule_name(body))
    return _Answer()


def _described_rule(info: RuleInfo) -> Described:
    r = info.properties
    if r.filter_type is FilterType.SQL:
        flt = Described(ULong(SQL_FILTER), [r.sql, Int(_COMPATIBILITY_LEVEL)])
    elif r.filter_type is FilterType.CORRELATION:
        values: list[Any] = [r.correlation.get(name) for _, name in _CORRELATION_KEYS]
        values.append({k: to_amqp_value(v) for k, v in r.properties.items()})
        flt = Described(ULong(CORRELATION_FILTER), values)
    elif r.filter_type is FilterType.TRUE:
        flt = Described(ULong(TRUE_FILTER), [])
    else:
        flt = Described(ULong(FALSE_FILTER), [])
    if r.action:
        action = Described(ULong(SQL_ACTION), [r.action, Int(_COMPATIBILITY_LEVEL)])
    else:
        action = Described(ULong(EMPTY_ACTION), [])
    return Described(ULong(RULE_DESCRIPTION), [flt, action, info.name, timestamp(info.created_at)])


def _enumerate_rules(ns: Namespace, path: str, body: Mapping[str, Any]) -> _Answer:
    topic, sub = _subscription(path)
    skip = _int(body, "skip", required=False) or 0
    top = _int(body, "top", required=False)
    if skip < 0 or (top is not None and top < 0):
        raise _arg("'skip' and 'top' must not be negative")
    rules = ns.list_rules(topic, sub)[skip:]
    if top is not None:
        rules = rules[:top]
    if not rules:
        return _Answer(status=204)
    return _Answer({"rules": [{"rule-description": _described_rule(r)} for r in rules]})


_Op = Callable[[Namespace, str, Mapping[str, Any]], _Answer]

OPERATIONS: dict[str, tuple[_Op, bool]] = {  # operation: (handler, may change state)
    RENEW_LOCK: (_renew_lock, True),
    UPDATE_DISPOSITION: (_update_disposition, True),
    RECEIVE_BY_SEQUENCE_NUMBER: (_receive_by_sequence_number, True),
    PEEK_MESSAGE: (_peek, False),
    SCHEDULE_MESSAGE: (_schedule, True),
    CANCEL_SCHEDULED_MESSAGE: (_cancel_scheduled, True),
    GET_SESSION_STATE: (_get_session_state, True),  # may lock the session
    SET_SESSION_STATE: (_set_session_state, True),
    RENEW_SESSION_LOCK: (_renew_session_lock, True),
    GET_MESSAGE_SESSIONS: (_get_message_sessions, False),
    ADD_RULE: (_add_rule, True),
    REMOVE_RULE: (_remove_rule, True),
    ENUMERATE_RULES: (_enumerate_rules, False),
}
# the operations on a receiver's session: given the session lock the receiver was granted, they
# act only while it still holds the session
_HeldOp = Callable[[Namespace, str, Mapping[str, Any], uuid.UUID | None], _Answer]
HELD_OPERATIONS: dict[str, _HeldOp] = {
    RECEIVE_BY_SEQUENCE_NUMBER: _receive_by_sequence_number,
    GET_SESSION_STATE: _get_session_state,
    SET_SESSION_STATE: _set_session_state,
    RENEW_SESSION_LOCK: _renew_session_lock,
}


# --- the entry point --------------------------------------------------------------------------


def _response(
    request: Message, status: int, description: str, body: Any, condition: str | None
) -> Message:
    app: dict[Any, Any] = {"statusCode": Int(status), "statusDescription": description}
    if condition is not None:
        app["errorCondition"] = Symbol(condition)
    correlation = request.properties.message_id if request.properties is not None else None
    return Message(
        properties=Properties(correlation_id=correlation),
        application_properties=app,
        body=body,
        body_type="value",
    )


def refusal(request: Message, status: int, description: str, condition: str) -> Message:
    """The answer refusing ``request`` before any operation ran (such as 401 when the
    connection's token lacks the claim)."""
    return _response(request, status, description, {}, condition)


def handle(
    namespace: Namespace, entity_path: str, request: Message, now: float | None = None
) -> Message:
    """The answer to one ``$management`` request addressed to ``<entity_path>/$management``
    (``respond`` also says whether state may have changed).

    ``now`` is the driver's time of the request; the operations read the namespace's own clock
    (the node's, the same one), so they agree with the locks and schedules they act on."""
    return respond(namespace, entity_path, request).message


def respond(
    namespace: Namespace, entity_path: str, request: Message, holder: uuid.UUID | None = None
) -> Reply:
    """Answer one ``$management`` request addressed to ``<entity_path>/$management``.
    ``holder``: the session lock of the receiver the request comes from, if it holds one
    (see ``HELD_OPERATIONS``).

    Never raises for a bad request or a refused operation: the answer carries the status and
    error condition. ``Reply.changed`` is true when the operation may have changed state,
    including a failure part-way through several lock tokens.
    """
    app = request.application_properties or {}
    operation = app.get("operation")
    op = OPERATIONS.get(str(operation)) if isinstance(operation, str) else None
    if op is None:
        text = f"unknown operation {operation!r}"
        return Reply(
            _response(request, 400, text, {}, NOT_IMPLEMENTED), False, 400, NOT_IMPLEMENTED
        )
    fn, may_change = op
    body = request.body if request.body_type == "value" else None
    try:
        if body is None:
            body = {}
        if not isinstance(body, dict) or not all(isinstance(k, str) for k in body):
            raise _arg("the request body must be a map with string keys")
        held = HELD_OPERATIONS.get(str(operation)) if holder is not None else None
        answer = (
            held(namespace, entity_path, body, holder) if held else fn(namespace, entity_path, body)
        )
    except _Refused as e:
        return Reply(
            _response(request, e.status, e.text, {}, e.condition), False, e.status, e.condition
        )
    except ServiceBusError as e:
        condition = condition_of(e, NOT_ALLOWED)
        return Reply(
            _response(request, e.code.status, str(e), {}, condition),
            may_change,
            e.code.status,
            condition,
        )
    except Exception as e:  # a bug here must not take the client's connection down
        text = f"internal error: {type(e).__name__}: {e}"
        return Reply(_response(request, 500, text, {}, INTERNAL_ERROR), True, 500, INTERNAL_ERROR)
    description = "OK" if answer.status == 200 else "No Content"
    return Reply(
        _response(request, answer.status, description, answer.body, None),
        may_change,
        answer.status,
    )
