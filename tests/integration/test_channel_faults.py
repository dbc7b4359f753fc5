"""Cluster channels against failures of real node processes: a channel that
cannot go on says why in DISPLAY CHSTATUS and recovers without duplicates; a member re-created
under the same name with an empty data directory (after RESET CLUSTER removed the old one) is
not black-holed; a dead subscriber node
fills its host's transmission queue up to MAXDEPTH and no further."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from qmgr.client import OutgoingMessage
from qmgr.client.errors import MQClientError
from qmgr.launcher.poll import wait_for
from tests.integration.cluster_nodes import Cluster, ClusterNode

DLQ = "SYSTEM.DEAD.LETTER.QUEUE"


def depth(node: ClusterNode, queue: str) -> int:
    return int(node.mqsc(f"DISPLAY QLOCAL({queue}) CURDEPTH")[0]["CURDEPTH"])


def rss_mib(node: ClusterNode) -> float:
    assert node.proc is not None
    for line in Path(f"/proc/{node.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.fixture
def cl(tmp_path: Path) -> Iterator[Cluster]:
    """A full repository, a publishing node PUB1 and a subscribing node SUB1 of one test's own
    (one that re-creates PUB1)."""
    cluster = Cluster(tmp_path).start(["FR1"], ["PUB1", "SUB1"])
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The same three nodes for the tests that leave them running and their channels RUNNING,
    each on a topic of its own."""
    cluster = Cluster(tmp_path_factory.mktemp("channel_faults")).start(["FR1"], ["PUB1", "SUB1"])
    try:
        yield cluster
    finally:
        cluster.stop()


def direct_topic(cl: Cluster, host: str, name: str, topic: str) -> None:
    other = "SUB1" if host == "PUB1" else "PUB1"
    cl.define_topic(host, name, topic, clroute="DIRECT")
    cl.wait_definition(name, [host], on=[other])


def test_a_channel_that_cannot_go_on_shows_why_and_recovers_without_duplicates(
    shared: Cluster,
) -> None:
    direct_topic(shared, "PUB1", "STAT", "Stat")
    sub = shared["SUB1"]
    sub.mqsc("DEFINE QLOCAL(SUBQ)")
    sub.mqsc("DEFINE SUB(S1) TOPICSTR('Stat/x') DEST(SUBQ)")
    shared.wait_proxy("PUB1", "SUB1", "Stat/x")
    # the subscription's queue and the dead-letter queue refuse everything: the receiver
    # cannot deliver the publication (PMSGDLV ALLDUR, a durable subscription) nor
    # dead-letter it, so the channel cannot go on
    sub.mqsc("ALTER QLOCAL(SUBQ) PUT(DISABLED)")
    sub.mqsc(f"ALTER QLOCAL({DLQ}) PUT(DISABLED)")
    shared["PUB1"].c.publish("Stat/x", OutgoingMessage("first", persistent=True))

    def sdr() -> dict[str, str]:
        return shared["PUB1"].chstatus().get("SUB1", {})

    status = wait_for(
        lambda: sdr().get("STATUS") == "RETRYING",
        20.0,
        what="channel to SUB1 RETRYING",
        retry=Exception,
    )
    status = sdr()
    assert "MQRC_PUT_INHIBITED" in status["LSTERROR"], status
    assert status["XQMSGSA"] == "1" and status["INDOUBT"] == "YES"
    # it keeps retrying with back-off; once the dead-letter queue takes it, it moves on
    sub.mqsc(f"ALTER QLOCAL({DLQ}) PUT(ENABLED)")
    wait_for(
        lambda: sdr().get("STATUS") == "RUNNING",
        30,
        what="channel to SUB1 RUNNING",
        retry=Exception,
    )
    wait_for(lambda: sdr().get("XQMSGSA") == "0", 20.0, what="the queue drained", retry=Exception)
    assert sdr()["LSTERROR"] == ""
    dead = sub.c.browse(DLQ)
    assert [m.body for m in dead] == [b"first"]
    assert dead[0].properties["MQDLH.ReasonName"] == "MQRC_PUT_INHIBITED"
    assert dead[0].properties["MQDLH.Reason"] == 2051
    assert dead[0].properties["MQDLH.DestQName"] == "Stat/x"
    assert dead[0].properties["MQDLH.PutApplName"] == "PUB1"
    sub.mqsc("ALTER QLOCAL(SUBQ) PUT(ENABLED)")
    shared["PUB1"].c.publish("Stat/x", OutgoingMessage("marker", persistent=True))
    wait_for(lambda: depth(sub, "SUBQ") == 1, 20.0, what="the marker", retry=Exception)
    assert [m.body for m in sub.c.browse("SUBQ")] == [b"marker"]
    assert depth(sub, DLQ) == 1


def test_a_publication_that_cannot_be_sent_does_not_stop_its_channel(shared: Cluster) -> None:
    """An expiry the wire cannot carry (a poison value from an application) is rejected at the
    edge with MQRC_EXPIRY_ERROR, nothing is queued for the channel, and the channel goes on."""
    direct_topic(shared, "PUB1", "POISON", "Poison")
    sub = shared["SUB1"].c.subscribe("Poison/x", name="POISON", durable=True)
    shared.wait_proxy("PUB1", "SUB1", "Poison/x")
    pub = shared["PUB1"]
    with pytest.raises(MQClientError) as rejected:
        pub.c.publish("Poison/x", OutgoingMessage("poison", persistent=True, ttl_ms=2**63 - 1))
    assert rejected.value.reason_name == "MQRC_EXPIRY_ERROR"
    assert depth(pub, DLQ) == 0
    for i in range(3):
        pub.c.publish("Poison/x", OutgoingMessage(f"after {i}", persistent=True))
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 3 and time.monotonic() < deadline:
        got.extend(m.body for m in sub.receive_batch(timeout=1))
    assert got == [b"after 0", b"after 1", b"after 2"]
    wait_for(
        lambda: pub.chstatus()["SUB1"]["XQMSGSA"] == "0",
        20.0,
        what="PUB1's queue for SUB1 empty",
        retry=Exception,
    )
    assert pub.chstatus()["SUB1"]["STATUS"] == "RUNNING"
    sub.close()


def test_a_member_re_created_after_reset_cluster_has_its_publications_delivered(
    cl: Cluster,
) -> None:
    direct_topic(cl, "SUB1", "RECR", "Recreate")
    sub = cl["SUB1"].c.subscribe("Recreate/x", name="RECR", durable=True)
    cl.wait_proxy("PUB1", "SUB1", "Recreate/x")
    pub = cl["PUB1"]
    before = [("Recreate/x", OutgoingMessage(f"old {i}", persistent=True)) for i in range(10)]
    pub.c.publish_many(before)
    got = []
    while len(got) < 10:
        batch = sub.receive_batch(timeout=20)
        assert batch, f"only {len(got)} of 10 arrived before the re-creation"
        got.extend(m.body.decode() for m in batch)
    old_qmid = cl["SUB1"].mqsc("DISPLAY CHSTATUS(*)")
    pub.kill()
    assert pub.data_dir is not None
    shutil.rmtree(pub.data_dir)  # the same name, an empty data directory: a new QMID
    # the old PUB1 is still a member: an administrator removes it first (MQ: RESET CLUSTER)
    cl["FR1"].c.mqsc("RESET CLUSTER(DEMO) ACTION(FORCEREMOVE) QMNAME(PUB1) QUEUES(NO)")
    pub.start()
    cl.wait_proxy("PUB1", "SUB1", "Recreate/x")
    after = [("Recreate/x", OutgoingMessage(f"new {i}", persistent=True)) for i in range(10)]
    pub.c.publish_many(after)
    new: list[str] = []
    deadline = time.monotonic() + 30
    while len(new) < 10 and time.monotonic() < deadline:
        new.extend(m.body.decode() for m in sub.receive_batch(timeout=1))
    assert new == [f"new {i}" for i in range(10)]
    assert sub.receive_batch(timeout=2) == []
    sub.close()
    qmids = {
        r["RQMID"]
        for r in cl["SUB1"].mqsc("DISPLAY CHSTATUS(*)")
        if r.get("CHLTYPE") == "CLUSRCVR" and r.get("RQMNAME") == "PUB1"
    }
    assert len(qmids) == 1 and not {r.get("RQMID") for r in old_qmid} & qmids


def test_a_dead_subscriber_node_fills_its_hosts_transmission_queue_up_to_maxdepth(
    tmp_path: Path,
) -> None:
    cl = Cluster(tmp_path).start(["FR1"], ["HOST1", "PUB1", "SUB1"])
    try:
        cl.define_topic("HOST1", "BP", "Bp")
        cl.wait_definition("BP", ["HOST1"], on=["PUB1", "SUB1"])
        cl["SUB1"].c.create_subscription("Bp/x", name="BPSUB")
        cl.wait_proxy("HOST1", "SUB1", "Bp/x")
        host = cl["HOST1"]
        host.mqsc("ALTER QLOCAL(SYSTEM.CLUSTER.TRANSMIT.SUB1) MAXDEPTH(1000)")
        cl["SUB1"].kill()
        pub = cl["PUB1"].c
        body = b"x" * 8192
        pub.publish_many([("Bp/x", OutgoingMessage(body, persistent=False)) for _ in range(200)])
        wait_for(
            lambda: host.chstatus()["SUB1"]["XQMSGSA"] == "200",
            20.0,
            what="200 held on HOST1",
            retry=Exception,
        )
        base = rss_mib(host)
        for _ in range(100):  # 20,000 non-persistent publications of 8 KiB (156 MiB)
            pub.publish_many([("Bp/x", OutgoingMessage(body, persistent=False))] * 200)
        for i in range(3):
            pub.publish_many(
                [("Bp/x", OutgoingMessage(f"p{i}.{j}", persistent=True)) for j in range(100)]
            )
        wait_for(
            lambda: depth(host, DLQ) == 300,
            60,
            what="300 on HOST1's dead-letter queue",
            retry=Exception,
        )
        status = host.chstatus()["SUB1"]
        assert status["XQMSGSA"] == "1000" and status["MAXDEPTH"] == "1000"
        grown = rss_mib(host) - base
        assert grown < 60, f"HOST1 grew by {grown:.0f} MiB"
        dead = host.c.browse(DLQ, limit=300)
        assert {m.properties["MQDLH.ReasonName"] for m in dead} == {"MQRC_Q_FULL"}
        assert {m.properties["MQDLH.DestQName"] for m in dead} == {"SYSTEM.CLUSTER.TRANSMIT.SUB1"}
        assert {m.properties["MQDLH.DestQMgrName"] for m in dead} == {"SUB1"}
        assert sorted(m.body.decode() for m in dead) == sorted(
            f"p{i}.{j}" for i in range(3) for j in range(100)
        )
        # the limit is stored: after a restart it still holds
        host.kill()
        host.start()
        cl["PUB1"].c.publish("Bp/x", OutgoingMessage("after restart", persistent=True))
        wait_for(
            lambda: host.chstatus()["SUB1"]["MAXDEPTH"] == "1000",
            30,
            what="HOST1's channel to SUB1 with MAXDEPTH 1000",
            retry=Exception,
        )
        # a publisher whose own transmission queue is full is told so (PMSGDLV ALLDUR)
        cl["PUB1"].mqsc("ALTER QLOCAL(SYSTEM.CLUSTER.TRANSMIT.HOST1) MAXDEPTH(20)")
        wait_for(
            lambda: cl["PUB1"].chstatus()["HOST1"]["XQMSGSA"] == "0",
            20.0,
            what="PUB1's queue to HOST1 empty",
            retry=Exception,
        )
        host.kill()
        persistent = OutgoingMessage("held", persistent=True)
        for _ in range(20):
            cl["PUB1"].c.publish("Bp/x", persistent)
        with pytest.raises(MQClientError) as info:
            cl["PUB1"].c.publish("Bp/x", persistent)
        assert info.value.reason_name == "MQRC_Q_FULL"
        assert "MAXDEPTH 20" in info.value.text
        # non-persistent under NPMSGDLV ALLAVAIL: accepted, not sent to that peer
        cl["PUB1"].c.publish("Bp/x", OutgoingMessage("np", persistent=False))
        assert cl["PUB1"].chstatus()["HOST1"]["XQMSGSA"] == "20"
    finally:
        cl.stop()


def test_altering_the_transmission_queue_of_no_member_fails_and_creates_nothing(
    shared: Cluster,
) -> None:
    pub = shared["PUB1"]
    for name in ("SYSTEM.CLUSTER.TRANSMIT.", "SYSTEM.CLUSTER.TRANSMIT.NOSUCHQM"):
        ok, records = pub.c.mqsc_ok(f"ALTER QLOCAL({name}) MAXDEPTH(5)")
        assert not ok
        assert records[0].attrs["REASON"] == "MQRC_UNKNOWN_OBJECT_NAME"
    assert set(pub.chstatus()) <= {"FR1", "SUB1"}
