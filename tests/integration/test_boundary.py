"""The node's error and validation boundary against a real node process: garbage protobuf and
poison values are refused with INVALID_ARGUMENT or the typed MQ error, change nothing, print no
traceback, and the node keeps serving everyone else."""

from __future__ import annotations

import grpc
import pytest

from qmgr.client import MQClientError
from qmgr.wire import messages_pb2, messaging_pb2, messaging_pb2_grpc
from tests.integration.conftest import NodeProcess

GARBAGE = b"\xff\xff\xff\xff\x0f garbage"  # a truncated varint tag: never valid protobuf
UNARY = [
    "/qmgr.wire.Messaging/Put",
    "/qmgr.wire.Messaging/Get",
    "/qmgr.wire.Messaging/Publish",
    "/qmgr.wire.Messaging/Commit",
    "/qmgr.wire.Messaging/Unsubscribe",
    "/qmgr.wire.Admin/Mqsc",
]


@pytest.fixture
def node(shared_node: NodeProcess) -> NodeProcess:
    """The module's one node (see ``shared_node``)."""
    return shared_node


def _depth(node: NodeProcess, queue: str) -> int:
    with node.client() as qm:
        return int(qm.mqsc(f"DISPLAY QSTATUS({queue}) CURDEPTH")[0]["CURDEPTH"])


def _no_traceback(node: NodeProcess) -> None:
    text = node.log.read_text()
    assert "Traceback" not in text, text[-3000:]


def test_garbage_to_unary_and_server_streaming_methods(node: NodeProcess) -> None:
    with grpc.insecure_channel(node.address) as ch:
        for method in UNARY:
            call = ch.unary_unary(method)
            for _ in range(3):
                with pytest.raises(grpc.RpcError) as err:
                    call(GARBAGE, timeout=20)
                assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, method
                assert "not a valid message" in (err.value.details() or "")
        for method in ("/qmgr.wire.Messaging/Subscribe", "/qmgr.wire.Messaging/Consume"):
            stream = ch.unary_stream(method)(GARBAGE, timeout=20)
            with pytest.raises(grpc.RpcError) as err:
                list(stream)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, method
    with node.client() as qm:  # the node keeps serving
        qm.mqsc("DEFINE QLOCAL(AFTER.GARBAGE)")
        qm.put("AFTER.GARBAGE", b"fine", persistent=True)
        got = qm.get("AFTER.GARBAGE", wait_ms=5000)
        assert got is not None and got.body == b"fine"
    _no_traceback(node)


def test_garbage_on_publish_stream_ends_it_with_invalid_argument(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(PS.DEST)")
        qm.create_subscription("ps/t", name="PS.SUB", destination="PS.DEST")
    good = messaging_pb2.PublishRequest(batch_id=1)
    good.publications.add(topic="ps/t", message=messages_pb2.Message(body=b"before"))

    def requests() -> object:
        yield good.SerializeToString()
        yield GARBAGE

    with grpc.insecure_channel(node.address) as ch:
        call = ch.stream_stream("/qmgr.wire.Messaging/PublishStream")(requests(), timeout=20)
        acks = []
        with pytest.raises(grpc.RpcError) as err:
            for raw in call:
                acks.append(messaging_pb2.PublishResponse.FromString(raw))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [a.batch_id for a in acks if not a.HasField("error")] in ([], [1])
    with node.client() as qm:
        got = qm.get("PS.DEST", wait_ms=5000)
        assert got is not None and got.body == b"before"
        assert qm.get("PS.DEST") is None
        with qm.subscribe("ps/#") as sub:  # a new stream works
            qm.publish("ps/t", b"after")
            m = sub.receive(timeout=10)
            assert m is not None and m.body == b"after"
    _no_traceback(node)


POISON_VALUES: list[tuple[dict[str, object], int]] = [
    ({"expiry_ms": 2**63 - 1}, 2013),  # MQRC_EXPIRY_ERROR
    ({"expiry_ms": -1000}, 2013),
    ({"expiry_ms": 999_999_999 * 100 + 1}, 2013),
    ({"priority": 10}, 2050),  # MQRC_PRIORITY_ERROR
    ({"priority": -5}, 2050),
    ({"persistence": 7}, 2047),  # MQRC_PERSISTENCE_ERROR
    ({"properties": {"MQTopicString": messages_pb2.Value(string_value="x")}}, 2442),
    ({"properties": {"not a name": messages_pb2.Value(string_value="x")}}, 2442),
]


@pytest.mark.parametrize(("fields", "reason"), POISON_VALUES)
def test_poison_values_are_rejected_and_change_nothing(
    node: NodeProcess, fields: dict[str, object], reason: int
) -> None:
    case = POISON_VALUES.index((fields, reason))  # a queue and topic for each case
    queue, topic = f"POISON.Q{case}", f"poison{case}"
    with node.client() as qm:
        qm.mqsc(f"DEFINE QLOCAL({queue})")
        sub = qm.subscribe(f"{topic}/#")
        with grpc.insecure_channel(node.address) as ch:
            stub = messaging_pb2_grpc.MessagingStub(ch)
            poison = messages_pb2.Message(body=b"poison", persistence=messages_pb2.PERSISTENT)
            for k, v in fields.items():
                if k == "properties":
                    for name, value in v.items():  # type: ignore[attr-defined]
                        poison.properties[name].CopyFrom(value)
                else:
                    setattr(poison, k, v)
            ok = messages_pb2.Message(body=b"ok", persistence=messages_pb2.PERSISTENT)
            put = messaging_pb2.PutRequest(queue=queue, messages=[ok, poison])
            pub = messaging_pb2.PublishRequest(
                publications=[
                    messaging_pb2.Publication(topic=f"{topic}/a", message=ok),
                    messaging_pb2.Publication(topic=f"{topic}/b", message=poison),
                ]
            )
            for call, request in ((stub.Put, put), (stub.Publish, pub)):
                with pytest.raises(grpc.RpcError) as err:
                    call(request, timeout=20)
                assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                meta = dict(err.value.trailing_metadata() or ())
                assert meta.get("mq-reason") == str(reason), (meta, err.value.details())
        # nothing of either batch was stored or published
        assert _depth(node, queue) == 0
        # the subscription stream still works: the next thing it receives is the marker
        qm.publish(f"{topic}/marker", b"marker")
        m = sub.receive(timeout=10)
        assert m is not None and m.body == b"marker"
        sub.close()
    _no_traceback(node)


def test_sdk_sees_typed_errors_for_poison_values(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(SDK.Q)")
        cases = [
            (lambda: qm.put("SDK.Q", b"x", ttl_ms=2**63 - 1), "MQRC_EXPIRY_ERROR"),
            (lambda: qm.put("SDK.Q", b"x", ttl_ms=-1), "MQRC_EXPIRY_ERROR"),
            (lambda: qm.put("SDK.Q", b"x", priority=10), "MQRC_PRIORITY_ERROR"),
            (lambda: qm.publish("sdk/t", b"x", priority=-5), "MQRC_PRIORITY_ERROR"),
            (lambda: qm.put("Q" * 49, b"x"), "MQRC_OBJECT_NAME_ERROR"),
            (lambda: qm.publish("t" * 10_241, b"x"), "MQRC_TOPIC_STRING_ERROR"),
            (lambda: qm.subscribe("t" * 10_241).close(), "MQRC_TOPIC_STRING_ERROR"),
            (lambda: qm.subscribe("ok", name="n" * 10_241).close(), "MQRC_SUB_NAME_ERROR"),
            (lambda: qm.get_many("SDK.Q", 10_001), "MQRC_OPTIONS_ERROR"),
        ]
        for call, reason_name in cases:
            with pytest.raises(MQClientError) as err:
                call()
            assert err.value.reason_name == reason_name, err.value
        assert _depth(node, "SDK.Q") == 0
        # the longest valid values are accepted
        qm.put("SDK.Q", b"x", ttl_ms=999_999_999 * 100, priority=9)
        qm.publish("t" * 10_240, b"x")
        got = qm.get("SDK.Q")
        assert got is not None and got.priority == 9
    _no_traceback(node)


def test_oversized_batch_on_publish_stream_ends_it_with_the_typed_error(
    node: NodeProcess,
) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(BIG.DEST) MAXDEPTH(100000)")
        qm.create_subscription("big/t", name="BIG.SUB", destination="BIG.DEST")
    big = messaging_pb2.PublishRequest(batch_id=1)
    for _ in range(10_001):
        big.publications.add(topic="big/t", message=messages_pb2.Message(body=b"x"))
    with grpc.insecure_channel(node.address) as ch:
        stub = messaging_pb2_grpc.MessagingStub(ch)
        with pytest.raises(grpc.RpcError) as err:
            list(stub.PublishStream(iter([big]), timeout=20))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert dict(err.value.trailing_metadata() or ())["mq-reason"] == "2046"
    assert _depth(node, "BIG.DEST") == 0
    _no_traceback(node)


def test_a_poison_value_in_a_publish_stream_batch_fails_only_that_batch(
    node: NodeProcess,
) -> None:
    """The stream goes on: the batch with the bad publication publishes nothing and is answered
    with the typed error, the batches before and after it are published."""
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(PSB.DEST)")
        qm.create_subscription("psb/t", name="PSB.SUB", destination="PSB.DEST")
    batches = []
    for batch_id, bodies, bad in ((1, [b"a"], False), (2, [b"b", b"c"], True), (3, [b"d"], False)):
        request = messaging_pb2.PublishRequest(batch_id=batch_id)
        for body in bodies:
            request.publications.add(topic="psb/t", message=messages_pb2.Message(body=body))
        if bad:
            request.publications[-1].message.priority = 10
        batches.append(request)
    with grpc.insecure_channel(node.address) as ch:
        stub = messaging_pb2_grpc.MessagingStub(ch)
        acks = list(stub.PublishStream(iter(batches), timeout=20))
    assert [a.batch_id for a in acks] == [1, 2, 3]
    assert [a.error.reason_name for a in acks] == ["", "MQRC_PRIORITY_ERROR", ""]
    assert acks[1].accepted == 0
    with node.client() as qm:
        bodies = [m.body for m in qm.get_many("PSB.DEST", 10, wait_ms=2000)]
    assert bodies == [b"a", b"d"]
    _no_traceback(node)
