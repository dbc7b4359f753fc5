"""Two full repositories, as MQ recommends them: when one is down the other still takes every
new definition and sends it to the members, and the Raft log settles what it relayed when both
are back (``qmgr.node.cluster.repolink``). Three full repositories commit as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from qmgr.launcher.poll import wait_for
from tests.integration.cluster_nodes import Cluster, ClusterNode, exactly_once
from tests.integration.test_repository_outage import clstate, define_pending, topic_def

PARTIALS = ["HOST1", "HOST2", "PUB1", "SUB1"]


def relayed(fr: ClusterNode) -> int:
    """RAFTRELAYED of a full repository: changes it relayed and the log has not settled."""
    return int(fr.mqsc("DISPLAY QMGR ALL")[0]["RAFTRELAYED"])


def define_relayed(node: ClusterNode, name: str, topic: str, clroute: str) -> None:
    """DEFINE TOPIC on ``node`` succeeds and says which full repository relayed it."""
    ok, records = node.c.mqsc_ok(topic_def(name, topic, clroute))
    assert ok, [(r.code, r.text) for r in records]
    texts = " ".join(r.text for r in records)
    assert "relayed this change to the members" in texts, texts


def running(cl: Cluster, *down: str) -> list[str]:
    return [n for n in cl.nodes if n not in down]


def active_once_everywhere(cl: Cluster, name: str, host: str, nodes: list[str]) -> None:
    """Every node of ``nodes`` shows ``name`` hosted by ``host`` ACTIVE (once: ``clstate``
    fails on a second copy)."""
    for node in nodes:
        wait_for(
            lambda n=cl[node]: clstate(n, name, host) == "ACTIVE",
            20.0,
            what=f"{name}@{host} ACTIVE on {node}",
            retry=Exception,
        )


@pytest.mark.parametrize("down", ["FR1", "FR2"])
def test_with_one_of_two_full_repositories_stopped_a_new_definition_reaches_every_member(
    tmp_path: Path, down: str
) -> None:
    cl = Cluster(tmp_path).start(["FR1", "FR2"], PARTIALS)
    up = "FR2" if down == "FR1" else "FR1"
    try:
        cl.define_topic("HOST1", "ORDERS", "Orders")
        cl.wait_definition("ORDERS", ["HOST1"])
        orders = cl["SUB1"].c.subscribe("Orders/New")
        cl.wait_proxy("HOST1", "SUB1", "Orders/New")
        cl[down].kill()
        # routing over the existing routes never stops
        exactly_once(cl["PUB1"], orders, "Orders/New", b"while one is down")
        # a definition made on a partial repository reaches every running member through the
        # full repository that is up, ACTIVE, and routes at once
        define_relayed(cl["HOST2"], "PRICES", "Prices", "TOPICHOST")
        active_once_everywhere(cl, "PRICES", "HOST2", running(cl, down))
        assert relayed(cl[up]) >= 1
        # and one made on the full repository that is up, the same way
        define_relayed(cl[up], "RATES", "Rates", "TOPICHOST")
        active_once_everywhere(cl, "RATES", up, running(cl, down))
        prices = cl["SUB1"].c.subscribe("Prices/Today")
        cl.wait_proxy("HOST2", "SUB1", "Prices/Today")
        exactly_once(cl["PUB1"], prices, "Prices/Today", b"through the relayed definition")
        # a partial repository restarted meanwhile gets it from the one that is up
        cl["PUB1"].restart()
        assert clstate(cl["PUB1"], "PRICES", "HOST2") == "ACTIVE"
        exactly_once(cl["PUB1"], prices, "Prices/Today", b"after PUB1 restarted")
        # the full repository comes back: the log commits what was relayed, once
        cl[down].start()
        wait_for(
            lambda: relayed(cl[up]) == 0, 20.0, what=f"nothing relayed on {up}", retry=Exception
        )
        active_once_everywhere(cl, "PRICES", "HOST2", list(cl.nodes))
        active_once_everywhere(cl, "RATES", up, list(cl.nodes))
        assert relayed(cl[down]) == 0
        exactly_once(cl["PUB1"], prices, "Prices/Today", b"after both are back")
        exactly_once(cl["PUB1"], orders, "Orders/New", b"after both are back")
        prices.close()
        orders.close()
    finally:
        cl.stop()


def test_both_down_definitions_stay_pending_and_converge_when_either_returns(
    tmp_path: Path,
) -> None:
    cl = Cluster(tmp_path).start(["FR1", "FR2"], PARTIALS)
    try:
        cl["FR1"].kill()
        cl["FR2"].kill()
        define_pending(cl["HOST1"], "PRICES", "Prices", "TOPICHOST")
        define_pending(cl["PUB1"], "NEWS", "News", "DIRECT")
        assert clstate(cl["SUB1"], "PRICES", "HOST1") is None
        # FR2 alone: no quorum, and still every running member converges through it
        cl["FR2"].start()
        active_once_everywhere(cl, "PRICES", "HOST1", running(cl, "FR1"))
        active_once_everywhere(cl, "NEWS", "PUB1", running(cl, "FR1"))
        prices = cl["SUB1"].c.subscribe("Prices/Today")
        cl.wait_proxy("HOST1", "SUB1", "Prices/Today")
        exactly_once(cl["PUB1"], prices, "Prices/Today", b"FR2 alone")
        # FR1 returns: committed, and FR1 serves the same view
        cl["FR1"].start()
        wait_for(
            lambda: relayed(cl["FR2"]) == 0, 20.0, what="nothing relayed on FR2", retry=Exception
        )
        active_once_everywhere(cl, "PRICES", "HOST1", list(cl.nodes))
        active_once_everywhere(cl, "NEWS", "PUB1", list(cl.nodes))
        exactly_once(cl["PUB1"], prices, "Prices/Today", b"both back")
        prices.close()
    finally:
        cl.stop()


def test_the_same_object_defined_differently_on_two_sides_of_an_outage_is_a_conflict(
    tmp_path: Path,
) -> None:
    """FR2 down: HOST1 defines SPORTS DIRECT, relayed by FR1. FR1 down, FR2 back alone: HOST2
    defines SPORTS TOPICHOST, through FR2 (FR1's relay died with it). When both are back the
    log keeps one: the other host's definition is refused as MQ refuses it,
    MQRCCF_CLUSTER_TOPIC_CONFLICT, and shown CLSTATE(INVALID) there; every member agrees."""
    cl = Cluster(tmp_path).start(["FR1", "FR2"], PARTIALS)
    try:
        cl["FR2"].kill()
        define_relayed(cl["HOST1"], "SPORTS", "Sports", "DIRECT")
        active_once_everywhere(cl, "SPORTS", "HOST1", running(cl, "FR2"))
        cl["FR1"].kill()
        cl["FR2"].start()
        # relayed, or kept PENDING if HOST1 (failing over to FR2, which lacks its SPORTS)
        # sent its own again first: accepted where it is made either way
        ok, records = cl["HOST2"].c.mqsc_ok(topic_def("SPORTS", "Sports", "TOPICHOST"))
        assert ok, [(r.code, r.text) for r in records]
        cl["FR1"].start()

        def settled() -> dict[str, str | None] | None:
            states = {h: clstate(cl[h], "SPORTS", h) for h in ("HOST1", "HOST2")}
            return states if sorted(map(str, states.values())) == ["ACTIVE", "INVALID"] else None

        final = wait_for(settled, 60, what="one ACTIVE, one INVALID", retry=Exception)
        loser = next(h for h, s in final.items() if s == "INVALID")
        winner = next(h for h in final if h != loser)
        text = Path(cl[loser].log).read_text()
        assert "CLSTATE(INVALID)" in text and "MQRCCF_CLUSTER_TOPIC_CONFLICT" in text
        # the local object is kept, and every member holds the winner's only
        assert cl[loser].mqsc("DISPLAY TOPIC(SPORTS)")[0]["TOPICSTR"] == "Sports"
        for fr in ("FR1", "FR2"):
            wait_for(
                lambda fr=fr: relayed(cl[fr]) == 0,
                20.0,
                what=f"nothing relayed on {fr}",
                retry=Exception,
            )
        for node in cl.nodes:
            wait_for(
                lambda n=cl[node]: {h for o, h in n.tcluster() if o == "SPORTS"} == {winner},
                20.0,
                what=f"only {winner}'s SPORTS on {node}",
                retry=Exception,
            )
    finally:
        cl.stop()


def test_three_full_repositories_commit_with_one_down_and_relay_nothing(tmp_path: Path) -> None:
    cl = Cluster(tmp_path).start(["FR1", "FR2", "FR3"], ["HOST1", "SUB1"])
    try:
        cl["FR1"].kill()
        ok, records = cl["HOST1"].c.mqsc_ok(topic_def("PRICES", "Prices", "TOPICHOST"))
        assert ok, [(r.code, r.text) for r in records]
        assert "relayed" not in " ".join(r.text for r in records)
        active_once_everywhere(cl, "PRICES", "HOST1", running(cl, "FR1"))
        assert relayed(cl["FR2"]) == relayed(cl["FR3"]) == 0
    finally:
        cl.stop()


def test_a_change_goes_through_a_full_repository_restarted_since_the_last_one(
    tmp_path: Path,
) -> None:
    """A partial repository keeps its channel to a full repository between changes; after
    that full repository was killed and started again, the next change still commits (on a
    new channel), with no warning and nothing relayed."""
    cl = Cluster(tmp_path).start(["FR1", "FR2", "FR3"], ["HOST1", "SUB1"])
    try:
        cl.define_topic("HOST1", "ORDERS", "Orders")
        active_once_everywhere(cl, "ORDERS", "HOST1", list(cl.nodes))
        cl["FR1"].kill()
        cl["FR1"].start()
        ok, records = cl["HOST1"].c.mqsc_ok(topic_def("PRICES", "Prices", "TOPICHOST"))
        assert ok, [(r.code, r.text) for r in records]
        assert not [r for r in records if r.code == "AMQ9883W"], [r.text for r in records]
        active_once_everywhere(cl, "PRICES", "HOST1", list(cl.nodes))
        assert relayed(cl["FR1"]) == relayed(cl["FR2"]) == relayed(cl["FR3"]) == 0
    finally:
        cl.stop()
