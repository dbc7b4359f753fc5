"""`qmgr demo` end to end: a real local cluster (the default topology: PRICES on HOSTA1 and
HOSTA2, ORDERS on HOSTB1), a small load, and the JSON report it writes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from qmgr.launcher.cluster_state import pid_alive
from qmgr.launcher.launch import qmgr_command


def test_demo_delivers_everything_once_through_both_prices_hosts(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "QMGR_HOME": str(tmp_path / "home"), "TMPDIR": str(scratch)}
    args = ["demo", "--messages", "2000", "--json-out", str(out)]
    args += ["--chart", str(tmp_path / "chart.png")]
    result = subprocess.run(
        [*qmgr_command(), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(out.read_text())

    assert report["ok"] is True
    assert report["messages"] == 2000
    assert sum(n for by in report["sent"].values() for n in by.values()) == 2000
    assert report["totals"]["lost"] == 0
    assert report["totals"]["duplicates"] == 0
    assert report["totals"]["received"] == report["totals"]["expected"] > 2000
    subscriptions = {(r["subscriber"], r["subscription"]) for r in report["rows"]}
    assert subscriptions == {("SUB1", "Prices/#"), ("SUB1", "Orders/#"), ("SUB2", "Prices/Fruit/+")}

    branches = {b["branch"]: b for b in report["branches"]}
    # round robin between the two hosts of Prices; Orders has one host
    prices = branches["Prices"]["routes"]
    assert set(prices) == {"HOSTA1", "HOSTA2"}
    assert min(prices.values()) > 0
    assert set(branches["Orders"]["routes"]) == {"HOSTB1"}
    orders = [r for r in report["rows"] if r["topic"].startswith("Orders/")]
    assert orders
    assert all(r["out_of_order"] == 0 for r in orders)

    # every node was stopped and the temporary state directory removed
    assert report["nodes"].keys() >= {"FR1", "HOSTA1", "HOSTA2", "HOSTB1", "PUB1", "SUB1"}
    assert not [name for name, pid in report["nodes"].items() if pid_alive(pid)]
    assert list(scratch.iterdir()) == []
    assert "ordering:" in result.stdout
