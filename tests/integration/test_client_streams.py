"""The blocking client's streams on both carriers: its own (qmgr.client.direct, the default)
and the gRPC runtime's public streams. Both must give the same messages, in the same order,
with the same acknowledgements and the same errors."""

from __future__ import annotations

import grpc
import pytest

from qmgr.client import MQClientError, QueueManagerClient, direct
from qmgr.client.pubwire import BatchEncoder
from tests.integration.conftest import NodeProcess

N = 2_500  # several batches and deliveries, a delivery's last message among them


@pytest.fixture
def node(shared_node: NodeProcess) -> NodeProcess:
    """The module's one node (see ``shared_node``)."""
    return shared_node


@pytest.fixture(params=[True, False], ids=["direct", "public"])
def carrier(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setattr(direct, "ENABLED", request.param)
    return bool(request.param)


def _publish(client: QueueManagerClient, topic: str, n: int, *, persistent: bool) -> None:
    publisher = client.stream_publisher(batch_size=64, window=4)
    for i in range(n):
        publisher.publish(topic, b"m%d" % i, properties={"i": str(i)}, persistent=persistent)
    assert publisher.close().accepted == n


def test_stream_publish_and_receive_every_message_once_in_order(
    node: NodeProcess, carrier: bool
) -> None:
    with node.client() as client:
        assert client._direct is carrier
        with client.subscribe("streams/t", max_batch=100) as sub:
            _publish(client, "streams/t", N, persistent=False)
            got = [sub.receive(timeout=10) for _ in range(N)]
            assert sub.receive(timeout=0.2) is None
        assert [m.body for m in got if m is not None] == [b"m%d" % i for i in range(N)]
        assert [m.properties["i"] for m in got if m is not None] == [str(i) for i in range(N)]


def test_consume_acknowledges_each_batch_and_leaves_nothing(
    node: NodeProcess, carrier: bool
) -> None:
    queue = "STREAMS.DIRECT.Q" if carrier else "STREAMS.PUBLIC.Q"  # a queue for each carrier
    topic = f"streams/{queue}"
    with node.client() as client:
        client.mqsc(f"DEFINE QLOCAL({queue})")
        client.create_subscription(topic, name=queue, destination=queue)
        _publish(client, topic, N, persistent=True)
        bodies: list[bytes] = []
        batches = client.consume(queue, 300)
        for batch in batches:
            bodies += [m.body for m in batch]
            if len(bodies) >= N:
                break
        batches.close()  # acknowledges the last batch
        assert bodies == [b"m%d" % i for i in range(N)]
        assert client.get(queue) is None  # everything acknowledged, nothing went back
        # a second consumer sees nothing either, and ends on its own time-out
        with client.consumer(queue) as again:
            assert again.receive(timeout=0.3) is None


def test_a_stream_refused_by_the_node_raises_the_same_error(
    node: NodeProcess, carrier: bool
) -> None:
    with node.client() as client:
        consumer = client.consumer("NO.SUCH.QUEUE")
        with pytest.raises(MQClientError) as caught:
            consumer.receive(timeout=10)
        consumer.close()
        assert caught.value.reason_name == "MQRC_UNKNOWN_OBJECT_NAME"
        with pytest.raises(MQClientError) as unknown:  # consume(): raised where it iterates
            next(client.consume("NO.SUCH.QUEUE"))
        assert unknown.value.reason_name == "MQRC_UNKNOWN_OBJECT_NAME"
        with pytest.raises(MQClientError) as bad:
            client.subscribe("")
        assert bad.value.reason != 0


def test_closing_the_client_ends_an_open_subscription_quietly(
    node: NodeProcess, carrier: bool
) -> None:
    client = node.client()
    sub = client.subscribe("streams/closed")
    _publish(client, "streams/closed", 10, persistent=False)
    assert sub.receive(timeout=10) is not None
    client.close()
    sub.close(timeout=5)
    assert sub.receive(timeout=0.2) is None


def test_a_response_that_cannot_be_read_fails_the_direct_stream(node: NodeProcess) -> None:
    def unreadable(data: bytes) -> object:
        raise ValueError("not a response")

    with node.client() as client:
        streams = direct.DirectStreams(client._channel)
        stream = direct.DirectStream(streams._channel, streams._publish, unreadable, ())
        encoder = BatchEncoder()
        encoder.add("streams/bad", b"x", None, None, False)
        for batch_id in (1, 2, 3):  # the second and third wait for the first send
            stream.send(encoder.request(batch_id))
        stream.done_sending()
        with pytest.raises(direct.StreamError) as caught:
            next(stream)
        assert caught.value.code() == grpc.StatusCode.INTERNAL
        with pytest.raises(direct.StreamError):  # and it stays ended
            next(stream)
