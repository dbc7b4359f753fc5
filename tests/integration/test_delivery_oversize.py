"""Responses are sized against the transport limit before messages are taken: large persistent
messages through Get, Consume and Subscribe are never lost to a response that cannot be sent,
with the SDK and with a plain gRPC channel that declares gRPC's default 4 MiB limit; MAXMSGL
stays within what one response can carry."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import grpc
import pytest

from qmgr.client import MQClientError, OutgoingMessage, QueueManagerClient
from qmgr.launcher.poll import wait_for
from qmgr.wire import messaging_pb2 as pb
from qmgr.wire import messaging_pb2_grpc
from tests.integration.conftest import NodeProcess
from tests.integration.test_delivery import qstatus

MIB = 1024 * 1024
DEFAULT_GRPC_LIMIT = 4 * MIB


@pytest.fixture
def node(shared_node: NodeProcess) -> NodeProcess:
    """The module's one node (see ``shared_node``)."""
    return shared_node


def body(i: int, size: int) -> bytes:
    return f"{i:04d}".encode() * (size // 4)


def put_each(qm: QueueManagerClient, queue: str, n: int, size: int) -> None:
    for i in range(n):
        qm.put(queue, body(i, size), persistent=True)


def indexes(bodies: list[bytes], size: int) -> list[int]:
    assert all(len(b) == size for b in bodies)
    return [int(b[:4]) for b in bodies]


def plain_consume(
    queue: str, finished: threading.Event, acknowledge: int = 0
) -> Iterator[pb.ConsumeControl]:
    """The requests of a Consume stream from a client with gRPC's default receive limit: open,
    then (once ``finished``) acknowledge the first ``acknowledge`` messages and end."""
    limits = pb.DeliveryLimits(max_response_bytes=DEFAULT_GRPC_LIMIT)
    yield pb.ConsumeControl(open=pb.ConsumeRequest(queue=queue, max_batch=10, limits=limits))
    finished.wait(30)  # ending the requests would end the stream
    if acknowledge:
        yield pb.ConsumeControl(ack=pb.Ack(acknowledged=acknowledge))


def test_large_messages_through_get_consume_and_subscribe(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(BIG.Q) MAXDEPTH(100)")
        put_each(qm, "BIG.Q", 30, 3 * MIB)
        got: list[bytes] = []
        while len(got) < 30:
            batch = qm.get_many("BIG.Q", 30)
            assert batch, f"lost after {len(got)}"
            assert len(batch) < 30  # 90 MiB cannot travel in one response
            got += [m.body for m in batch]
        assert indexes(got, 3 * MIB) == list(range(30))

        put_each(qm, "BIG.Q", 30, 3 * MIB)
        with qm.consumer("BIG.Q", 30) as consumer:
            got = []
            while len(got) < 30:
                msg = consumer.receive(timeout=30)
                assert msg is not None, f"lost after {len(got)}"
                got.append(msg.body)
        assert indexes(got, 3 * MIB) == list(range(30))

        qm.create_subscription("big/#", name="BIG.SUB", durable=True)
        for i in range(30):
            qm.publish("big/x", body(i, 3 * MIB), persistent=True)
        qm.publish("big/marker", "marker", persistent=True)
        with qm.subscribe("big/#", name="BIG.SUB", durable=True, max_batch=30) as sub:
            got = []
            while True:
                msg = sub.receive(timeout=30)
                assert msg is not None, f"lost after {len(got)}"
                if msg.body == b"marker":
                    break
                got.append(msg.body)
        assert indexes(got, 3 * MIB) == list(range(30))
        assert qm.get_many("BIG.Q", 1) == []


def test_plain_grpc_channel_declaring_the_default_limit(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(MID.Q) MAXDEPTH(100)")
        put_each(qm, "MID.Q", 10, MIB)
    with grpc.insecure_channel(node.address) as channel:  # gRPC's default 4 MiB receive limit
        stub = messaging_pb2_grpc.MessagingStub(channel)
        got: list[bytes] = []
        while len(got) < 10:
            request = pb.GetRequest(
                queue="MID.Q", max_messages=10, max_response_bytes=DEFAULT_GRPC_LIMIT
            )
            batch = stub.Get(request, timeout=20).messages
            assert batch, f"lost after {len(got)}"
            got += [m.body for m in batch]
        assert indexes(got, MIB) == list(range(10))

    with node.client() as qm:
        put_each(qm, "MID.Q", 10, MIB)
    with grpc.insecure_channel(node.address) as channel:
        stub = messaging_pb2_grpc.MessagingStub(channel)
        finished = threading.Event()
        call = stub.Consume(plain_consume("MID.Q", finished), timeout=30)
        got = []
        for delivery in call:
            assert delivery.ByteSize() <= DEFAULT_GRPC_LIMIT
            got += [m.body for m in delivery.messages]
            if len(got) >= 10:
                break
        call.cancel()  # not acknowledged: everything goes back
        finished.set()
        assert indexes(got, MIB) == list(range(10))
    with node.client() as qm:
        wait_for(lambda: qstatus(qm, "MID.Q") == (10, 0), 30.0, 0.1, what="backed out")
        back = qm.get_many("MID.Q", 10)
        back += qm.get_many("MID.Q", 10)
        back += qm.get_many("MID.Q", 10)
        assert indexes([m.body for m in back], MIB) == list(range(10))
        assert all(m.backout_count == 1 for m in back)


def test_message_larger_than_the_declared_limit_stays(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(BIG1.Q)")
        qm.put("BIG1.Q", body(0, 3 * MIB), persistent=True)
    with grpc.insecure_channel(node.address) as channel:
        stub = messaging_pb2_grpc.MessagingStub(channel)
        with pytest.raises(grpc.RpcError) as err:
            stub.Get(pb.GetRequest(queue="BIG1.Q", max_response_bytes=MIB), timeout=20)
        meta = dict(err.value.trailing_metadata() or ())
        assert meta["mq-reason-name"] == "MQRC_MSG_TOO_BIG_FOR_CHANNEL"
    with node.client() as qm:
        (msg,) = qm.get_many("BIG1.Q", 5)
        assert len(msg.body) == 3 * MIB


def test_maxmsgl_is_capped_at_what_a_response_carries(node: NodeProcess) -> None:
    with node.client() as qm:
        for bad in (
            "DEFINE QLOCAL(CAP.Q) MAXMSGL(62914561)",
            "DEFINE QLOCAL(CAP.Q) MAXMSGL(104857600)",
            "ALTER QMGR MAXMSGL(104857600)",
        ):
            ok, records = qm.mqsc_ok(bad)
            assert not ok and "out of range" in records[0].text, bad
        qm.mqsc("ALTER QMGR MAXMSGL(62914560)")
        qm.mqsc("DEFINE QLOCAL(CAP.Q) MAXMSGL(62914560)")
        largest = b"x" * 62_914_560
        qm.put("CAP.Q", OutgoingMessage(largest, {"p": "v" * 1000}, persistent=True))
        with pytest.raises(MQClientError) as err:
            qm.put("CAP.Q", largest + b"x")
        assert err.value.reason_name == "MQRC_MSG_TOO_BIG_FOR_Q"
        (msg,) = qm.get_many("CAP.Q", 5)
        assert msg.body == largest


def test_small_bodies_with_large_properties_are_sized_too(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(PROP.Q)")
        for i in range(6):
            qm.put("PROP.Q", OutgoingMessage(str(i), {"big": "v" * MIB}, persistent=True))
    with grpc.insecure_channel(node.address) as channel:  # gRPC's default 4 MiB receive limit
        stub = messaging_pb2_grpc.MessagingStub(channel)
        finished = threading.Event()
        call = stub.Consume(plain_consume("PROP.Q", finished, acknowledge=6), timeout=30)
        got: list[str] = []
        for delivery in call:
            assert 0 < len(delivery.messages) < 4
            got += [m.body.decode() for m in delivery.messages]
            if len(got) >= 6:
                finished.set()
                break
        assert got == [str(i) for i in range(6)]
        for _ in call:  # the acknowledgement is sent, then the requests end: so does the stream
            pass
    with node.client() as qm:
        wait_for(lambda: qstatus(qm, "PROP.Q") == (0, 0), 30.0, 0.1, what="all acknowledged")
