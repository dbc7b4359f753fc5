"""bench/bench_peers.py --quick runs to completion and prints its summary and ratios; the
Mosquitto rows are measured when its broker and C clients are installed, else skipped with
how to install them. No rate or duration is asserted: the machine is shared."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.bench_peers import LABELS, PAIRS, find_mosquitto  # noqa: E402


def test_bench_peers_quick_prints_the_summary() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_peers.py"), "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    summary = out[out.index("Summary:") :]
    ratios = summary[summary.index("Ratios") :]
    for key in ("node_np", "node_p", "raw3", "qmgr3"):
        row = next(line for line in summary.splitlines() if LABELS[key] in line)
        assert "skipped" not in row and "missing" not in row, row
    mosquitto = find_mosquitto() is not None
    for key in ("mosq0", "mosq1"):
        row = next(line for line in summary.splitlines() if LABELS[key] in line)
        assert ("skipped" in row) != mosquitto, row
    for pair in PAIRS:
        row = next(line for line in ratios.splitlines() if pair.ratio in line)
        assert ("skipped" in row) == (pair.peer != "raw3" and not mosquitto), row
    if not mosquitto:
        assert "apt-get install mosquitto mosquitto-clients" in out
