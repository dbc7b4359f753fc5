"""A cluster built the way MQ builds every cluster (IBM MQ 9.x "Setting up a new cluster"):
each partial repository runs an MQSC script with its cluster-receiver channel (its own
CONNAME) and a cluster-sender channel to a full repository; no ``--cluster`` nor ``--join``.
The full repository keeps its start options (its Raft group)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from qmgr.client import MQClientError
from qmgr.launcher.poll import wait_for  # noqa: E402
from tests.integration.cluster_nodes import (
    Cluster,
    ClusterNode,
    exactly_once,
    free_ports,
)


def _script(cl: Cluster, node: ClusterNode, fr: str = "FR1", conname: str = "") -> str:
    own = conname or f"127.0.0.1({node.port})"
    return (
        f"* cluster channels of {node.name}\n"
        f"DEFINE CHANNEL({cl.name}.{node.name}) CHLTYPE(CLUSRCVR) TRPTYPE(TCP) +\n"
        f"       CONNAME('{own}') CLUSTER({cl.name}) CLWLWGHT(30)\n"
        f"DEFINE CHANNEL({cl.name}.{fr}) CHLTYPE(CLUSSDR) TRPTYPE(TCP) +\n"
        f"       CONNAME('{cl.fr_address(fr)}') CLUSTER({cl.name})\n"
    )


def _runmqsc(node: ClusterNode, script: str, tmp: Path) -> str:
    path = tmp / f"{node.name}.mqsc"
    path.write_text(script)
    done = node.cli("runmqsc", node.address, "-f", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _members(node: ClusterNode) -> dict[str, dict[str, str]]:
    return {r["CLUSQMGR"]: r for r in node.mqsc("DISPLAY CLUSQMGR(*) ALL")}


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("mqscbuild")
    cluster = Cluster(base).start(["FR1"], ["PJ"])  # PJ: started with --cluster --join
    try:
        fr1 = cluster["FR1"]  # keeps its Raft start options; its script names its CLUSRCVR
        _runmqsc(
            fr1,
            f"DEFINE CHANNEL(DEMO.FR1) CHLTYPE(CLUSRCVR) TRPTYPE(TCP) "
            f"CONNAME('{cluster.fr_address('FR1')}') CLUSTER(DEMO)\n",
            base,
        )
        for name in ("PA", "PB"):
            node = cluster.bare(name)
            node.start()
            _runmqsc(node, _script(cluster, node), base)
        yield cluster
    finally:
        cluster.stop()


def test_runmqsc_scripts_build_the_cluster(cl: Cluster) -> None:
    for name in ("PA", "PB"):
        wait_for(
            lambda name=name: name in _members(cl["FR1"]),
            20.0,
            what=f"{name} a member on FR1",
            retry=Exception,
        )
    pa = wait_for(
        lambda: (m := _members(cl["PA"])) and "FR1" in m and m,
        20.0,
        what="PA sees FR1",
        retry=Exception,
    )
    assert pa["PA"]["DEFTYPE"] == "CLUSRCVR"
    assert pa["PA"]["CONNAME"] == cl["PA"].address
    assert pa["PA"]["CLWLWGHT"] == "30"  # the CLUSRCVR's workload attribute, published
    assert pa["FR1"]["DEFTYPE"] == "CLUSSDRB"  # reached through the CLUSSDR defined on PA
    assert pa["FR1"]["QMTYPE"] == "REPOS"
    on_fr = _members(cl["FR1"])
    assert on_fr["PA"]["DEFTYPE"] == "CLUSSDRA"  # auto-defined from PA's CLUSRCVR
    assert on_fr["PB"]["CONNAME"] == cl["PB"].address
    assert on_fr["FR1"]["DEFTYPE"] == "CLUSRCVR"
    channels = {r["CHANNEL"]: r for r in cl["PA"].mqsc("DISPLAY CHANNEL(*) ALL")}
    assert channels["DEMO.PA"]["CHLTYPE"] == "CLUSRCVR"
    assert channels["DEMO.PA"]["CLUSTER"] == "DEMO"
    assert channels["DEMO.FR1"]["CHLTYPE"] == "CLUSSDR"
    assert channels["DEMO.FR1"]["CONNAME"] == cl["FR1"].address
    only = cl["PA"].mqsc("DISPLAY CHANNEL(*) CHLTYPE(CLUSSDR)")
    assert [r["CHANNEL"] for r in only] == ["DEMO.FR1"]


def _once(cl: Cluster, topic: str, body: bytes) -> None:
    sub = cl["PB"].c.subscribe(topic)
    try:
        cl.wait_proxy("PA", "PB", topic)
        exactly_once(cl["PA"], sub, topic, body)
    finally:
        sub.close()


def test_clustered_topic_publication_arrives_once_and_survives_a_restart(cl: Cluster) -> None:
    cl.define_topic("PA", "SPORTS", "Sports")
    cl.wait_definition("SPORTS", ["PA"], on=["FR1", "PA", "PB"])
    _once(cl, "Sports/Football", b"goal")

    pb = cl["PB"]
    # the CONNAME it advertises from its next start: another name for the same port
    pb.mqsc(f"ALTER CHANNEL(DEMO.PB) CHLTYPE(CLUSRCVR) CONNAME('localhost({pb.port})')")
    pb.kill()
    pb.start()  # no cluster options: it rejoins from its stored channel definitions
    wait_for(lambda: "FR1" in _members(pb), 20.0, what="PB back in the cluster", retry=Exception)
    wait_for(
        lambda: _members(cl["FR1"])["PB"]["CONNAME"] == f"localhost:{pb.port}",
        20.0,
        what="PB's new CONNAME on FR1",
        retry=Exception,
    )
    cl.wait_definition("SPORTS", ["PA"], on=["PB"])
    kinds = {r["CHANNEL"]: r["CHLTYPE"] for r in cl["PB"].mqsc("DISPLAY CHANNEL(*)")}
    assert kinds == {"DEMO.PB": "CLUSRCVR", "DEMO.FR1": "CLUSSDR"}
    _once(cl, "Sports/Tennis", b"ace")


def _refused(node: ClusterNode, command: str, reason: str) -> None:
    with pytest.raises(MQClientError, match=reason):
        node.c.mqsc(command)


def test_bad_channel_definitions_are_refused_and_change_nothing(cl: Cluster) -> None:
    pa = cl["PA"]
    before = pa.mqsc("DISPLAY CHANNEL(*) ALL")
    fr = cl.fr_address("FR1")
    _refused(
        pa, f"DEFINE CHANNEL(DEMO.FR2) CHLTYPE(CLUSSDR) CONNAME('{fr}')", "MQRCCF_CLUSTER_NAME"
    )
    _refused(
        pa,
        f"DEFINE CHANNEL(OTHER.FR1) CHLTYPE(CLUSSDR) CONNAME('{fr}') CLUSTER(OTHER)",
        "MQRCCF_CLUSTER_NAME_ERROR",
    )
    for bad in ("fr1(port)", "fr1(99999)", "fr1:1:2", "fr1((1414)", "fr1(1414),"):
        _refused(
            pa,
            f"DEFINE CHANNEL(DEMO.FR2) CHLTYPE(CLUSSDR) CONNAME('{bad}') CLUSTER(DEMO)",
            "MQRCCF_CONN_NAME_ERROR",
        )
    _refused(pa, "DEFINE CHANNEL(DEMO.FR2) CHLTYPE(CLUSSDR) CLUSTER(DEMO)", "MQRCCF_CONN_NAME")
    _refused(
        pa,
        f"DEFINE CHANNEL(DEMO.FR1) CHLTYPE(CLUSSDR) CONNAME('{fr}') CLUSTER(DEMO)",
        "MQRCCF_OBJECT_ALREADY_EXISTS",
    )
    _refused(
        pa,
        "DEFINE CHANNEL(DEMO.PA2) CHLTYPE(CLUSRCVR) CONNAME('127.0.0.1(1)') CLUSTER(DEMO)",
        "MQRCCF_CHANNEL_TYPE_ERROR",
    )
    _refused(pa, "DELETE CHANNEL(DEMO.PA)", "MQRCCF_CHANNEL_IN_USE")
    _refused(pa, "DELETE CHANNEL(DEMO.NONE)", "MQRCCF_CHANNEL_NOT_FOUND")
    assert pa.mqsc("DISPLAY CHANNEL(*) ALL") == before
    assert "FR1" in _members(pa)  # still serving, still in the cluster


def test_more_clussdrs_add_join_addresses_and_delete_removes_one(cl: Cluster) -> None:
    pa = cl["PA"]
    (port,) = free_ports(1)
    pa.mqsc(f"DEFINE CHANNEL(DEMO.FR9) CHLTYPE(CLUSSDR) CONNAME('127.0.0.1({port})') CLUSTER(DEMO)")
    members = _members(pa)
    temp = f"SYSTEM.TEMPQMGR.127.0.0.1({port})"
    assert members[temp]["DEFTYPE"] == "CLUSSDR"  # not reached (nothing listens there)
    assert members[temp]["CHANNEL"] == "DEMO.FR9"
    assert members["FR1"]["DEFTYPE"] == "CLUSSDRB"
    pa.mqsc("DELETE CHANNEL(DEMO.FR9)")
    assert temp not in _members(pa)
    assert "DEMO.FR9" not in {r["CHANNEL"] for r in pa.mqsc("DISPLAY CHANNEL(*)")}
    cl.define_topic("PA", "NEWS", "News")
    cl.wait_definition("NEWS", ["PA"], on=["FR1", "PB"])  # still reaches the repository


def test_clussdr_on_members_started_with_cluster_options(cl: Cluster) -> None:
    """``--join`` and a CLUSSDR combine; a full repository stores and shows its CLUSSDRs and
    keeps its Raft group as started."""
    pj, fr = cl["PJ"], cl["FR1"]
    assert _members(pj)["FR1"]["DEFTYPE"] == "CLUSSDRA"
    (own,) = pj.mqsc("DISPLAY CHANNEL(DEMO.PJ)")
    assert (own["CHLTYPE"], own["CONNAME"]) == ("CLUSRCVR", pj.address)
    pj.mqsc(
        f"DEFINE CHANNEL(DEMO.FR1) CHLTYPE(CLUSSDR) CONNAME('{cl.fr_address('FR1')}') CLUSTER(DEMO)"
    )
    assert _members(pj)["FR1"]["DEFTYPE"] == "CLUSSDRB"

    (port,) = free_ports(1)
    fr.mqsc(f"DEFINE CHANNEL(DEMO.FR2) CHLTYPE(CLUSSDR) CONNAME('127.0.0.1:{port}') CLUSTER(DEMO)")
    (shown,) = fr.mqsc("DISPLAY CHANNEL(DEMO.FR2)")
    assert (shown["CHLTYPE"], shown["CONNAME"]) == ("CLUSSDR", f"127.0.0.1:{port}")
    assert fr.mqsc("DISPLAY QMGR")[0]["RAFTSTATE"] == "LEADER"
    cl.define_topic("PJ", "WEATHER", "Weather")
    cl.wait_definition("WEATHER", ["PJ"], on=["FR1", "PJ", "PA"])


def test_full_repository_unreachable_when_the_clussdr_is_defined(
    cl: Cluster, tmp_path: Path
) -> None:
    """MQ accepts channel definitions without connecting: the node joins once the full
    repository answers; until then DISPLAY CLUSQMGR shows it with DEFTYPE(CLUSSDR)."""
    late = Cluster(tmp_path, name="LATE", secret=cl.secret)
    ports = free_ports(2)
    fr_conname = f"127.0.0.1({ports[0]})"
    pc = late.bare("PC")
    pc.env["QMGR_CLUSTER_SECRET"] = late.member_secret or ""
    pc.start()
    try:
        pc.mqsc(f"DEFINE CHANNEL(LATE.FR1) CHLTYPE(CLUSSDR) CONNAME('{fr_conname}') CLUSTER(LATE)")
        temp = f"SYSTEM.TEMPQMGR.{fr_conname}"
        (alone,) = pc.mqsc("DISPLAY CLUSQMGR(*)")  # no cluster-receiver yet: not joining
        assert (alone["CLUSQMGR"], alone["DEFTYPE"]) == (temp, "CLUSSDR")
        records = pc.c.mqsc(
            f"DEFINE CHANNEL(LATE.PC) CHLTYPE(CLUSRCVR) CONNAME('127.0.0.1({pc.port})') "
            "CLUSTER(LATE)"
        )
        assert [r.code for r in records] == ["AMQ8014I", "AMQ9202W"]  # created; not joined yet
        assert "joins when one does" in records[1].text
        members = _members(pc)
        assert members[temp]["DEFTYPE"] == "CLUSSDR"
        assert "FR1" not in members
        args = ["--cluster", "LATE", "--full-repository", "--raft", f"127.0.0.1:{ports[1]}"]
        fr = late._node("FR1", ports[0], args)
        late.nodes["FR1"] = fr
        fr.start()
        wait_for(
            lambda: "PC" in _members(fr), 20.0, what="PC joined once FR1 answers", retry=Exception
        )
        members = wait_for(
            lambda: (m := _members(pc)) and "FR1" in m and m,
            20.0,
            what="FR1 known on PC",
            retry=Exception,
        )
        assert members["FR1"]["DEFTYPE"] == "CLUSSDRB"
        assert temp not in members
    finally:
        late.stop()


def test_restart_without_the_secret_is_refused_with_the_reason(tmp_path: Path) -> None:
    cl = Cluster(tmp_path)
    node = cl.bare("FORGOT")
    node.start()
    try:
        node.mqsc("DEFINE CHANNEL(DEMO.FORGOT) CHLTYPE(CLUSRCVR) CLUSTER(DEMO)")
        node.mqsc("DEFINE CHANNEL(DEMO.FR1) CHLTYPE(CLUSSDR) CONNAME('127.0.0.1(1)') CLUSTER(DEMO)")
        node.kill()
        node.env.pop("QMGR_CLUSTER_SECRET", None)
        with pytest.raises(RuntimeError, match="has cluster channels"):
            node.start(timeout=15)
    finally:
        cl.stop()


def test_node_without_a_secret_cannot_join(tmp_path: Path) -> None:
    cl = Cluster(tmp_path)
    node = cl.bare("NOSEC")
    node.env.pop("QMGR_CLUSTER_SECRET", None)
    node.start()
    try:
        _refused(
            node,
            "DEFINE CHANNEL(DEMO.NOSEC) CHLTYPE(CLUSRCVR) CONNAME('127.0.0.1(1)') CLUSTER(DEMO)",
            "MQRCCF_COMMAND_FAILED",
        )
        assert node.mqsc("DISPLAY CHANNEL(*)") == []
        node.mqsc("DEFINE QLOCAL(STILL.SERVING)")
    finally:
        cl.stop()
