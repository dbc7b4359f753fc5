"""kill -9 during cluster traffic: persistent publications arrive exactly once, the full
repositories survive the loss of their Raft leader, a restarted subscriber node gets its durable
subscription, its proxies and the publications held for it back."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

from qmgr.client import OutgoingMessage
from qmgr.launcher.poll import wait_for
from tests.integration.cluster_nodes import Cluster

ROUTE = "qmgr.route"


def test_topic_host_killed_during_a_persistent_stream_every_message_arrives_once(
    tmp_path: Path,
) -> None:
    cl = Cluster(tmp_path).start(["FR1"], ["HOSTA1", "HOSTA2", "PUB1", "SUB1"])
    try:
        cl.two_hosts_and_a_subscription(("HOSTA1", "HOSTA2"), "Prices/Stream", "STREAM")
        sub_node = cl["SUB1"]
        n = 3000
        done = threading.Event()

        def publish() -> None:
            pub = cl["PUB1"].c.stream_publisher(batch_size=25, window=4)
            for i in range(n):
                pub.publish("Prices/Stream", OutgoingMessage(str(i), persistent=True))
            pub.close()
            done.set()

        publisher = threading.Thread(target=publish)
        publisher.start()
        received: list[str] = []
        routes: Counter[str] = Counter()
        sub = sub_node.c.subscribe("Prices/Stream", name="STREAM", durable=True)

        def take(timeout: float) -> int:
            batch = sub.receive_batch(timeout=timeout)
            received.extend(m.body.decode() for m in batch)
            routes.update(str(m.properties[ROUTE]).split(",")[1] for m in batch)
            return len(batch)

        while len(received) < 300:
            assert take(20), "nothing arrived before the kill"
        cl["HOSTA1"].kill()
        publisher.join(120)
        assert done.is_set(), "the publisher did not finish after the host died"
        while take(2):
            pass
        after_kill = Counter(routes)
        cl["HOSTA1"].start()  # publications in doubt with it are resent or de-duplicated
        while len(received) < n and take(20):
            pass
        while take(1):
            pass
        sub.close()
        counts = Counter(received)
        assert len(received) == n, f"{len(received)} received, {n - len(counts)} missing"
        assert set(counts) == {str(i) for i in range(n)}
        assert not [k for k, v in counts.items() if v > 1], "duplicates"
        assert after_kill["HOSTA2"] > 0  # re-routed through the surviving host
    finally:
        cl.stop()


def _leader(cl: Cluster, ask: str | None = None) -> str | None:
    """The full repository that is the Raft leader, as full repository ``ask`` sees it."""
    raft_of = {}
    for name in cl.frs:
        args = cl[name].args
        raft_of[args[args.index("--raft") + 1]] = name
    rec = cl[ask or cl.frs[0]].mqsc("DISPLAY QMGR ALL")[0]
    return raft_of.get(rec["RAFTLEADER"])


def test_raft_leader_killed_a_new_definition_still_reaches_every_member(tmp_path: Path) -> None:
    def leader_of(c: Cluster) -> str:
        return str(wait_for(lambda: _leader(c), 20.0, what="a Raft leader", retry=Exception))

    # the partial repositories watch the leader: its death also makes them fail over
    cl = Cluster(tmp_path).start(["FR1", "FR2", "FR3"], ["HOST1", "PUB1", "SUB1"], leader_of)
    try:
        leader = leader_of(cl)
        cl[leader].kill()
        survivors = [n for n in cl.nodes if n != leader]
        cl.define_topic("HOST1", "ORDERS", "Orders")
        cl.wait_definition("ORDERS", ["HOST1"], on=survivors)
        asked = next(n for n in survivors if n in cl.frs)
        new_leader = wait_for(
            lambda: _leader(cl, asked), 20.0, what="a new leader", retry=Exception
        )
        assert new_leader != leader
        sub = cl["SUB1"].c.subscribe("Orders/New")
        cl.wait_proxy("HOST1", "SUB1", "Orders/New")
        cl["PUB1"].c.publish("Orders/New", b"after failover")
        got = sub.receive_batch(timeout=20)
        assert [m.body for m in got] == [b"after failover"]
        sub.close()
    finally:
        cl.stop()


def test_restarted_subscriber_gets_durable_subscription_proxies_and_held_publications(
    tmp_path: Path,
) -> None:
    cl = Cluster(tmp_path).start(["FR1"], ["HOST1", "HOST2", "PUB1", "SUB1"])
    try:
        cl.define_topic("HOST1", "PRICES", "Prices")
        cl.wait_definition("PRICES", ["HOST1"], on=["PUB1", "SUB1"])
        # topic-host routing: a partial repository knows the full repositories and the hosts,
        # not every other member
        known = {r["CLUSQMGR"] for r in cl["PUB1"].mqsc("DISPLAY CLUSQMGR(*)")}
        assert known == {"FR1", "HOST1", "PUB1"}
        cl["SUB1"].c.create_subscription("Prices/Held", name="HELD")
        cl.wait_proxy("HOST1", "SUB1", "Prices/Held")
        cl["SUB1"].kill()
        cl["PUB1"].c.publish_many(
            [("Prices/Held", OutgoingMessage(str(i), persistent=True)) for i in range(100)]
        )

        def held() -> int:
            return int(cl["HOST1"].chstatus().get("SUB1", {}).get("XQMSGSA", "0"))

        wait_for(
            lambda: held() == 100,
            20.0,
            what="100 publications held for SUB1 on HOST1",
            retry=Exception,
        )
        cl["HOST1"].kill()  # the host restarts too: held publications and proxies are stored
        cl["HOST1"].start()
        assert ("SUB1", "Prices/Held") in cl["HOST1"].proxies()
        # a second host appears while the subscriber is down: it learns the proxy only when
        # the restarted subscriber node re-sends its own
        cl.define_topic("HOST2", "PRICES", "Prices")
        cl.wait_definition("PRICES", ["HOST1", "HOST2"], on=["PUB1", "HOST1"])
        assert ("SUB1", "Prices/Held") not in cl["HOST2"].proxies()
        cl["SUB1"].start()
        cl.wait_proxy("HOST2", "SUB1", "Prices/Held")
        names = [r["SUB"] for r in cl["SUB1"].mqsc("DISPLAY SUB(HELD)")]
        assert names == ["HELD"]
        sub = cl["SUB1"].c.subscribe("Prices/Held", name="HELD", durable=True)
        cl["PUB1"].c.publish_many(
            [("Prices/Held", OutgoingMessage(str(i), persistent=True)) for i in range(100, 110)]
        )
        got: list[str] = []
        routes: Counter[str] = Counter()
        while len(got) < 110:
            batch = sub.receive_batch(timeout=20)
            assert batch, f"only {len(got)} of 110 arrived"
            got.extend(m.body.decode() for m in batch)
            routes.update(str(m.properties[ROUTE]).split(",")[1] for m in batch)
        assert sorted(got, key=int) == [str(i) for i in range(110)]
        # the 100 held went through HOST1; the 10 new alternate between the hosts, or all go
        # through HOST2 while PUB1's channel to the restarted HOST1 is not running yet
        assert set(routes) == {"HOST1", "HOST2"} and 100 <= routes["HOST1"] <= 105, routes
        # with every full repository gone, existing routes keep working
        cl["FR1"].kill()
        cl["PUB1"].c.publish("Prices/Held", OutgoingMessage("no FR", persistent=True))
        cl["PUB1"].c.publish("Prices/Held", OutgoingMessage("no FR", persistent=True))
        bodies: list[bytes] = []
        while len(bodies) < 2:
            batch = sub.receive_batch(timeout=20)
            assert batch
            bodies.extend(m.body for m in batch)
        assert bodies == [b"no FR", b"no FR"]
        assert sub.receive_batch(timeout=0.5) == []
        sub.close()
    finally:
        cl.stop()
