"""`qmgr load` on a real small run, as a user sees it in an 80-column terminal: the shipped
kill-host scenario, paced so that the kill comes mid-run: the table with every number whole, the
verdicts, the fault counted as it happened, and the pace in the report files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_a_kill_run_reads_whole_in_80_columns_and_says_what_happened(tmp_path: Path) -> None:
    shipped = (ROOT / "scenarios" / "kill-host.toml").read_text()
    topology = ROOT / "scenarios" / "topology-two-hosts.toml"
    scenario = tmp_path / "kill-host.toml"
    scenario.write_text(
        shipped.replace('"topology-two-hosts.toml"', json.dumps(str(topology)))
        .replace("publishers = 4", "publishers = 2")
        .replace("persistent = true", "persistent = true\nrate = 100")
    )
    out = tmp_path / "report"
    done = subprocess.run(
        [sys.executable, "-m", "qmgr.cli.main", "load", str(scenario), "--messages", "150"]
        + ["--out", str(out)],
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "80", "QMGR_HOME": str(tmp_path / "home")},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())["kill-host"]
    meta = summary["meta"]
    assert meta["kill_threshold"] == 120  # 40% of 2 × 150, both publishers together
    assert 120 <= meta["killed_after_acknowledged"] < 300
    assert meta["published"] == 300 and meta["receipts"] == 300
    assert meta["publish_rate"] > 0 and meta["drain_rate"] > 0

    report = done.stdout[done.stdout.index("qmgr load: delivery per subscriber") :]
    assert "…" not in report
    assert max(len(line) for line in report.splitlines()) <= 80
    (row,) = [r for r in summary["metrics"] if r["subscriber"] == "ALL" and r["publisher"] == "*"]
    (line,) = [x for x in report.splitlines() if x.split()[:2] == ["ALL", str(row["received"])]]
    ratio = f"({100 * row['out_of_order_ratio']:.1f}%)"
    assert line.split()[1:6] == ["300", "0", "0", str(row["out_of_order"]), ratio]
    words = " ".join(report.split())
    assert "nothing lost or duplicated through the kill of HOSTA1" in words
    assert (
        f"HOSTA1 killed with kill -9 once {meta['killed_after_acknowledged']:,} of the 300 "
        "messages were acknowledged (after = 0.4: at 120 or more), started again 1 s later"
    ) in words
    assert "pace: published" in words
