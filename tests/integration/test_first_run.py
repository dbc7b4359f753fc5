"""A first run, as the README's tour has it, against a real cluster of `qmgr start` processes
started by `qmgr cluster up` (the default topology's nodes that the tour uses: a full
repository, the two topic hosts of Prices, the publisher and the subscriber).

- The tour's commands, read from README.md, run as written: pasted at once (one shell reads
  them line after line) and typed slowly (each a while after the one before, longer than
  `qmgr sub` used to wait); each time both publications arrive once.
- `qmgr pub` says where its publications went: delivered on the node, sent into the cluster to
  which members, or nowhere.
- `qmgr cluster status` shows each member's own view: healthy members read as healthy next to
  the full repository's STATUS(INACTIVE), and a member that is down reads as not running.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from qmgr.launcher.cluster_state import pid_alive
from qmgr.launcher.launch import qmgr_command
from qmgr.launcher.poll import wait_for

README = Path(__file__).resolve().parents[2] / "README.md"
QMGR_BIN = Path(qmgr_command()[0]).parent
TYPING_PAUSE = 6.0  # seconds between typed lines: more than `qmgr sub` used to wait (5 s)

DEFAULT_TOPOLOGY = README.parent / "compose" / "cluster.toml"
TOUR_NODES = ("FR1", "HOSTA1", "HOSTA2", "PUB1", "SUB1")


def tour_topology() -> str:
    """The default topology (compose/cluster.toml) with only the nodes the tour uses, as TOML
    (JSON's string escapes are TOML's too)."""
    default = tomllib.loads(DEFAULT_TOPOLOGY.read_text())
    out = [f"cluster = {json.dumps(default['cluster'])}"]
    for node in default["node"]:
        if node["name"] in TOUR_NODES:
            out.append("[[node]]")
            out += [
                f"{key} = {json.dumps(node[key])}"
                for key in ("name", "role", "mqsc")
                if key in node
            ]
    return "\n".join(out) + "\n"


def tour() -> tuple[list[str], list[tuple[str, str]]]:
    """The tour's commands (its `# qmgr ...` lines) and the (topic, body) of each publication
    its output shows."""
    text = README.read_text()
    start = text.index("\n## A short tour\n")
    section = text[start : text.index("\n## ", start + 1)]
    (block,) = [
        b for b in re.findall(r"```text\n(.*?)```", section, flags=re.DOTALL) if "qmgr sub" in b
    ]
    lines = block.splitlines()
    commands = [line[2:] for line in lines if line.startswith("# qmgr ")]
    shown = [
        (m.group(1), m.group(2))
        for line in lines
        if (m := re.match(r'\{"topic": "([^"]+)", "body": "([^"]*)"', line))
    ]
    return commands, shown


class Cluster:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = {
            **os.environ,
            "QMGR_HOME": str(home),
            "PATH": f"{QMGR_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        }

    def shell(self, script: str) -> subprocess.CompletedProcess[str]:
        """``script`` run by bash as a terminal runs what is typed or pasted into it."""
        return subprocess.run(
            ["bash", "-c", script], capture_output=True, text=True, env=self.env, timeout=240
        )

    def qmgr(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["qmgr", *args], input=stdin, capture_output=True, text=True, env=self.env, timeout=120
        )

    def status(self) -> dict[str, dict[str, object]]:
        done = self.qmgr("cluster", "status", "--output", "json")
        assert done.returncode == 0, done.stderr
        return {n["name"]: n for n in json.loads(done.stdout)["nodes"]}

    def pids(self) -> list[int]:
        return [int(str(n["pid"])) for n in self.status().values()]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("first-run")
    cluster = Cluster(base / "home")
    topology = base / "demo.toml"
    topology.write_text(tour_topology())
    up = cluster.qmgr("cluster", "up", str(topology))
    assert up.returncode == 0, up.stdout + up.stderr
    pids: list[int] = []
    try:
        pids = cluster.pids()
        yield cluster
    finally:
        down = cluster.qmgr("cluster", "down", "--purge")
        for pid in pids:  # whatever `down` left behind
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
        assert down.returncode == 0, down.stdout + down.stderr


def check_tour_output(stdout: str, shown: list[tuple[str, str]]) -> None:
    """Both publications arrived once, each through a topic host of Prices; the proxy
    subscription of SUB1 is at HOSTA1; each `qmgr pub` said it sent into the cluster."""
    received = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    assert sorted((m["topic"], m["body"]) for m in received) == sorted(shown)
    for m in received:
        route = m["properties"]["qmgr.route"].split(",")
        assert route[0] == "PUB1" and route[-1] == "SUB1" and route[1] in ("HOSTA1", "HOSTA2")
    sent = re.findall(r"0 local deliveries, sent into cluster DEMO to HOSTA[12]$", stdout, re.M)
    assert len(sent) == len(shown)
    assert "SYSTEM.PROXY.SUB1 DEMO Prices/#" in stdout


def test_tour_pasted_at_once(demo: Cluster) -> None:
    """Right after `qmgr cluster up`, the tour's lines pasted into a shell in one go."""
    commands, shown = tour()
    assert len(shown) == 2 and any(c.startswith("qmgr pub ") for c in commands)
    done = demo.shell("\n".join(commands))
    assert done.returncode == 0, done.stdout + done.stderr
    check_tour_output(done.stdout, shown)


def test_tour_typed_slowly(demo: Cluster) -> None:
    """The same lines, each typed a while after the one before; the tour's subscription is
    made anew (a durable one outlives its first run)."""
    commands, shown = tour()
    demo.qmgr("runmqsc", "SUB1", stdin="DELETE SUB(TOUR)\n")  # absent when run on its own
    out = []
    for i, command in enumerate(commands):
        if i:
            time.sleep(TYPING_PAUSE)
        done = demo.shell(command)
        assert done.returncode == 0, command + "\n" + done.stdout + done.stderr
        out.append(done.stdout)
    check_tour_output("".join(out), shown)


def test_pub_says_where_its_publications_went(demo: Cluster) -> None:
    made = demo.qmgr("sub", "SUB1", "Prices/#", "--durable", "--name", "WHERE", "--no-receive")
    assert made.returncode == 0, made.stderr
    assert "in place across cluster DEMO" in made.stderr
    local = demo.qmgr("sub", "PUB1", "Local/#", "--durable", "--name", "HERE", "--no-receive")
    assert local.returncode == 0, local.stderr

    done = demo.qmgr("pub", "PUB1", "Prices/Fruit/Apples", "1.25")  # to a topic host
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(
        r"published 1 on 'Prices/Fruit/Apples': 0 local deliveries, sent into cluster DEMO to "
        r"HOSTA[12]\n",
        done.stdout,
    )
    done = demo.qmgr("pub", "PUB1", "Prices/Fruit/Apples", "1.25", "--count", "4")
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(
        r"published 4 on 'Prices/Fruit/Apples': 0 local deliveries, 4 copies sent into cluster "
        r"DEMO to (HOSTA1, HOSTA2|HOSTA1|HOSTA2)\n",
        done.stdout,
    )
    done = demo.qmgr("pub", "HOSTA1", "Prices/Veg/Leeks", "2.10")  # a host passes it on
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "published 1 on 'Prices/Veg/Leeks': 0 local deliveries, sent into cluster DEMO to SUB1\n"
    )
    done = demo.qmgr("pub", "PUB1", "Local/News", "kept here")  # not a cluster topic
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "published 1 on 'Local/News': 1 local deliveries and none sent into cluster DEMO\n"
    )
    for node in ("PUB1", "HOSTA1"):  # a typo: no subscription anywhere matches it
        done = demo.qmgr("pub", node, "Prises/Fruit/Apples", "1.25")
        assert done.returncode == 0, done.stderr
        assert done.stdout == (
            "published 1 on 'Prises/Fruit/Apples': 0 local deliveries and none sent into "
            "cluster DEMO: no subscription matched, nothing was delivered\n"
        )

    got = demo.qmgr("sub", "SUB1", "Prices/#", "--durable", "--name", "WHERE", "--count", "6")
    assert got.returncode == 0, got.stderr
    assert sorted(got.stdout.splitlines()) == sorted(
        ["Prices/Fruit/Apples: 1.25"] * 5 + ["Prices/Veg/Leeks: 2.10"]
    )
    got = demo.qmgr("sub", "PUB1", "Local/#", "--durable", "--name", "HERE", "--count", "1")
    assert got.returncode == 0 and got.stdout == "Local/News: kept here\n", got.stderr
    for node, name in (("SUB1", "WHERE"), ("PUB1", "HERE")):
        demo.qmgr("runmqsc", node, stdin=f"DELETE SUB({name})\n")


def test_cluster_status_shows_each_members_own_view(demo: Cluster) -> None:
    nodes = demo.status()
    assert all(n["healthy"] and n["ready"] == "SERVING" and n["joined"] for n in nodes.values())
    text = demo.qmgr("cluster", "status")
    assert text.returncode == 0, text.stderr
    rows = [line for line in text.stdout.splitlines() if "│ NORMAL │" in line]
    assert len(rows) == 4 and all("INACTIVE" in r or "RUNNING" in r for r in rows)
    assert all(r.split("│")[-2].strip() == "healthy" for r in rows)
    assert "INACTIVE until FR1 has something to send there" in text.stdout

    pid = int(str(nodes["PUB1"]["pid"]))
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not pid_alive(pid), 30.0, what="PUB1 gone")
    down = demo.status()["PUB1"]
    assert (down["alive"], down["ready"], down["healthy"]) == (False, None, False)
    text = demo.qmgr("cluster", "status")
    (row,) = [
        line for line in text.stdout.splitlines() if line.startswith("│ PUB1 ") and "NORMAL" in line
    ]
    assert row.split("│")[-2].strip() == "not running"

    again = demo.qmgr("cluster", "restart", "PUB1")
    assert again.returncode == 0, again.stdout + again.stderr
    assert demo.status()["PUB1"]["healthy"] is True
