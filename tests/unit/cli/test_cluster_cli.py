"""`qmgr cluster` without real nodes: refusals, node flags, state files, pid checks."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from qmgr.cli.cluster import cluster
from qmgr.launcher.cluster_launch import _below_ephemeral, free_ports, node_args, plan_ports
from qmgr.launcher.cluster_state import (
    ADDRESSES_FILE,
    ClusterState,
    NodeState,
    find_cluster,
    node_alive,
    pid_alive,
    read_state,
    state_dir,
    write_state,
)
from qmgr.launcher.topology import parse_topology, plan_addresses

TOPOLOGY = """
cluster = "C1"
[[node]]
name = "FR1"
role = "full"
[[node]]
name = "FR2"
role = "full"
[[node]]
name = "P1"
"""


@pytest.fixture(autouse=True)
def qmgr_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("QMGR_HOME", str(home))
    return home


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cluster, list(args))
    return result.exit_code, result.output


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def stale_state(name: str) -> ClusterState:
    node = NodeState("FR1", "full", "127.0.0.1:1", "127.0.0.1:2", dead_pid(), "log", "data")
    return ClusterState(cluster=name, topology="t.toml", nodes=(node,))


def test_node_flags_for_full_and_partial_repositories() -> None:
    topology = parse_topology(TOPOLOGY)
    plan = plan_addresses(topology, "127.0.0.1", lambda n: list(range(5000, 5000 + n)))
    assert node_args(topology, topology.node("FR1"), plan) == [
        "start",
        "--name",
        "FR1",
        "--listen",
        "127.0.0.1:5000",
        "--cluster",
        "C1",
        "--full-repository",
        "--raft",
        "127.0.0.1:5003",
        "--raft-peers",
        "127.0.0.1:5003,127.0.0.1:5004",
    ]
    assert node_args(topology, topology.node("P1"), plan) == [
        "start",
        "--name",
        "P1",
        "--listen",
        "127.0.0.1:5002",
        "--cluster",
        "C1",
        "--join",
        "127.0.0.1:5000,127.0.0.1:5001",
    ]


def test_up_with_an_invalid_topology_starts_nothing(tmp_path: Path, qmgr_home: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('cluster = "C1"\n[[node]]\nname = "P1"\nrole = "spare"\n')
    code, output = run("up", str(path))
    assert code == 1
    assert f"invalid topology {path}" in output
    assert 'role must be "full" or "partial", got \'spare\'' in output
    assert not (qmgr_home / "clusters").exists()


def test_up_refuses_a_base_port_in_use(tmp_path: Path, qmgr_home: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        path = tmp_path / "c.toml"
        path.write_text(TOPOLOGY.replace('cluster = "C1"', f'cluster = "C1"\nbase_port = {port}'))
        code, output = run("up", str(path))
    assert code == 1
    assert f"listen port {port} of FR1 is not free" in output
    assert not (qmgr_home / "clusters").exists()


def test_status_and_down_without_a_cluster() -> None:
    for command in ("status", "down"):
        code, output = run(command)
        assert code == 1 and "no cluster is up" in output
        code, output = run(command, "--cluster", "C9")
        assert code == 1 and "cluster C9 is not up" in output


def test_state_round_trip_and_file_names() -> None:
    state = stale_state("A/B%1")
    directory = state_dir("A/B%1")
    assert directory.name == "A%2FB%251"
    write_state(directory, state)
    assert read_state(directory) == state
    assert json.loads((directory / "state.json").read_text())["nodes"][0]["name"] == "FR1"


def test_cluster_may_be_omitted_only_when_one_is_known() -> None:
    write_state(state_dir("ONE"), stale_state("ONE"))
    assert find_cluster(None)[1].cluster == "ONE"
    write_state(state_dir("TWO"), stale_state("TWO"))
    code, output = run("status")
    assert code == 1 and "several clusters are up (ONE, TWO)" in output
    assert find_cluster("TWO")[1].cluster == "TWO"


def test_status_of_a_stopped_cluster_shows_dashes() -> None:
    write_state(state_dir("C1"), stale_state("C1"))
    code, output = run("status", "--output", "json")
    assert code == 0, output
    status = json.loads(output)
    node = status["nodes"][0]
    assert node["alive"] is False
    assert node["channels"] is None and node["channels_error"] == "node is not running"
    assert node["topic_hosts"] is None
    assert status["members"] == {"seen_by": None, "records": None, "error": "no node is running"}
    code, output = run("status")
    assert code == 0 and "FR1" in output and "no" in output


def test_down_of_a_stale_cluster_removes_its_state_and_keeps_data() -> None:
    directory = state_dir("C1")
    write_state(directory, stale_state("C1"))
    (directory / "FR1").mkdir()
    code, output = run("down")
    assert code == 0, output
    assert "stopped 0 node(s)" in output
    assert not (directory / "state.json").exists()
    assert (directory / "FR1").is_dir()


def test_down_purge_removes_everything() -> None:
    directory = state_dir("C1")
    write_state(directory, stale_state("C1"))
    code, output = run("down", "--cluster", "C1", "--purge")
    assert code == 0, output
    assert not directory.exists()


def test_pid_checks() -> None:
    assert pid_alive(os.getpid())
    assert not pid_alive(dead_pid())
    assert not pid_alive(0)
    # alive, but not a `qmgr start --name FR1` (a reused pid must not be signalled)
    assert not node_alive(os.getpid(), "FR1") or not Path("/proc").is_dir()


def test_free_ports_are_distinct() -> None:
    ports = free_ports(6)
    assert len(set(ports)) == 6 and all(0 < p < 65536 for p in ports)


def test_addresses_of_the_previous_run_are_reused_when_they_fit() -> None:
    topology = parse_topology(TOPOLOGY)
    base = state_dir("C1")
    first = plan_ports(topology, base)
    assert json.loads((base / ADDRESSES_FILE).read_text())["FR1"]["listen"] == first["FR1"].listen
    assert plan_ports(topology, base) == first
    # another node set (or roles) on the same directory: fresh ports, saved again
    changed = parse_topology(TOPOLOGY.replace('name = "P1"', 'name = "P2"'))
    second = plan_ports(changed, base)
    assert list(second) == ["FR1", "FR2", "P2"]
    assert plan_ports(changed, base) == second
    # a saved port that is now taken: fresh ports
    host, port = second["FR1"].listen.split(":")
    with socket.socket() as busy:
        busy.bind((host, int(port)))
        busy.listen()
        assert plan_ports(changed, base)["FR1"].listen != second["FR1"].listen


def test_free_ports_are_distinct_free_and_below_the_ephemeral_range() -> None:
    """Ports the kernel hands out itself (outgoing connections, binds to port 0) never collide
    with the ones planned for nodes: they come from below that range where it is known."""
    ports = free_ports(12)
    assert len(set(ports)) == 12
    below = _below_ephemeral()
    if below is not None:
        assert all(p in below for p in ports)
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # free
