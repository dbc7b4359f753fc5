"""The load job submitted with spark-submit to a real Spark standalone cluster (a master and a
worker from the pyspark package, started by the test on loopback)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")

from qmgr.spark.session import JAVA_OPTIONS  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).parent
JOB = ROOT / "qmgr" / "spark" / "job.py"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        # the master and worker compile as the job's own JVMs do (qmgr.spark.session)
        "SPARK_DAEMON_JAVA_OPTS": JAVA_OPTIONS,
    }


def _start(args: list[str], log: Path, ready: str, timeout: float = 90) -> subprocess.Popen[bytes]:
    """Start a Spark daemon with ``spark-class`` and wait for ``ready`` in its log."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_env(),
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    while ready not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"{args[0]} did not start:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)
    return proc


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[str]:
    """spark://127.0.0.1:PORT of a master with one worker (2 cores) registered."""
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs = []
    try:
        procs.append(
            _start(
                [
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(_free_port()),
                ],
                tmp_path / "master.log",
                "I have been elected leader",
            )
        )
        procs.append(
            _start(
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "2",
                    "--memory",
                    "1g",
                    "--webui-port",
                    str(_free_port()),
                    "--work-dir",
                    str(tmp_path / "work"),
                    url,
                ],
                tmp_path / "worker.log",
                "Successfully registered with master",
            )
        )
        yield url
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def test_spark_submit_to_a_standalone_master(standalone: str, tmp_path: Path) -> None:
    scenario = tmp_path / "small.toml"
    scenario.write_text(
        (ROOT / "scenarios" / "one-host.toml")
        .read_text()
        .replace('topology = "', f'topology = "{ROOT / "scenarios"}/')
        .replace("publishers = 4", "publishers = 2")
        .replace("messages = 2500", "messages = 200")
    )
    out = tmp_path / "out"
    done = subprocess.run(
        [
            str(SPARK_HOME / "bin" / "spark-submit"),
            "--master",
            standalone,
            "--conf",
            "spark.ui.enabled=false",
            "--driver-java-options",
            JAVA_OPTIONS,
            "--conf",
            f"spark.executor.extraJavaOptions={JAVA_OPTIONS}",
            str(JOB),
            str(scenario),
            "--out",
            str(out),
        ],
        env={**_env(), "QMGR_HOME": str(tmp_path / "home")},
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    saved = json.loads((out / "one-host" / "metrics.json").read_text())
    total = next(r for r in saved["metrics"] if r["subscriber"] == r["publisher"] == "*")
    assert (total["sent"], total["acknowledged"], total["received"]) == (600, 600, 600)
    assert (total["lost"], total["duplicated"], total["out_of_order"]) == (0, 0, 0)
    # the executors of the standalone worker ran the partitions, not the driver
    apps = list((tmp_path / "work").glob("app-*/*/stderr"))
    assert apps, "no executor ran on the worker"
