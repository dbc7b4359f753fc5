"""STOP CHANNEL / START CHANNEL on cluster-sender channels, observed on real node processes:
STATUS(STOPPED) in DISPLAY CHSTATUS, nothing sent while stopped (publications wait on the
transmission queue, persistent ones across a restart of the node, which keeps the channel
STOPPED), the workload algorithm preferring hosts whose channel is not stopped, everything
waiting delivered exactly once after START, and MQ's reasons for unknown or already stopped
channels."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

import pytest

from qmgr.client import MQClientError, OutgoingMessage
from qmgr.client.sync import Subscription
from qmgr.launcher.poll import wait_for
from tests.integration.cluster_nodes import Cluster, cluster_with_topics

ROUTE = "qmgr.route"


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster_with_topics(
        tmp_path_factory.mktemp("channels"),
        ["HOSTA1", "HOSTA2", "HOSTB1", "PUB1", "SUB1"],
        [
            ("HOSTA1", "PRICES", "Prices"),
            ("HOSTA2", "PRICES", "Prices"),
            ("HOSTB1", "ORDERS", "Orders"),
        ],
    ) as cluster:
        yield cluster


def status(cl: Cluster, node: str, peer: str) -> str:
    return cl[node].chstatus().get(peer, {}).get("STATUS", "")


def drain(sub: Subscription, timeout: float) -> list[bytes]:
    got: list[bytes] = []
    while True:
        batch = sub.receive_batch(timeout=timeout)
        if not batch:
            return got
        got.extend(m.body for m in batch)


def settled(cl: Cluster, sub: Subscription, topic: str, expected: list[bytes]) -> list[bytes]:
    """Everything that arrives at ``sub`` once ``expected`` all has, and PUB1's marker
    published on ``topic`` after that: a late duplicate arrives before the marker."""
    got: list[bytes] = []

    def until(done: Callable[[], bool], what: str) -> None:
        def arrived() -> bool:
            got.extend(m.body for m in sub.receive_batch(timeout=0.5))
            return done()

        wait_for(arrived, 20.0, what=what)

    until(lambda: not Counter(expected) - Counter(got), "everything expected")
    cl["PUB1"].c.publish(topic, b"marker")
    until(lambda: b"marker" in got, "the marker")
    assert got[-1] == b"marker", got
    return got[:-1]


def refused(cl: Cluster, node: str, command: str) -> str:
    with pytest.raises(MQClientError) as err:
        cl[node].c.mqsc(command)
    records = getattr(err.value, "records", [])
    return f"{err.value} {records[0].attrs.get('REASON', '') if records else ''}"


def test_unknown_channel_names_are_refused(cl: Cluster) -> None:
    for command in (
        "STOP CHANNEL(DEMO.NOSUCHQM)",
        "START CHANNEL(DEMO.NOSUCHQM)",
        "STOP CHANNEL(OTHER.HOSTB1)",
        "STOP CHANNEL(DEMO.PUB1)",  # its own cluster-receiver, not a sender
    ):
        assert "MQRCCF_CHANNEL_NOT_FOUND" in refused(cl, "PUB1", command)


def test_stopped_channel_holds_persistent_publications_across_a_restart_then_delivers_once(
    cl: Cluster,
) -> None:
    sub_node = cl["SUB1"]
    sub_node.c.create_subscription("Orders/Stop", name="ORDSTOP")
    cl.wait_proxy("HOSTB1", "SUB1", "Orders/Stop")
    sub = sub_node.c.subscribe("Orders/Stop", name="ORDSTOP", durable=True)
    try:
        cl["PUB1"].c.publish("Orders/Stop", b"warm-up")
        assert settled(cl, sub, "Orders/Stop", [b"warm-up"]) == [b"warm-up"]
        wait_for(
            lambda: status(cl, "PUB1", "HOSTB1") == "RUNNING",
            20.0,
            what="channel to HOSTB1 RUNNING",
            retry=Exception,
        )
        assert "MQRCCF_CHANNEL_IN_USE" in refused(cl, "PUB1", "START CHANNEL(DEMO.HOSTB1)")

        cl["PUB1"].c.mqsc("STOP CHANNEL(DEMO.HOSTB1)")
        assert status(cl, "PUB1", "HOSTB1") == "STOPPED"
        assert "MQRCCF_CHANNEL_NOT_ACTIVE" in refused(cl, "PUB1", "STOP CHANNEL(DEMO.HOSTB1)")
        cl["PUB1"].c.publish_many(
            [("Orders/Stop", OutgoingMessage(f"p{i}", persistent=True)) for i in range(5)]
        )
        row = cl["PUB1"].chstatus()["HOSTB1"]
        assert row["STATUS"] == "STOPPED" and row["XQMSGSA"] == "5"
        assert drain(sub, 2) == []  # nothing is sent on a stopped channel

        cl["PUB1"].kill()
        cl["PUB1"].start()
        row = cl["PUB1"].chstatus()["HOSTB1"]
        assert row["STATUS"] == "STOPPED" and row["XQMSGSA"] == "5"
        assert drain(sub, 2) == []

        cl["PUB1"].c.mqsc("START CHANNEL(DEMO.HOSTB1)")
        cl["PUB1"].c.publish("Orders/Stop", b"after")
        expected = [*(f"p{i}".encode() for i in range(5)), b"after"]
        assert Counter(settled(cl, sub, "Orders/Stop", expected)) == Counter(expected)
        wait_for(
            lambda: status(cl, "PUB1", "HOSTB1") == "RUNNING",
            20.0,
            what="channel to HOSTB1 RUNNING",
            retry=Exception,
        )
        assert cl["PUB1"].chstatus()["HOSTB1"]["XQMSGSA"] == "0"
    finally:
        sub.close()
        sub_node.c.mqsc("DELETE SUB(ORDSTOP)")


def test_workload_prefers_hosts_whose_channel_is_not_stopped(cl: Cluster) -> None:
    sub = cl["SUB1"].c.subscribe("Prices/Stop")
    for host in ("HOSTA1", "HOSTA2"):
        cl.wait_proxy(host, "SUB1", "Prices/Stop")
    try:
        cl["PUB1"].c.mqsc("STOP CHANNEL(DEMO.HOSTA1)")
        assert status(cl, "PUB1", "HOSTA1") == "STOPPED"
        cl["PUB1"].c.publish_many([("Prices/Stop", OutgoingMessage(str(i))) for i in range(10)])
        got = []
        while len(got) < 10:
            batch = sub.receive_batch(timeout=10)
            assert batch, "publications did not arrive through the other host"
            got.extend(batch)
        assert Counter(str(m.properties[ROUTE]).split(",")[1] for m in got) == {"HOSTA2": 10}
        assert cl["PUB1"].chstatus()["HOSTA1"]["XQMSGSA"] == "0"
        cl["PUB1"].c.mqsc("START CHANNEL(DEMO.HOSTA1)")
        cl["PUB1"].c.publish_many([("Prices/Stop", OutgoingMessage(str(i))) for i in range(10)])
        got = []
        while len(got) < 10:
            batch = sub.receive_batch(timeout=10)
            assert batch, "publications did not arrive after START"
            got.extend(batch)
        routes = Counter(str(m.properties[ROUTE]).split(",")[1] for m in got)
        assert set(routes) == {"HOSTA1", "HOSTA2"}
        assert drain(sub, 1) == []
    finally:
        sub.close()
        if status(cl, "PUB1", "HOSTA1") == "STOPPED":
            cl["PUB1"].c.mqsc("START CHANNEL(DEMO.HOSTA1)")


def test_higher_ranked_host_with_a_stopped_channel_keeps_its_publications_until_start(
    cl: Cluster,
) -> None:
    """CLWLRANK is applied before channel status: publications for the higher-ranked host wait
    on its transmission queue while its channel is STOPPED, and arrive once after START."""
    host = cl["HOSTA1"]
    sub = cl["SUB1"].c.subscribe("Prices/Ranked")
    for h in ("HOSTA1", "HOSTA2"):
        cl.wait_proxy(h, "SUB1", "Prices/Ranked")
    host.c.mqsc("ALTER CHANNEL(DEMO.HOSTA1) CHLTYPE(CLUSRCVR) CLWLRANK(3)")
    try:
        wait_for(
            lambda: cl["PUB1"].mqsc("DISPLAY CLUSQMGR(HOSTA1) CLWLRANK")[0]["CLWLRANK"] == "3",
            20.0,
            what="CLWLRANK(3) of HOSTA1 seen by PUB1",
            retry=Exception,
        )
        cl["PUB1"].c.mqsc("STOP CHANNEL(DEMO.HOSTA1)")
        cl["PUB1"].c.publish_many(
            [("Prices/Ranked", OutgoingMessage(f"r{i}", persistent=True)) for i in range(6)]
        )
        assert cl["PUB1"].chstatus()["HOSTA1"]["XQMSGSA"] == "6"
        assert drain(sub, 2) == []
        cl["PUB1"].c.mqsc("START CHANNEL(DEMO.HOSTA1)")
        got = []
        while len(got) < 6:
            batch = sub.receive_batch(timeout=10)
            assert batch, "held publications did not arrive after START"
            got.extend(batch)
        assert sorted(m.body for m in got) == [f"r{i}".encode() for i in range(6)]
        assert {str(m.properties[ROUTE]).split(",")[1] for m in got} == {"HOSTA1"}
        assert drain(sub, 1) == []
    finally:
        sub.close()
        host.c.mqsc("ALTER CHANNEL(DEMO.HOSTA1) CHLTYPE(CLUSRCVR) CLWLRANK(0)")
        if status(cl, "PUB1", "HOSTA1") == "STOPPED":
            cl["PUB1"].c.mqsc("START CHANNEL(DEMO.HOSTA1)")
        wait_for(
            lambda: cl["PUB1"].mqsc("DISPLAY CLUSQMGR(HOSTA1) CLWLRANK")[0]["CLWLRANK"] == "0",
            20.0,
            what="CLWLRANK(0) of HOSTA1 seen by PUB1",
            retry=Exception,
        )
