"""The load-and-ordering job in local mode on small real clusters (node processes on loopback,
the "qmgr" Spark data source, real Spark): its metrics against what the test knows."""

from __future__ import annotations

import dataclasses
import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from qmgr.launcher.launch import qmgr_command  # noqa: E402
from qmgr.spark import metrics as m  # noqa: E402
from qmgr.spark.job import JobOptions, run_scenarios  # noqa: E402
from qmgr.spark.report import ScenarioResult, console  # noqa: E402
from qmgr.spark.scenario import Scenario, load_scenario  # noqa: E402

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


@pytest.fixture(scope="module")
def spark(spark_session: Any) -> Any:
    """The test process's shared local session (tests/conftest.py), as the job's own is."""
    return spark_session


def _qmgr(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*qmgr_command(), *args], capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def bridge_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The bridge topology (two topic hosts for Prices, a Service Bus node bridging Prices/#
    and Orders/#) started once with ``qmgr cluster up`` under a QMGR_HOME of the module's, for
    the tests that run on it; its name."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("QMGR_HOME", str(tmp_path_factory.mktemp("bridge-home")))
        up = _qmgr("cluster", "up", str(SCENARIOS / "topology-bridge.toml"), "--timeout", "60")
        try:
            assert up.returncode == 0, up.stdout + up.stderr
            yield "LOADSB"
        finally:
            _qmgr("cluster", "down", "--cluster", "LOADSB")


def small(name: str, publishers: int = 2, messages: int = 300, **load: Any) -> Scenario:
    """A shipped scenario with a small load."""
    scenario = load_scenario(SCENARIOS / f"{name}.toml")
    smaller = dataclasses.replace(scenario.load, publishers=publishers, messages=messages, **load)
    return dataclasses.replace(scenario, load=smaller)


def run(spark: Any, tmp_path: Path, *scenarios: Scenario) -> list[ScenarioResult]:
    options = JobOptions(scenarios=(), out=tmp_path / "out", timeout=60)
    return run_scenarios(spark, list(scenarios), options, console())


def rows(result: ScenarioResult) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["subscriber"], r["publisher"]): r for r in result.metrics}


def shares(result: ScenarioResult, subscriber: str = m.ALL) -> dict[str, float]:
    return {
        r["host"]: r["share"]
        for r in result.hosts
        if r["subscriber"] == subscriber and r["publisher"] == m.ALL
    }


def assert_complete(result: ScenarioResult) -> None:
    """Everything sent was acknowledged and received once: nothing lost, duplicated or
    unexpected, for every stream."""
    for key, row in rows(result).items():
        assert row["sent"] > 0, key
        assert row["acknowledged"] == row["sent"], key
        assert row["received"] == row["unique"] == row["sent"], key
        assert (row["lost"], row["duplicated"], row["unexpected"]) == (0, 0, 0), key


def test_one_topic_host_keeps_each_publishers_order(spark: Any, tmp_path: Path) -> None:
    (result,) = run(spark, tmp_path, small("one-host"))
    assert_complete(result)
    table = rows(result)
    # publisher i publishes on topics[i % 2]: ALL gets both publishers, APPLES only P000
    assert table[("ALL", m.ALL)]["sent"] == 600
    assert table[("APPLES", m.ALL)]["sent"] == 300
    apples = [p for s, p in table if s == "APPLES" and p != m.ALL]
    assert len(apples) == 1 and apples[0].startswith("P000-")
    for key, row in table.items():
        assert row["out_of_order"] == 0, key
        assert row["max_displacement"] == 0, key
        assert row["latency_p50_ms"] is not None and row["latency_p50_ms"] >= 0, key
        assert row["latency_p50_ms"] <= row["latency_p99_ms"] <= row["latency_max_ms"], key
    assert shares(result) == {"HOSTA1": 1.0}

    # the outputs
    out = tmp_path / "out"
    saved = json.loads((out / "one-host" / "metrics.json").read_text())
    assert saved["meta"]["run"] == result.run_id
    assert {(r["subscriber"], r["publisher"]) for r in saved["metrics"]} == set(table)
    receipts = spark.read.parquet(str(out / "one-host" / "receipts.parquet"))
    assert receipts.count() == 900
    assert receipts.where(receipts.publisher.isNull()).count() == 0
    header = (out / "summary.csv").read_text().splitlines()[0]
    assert header.startswith("scenario,subscriber,publisher,sent,acknowledged,received")
    for chart in (out / "chart.png", out / "one-host" / "chart.png"):
        assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_two_topic_hosts_share_the_load_and_lose_order_and_a_kill_loses_nothing(
    spark: Any, tmp_path: Path
) -> None:
    """The same cluster (two topic hosts) for both scenarios: round robin first, then a
    persistent run during which HOSTA1 is killed with kill -9 and restarted."""
    two = small("two-hosts")
    kill = small("kill-host", rate=150.0)  # paced, so the kill comes in the middle
    first, killed = run(spark, tmp_path, two, kill)

    assert_complete(first)
    total = rows(first)[("ALL", m.ALL)]
    assert total["out_of_order"] > 0
    assert 0 < total["out_of_order_ratio"] < 1
    assert total["max_displacement"] > 0
    split = shares(first, "ALL")
    assert set(split) == {"HOSTA1", "HOSTA2"}
    assert split["HOSTA1"] == pytest.approx(0.5, abs=0.1)

    assert killed.meta["killed"] == "HOSTA1"
    assert 0 < killed.meta["killed_after_acknowledged"] < killed.scenario.load.total
    # a publication missing from the receipts is stuck if a transmission queue still holds it
    assert killed.meta["held_after_drain"] == {}, "stuck on transmission queues"
    assert_complete(killed)
    assert set(shares(killed, "ALL")) == {"HOSTA1", "HOSTA2"}


def test_mq_to_service_bus_sessions_and_the_sequenced_helper_and_nservicebus(
    spark: Any, tmp_path: Path, bridge_cluster: str
) -> None:
    """The bridge cluster (two topic hosts for Prices, a Service Bus node bridging Prices/#
    and Orders/#): the bridge carries a disordered stream into per-publisher sessions, the
    sequenced-delivery helper hands it over in order; the ForwardingTopology routes each
    event type to the endpoints whose rules ask for it."""
    options = JobOptions(scenarios=(), out=tmp_path / "out", timeout=60, cluster=bridge_cluster)
    scenarios = [small("bridge-sequenced", messages=150), small("nservicebus", messages=100)]
    sequenced, nsb = run_scenarios(spark, scenarios, options, console())
    assert_complete(sequenced)
    table = rows(sequenced)
    assert table[("MQ", m.ALL)]["out_of_order"] > 0  # two topic hosts
    assert table[("SB-SESSIONS", m.ALL)]["out_of_order"] > 0  # the sessions as they arrived
    sequenced_rows = [r for (s, _), r in table.items() if s == "SB-SEQUENCED"]
    assert len(sequenced_rows) == 3  # two publishers and their total
    for row in sequenced_rows:
        assert (row["received"], row["out_of_order"], row["max_displacement"]) == (
            row["sent"],
            0,
            0,
        )
    assert set(shares(sequenced, "SB-SEQUENCED")) == {"HOSTA1", "HOSTA2"}  # qmgr.route kept

    assert_complete(nsb)
    endpoints = rows(nsb)
    assert endpoints[("shipping", m.ALL)]["received"] == 100  # OrderAccepted only
    assert endpoints[("billing", m.ALL)]["received"] == 200  # OrderAccepted and OrderDeclined
    assert endpoints[(m.ALL, m.ALL)]["out_of_order"] == 0  # one topic host for Orders


def test_a_cluster_started_by_qmgr_cluster_up_is_used_and_left_running(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qmgr.client import QueueManagerClient
    from qmgr.launcher.cluster_state import read_state, state_dir
    from qmgr.spark.job import JobError

    monkeypatch.setenv("QMGR_HOME", str(tmp_path / "home"))
    up = _qmgr("cluster", "up", str(SCENARIOS / "topology-direct.toml"), "--timeout", "60")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        options = JobOptions(scenarios=(), out=tmp_path / "out", cluster="LOAD3")
        (result,) = run_scenarios(spark, [small("direct", messages=200)], options, console())
        assert_complete(result)
        assert result.total()["out_of_order"] == 0
        assert shares(result) == {m.DIRECT: 1.0}
        # the nodes still run; the job's subscriptions are gone
        state = read_state(state_dir("LOAD3"))
        assert state is not None
        sub1 = next(n for n in state.nodes if n.name == "SUB1")
        with QueueManagerClient(sub1.address) as client:
            _, records = client.mqsc_ok("DISPLAY SUB(*)")
        assert not [r for r in records if r.attrs.get("SUB", "").startswith("LOAD.")]
        # a fault needs a cluster the job starts (and restarts a node of)
        with pytest.raises(JobError, match="needs a cluster the job starts"):
            run_scenarios(spark, [small("kill-host")], options, console())
        # --compose finds the nodes through the published-port variables of the compose file
        for node in state.nodes:
            monkeypatch.setenv(f"QMGR_PORT_{node.name}", node.address.rsplit(":", 1)[1])
        monkeypatch.setenv("QMGR_PUBLISH_ADDRESS", "0.0.0.0")  # published on every address
        composed = JobOptions(scenarios=(), out=tmp_path / "composed", compose=True)
        (result,) = run_scenarios(spark, [small("direct", messages=100)], composed, console())
        assert_complete(result)
        with pytest.raises(JobError, match="needs a cluster the job starts"):
            run_scenarios(spark, [small("kill-host")], composed, console())
        with socket.socket() as unused:
            unused.bind(("127.0.0.1", 0))
            monkeypatch.setenv("QMGR_PORT_SUB1", str(unused.getsockname()[1]))
            with pytest.raises(JobError, match="no node SUB1 answers on 127.0.0.1:"):
                run_scenarios(spark, [small("direct", messages=100)], composed, console())
    finally:
        _qmgr("cluster", "down", "--cluster", "LOAD3")


def test_a_run_larger_than_the_queues_sizes_them_first(bridge_cluster: str) -> None:
    """The drain reads after the injection, so a run of more publications than a queue's
    MAXDEPTH (100,000 by default) would lose non-persistent copies to full queues (NPMSGDLV):
    stage 0 raises the durable model queue's MAXDEPTH where the job's MQ subscriptions go,
    the bridge subscription's queue feeding a measured Service Bus entity (and not the other
    bridge's) and every transmission queue; it never lowers one."""
    from qmgr.launcher.topology import load_topology
    from qmgr.spark.job import size_queues, size_transmission_queues
    from qmgr.spark.nodes import attach_nodes

    nodes = attach_nodes(bridge_cluster, load_topology(SCENARIOS / "topology-bridge.toml"))
    scenario = small("bridge-sequenced", publishers=2, messages=150_000)  # 300,000
    changed = size_queues(nodes, scenario) + size_transmission_queues(nodes, scenario)
    sb1 = nodes.client("SB1")

    def depth(kind: str, queue: str) -> int:
        return int(sb1.mqsc(f"DISPLAY {kind}('{queue}') MAXDEPTH")[0].attrs["MAXDEPTH"])

    def bridge_queue(bridge: str) -> str:
        sub = sb1.mqsc(f"DISPLAY BRIDGE({bridge}) SUB")[0].attrs["SUB"]
        return str(sb1.mqsc(f"DISPLAY SUB('{sub}') DEST")[0].attrs["DEST"])

    assert depth("QMODEL", "SYSTEM.DURABLE.MODEL.QUEUE") == 300_000
    assert depth("QLOCAL", bridge_queue("PRICES.SB")) == 300_000  # feeds 'prices'
    assert depth("QLOCAL", bridge_queue("ORDERS.NSB")) == 100_000  # not measured
    assert "HOSTA1: SYSTEM.CLUSTER.TRANSMIT.SB1" in changed
    assert "PUB1: SYSTEM.CLUSTER.TRANSMIT.HOSTA2" in changed
    # a smaller run changes nothing and lowers nothing
    tiny = small("bridge-sequenced", publishers=1, messages=500)
    assert size_queues(nodes, tiny) + size_transmission_queues(nodes, tiny) == []
    assert depth("QMODEL", "SYSTEM.DURABLE.MODEL.QUEUE") == 300_000
