"""Topology files whose nodes host a Service Bus namespace: parsing, the node's start flags,
and its Service Bus address kept in the cluster state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from qmgr.cli.cluster import cluster
from qmgr.launcher.cluster_launch import node_args
from qmgr.launcher.cluster_state import ClusterState, NodeState, read_state, state_dir, write_state
from qmgr.launcher.compose import compose_document, compose_files
from qmgr.launcher.topology import TopologyError, parse_topology, plan_addresses

CONFIG = {
    "UserConfig": {
        "Namespaces": [{"Name": "sbemulatorns", "Queues": [{"Name": "orders"}], "Topics": []}],
        "Logging": {"Type": "Console"},
    }
}


def topology_text(servicebus: str) -> str:
    return f"""
cluster = "C1"
[[node]]
name = "FR1"
role = "full"
[[node]]
name = "SB1"
servicebus = {servicebus}
"""


@pytest.fixture(autouse=True)
def qmgr_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("QMGR_HOME", str(home))
    return home


def test_servicebus_true_starts_the_node_with_a_namespace_on_a_free_port() -> None:
    topology = parse_topology(topology_text("true"))
    spec = topology.node("SB1")
    assert spec.servicebus and spec.hosts_servicebus and spec.servicebus_config is None
    assert not topology.node("FR1").hosts_servicebus
    plan = plan_addresses(topology, "127.0.0.1", lambda n: list(range(6000, 6000 + n)))
    args = node_args(topology, spec, plan)
    assert args[-3:] == ["--servicebus", "--servicebus-port", "127.0.0.1:0"]
    assert "--servicebus" not in node_args(topology, topology.node("FR1"), plan)


def test_servicebus_config_is_relative_to_the_topology_file(tmp_path: Path) -> None:
    (tmp_path / "sb").mkdir()
    (tmp_path / "sb" / "Config.json").write_text(json.dumps(CONFIG))
    topology = parse_topology(topology_text('"sb/Config.json"'), "t.toml", tmp_path)
    spec = topology.node("SB1")
    assert spec.servicebus_config == (tmp_path / "sb" / "Config.json").resolve()
    plan = plan_addresses(topology, "127.0.0.1", lambda n: list(range(6000, 6000 + n)))
    args = node_args(topology, spec, plan)
    assert args[-4:] == [
        "--servicebus-config",
        str(spec.servicebus_config),
        "--servicebus-port",
        "127.0.0.1:0",
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1", "'servicebus' must be true, false or the path of a Config.json, got an integer"),
        ('""', "'servicebus' must be true, false or the path of a Config.json, got an empty"),
        ('"missing.json"', "'servicebus': cannot read"),
        ('"bad.json"', "'servicebus': "),
    ],
)
def test_a_bad_servicebus_value_is_reported_before_anything_starts(
    tmp_path: Path, value: str, expected: str
) -> None:
    (tmp_path / "bad.json").write_text('{"UserConfig": {"Namespaces": []}}')
    with pytest.raises(TopologyError) as info:
        parse_topology(topology_text(value), "t.toml", tmp_path)
    (problem,) = info.value.problems
    assert problem.startswith("node 2 (SB1): ") and expected in problem


def test_the_state_keeps_the_service_bus_address_and_reads_older_files() -> None:
    nodes = (
        NodeState("FR1", "full", "127.0.0.1:1", "127.0.0.1:2", 1, "log", "data"),
        NodeState("SB1", "partial", "127.0.0.1:3", None, 2, "log", "data", "127.0.0.1:5999"),
    )
    state = ClusterState(cluster="C1", topology="t.toml", nodes=nodes)
    directory = state_dir("C1")
    write_state(directory, state)
    back = read_state(directory)
    assert back == state
    assert back is not None and back.servicebus_address("SB1") == "127.0.0.1:5999"
    assert back.servicebus_address("FR1") is None
    with pytest.raises(KeyError):
        back.servicebus_address("NOPE")
    data = json.loads((directory / "state.json").read_text())
    for node in data["nodes"]:
        del node["servicebus"]  # a state file written before the field existed
    (directory / "state.json").write_text(json.dumps(data))
    older = read_state(directory)
    assert older is not None and older.servicebus_address("SB1") is None


def test_status_shows_the_service_bus_address_and_bridges() -> None:
    node = NodeState("SB1", "full", "127.0.0.1:1", "127.0.0.1:2", 0, "log", "data", "127.0.0.1:9")
    write_state(state_dir("C1"), ClusterState(cluster="C1", topology="t.toml", nodes=(node,)))
    result = CliRunner().invoke(cluster, ["status", "--output", "json"])
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.output)["nodes"]
    assert entry["servicebus"] == "127.0.0.1:9"
    assert entry["bridges"] is None and entry["bridges_error"] == "node is not running"
    result = CliRunner().invoke(cluster, ["status"])
    assert result.exit_code == 0 and "127.0.0.1:9" in result.output


def test_compose_starts_namespaces_and_carries_a_copy_of_each_config(tmp_path: Path) -> None:
    (tmp_path / "sb").mkdir()
    (tmp_path / "sb" / "Config.json").write_text(json.dumps(CONFIG))
    text = topology_text('"sb/Config.json"') + '[[node]]\nname = "SB2"\nservicebus = true\n'
    topology = parse_topology(text, "t.toml", tmp_path)
    services = compose_document(topology)["services"]
    sb1, sb2, fr1 = services["SB1"], services["SB2"], services["FR1"]
    assert sb1["command"][-4:] == [
        "--servicebus-config",
        "/config/Config.json",
        "--servicebus-port",
        "0.0.0.0:5672",
    ]
    assert "./servicebus/SB1.json:/config/Config.json:ro" in sb1["volumes"]
    assert sb2["command"][-3:] == ["--servicebus", "--servicebus-port", "0.0.0.0:5672"]
    assert not any(a.startswith("--servicebus") for a in fr1["command"])
    files = compose_files(topology, "t.toml")
    assert json.loads(files["servicebus/SB1.json"]) == CONFIG
    assert "servicebus/SB2.json" not in files
    (tmp_path / "sb" / "Config.json").unlink()
    with pytest.raises(TopologyError) as info:
        compose_files(topology, "t.toml")
    assert "node SB1: 'servicebus': cannot read" in info.value.problems[0]
