"""Full repositories down, as MQ documents it (docs/mq-semantics.md §1.4): partial repositories
keep routing from their cached view; a clustered topic defined or altered meanwhile is accepted
where it is made (CLSTATE(PENDING)) and reaches every member when a full repository returns;
a full repository restarted without its Raft quorum serves its last committed view; a conflict
found only when the repository returns shows the local definition CLSTATE(INVALID)."""

from __future__ import annotations

from pathlib import Path

from qmgr.client import QueueManagerClient
from qmgr.launcher.poll import wait_for
from tests.integration.cluster_nodes import Cluster, ClusterNode, exactly_once, free_ports


def clstate(node: ClusterNode, name: str, host: str) -> str | None:
    """CLSTATE of ``name`` hosted by ``host`` as ``node`` shows it (None: not shown)."""
    ok, records = node.c.mqsc_ok(f"DISPLAY TCLUSTER({name})")
    states = [r.attrs["CLSTATE"] for r in records if ok and r.attrs.get("CLUSQMGR") == host]
    assert len(states) <= 1, f"{name}@{host} shown {len(states)} times on {node.name}"
    return states[0] if states else None


def topic_def(name: str, topic: str, clroute: str) -> str:
    return f"DEFINE TOPIC({name}) TOPICSTR('{topic}') CLUSTER(DEMO) CLROUTE({clroute})"


def define_pending(
    node: ClusterNode, name: str, topic: str = "", clroute: str = "", command: str = ""
) -> None:
    """``command`` (default: DEFINE TOPIC(name) of ``topic`` and ``clroute``) succeeds on
    ``node`` with the warning that the definition is pending."""
    ok, records = node.c.mqsc_ok(command or topic_def(name, topic, clroute))
    assert ok, [(r.code, r.text) for r in records]
    warned = [r for r in records if dict(r.attrs).get("CLSTATE") == "PENDING"]
    assert warned and name in warned[0].text, [(r.code, r.text) for r in records]
    assert clstate(node, name, node.name) == "PENDING"
    shown = node.mqsc(f"DISPLAY TOPIC({name}) CLUSINFO")
    assert ("CLUSTER", node.name, "PENDING") in {
        (r.get("TYPE"), r.get("CLUSQMGR"), r.get("CLSTATE")) for r in shown
    }


def descr(node: ClusterNode, name: str, host: str) -> str:
    ok, records = node.c.mqsc_ok(f"DISPLAY TCLUSTER({name})")
    return next(r.attrs["DESCR"] for r in records if ok and r.attrs["CLUSQMGR"] == host)


def test_both_full_repositories_down_routing_goes_on_and_definitions_made_meanwhile_reach_everyone(
    tmp_path: Path,
) -> None:
    cl = Cluster(tmp_path).start(["FR1", "FR2"], ["HOST1", "PUB1", "SUB1"])
    try:
        cl.define_topic("HOST1", "ORDERS", "Orders")
        cl.wait_definition("ORDERS", ["HOST1"])
        sub = cl["SUB1"].c.subscribe("Orders/New")
        cl.wait_proxy("HOST1", "SUB1", "Orders/New")
        cl["FR1"].kill()
        cl["FR2"].kill()
        # routing over the existing routes never stops
        exactly_once(cl["PUB1"], sub, "Orders/New", b"while both are down")
        # definitions are accepted where they are made, and kept pending
        define_pending(cl["HOST1"], "PRICES", "Prices", "TOPICHOST")
        define_pending(
            cl["HOST1"], "ORDERS", command="ALTER TOPIC(ORDERS) DESCR('changed meanwhile')"
        )
        define_pending(cl["PUB1"], "NEWS", "News", "DIRECT")
        # what is refused locally is still refused at once, and changes nothing
        ok, records = cl["HOST1"].c.mqsc_ok("ALTER TOPIC(ORDERS) CLROUTE(DIRECT)")
        assert not ok
        assert dict(records[0].attrs)["REASON"] == "MQRCCF_CLROUTE_NOT_ALTERABLE"
        assert cl["HOST1"].mqsc("DISPLAY TOPIC(ORDERS)")[0]["CLROUTE"] == "TOPICHOST"
        assert clstate(cl["SUB1"], "PRICES", "HOST1") is None  # not known elsewhere yet
        assert clstate(cl["HOST1"], "PRICES", "HOST1") == "PENDING"  # still pending on retry
        exactly_once(cl["PUB1"], sub, "Orders/New", b"still routed")
        # the full repositories come back one after the other
        cl["FR1"].start()
        cl["FR2"].start()
        cl.wait_definition("PRICES", ["HOST1"])
        cl.wait_definition("NEWS", ["PUB1"])
        for node in cl.nodes.values():
            wait_for(
                lambda n=node: descr(n, "ORDERS", "HOST1") == "changed meanwhile",
                20.0,
                what=f"ORDERS altered on {node.name}",
                retry=Exception,
            )
        # the new definition routes: a publication reaches the subscriber once
        prices = cl["SUB1"].c.subscribe("Prices/Today")
        cl.wait_proxy("HOST1", "SUB1", "Prices/Today")
        exactly_once(cl["PUB1"], prices, "Prices/Today", b"after the outage")
        exactly_once(cl["PUB1"], sub, "Orders/New", b"after the outage")
        prices.close()
        sub.close()
    finally:
        cl.stop()


def test_a_full_repository_restarted_alone_serves_its_view(tmp_path: Path) -> None:
    cl = Cluster(tmp_path).start(["FR1", "FR2"], ["HOST1"])
    try:
        cl.define_topic("HOST1", "ORDERS", "Orders")
        cl.wait_definition("ORDERS", ["HOST1"])
        cl["FR1"].kill()
        cl["FR2"].kill()
        cl["FR1"].start()  # alone: no Raft quorum
        assert clstate(cl["FR1"], "ORDERS", "HOST1") == "ACTIVE"
        # a new partial repository joins through it and sees the known topics
        port = free_ports(1)[0]
        join = ["--cluster", cl.name, "--join", f"127.0.0.1:{cl['FR1'].port}"]
        cl.nodes["NEW1"] = new = cl._node("NEW1", port, join)
        new.start()
        wait_for(
            lambda: clstate(new, "ORDERS", "HOST1") == "ACTIVE",
            20.0,
            what="ORDERS on NEW1",
            retry=Exception,
        )
        # its join waited for the quorum: once FR2 is back both repositories list it
        cl["FR2"].start()
        for fr in ("FR1", "FR2"):
            wait_for(
                lambda fr=fr: "NEW1" in {r["CLUSQMGR"] for r in cl[fr].mqsc("DISPLAY CLUSQMGR(*)")},
                20.0,
                what=f"NEW1 known to {fr}",
                retry=Exception,
            )
    finally:
        cl.stop()


def test_a_conflict_found_when_the_repository_returns_shows_the_definition_invalid(
    tmp_path: Path,
) -> None:
    cl = Cluster(tmp_path).start(["FR1"], ["HOST1", "HOST2"])
    try:
        cl["FR1"].kill()
        define_pending(cl["HOST1"], "SPORTS", "Sports", "DIRECT")
        define_pending(cl["HOST2"], "SPORTS", "Sports", "TOPICHOST")
        cl["FR1"].start()

        def settled() -> dict[str, str | None] | None:
            states = {h: clstate(cl[h], "SPORTS", h) for h in ("HOST1", "HOST2")}
            return states if sorted(map(str, states.values())) == ["ACTIVE", "INVALID"] else None

        final = wait_for(settled, 20.0, what="one ACTIVE, one INVALID", retry=Exception)
        loser = next(h for h, s in final.items() if s == "INVALID")
        winner = next(h for h in final if h != loser)
        # never silently dropped: the local object is kept and the conflict is in the log
        assert cl[loser].mqsc("DISPLAY TOPIC(SPORTS)")[0]["TOPICSTR"] == "Sports"
        text = Path(cl[loser].log).read_text()
        assert "CLSTATE(INVALID)" in text and "MQRCCF_CLUSTER_TOPIC_CONFLICT" in text
        # the repository holds the winner's only
        assert {h for n, h in cl["FR1"].tcluster() if n == "SPORTS"} == {winner}
        # the loser fixes its definition: accepted at once
        cl[loser].mqsc("DELETE TOPIC(SPORTS)")
        wait_for(
            lambda: clstate(cl[loser], "SPORTS", loser) is None,
            20.0,
            what=f"SPORTS gone from {loser}",
            retry=Exception,
        )
        route = "DIRECT" if winner == "HOST1" else "TOPICHOST"
        cl[loser].mqsc(topic_def("SPORTS", "Sports", route))
        cl.wait_definition("SPORTS", ["HOST1", "HOST2"])
    finally:
        cl.stop()


def test_a_conflict_while_the_repository_is_available_is_still_refused_and_undone(
    tmp_path: Path,
) -> None:
    cl = Cluster(tmp_path).start(["FR1"], ["HOST1", "HOST2"])
    try:
        cl.define_topic("HOST1", "SPORTS", "Sports", "DIRECT")
        cl.wait_definition("SPORTS", ["HOST1"], on=["HOST2"])
        ok, records = cl["HOST2"].c.mqsc_ok(topic_def("SPORTS", "Sports", "TOPICHOST"))
        assert not ok
        assert dict(records[0].attrs)["REASON"] == "MQRCCF_CLUSTER_TOPIC_CONFLICT"
        ok, _ = cl["HOST2"].c.mqsc_ok("DISPLAY TOPIC(SPORTS)")
        assert not ok  # nothing changed
        assert clstate(cl["HOST2"], "SPORTS", "HOST2") is None
        client = QueueManagerClient(cl["HOST2"].address, timeout=20)
        client.publish("Sports/Scores", b"node keeps serving")
        client.close()
    finally:
        cl.stop()


def test_a_pending_definition_survives_a_restart_of_its_queue_manager(tmp_path: Path) -> None:
    cl = Cluster(tmp_path).start(["FR1"], ["HOST1", "SUB1"])
    try:
        cl["FR1"].kill()
        define_pending(cl["HOST1"], "ORDERS", "Orders", "TOPICHOST")
        cl["HOST1"].restart()  # starts on its kept view: still pending
        assert clstate(cl["HOST1"], "ORDERS", "HOST1") == "PENDING"
        cl["FR1"].start()
        cl.wait_definition("ORDERS", ["HOST1"])
    finally:
        cl.stop()
