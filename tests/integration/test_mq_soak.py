"""100,000 messages on one connection of each kind, against a real node: a stream publisher, a
subscription read with ``receive()`` (automatic acknowledgement) and a queue read with
``consume()`` (explicit acknowledgement), so credits, delivery ids and the SDK's buffers are
exercised far past their first wrap. Every message arrives once, in order, with its property;
a marker published last shows that no late duplicate follows."""

from __future__ import annotations

from qmgr.client import QueueManagerClient
from tests.integration.conftest import NodeProcess
from tests.integration.test_delivery import qstatus, sub_queue

N = 100_000


def _room(qm: QueueManagerClient) -> None:
    """Subscription queues deep enough for all N and the marker (the models' MAXDEPTH is
    100,000, and a publication to a full queue is refused or, non-persistent, dropped)."""
    for model in ("SYSTEM.NDURABLE.MODEL.QUEUE", "SYSTEM.DURABLE.MODEL.QUEUE"):
        qm.mqsc(f"ALTER QMODEL({model}) MAXDEPTH({2 * N})")


def _publish(qm: QueueManagerClient, topic: str, *, persistent: bool) -> None:
    pub = qm.stream_publisher(batch_size=100, window=8)
    for i in range(N):
        pub.publish(topic, str(i), properties={"n": str(i)}, persistent=persistent)
    pub.publish(topic, "marker", persistent=persistent)
    assert pub.close().accepted == N + 1


def test_a_subscription_takes_100000_publications_once_in_order(node: NodeProcess) -> None:
    with node.client() as qm:
        _room(qm)
        with qm.subscribe("soak/#", max_batch=1000) as sub:
            _publish(qm, "soak/one", persistent=False)
            got = []
            while True:
                msg = sub.receive(timeout=30)
                assert msg is not None, f"stalled after {len(got)} messages"
                if msg.text == "marker":
                    break
                got.append((msg.text, msg.properties["n"]))
            assert got == [(str(i), str(i)) for i in range(N)]
            assert sub.receive(timeout=0.5) is None  # nothing after the marker


def test_a_consumer_acknowledges_100000_persistent_messages_once_in_order(
    node: NodeProcess,
) -> None:
    with node.client() as qm:
        _room(qm)
        qm.create_subscription("soakq/#", name="SOAKQ", durable=True)
        queue = sub_queue(qm, "SOAKQ")
        _publish(qm, "soakq/one", persistent=True)
        got: list[str] = []
        for batch in qm.consume(queue, max_batch=500):
            got.extend(m.text for m in batch)
            if got[-1] == "marker":
                break
        assert got == [str(i) for i in range(N)] + ["marker"]
        assert qstatus(qm, queue) == (0, 0)  # every message acknowledged, none in doubt
