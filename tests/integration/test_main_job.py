"""The README's first command, end to end in a short mode: `scripts/demo --messages 100` starts
the default cluster (with the Service Bus node and its bridge), runs the shipped scenarios of
scenarios/demo/ through the Spark load job and leaves the report; with --keep the cluster stays
up for `qmgr runmqsc` and `qmgr sb`, and `qmgr cluster down` stops it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from qmgr.launcher.launch import qmgr_command  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
QMGR = qmgr_command()  # the venv's script, else `python -m qmgr.cli.main`

# the whole main job (ten nodes, a JVM, three scenarios): the run itself is bounded at 900 s
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _totals(summary: dict[str, Any], scenario: str) -> dict[str, dict[str, Any]]:
    """The per-subscriber totals (publisher '*') of one scenario."""
    return {
        row["subscriber"]: row
        for row in summary[scenario]["metrics"]
        if row["publisher"] == "*" and row["subscriber"] != "*"
    }


def test_the_main_job_shows_the_contrasts_with_nothing_lost(tmp_path: Path) -> None:
    home = tmp_path / "home"
    keep = home / "clusters" / "DEMO"
    out = tmp_path / "report"
    env = {**os.environ, "QMGR_HOME": str(home)}
    done = subprocess.run(
        [
            str(ROOT / "scripts" / "demo"),
            "--messages",
            "100",
            "--out",
            str(out),
            "--keep",
            str(keep),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    try:
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        summary = json.loads((out / "summary.json").read_text())
        assert set(summary) == {"orders-one-host", "prices-two-hosts", "kill-host"}
        for scenario in summary:
            for row in summary[scenario]["metrics"]:
                assert row["lost"] == 0 and row["duplicated"] == 0, (scenario, row)
                assert row["received"] == row["acknowledged"] == row["sent"], (scenario, row)
        one_host = _totals(summary, "orders-one-host")
        assert one_host["ORDERS"]["out_of_order"] == 0
        two_hosts = _totals(summary, "prices-two-hosts")
        assert two_hosts["PRICES"]["out_of_order"] > 0  # two topic hosts: order lost
        assert two_hosts["SB-SESSIONS"]["out_of_order"] > 0  # the bridge keeps what it got
        assert two_hosts["SB-SEQUENCED"]["out_of_order"] == 0  # the helper restores it
        assert summary["kill-host"]["meta"]["killed"] == "HOSTA1"
        assert (out / "chart.png").stat().st_size > 0
        assert (out / "prices-two-hosts" / "receipts.parquet").exists()
        assert "left running" in done.stdout
        # the kept cluster: every node answers DISPLAY CLUSQMGR; SB1 shows its bridge
        for node in (
            "FR1",
            "FR2",
            "FR3",
            "HOSTA1",
            "HOSTA2",
            "HOSTB1",
            "PUB1",
            "SUB1",
            "SUB2",
            "SB1",
        ):
            shown = subprocess.run(
                [*QMGR, "runmqsc", node],
                input="DISPLAY CLUSQMGR(*)\n",
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert shown.returncode == 0, shown.stdout + shown.stderr
            # itself and the full repositories, as a partial repository knows them in MQ
            assert f"CLUSQMGR({node})" in shown.stdout and "CLUSQMGR(FR1)" in shown.stdout
        bridge = subprocess.run(
            [*QMGR, "runmqsc", "SB1"],
            input="DISPLAY BRIDGE(*)\n",
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "BRIDGE(PRICES.SB)" in bridge.stdout
    finally:
        subprocess.run(
            [*QMGR, "cluster", "down", "--cluster", "DEMO"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
