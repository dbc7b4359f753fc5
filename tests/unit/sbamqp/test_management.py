"""``$management`` operations: requests built the way azure-servicebus 7.15.0 builds them, answers
read by the SDK's own handlers (``_common/mgmt_handlers.py``) after a trip through its decoder."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from azure.servicebus import ServiceBusMessage, ServiceBusReceiveMode
from azure.servicebus._common import mgmt_handlers
from azure.servicebus._pyamqp._decode import decode_payload
from azure.servicebus._pyamqp._encode import encode_payload
from azure.servicebus._pyamqp.message import Message as PyMessage
from azure.servicebus._pyamqp.utils import amqp_string_value
from azure.servicebus._servicebus_sender import ServiceBusSender
from azure.servicebus._transport._pyamqp_transport import PyamqpTransport as T
from azure.servicebus.exceptions import (
    MessageLockLostError,
    MessageNotFoundError,
    MessageSizeExceededError,
    MessagingEntityNotFoundError,
    ServiceBusError,
    SessionLockLostError,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qmgr.amqp.message import Message, Properties, decode_message, encode_message
from qmgr.core.clock import ManualClock
from qmgr.sbamqp.management import OPERATIONS, Reply, handle, respond
from qmgr.servicebus.entities import QueueProperties
from qmgr.servicebus.message import MessageState, SbMessage
from qmgr.servicebus.namespace import Namespace, ReceiveMode

OPS = "com.microsoft:"


def namespace(clock: ManualClock) -> Namespace:
    """Queue ``q`` and session queue ``s``, both with a 30 s lock."""
    n = Namespace(clock=clock)
    n.create_queue("q", QueueProperties(lock_duration=30.0))
    n.create_queue("s", QueueProperties(requires_session=True, lock_duration=30.0))
    return n


@pytest.fixture
def ns(clock: ManualClock) -> Namespace:
    return namespace(clock)


def request(operation: str, body: dict[str, Any], entity: str = "q") -> Any:
    """A request as ``BaseHandler._mgmt_request_response`` and ``ManagementLink`` make it,
    encoded by the SDK and decoded by ours."""
    msg = T.create_mgmt_msg(
        message=body,
        application_properties={
            OPS + "server-timeout": T.AMQP_UINT_VALUE(60000),
            "associated-link-name": "SBReceiver-x",
        },
        config=None,
        reply_to=f"{entity}/$management",
    )
    msg.application_properties["operation"] = amqp_string_value(OPS + operation)
    msg.application_properties["type"] = amqp_string_value(b"entity-mgmt")
    msg = msg._replace(properties=msg.properties._replace(message_id=uuid.uuid4()))
    return decode_message(bytes(encode_payload(bytearray(), msg)))


def sdk_view(reply: Reply) -> tuple[int, PyMessage, Any]:
    m = decode_payload(memoryview(encode_message(reply.message)))
    app = m.application_properties
    return app[b"statusCode"], m, app.get(b"statusDescription")


def call(handler: Callable[..., Any], reply: Reply, **kw: Any) -> Any:
    status, m, description = sdk_view(reply)
    return handler(status, m, description, amqp_transport=T, **kw)


def send(ns: Namespace, path: str = "q", n: int = 3, session: str | None = None) -> list[int]:
    return ns.send(path, [SbMessage(body=b"m%d" % i, session_id=session) for i in range(n)])


# --- the envelope ---------------------------------------------------------------------------


def test_response_correlates_with_the_request_and_carries_int_status(ns: Namespace) -> None:
    send(ns)
    req = request(
        "peek-message", {"from-sequence-number": T.AMQP_LONG_VALUE(1), "message-count": 1}
    )
    reply = respond(ns, "q", req)
    status, m, description = sdk_view(reply)
    assert status == 200 and isinstance(status, int)
    assert m.properties.correlation_id == req.properties.message_id
    assert description == b"OK"
    assert b"errorCondition" not in m.application_properties
    assert reply.changed is False


def test_unknown_operation_is_refused_and_changes_nothing(ns: Namespace) -> None:
    reply = respond(ns, "q", request("frobnicate", {}))
    with pytest.raises(ServiceBusError):
        call(mgmt_handlers.default, reply)
    assert reply.status == 400 and reply.changed is False


def test_unknown_entity_maps_to_entity_not_found(ns: Namespace) -> None:
    req = request(
        "peek-message", {"from-sequence-number": T.AMQP_LONG_VALUE(1), "message-count": 1}
    )
    reply = respond(ns, "nope", req)
    assert reply.status == 404
    with pytest.raises(MessagingEntityNotFoundError):
        call(mgmt_handlers.peek_op, reply, receiver=SimpleNamespace())


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"from-sequence-number": "one", "message-count": 1},
        {"from-sequence-number": T.AMQP_LONG_VALUE(1), "message-count": 0},
    ],
)
def test_malformed_peek_is_an_argument_error(ns: Namespace, body: dict[str, Any]) -> None:
    reply = respond(ns, "q", request("peek-message", body))
    assert (reply.status, reply.condition) == (400, "com.microsoft:argument-error")
    with pytest.raises(ServiceBusError):
        call(mgmt_handlers.peek_op, reply, receiver=SimpleNamespace())


def test_a_body_that_is_not_a_map_is_refused(ns: Namespace) -> None:
    req = request("peek-message", {})
    req.body = [1, 2]
    assert respond(ns, "q", req).status == 400


# --- peek -----------------------------------------------------------------------------------


def test_peek_returns_messages_the_sdk_parses(ns: Namespace) -> None:
    seqs = send(ns, n=3)
    req = request(
        "peek-message", {"from-sequence-number": T.AMQP_LONG_VALUE(2), "message-count": 5}
    )
    got = call(mgmt_handlers.peek_op, respond(ns, "q", req), receiver=SimpleNamespace())
    assert [m.sequence_number for m in got] == seqs[1:]
    assert [b"".join(m.body) for m in got] == [b"m1", b"m2"]
    assert ns.get_queue("q").active == 3  # nothing removed
    assert all(s.lock_token is None for s in ns.peek("q", 1, 10))  # nor locked


def test_peek_with_nothing_is_204_and_an_empty_list(ns: Namespace) -> None:
    req = request(
        "peek-message", {"from-sequence-number": T.AMQP_LONG_VALUE(1), "message-count": 5}
    )
    reply = respond(ns, "q", req)
    assert reply.status == 204
    assert call(mgmt_handlers.peek_op, reply, receiver=SimpleNamespace()) == []


def test_peek_in_a_session(ns: Namespace) -> None:
    send(ns, "s", 2, session="a")
    send(ns, "s", 2, session="b")
    body = {"from-sequence-number": T.AMQP_LONG_VALUE(1), "message-count": 10, "session-id": "b"}
    got = call(
        mgmt_handlers.peek_op,
        respond(ns, "s", request("peek-message", body)),
        receiver=SimpleNamespace(),
    )
    assert [m.session_id for m in got] == ["b", "b"]


# --- locks and settlement -------------------------------------------------------------------


def test_renew_lock_returns_expirations_the_sdk_reads(ns: Namespace, clock: ManualClock) -> None:
    send(ns, n=2)
    got = ns.receive("q", 2, ReceiveMode.PEEK_LOCK)
    clock.advance(10)
    body = {"lock-tokens": T.AMQP_ARRAY_VALUE([s.lock_token for s in got])}
    reply = respond(ns, "q", request("renew-lock", body))
    value = call(mgmt_handlers.message_lock_renew_op, reply)
    assert value[b"expirations"] == [int((clock.now() + 30) * 1000)] * 2
    assert reply.changed


def test_renew_of_no_lock_tokens_is_a_clear_argument_error(ns: Namespace) -> None:
    """An empty answer array reads differently in Python's SDK and in rhea, so it is never sent."""
    body = {"lock-tokens": T.AMQP_ARRAY_VALUE([])}
    reply = respond(ns, "q", request("renew-lock", body))
    status, _, description = sdk_view(reply)
    assert status == 400
    assert b"lock-tokens" in description
    assert not reply.changed


def test_renew_of_a_lost_lock_is_message_lock_lost(ns: Namespace, clock: ManualClock) -> None:
    send(ns, n=1)
    [got] = ns.receive("q", 1, ReceiveMode.PEEK_LOCK)
    clock.advance(31)
    ns.tick()
    body = {"lock-tokens": T.AMQP_ARRAY_VALUE([got.lock_token])}
    reply = respond(ns, "q", request("renew-lock", body))
    assert reply.condition == "com.microsoft:message-lock-lost"
    with pytest.raises(MessageLockLostError):
        call(mgmt_handlers.message_lock_renew_op, reply)


@pytest.mark.parametrize(
    ("status", "extra", "active", "deferred", "dlq"),
    [
        ("completed", {}, 0, 0, 0),
        ("abandoned", {}, 1, 0, 0),
        ("defered", {}, 0, 1, 0),
        ("suspended", {"deadletter-reason": "bad", "deadletter-description": "very"}, 0, 0, 1),
    ],
)
def test_update_disposition(
    ns: Namespace, status: str, extra: dict[str, Any], active: int, deferred: int, dlq: int
) -> None:
    send(ns, n=1)
    [got] = ns.receive("q", 1, ReceiveMode.PEEK_LOCK)
    body = {"disposition-status": status, "lock-tokens": T.AMQP_ARRAY_VALUE([got.lock_token])}
    body.update(extra)
    reply = respond(ns, "q", request("update-disposition", body))
    assert call(mgmt_handlers.default, reply) == {}
    assert reply.changed
    info = ns.get_queue("q")
    assert (info.active, info.deferred, info.dead_lettered) == (active, deferred, dlq)
    if dlq:
        [dead] = ns.peek("q/$DeadLetterQueue", 1, 1)
        assert dead.message.properties["DeadLetterReason"] == "bad"
        assert dead.message.properties["DeadLetterErrorDescription"] == "very"


def test_update_disposition_with_a_lost_lock(ns: Namespace) -> None:
    body = {"disposition-status": "completed", "lock-tokens": T.AMQP_ARRAY_VALUE([uuid.uuid4()])}
    reply = respond(ns, "q", request("update-disposition", body))
    with pytest.raises(MessageLockLostError):
        call(mgmt_handlers.default, reply)


def test_update_disposition_with_a_bad_status(ns: Namespace) -> None:
    send(ns, n=1)
    [got] = ns.receive("q", 1, ReceiveMode.PEEK_LOCK)
    body = {"disposition-status": "done", "lock-tokens": T.AMQP_ARRAY_VALUE([got.lock_token])}
    reply = respond(ns, "q", request("update-disposition", body))
    assert reply.status == 400 and not reply.changed
    [still] = ns.peek("q", 1, 10)
    assert still.lock_token == got.lock_token and still.state is MessageState.ACTIVE


# --- deferred messages ----------------------------------------------------------------------


def _defer_all(ns: Namespace, n: int) -> list[int]:
    seqs = send(ns, n=n)
    for s in ns.receive("q", n, ReceiveMode.PEEK_LOCK):
        assert s.lock_token is not None
        ns.defer("q", s.lock_token)
    return seqs


def _receive_deferred(ns: Namespace, seqs: list[int], settle_mode: int) -> Any:
    """The reply of queue "q" to receive-by-sequence-number (settle mode 0: receive and
    delete, 1: peek lock)."""
    body = {
        "sequence-numbers": T.AMQP_ARRAY_VALUE([T.AMQP_LONG_VALUE(s) for s in seqs]),
        "receiver-settle-mode": T.AMQP_UINT_VALUE(settle_mode),
    }
    return respond(ns, "q", request("receive-by-sequence-number", body))


def test_receive_deferred_peek_lock_then_settle_through_management(ns: Namespace) -> None:
    seqs = _defer_all(ns, 2)
    reply = _receive_deferred(ns, seqs, settle_mode=1)
    got = call(mgmt_handlers.deferred_message_op, reply, receiver=SimpleNamespace())
    assert [m.sequence_number for m in got] == seqs
    assert all(m.lock_token for m in got)
    assert got[0].locked_until_utc is not None
    tokens = [uuid.UUID(str(m.lock_token)) for m in got]
    settle = {"disposition-status": "completed", "lock-tokens": T.AMQP_ARRAY_VALUE(tokens)}
    assert (
        call(mgmt_handlers.default, respond(ns, "q", request("update-disposition", settle))) == {}
    )
    assert ns.peek("q", 1, 10) == []


def test_receive_deferred_receive_and_delete(ns: Namespace) -> None:
    seqs = _defer_all(ns, 1)
    reply = _receive_deferred(ns, seqs, settle_mode=0)
    got = call(
        mgmt_handlers.deferred_message_op,
        reply,
        receiver=SimpleNamespace(),
        receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE,
    )
    assert [m.sequence_number for m in got] == seqs
    assert ns.peek("q", 1, 10) == []


def test_receive_deferred_of_a_missing_number_is_message_not_found(ns: Namespace) -> None:
    seqs = _defer_all(ns, 1)
    reply = _receive_deferred(ns, [*seqs, 99], settle_mode=1)
    with pytest.raises(MessageNotFoundError):
        call(mgmt_handlers.deferred_message_op, reply, receiver=SimpleNamespace())
    [still] = ns.peek("q", 1, 10)
    assert still.state is MessageState.DEFERRED and still.lock_token is None


# --- scheduling -----------------------------------------------------------------------------


def test_schedule_and_cancel(ns: Namespace, clock: ManualClock) -> None:
    at = dt.datetime.fromtimestamp(clock.now() + 60, dt.UTC)
    msgs = [ServiceBusMessage(b"x", message_id="a"), ServiceBusMessage(b"y", message_id="b")]
    body, _ = ServiceBusSender._build_schedule_request(at, T, {}, *msgs)
    reply = respond(ns, "q", request("schedule-message", body))
    seqs = call(mgmt_handlers.schedule_op, reply)
    assert len(seqs) == 2 and reply.changed
    peeked = ns.peek("q", 1, 10)
    assert [p.state for p in peeked] == [MessageState.SCHEDULED] * 2
    assert [p.message.message_id for p in peeked] == ["a", "b"]
    cancel = {"sequence-numbers": T.AMQP_ARRAY_VALUE([T.AMQP_LONG_VALUE(s) for s in seqs])}
    assert (
        call(mgmt_handlers.default, respond(ns, "q", request("cancel-scheduled-message", cancel)))
        == {}
    )
    assert ns.peek("q", 1, 10) == []


def test_cancel_an_unknown_number_is_message_not_found(ns: Namespace) -> None:
    cancel = {"sequence-numbers": T.AMQP_ARRAY_VALUE([T.AMQP_LONG_VALUE(7)])}
    reply = respond(ns, "q", request("cancel-scheduled-message", cancel))
    with pytest.raises(MessageNotFoundError):
        call(mgmt_handlers.default, reply)


def test_schedule_without_a_time_or_with_garbage_is_refused(ns: Namespace) -> None:
    body = {"messages": [{"message-id": "a", "message": bytearray(b"\x00garbage")}]}
    assert respond(ns, "q", request("schedule-message", body)).status == 400
    assert respond(ns, "q", request("schedule-message", {"messages": []})).status == 400
    assert ns.peek("q", 1, 10) == []


# --- sessions -------------------------------------------------------------------------------


def test_session_state_lock_and_listing(ns: Namespace, clock: ManualClock) -> None:
    send(ns, "s", 1, session="a")
    assert ns.accept_session("s", "a") is not None
    set_body = {"session-id": "a", "session-state": bytearray(b"st")}
    reply = respond(ns, "s", request("set-session-state", set_body))
    assert call(mgmt_handlers.default, reply) == {} and reply.changed
    got = call(
        mgmt_handlers.default, respond(ns, "s", request("get-session-state", {"session-id": "a"}))
    )
    assert got[b"session-state"] == b"st"
    clock.advance(5)
    renewed = call(
        mgmt_handlers.session_lock_renew_op,
        respond(ns, "s", request("renew-session-lock", {"session-id": "a"})),
    )
    assert renewed[b"expiration"] == int((clock.now() + 30) * 1000)
    listing = {
        "last-updated-time": T.AMQP_TIMESTAMP_VALUE(253402300800000),
        "skip": T.AMQP_INT_VALUE(0),
        "top": T.AMQP_INT_VALUE(100),
    }
    reply = respond(ns, "s", request("get-message-sessions", listing))
    assert call(mgmt_handlers.list_sessions_op, reply) == ["a"]


def test_clearing_session_state(ns: Namespace) -> None:
    assert ns.accept_session("s", "a") is not None
    ns.set_session_state("s", "a", b"x")
    respond(ns, "s", request("set-session-state", {"session-id": "a", "session-state": None}))
    got = call(
        mgmt_handlers.default, respond(ns, "s", request("get-session-state", {"session-id": "a"}))
    )
    assert got[b"session-state"] is None


def test_no_sessions_is_204_and_an_empty_list(ns: Namespace) -> None:
    listing = {"skip": T.AMQP_INT_VALUE(0), "top": T.AMQP_INT_VALUE(100)}
    reply = respond(ns, "s", request("get-message-sessions", listing))
    assert reply.status == 204
    assert call(mgmt_handlers.list_sessions_op, reply) == []


def test_session_lock_lost(ns: Namespace, clock: ManualClock) -> None:
    send(ns, "s", 1, session="a")
    assert ns.accept_session("s", "a") is not None
    clock.advance(31)
    ns.tick()
    reply = respond(ns, "s", request("renew-session-lock", {"session-id": "a"}))
    with pytest.raises(SessionLockLostError):
        call(mgmt_handlers.session_lock_renew_op, reply)


def test_session_operation_without_a_session_id(ns: Namespace) -> None:
    reply = respond(ns, "s", request("get-session-state", {}))
    assert (reply.status, reply.condition) == (400, "com.microsoft:argument-error")


def test_handle_is_respond_message_for_the_driver(ns: Namespace, clock: ManualClock) -> None:
    send(ns)
    req = request(
        "peek-message", {"from-sequence-number": T.AMQP_LONG_VALUE(1), "message-count": 2}
    )
    answer = handle(ns, "q", req, clock.now())
    assert encode_message(answer) == encode_message(respond(ns, "q", req).message)


# --- rules (the .NET rule manager's shapes) -------------------------------------------------

SUB = "t/Subscriptions/s"


@pytest.fixture
def topic_ns(ns: Namespace) -> Namespace:
    ns.create_topic("t")
    ns.create_subscription("t", "s")
    return ns


def test_add_enumerate_and_remove_rules(topic_ns: Namespace) -> None:
    ns = topic_ns
    sql = {
        "rule-name": "big",
        "rule-description": {
            "sql-filter": {"expression": "amount > 10"},
            "correlation-filter": None,
            "sql-rule-action": {"expression": "SET sys.Label = 'big'"},
            "rule-name": "big",
        },
    }
    reply = respond(ns, SUB, request("add-rule", sql, SUB))
    assert call(mgmt_handlers.default, reply) == {} and reply.changed
    corr = {
        "rule-name": "red",
        "rule-description": {
            "correlation-filter": {
                "correlation-id": "c1",
                "label": "x",
                "properties": {"color": "red"},
            },
            "sql-rule-action": None,
        },
    }
    assert respond(ns, SUB, request("add-rule", corr, SUB)).status == 200
    rules = {r.name: r.properties for r in ns.list_rules("t", "s")}
    assert rules["big"].sql == "amount > 10" and rules["big"].action == "SET sys.Label = 'big'"
    assert dict(rules["red"].correlation) == {"CorrelationId": "c1", "Label": "x"}
    assert dict(rules["red"].properties) == {"color": "red"}

    listing = {"top": T.AMQP_INT_VALUE(100), "skip": T.AMQP_INT_VALUE(0)}
    reply = respond(ns, SUB, request("enumerate-rules", listing, SUB))
    assert not reply.changed
    value = call(mgmt_handlers.default, reply)
    names = [entry[b"rule-description"][2] for entry in value[b"rules"]]
    assert names == [b"$Default", b"big", b"red"]
    big = value[b"rules"][1][b"rule-description"]
    assert big[0] == [b"amount > 10", 20] and big[1] == [b"SET sys.Label = 'big'", 20]
    red = value[b"rules"][2][b"rule-description"]
    assert red[0][0] == b"c1" and red[0][4] == b"x" and red[0][8] == {b"color": b"red"}
    assert red[1] == []

    gone = {"rule-name": "big"}
    assert respond(ns, SUB, request("remove-rule", gone, SUB)).status == 200
    assert [r.name for r in ns.list_rules("t", "s")] == ["$Default", "red"]


def test_rule_errors(topic_ns: Namespace) -> None:
    ns = topic_ns
    dup = {"rule-name": "$Default", "rule-description": {"sql-filter": {"expression": "1=1"}}}
    reply = respond(ns, SUB, request("add-rule", dup, SUB))
    assert (reply.status, reply.condition) == (409, "com.microsoft:entity-already-exists")
    bad_sql = {"rule-name": "x", "rule-description": {"sql-filter": {"expression": "a >"}}}
    reply = respond(ns, SUB, request("add-rule", bad_sql, SUB))
    assert (reply.status, reply.condition) == (400, "com.microsoft:argument-error")
    both = {
        "rule-name": "x",
        "rule-description": {"sql-filter": {"expression": "1=1"}, "true-filter": {}},
    }
    assert respond(ns, SUB, request("add-rule", both, SUB)).status == 400
    missing = respond(ns, SUB, request("remove-rule", {"rule-name": "nope"}, SUB))
    assert (missing.status, missing.condition) == (404, "amqp:not-found")
    on_queue = respond(ns, "q", request("remove-rule", {"rule-name": "x"}))
    assert (on_queue.status, on_queue.condition) == (400, "amqp:not-allowed")
    assert [r.name for r in ns.list_rules("t", "s")] == ["$Default"]


def test_enumerate_rules_with_none_is_204(topic_ns: Namespace) -> None:
    topic_ns.delete_rule("t", "s", "$Default")
    listing = {"top": T.AMQP_INT_VALUE(100), "skip": T.AMQP_INT_VALUE(0)}
    assert respond(topic_ns, SUB, request("enumerate-rules", listing, SUB)).status == 204


def test_update_disposition_modifies_properties(ns: Namespace) -> None:
    send(ns, n=1)
    [got] = ns.receive("q", 1, ReceiveMode.PEEK_LOCK)
    body = {
        "disposition-status": "abandoned",
        "lock-tokens": T.AMQP_ARRAY_VALUE([got.lock_token]),
        "properties-to-modify": {
            "reason": "busy",
            "tries": T.AMQP_INT_VALUE(2),
            "big": T.AMQP_LONG_VALUE(2**40),
        },
    }
    assert respond(ns, "q", request("update-disposition", body)).status == 200
    [again] = ns.peek("q", 1, 1)
    assert again.message.properties == {"reason": "busy", "tries": 2, "big": 2**40}
    assert type(again.message.properties["tries"]).__name__ == "Int32"


def test_a_scheduled_message_without_an_id_gets_one(ns: Namespace, clock: ManualClock) -> None:
    at = dt.datetime.fromtimestamp(clock.now() + 60, dt.UTC)
    body, _ = ServiceBusSender._build_schedule_request(at, T, {}, ServiceBusMessage(b"x"))
    body["messages"][0]["message-id"] = None
    assert respond(ns, "q", request("schedule-message", body)).status == 200
    [p] = ns.peek("q", 1, 1)
    assert p.message.message_id


# --- whatever arrives, an answer and no exception ---------------------------------------------

_KEYS = [
    "lock-tokens", "disposition-status", "deadletter-reason", "deadletter-description",
    "properties-to-modify", "session-id", "sequence-numbers", "receiver-settle-mode",
    "from-sequence-number", "message-count", "messages", "message", "message-id",
    "session-state", "skip", "top", "last-updated-time", "rule-name", "rule-description",
]  # fmt: skip
_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.text(max_size=8)
    | st.binary(max_size=8)
    | st.uuids()
    | st.sampled_from(["completed", "abandoned", "defered", "suspended", "s", "a"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(_KEYS + ["expression"]), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(
    max_examples=150,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    operation=st.sampled_from(sorted(OPERATIONS)),
    body=st.dictionaries(st.sampled_from(_KEYS), _VALUES, max_size=5),
    entity=st.sampled_from(["q", "s", "t/Subscriptions/s", "q/$DeadLetterQueue", "zz"]),
)
def test_any_body_gets_an_answer(
    ns: Namespace, operation: str, body: dict[str, Any], entity: str
) -> None:
    if not ns.list_topics():
        ns.create_topic("t")
        ns.create_subscription("t", "s")
    sent = Message(
        properties=Properties(message_id="m1"),
        application_properties={"operation": operation, "type": "entity-mgmt"},
        body=body,
    )
    reply = respond(ns, entity, decode_message(encode_message(sent)))
    app = reply.message.application_properties
    assert app is not None and isinstance(app["statusCode"], int)
    assert sdk_view(reply)[0] == reply.status
    assert reply.status != 500, reply.message.application_properties


def test_a_failure_inside_is_answered_500(ns: Namespace, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(ns, "peek", broken)
    req = request(
        "peek-message", {"from-sequence-number": T.AMQP_LONG_VALUE(1), "message-count": 1}
    )
    reply = respond(ns, "q", req)
    assert (reply.status, reply.condition) == (500, "amqp:internal-error")
    with pytest.raises(ServiceBusError):
        call(mgmt_handlers.peek_op, reply, receiver=SimpleNamespace())


def test_oversize_session_state_is_message_size_exceeded(ns: Namespace) -> None:
    assert ns.accept_session("s", "a") is not None
    big = {"session-id": "a", "session-state": bytearray(300 * 1024)}
    reply = respond(ns, "s", request("set-session-state", big, "s"))
    assert (reply.status, reply.condition) == (400, "amqp:link:message-size-exceeded")
    with pytest.raises(MessageSizeExceededError):
        call(mgmt_handlers.default, reply)
    assert ns.get_session_state("s", "a") is None
