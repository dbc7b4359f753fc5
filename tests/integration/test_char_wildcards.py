"""WSCHEMA(CHAR) / MQSO_WILDCARD_CHAR subscriptions on real node processes: matched against the
full topic string (``*`` any characters including ``/``, ``?`` exactly one character), locally
and across a cluster, where the proxy covers the clustered branch (reference
docs/mq-semantics.md §3.4, §3.5)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from qmgr.client.sync import QueueManagerClient, Subscription
from qmgr.launcher.poll import wait_for
from tests.integration.cluster_nodes import Cluster, cluster_with_topics
from tests.integration.conftest import NodeProcess

TOPICS = ("Prices/Fruit/Apples", "Prices/Fruit/Pears", "Prices/Vegetables/Apples", "Pricez/x")


def receive_until(sub: Subscription, last: bytes, timeout: float = 20.0) -> list[bytes]:
    got: list[bytes] = []
    while last not in got:
        batch = sub.receive_batch(timeout=timeout)
        assert batch, f"{last!r} never arrived; got {got}"
        got.extend(m.body for m in batch)
    return got


def drain(qm: QueueManagerClient, queue: str, last: bytes) -> list[bytes]:
    got: list[bytes] = []

    def arrived() -> bool:
        got.extend(m.body for m in qm.get_many(queue, 100))
        return last in got

    wait_for(arrived, 20.0, what=f"{last!r} on {queue}", retry=Exception)
    return got


def test_local_char_wildcard_subscriptions(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(STAR.Q)")
        qm.mqsc("DEFINE SUB(STAR) TOPICSTR('Prices*Apples') DEST(STAR.Q) WSCHEMA(CHAR)")
        (rec,) = qm.mqsc("DISPLAY SUB(STAR) WSCHEMA")
        assert rec.attrs["WSCHEMA"] == "CHAR"
        with (
            qm.subscribe("Pr?ces/Fruit/*", wildcard_char=True) as one,
            qm.subscribe("Prices*Apples") as topic_scheme,  # default WSCHEMA(TOPIC): literal '*'
        ):
            for topic in TOPICS:
                qm.publish(topic, topic.encode())
            qm.publish("Prices/Fruit/end", b"end")
            qm.publish("Prices/end/Apples", b"end-apples")
            assert receive_until(one, b"end") == [
                b"Prices/Fruit/Apples",
                b"Prices/Fruit/Pears",
                b"end",
            ]
            assert drain(qm, "STAR.Q", b"end-apples") == [
                b"Prices/Fruit/Apples",
                b"Prices/Vegetables/Apples",
                b"end-apples",
            ]
            qm.publish("Prices*Apples", b"literal")
            assert topic_scheme.receive(timeout=10).body == b"literal"  # type: ignore[union-attr]


def test_bad_wschema_is_refused_with_nothing_made(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(Q)")
        ok, records = qm.mqsc_ok("DEFINE SUB(BAD) TOPICSTR('a*') DEST(Q) WSCHEMA(GLOB)")
        assert not ok and records[0].code == "AMQ8425E" and "WSCHEMA" in records[0].render()
        ok, _ = qm.mqsc_ok("DISPLAY SUB(BAD)")
        assert not ok


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster_with_topics(
        tmp_path_factory.mktemp("charcluster"),
        ["HOSTA1", "PUB1", "SUB1"],
        [("HOSTA1", "PRICES", "Prices")],
    ) as cluster:
        yield cluster


def test_char_wildcard_subscription_across_the_cluster(cl: Cluster) -> None:
    sub1 = cl["SUB1"].c
    sub1.mqsc("DEFINE QLOCAL(APPLES.Q)")
    sub1.mqsc("DEFINE SUB(APPLES) TOPICSTR('Prices/*Apples') DEST(APPLES.Q) WSCHEMA(CHAR)")
    with sub1.subscribe("Prices/Fr?it/*", wildcard_char=True) as fruit:
        # both are proxied to the topic host as the clustered branch they can match
        cl.wait_proxy("HOSTA1", "SUB1", "Prices/#")
        for topic in TOPICS[:3]:
            cl["PUB1"].c.publish(topic, topic.encode())
        cl["PUB1"].c.publish("Prices/Fruit/end", b"end")
        cl["PUB1"].c.publish("Prices/end/Apples", b"end-apples")
        assert receive_until(fruit, b"end") == [
            b"Prices/Fruit/Apples",
            b"Prices/Fruit/Pears",
            b"end",
        ]
        assert drain(sub1, "APPLES.Q", b"end-apples") == [
            b"Prices/Fruit/Apples",
            b"Prices/Vegetables/Apples",
            b"end-apples",
        ]
    sub1.mqsc("DELETE SUB(APPLES)")
    cl.wait_proxy("HOSTA1", "SUB1", "Prices/#", present=False)


def test_defined_char_subscription_survives_a_restart(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(KEEP.Q)")
        qm.mqsc("DEFINE SUB(KEEP) TOPICSTR('a/*/z') DEST(KEEP.Q) WSCHEMA(CHAR)")
    node.restart()
    with node.client() as qm:
        (rec,) = qm.mqsc("DISPLAY SUB(KEEP) WSCHEMA")
        assert rec.attrs["WSCHEMA"] == "CHAR"
        qm.publish("a/b/c/z", b"deep")
        qm.publish("a/z", b"no")
        qm.publish("a//z", b"end")
        assert drain(qm, "KEEP.Q", b"end") == [b"deep", b"end"]
