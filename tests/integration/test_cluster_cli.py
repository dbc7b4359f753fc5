"""`qmgr cluster up/status/down` with real `qmgr start` processes: 1 full repository and 2
partial repositories on loopback. Skipped while `qmgr start` does not accept the cluster flags.

The launcher's failure paths use a stand-in for `qmgr start` that passes every argument on to
the real one, except that a node called BROKEN fails at once.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import qmgr.launcher.cluster_launch as cluster_launch
from qmgr.cli.cluster import cluster
from qmgr.launcher.cluster_secrets import (
    ADMIN,
    MEMBER_FILE,
    PKI_DIR,
    SECRET_FILE,
    admin_client_options,
    cert_files,
)
from qmgr.launcher.cluster_state import node_alive, pid_alive
from qmgr.launcher.launch import qmgr_command
from qmgr.security.files import read_secret, write_private
from qmgr.security.keys import member_secret
from qmgr.security.pki import client_name, member_name

QMGR = qmgr_command()

TOPOLOGY = """
cluster = "ITEST"

[[node]]
name = "ITFR1"
role = "full"

[[node]]
name = "ITHOST1"
mqsc = '''
DEFINE TOPIC(PRICES) TOPICSTR('Prices') CLUSTER(ITEST) CLROUTE(TOPICHOST)
DEFINE QLOCAL(IT.Q1)
'''

[[node]]
name = "ITSUB1"
"""

STAND_IN = """
import os, sys
QMGR = {qmgr!r}
if "BROKEN" in sys.argv:
    print("stand-in: simulated start failure", file=sys.stderr)
    sys.exit(3)
os.execv(QMGR[0], [*QMGR, *sys.argv[1:]])
"""


def supports_cluster_flags() -> bool:
    result = subprocess.run([*QMGR, "start", "--help"], capture_output=True, text=True, timeout=60)
    return "--full-repository" in result.stdout


def running_under(home: Path) -> list[int]:
    """Pids of live processes whose command line mentions ``home`` (every node's --data-dir
    does), from /proc; empty where there is no /proc."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if str(home).encode() in cmdline and pid_alive(int(proc.name)):
            found.append(int(proc.name))
    return found


def state_pids(home: Path) -> list[int]:
    pids = []
    for state in (home / "clusters").glob("*/state.json"):
        pids += [n["pid"] for n in json.loads(state.read_text())["nodes"]]
    return pids


pytestmark = pytest.mark.skipif(
    not supports_cluster_flags(),
    reason="`qmgr start` does not accept --full-repository yet (cluster flags pending)",
)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path / "home"
    monkeypatch.setenv("QMGR_HOME", str(home))
    yield home
    for pid in {*state_pids(home), *running_under(home)}:  # what a failed test left running
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


def qmgr(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QMGR_HOME": str(home)}
    return subprocess.run(
        [*QMGR, *args], input=stdin, capture_output=True, text=True, env=env, timeout=90
    )


def test_cluster_up_status_runmqsc_down(home: Path, tmp_path: Path) -> None:
    topology = tmp_path / "itest.toml"
    topology.write_text(TOPOLOGY)
    up = qmgr(home, "cluster", "up", str(topology), "--timeout", "30")
    assert up.returncode == 0, up.stdout + up.stderr
    status = qmgr(home, "cluster", "status", "--output", "json")
    assert status.returncode == 0, status.stderr
    result = json.loads(status.stdout)
    assert result["cluster"] == "ITEST"
    assert [(n["name"], n["role"], n["alive"]) for n in result["nodes"]] == [
        ("ITFR1", "full", True),
        ("ITHOST1", "partial", True),
        ("ITSUB1", "partial", True),
    ]
    members = result["members"]["records"]
    if members is not None:
        assert {m["CLUSQMGR"] for m in members} >= {"ITFR1", "ITHOST1", "ITSUB1"}
    shown = qmgr(home, "runmqsc", "ITSUB1", stdin="DISPLAY QMGR\n")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "QMNAME(ITSUB1)" in shown.stdout
    pids = state_pids(home)
    down = qmgr(home, "cluster", "down")
    assert down.returncode == 0, down.stderr
    assert not any(pid_alive(pid) for pid in pids)
    assert not (home / "clusters" / "ITEST" / "state.json").exists()


# -- the launcher in process: registry, MQSC once per data, refusals, failures -----------------


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN.format(qmgr=QMGR))
    monkeypatch.setattr(cluster_launch, "qmgr_command", lambda: [sys.executable, str(script)])
    return script


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cluster, list(args))
    return result.exit_code, result.output


def test_launcher_up_registry_mqsc_status_down(home: Path, tmp_path: Path) -> None:
    topology = tmp_path / "itest.toml"
    topology.write_text(TOPOLOGY)
    code, output = invoke("up", str(topology))
    assert code == 0, output
    state = json.loads((home / "clusters" / "ITEST" / "state.json").read_text())
    assert state["topology"] == str(topology)
    nodes = {n["name"]: n for n in state["nodes"]}
    assert list(nodes) == ["ITFR1", "ITHOST1", "ITSUB1"]
    assert nodes["ITFR1"]["raft_address"] and nodes["ITHOST1"]["raft_address"] is None
    assert all(node_alive(n["pid"], n["name"]) for n in nodes.values())
    assert Path(nodes["ITSUB1"]["data_dir"]).is_dir() and Path(nodes["ITSUB1"]["log"]).is_file()

    # registered by name; the MQSC ran on ITHOST1
    shown = qmgr(home, "runmqsc", "ITHOST1", stdin="DISPLAY QLOCAL(IT.Q1)\n")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert (home / "nodes" / "ITSUB1.json").is_file()

    code, output = invoke("up", str(topology))
    assert code == 1 and "cluster ITEST is already up" in output

    code, output = invoke("status", "--output", "json")
    assert code == 0, output
    result = json.loads(output)
    assert [n["alive"] for n in result["nodes"]] == [True, True, True]
    for node in result["nodes"]:  # answered, or "-" with the node's reason
        assert node["channels"] is not None or node["channels_error"]
        assert node["topic_hosts"] is not None or node["topic_hosts_error"]
    hosts = result["nodes"][0]["topic_hosts"]  # as the full repository knows them
    if hosts is not None:
        assert [(t["TOPIC"], t["CLUSQMGR"]) for t in hosts] == [("PRICES", "ITHOST1")]
    code, output = invoke("status")
    assert code == 0 and "ITHOST1" in output

    code, output = invoke("down")
    assert code == 0, output
    assert "stopped 3 node(s)" in output
    assert not any(pid_alive(n["pid"]) for n in nodes.values())
    assert running_under(home) == []
    assert not (home / "nodes" / "ITSUB1.json").exists()

    # up again on the kept data: same addresses, and the MQSC is not run twice (DEFINE QLOCAL
    # would fail)
    code, output = invoke("up", str(topology))
    assert code == 0, output
    assert "(+2 earlier)" in output
    again = json.loads((home / "clusters" / "ITEST" / "state.json").read_text())["nodes"]
    assert [n["address"] for n in again] == [n["address"] for n in nodes.values()]
    assert [n["raft_address"] for n in again] == [n["raft_address"] for n in nodes.values()]
    code, output = invoke("down", "--purge")
    assert code == 0 and not (home / "clusters" / "ITEST").exists()


def test_launcher_stops_everything_when_a_node_fails(
    home: Path, tmp_path: Path, stand_in: Path
) -> None:
    topology = tmp_path / "broken.toml"
    topology.write_text(TOPOLOGY + '\n[[node]]\nname = "BROKEN"\n')
    code, output = invoke("up", str(topology))
    assert code == 1
    assert "node BROKEN failed to start: exited with code 3" in output
    assert "stand-in: simulated start failure" in output  # the log tail
    assert not (home / "clusters" / "ITEST" / "state.json").exists()
    logs = sorted((home / "clusters" / "ITEST").glob("*/node.log"))
    assert [p.parent.name for p in logs] == ["BROKEN", "ITFR1", "ITHOST1", "ITSUB1"]
    assert not list((home / "nodes").glob("*.json"))
    assert running_under(home) == []


def test_launcher_stops_everything_when_mqsc_fails(home: Path, tmp_path: Path) -> None:
    topology = tmp_path / "mqsc.toml"
    topology.write_text(TOPOLOGY.replace("DEFINE QLOCAL(IT.Q1)", "DELETE QLOCAL(IT.NONE)"))
    code, output = invoke("up", str(topology))
    assert code == 1
    assert "MQSC failed, so the cluster was stopped" in output
    assert "ITHOST1: DELETE QLOCAL(IT.NONE)" in output
    assert "AMQ8147E" in output
    assert not (home / "clusters" / "ITEST" / "state.json").exists()
    assert running_under(home) == []


# -- the cluster secret and certificates -------------------------------------------------------


def _proc_text(pid: int, what: str) -> list[str]:
    return (Path(f"/proc/{pid}") / what).read_bytes().decode(errors="replace").split("\0")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_up_gives_every_node_its_secret_by_file_and_keeps_it(home: Path, tmp_path: Path) -> None:
    """Full repositories get cluster.secret, partial repositories member.secret (the member
    secret derived from it), by file name only."""
    topology = tmp_path / "itest.toml"
    topology.write_text(TOPOLOGY)
    code, output = invoke("up", str(topology))
    assert code == 0, output
    base = home / "clusters" / "ITEST"
    secret_file, member_file = base / SECRET_FILE, base / MEMBER_FILE
    secret = secret_file.read_text().strip()
    assert _mode(base) == 0o700 and _mode(secret_file) == 0o600 and len(secret) >= 40
    assert _mode(member_file) == 0o600 and read_secret(member_file) == member_secret(secret).text
    state = json.loads((base / "state.json").read_text())
    assert {n["role"] for n in state["nodes"]} == {"full", "partial"}
    for node in state["nodes"]:
        pid = node["pid"]
        if Path(f"/proc/{pid}").is_dir():  # Linux: what other local users could see
            cmdline = _proc_text(pid, "cmdline")
            assert not any(secret in arg or "member1:" in arg for arg in cmdline)
            env = _proc_text(pid, "environ")
            given = secret_file if node["role"] == "full" else member_file
            assert f"QMGR_CLUSTER_SECRET_FILE={given}" in env, node["name"]
            assert not any(e.startswith("QMGR_CLUSTER_SECRET=") for e in env)
        assert _mode(Path(node["log"])) == 0o600
        data = Path(node["data_dir"])
        assert _mode(data) == 0o700
        assert {_mode(p) for p in data.rglob("*") if p.is_file()} == {0o600}
    for name in ("ITFR1", "ITHOST1", "ITSUB1"):
        files = cert_files(base, name)
        assert member_name(files.cert.read_bytes()) == name
        assert _mode(files.key) == 0o600
    admin = cert_files(base, ADMIN, client=True)
    assert client_name(admin.cert.read_bytes()) == ADMIN and _mode(admin.key) == 0o600
    ca = (base / PKI_DIR / "ca.pem").read_bytes()

    code, output = invoke("down")
    assert code == 0, output
    code, output = invoke("up", str(topology))  # the same secret and CA: the data still fits
    assert code == 0, output
    assert secret_file.read_text().strip() == secret
    assert (base / PKI_DIR / "ca.pem").read_bytes() == ca
    code, output = invoke("down", "--purge")
    assert code == 0, output


def test_up_takes_the_secret_file_it_is_given(home: Path, tmp_path: Path) -> None:
    topology = tmp_path / "itest.toml"
    topology.write_text(TOPOLOGY)
    mine = write_private(tmp_path / "mine.secret", "my-own-cluster-secret\n")
    code, output = invoke("up", str(topology), "--secret-file", str(mine))
    assert code == 0, output
    base = home / "clusters" / "ITEST"
    assert not (base / SECRET_FILE).exists()
    assert read_secret(base / MEMBER_FILE) == member_secret("my-own-cluster-secret").text
    fr, partial = json.loads((base / "state.json").read_text())["nodes"][:2]
    assert (fr["role"], partial["role"]) == ("full", "partial")
    if Path(f"/proc/{fr['pid']}").is_dir():
        assert f"QMGR_CLUSTER_SECRET_FILE={mine}" in _proc_text(fr["pid"], "environ")
        member_file = f"QMGR_CLUSTER_SECRET_FILE={base / MEMBER_FILE}"
        assert member_file in _proc_text(partial["pid"], "environ")
    code, output = invoke("down", "--purge")
    assert code == 0, output


def test_up_refuses_a_topology_with_a_password(home: Path, tmp_path: Path) -> None:
    topology = tmp_path / "old.toml"
    topology.write_text(TOPOLOGY.replace('cluster = "ITEST"', 'cluster = "ITEST"\npassword = "pw"'))
    code, output = invoke("up", str(topology))
    assert code == 1
    assert "'password' is no longer read" in output and "secret_file" in output
    assert not (home / "clusters").exists()
    assert running_under(home) == []


def test_up_refuses_an_empty_secret_file(home: Path, tmp_path: Path) -> None:
    topology = tmp_path / "itest.toml"
    topology.write_text(TOPOLOGY)
    empty = write_private(tmp_path / "empty.secret", "\n")
    code, output = invoke("up", str(topology), "--secret-file", str(empty))
    assert code == 1 and "is empty" in output
    assert running_under(home) == []


def test_up_with_tls_serves_member_certificates_of_the_cluster_ca(
    home: Path, tmp_path: Path
) -> None:
    from qmgr.client import MQClientError, QueueManagerClient

    topology = tmp_path / "itest.toml"
    topology.write_text(TOPOLOGY)
    code, output = invoke("up", str(topology), "--tls")
    assert code == 0, output
    base = home / "clusters" / "ITEST"
    state = json.loads((base / "state.json").read_text())
    assert state["tls"] is True
    code, output = invoke("status", "--output", "json")
    assert code == 0, output
    result = json.loads(output)
    assert all(n["channels"] is not None for n in result["nodes"]), result
    address = {n["name"]: n["address"] for n in state["nodes"]}
    options = admin_client_options(base, True)
    with QueueManagerClient(address["ITHOST1"], **options) as qm:
        ok, records = qm.mqsc_ok("DISPLAY QLOCAL(IT.Q1)")
        assert ok, records
    no_cert: dict[str, Any] = {"tls_ca": options["tls_ca"]}
    # no client certificate: the node refuses the call
    with pytest.raises(MQClientError), QueueManagerClient(address["ITHOST1"], 5, **no_cert) as qm:
        qm.mqsc_ok("DISPLAY QMGR")
    code, output = invoke("down", "--purge")
    assert code == 0, output


def test_every_node_shows_the_cluster_and_one_restarts_with_its_durable_state(
    home: Path, tmp_path: Path
) -> None:
    topology = tmp_path / "itest.toml"
    topology.write_text(TOPOLOGY)
    up = qmgr(home, "cluster", "up", str(topology), "--timeout", "30")
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        for node in ("ITFR1", "ITHOST1", "ITSUB1"):
            shown = qmgr(home, "runmqsc", node, stdin="DISPLAY CLUSQMGR(*)\n")
            assert shown.returncode == 0, shown.stdout + shown.stderr
            # itself and the full repository, at least (MQ's partial repositories know those)
            assert f"CLUSQMGR({node})" in shown.stdout and "CLUSQMGR(ITFR1)" in shown.stdout
        # durable state on a topic host: a persistent message on a queue, a durable subscription
        put = qmgr(home, "put", "ITHOST1", "IT.Q1", "kept", "--persistent")
        assert put.returncode == 0, put.stdout + put.stderr
        made = qmgr(
            home,
            "runmqsc",
            "ITHOST1",
            stdin="DEFINE SUB(IT.KEEP) TOPICSTR('Prices/#') DEST(IT.Q1)\n",
        )
        assert made.returncode == 0, made.stdout
        before = {
            n["name"]: n
            for n in json.loads(qmgr(home, "cluster", "status", "--output", "json").stdout)["nodes"]
        }
        restarted = qmgr(home, "cluster", "restart", "ITHOST1", "--kill")
        assert restarted.returncode == 0, restarted.stdout + restarted.stderr
        after = {
            n["name"]: n
            for n in json.loads(qmgr(home, "cluster", "status", "--output", "json").stdout)["nodes"]
        }
        assert after["ITHOST1"]["alive"] and after["ITHOST1"]["pid"] != before["ITHOST1"]["pid"]
        assert not pid_alive(before["ITHOST1"]["pid"])
        assert after["ITSUB1"]["pid"] == before["ITSUB1"]["pid"]  # the others went on
        subs = qmgr(home, "runmqsc", "ITHOST1", stdin="DISPLAY SUB(IT.KEEP)\n")
        assert "SUB(IT.KEEP)" in subs.stdout, subs.stdout
        got = qmgr(home, "get", "ITHOST1", "IT.Q1")
        assert got.returncode == 0 and "kept" in got.stdout, got.stdout + got.stderr
        unknown = qmgr(home, "cluster", "restart", "NOSUCH")
        assert unknown.returncode != 0 and "has no node NOSUCH" in unknown.stderr
    finally:
        qmgr(home, "cluster", "down")
