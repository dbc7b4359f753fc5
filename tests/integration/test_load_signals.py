"""`qmgr load` as a real process: without a Java runtime it says what to install and starts
nothing (exit code 2); stopped by SIGTERM, SIGHUP or SIGINT in the middle of the drain it stops
every process it started (nodes, Spark's JVM, Python workers) and exits 128 + the signal."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from qmgr.launcher.launch import qmgr_command  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
QMGR = qmgr_command()  # the venv's script, else `python -m qmgr.cli.main`
PUBLISHERS = 2
MESSAGES = 200


def scenario_file(directory: Path) -> Path:
    """A small one-host scenario whose drain waits long for more (so a test finds the job in
    the middle of it)."""
    path = directory / "signals.toml"
    topology = ROOT / "scenarios" / "topology-one-host.toml"
    path.write_text(
        f"""name = "signals"
topology = "{topology}"

[load]
nodes = ["PUB1"]
topics = ["Prices/Fruit/Apples", "Prices/Fruit/Pears"]
publishers = {PUBLISHERS}
messages = {MESSAGES}

[drain]
idle = 120

[[subscription]]
name = "ALL"
node = "SUB1"
topic = "Prices/#"
"""
    )
    return path


def isolated_env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "tmp").mkdir()
    return {**os.environ, "QMGR_HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path / "tmp")}


def _refused_before_anything_starts(
    tmp_path: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """`qmgr load` in ``env``, which must fail with exit code 2, no traceback, and nothing
    started: no output, no state or home directory of a cluster, no node registered."""
    out = tmp_path / "out"
    done = subprocess.run(
        [*QMGR, "load", str(scenario_file(tmp_path)), "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert "JAVA_GATEWAY_EXITED" not in done.stdout + done.stderr
    assert not out.exists()
    assert not (tmp_path / "home").exists()
    return done


def test_without_java_it_says_what_to_install_and_starts_nothing(tmp_path: Path) -> None:
    env = isolated_env(tmp_path)
    env.pop("JAVA_HOME", None)
    env["PATH"] = str(tmp_path / "no-java")
    done = _refused_before_anything_starts(tmp_path, env)
    lines = [x for x in done.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, done.stderr
    assert "qmgr load needs a Java runtime 17 or newer for Spark" in lines[0]
    assert "apt-get install openjdk-17-jre-headless" in lines[0] and "JAVA_HOME" in lines[0]
    assert list((tmp_path / "tmp").iterdir()) == []


def _processes() -> dict[int, tuple[int, str]]:
    """Every process: pid -> (parent pid, start time)."""
    table: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        table[int(entry.name)] = (int(fields[1]), fields[19])
    return table


def descendants(root: int) -> dict[int, str]:
    """The processes below ``root``: pid -> start time (which tells a reused pid apart)."""
    table = _processes()
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found: dict[int, str] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found[pid] = table[pid][1]
        todo.extend(children.get(pid, []))
    return found


def alive(pids: dict[int, str]) -> dict[int, str]:
    """Those of ``pids`` still running (the same process: same start time; not a zombie)."""
    running: dict[int, str] = {}
    for pid, started in pids.items():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[19] == started and fields[0] != "Z":
            try:
                running[pid] = Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
            except OSError:
                continue
    return running


def _launch(tmp_path: Path, out: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """``qmgr load`` on the test scenario in its own process group (as a terminal's foreground
    job), its output in a log file."""
    log = tmp_path / "load.log"
    with open(log, "wb") as output:
        job = subprocess.Popen(
            [*QMGR, "load", str(scenario_file(tmp_path)), "--out", str(out)],
            env=isolated_env(tmp_path),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return job, log


def _outlived(started: dict[int, str], grace: float = 20.0) -> dict[int, str]:
    """Those of ``started`` still running once they had ``grace`` seconds to exit."""
    end = time.monotonic() + grace
    while alive(started) and time.monotonic() < end:
        time.sleep(0.2)
    return alive(started)


def _reap(job: subprocess.Popen[bytes], started: dict[int, str]) -> None:
    if job.poll() is None:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(10)
    for pid in alive(started):
        os.kill(pid, signal.SIGKILL)


def acknowledged(out: Path) -> int:
    return sum(path.read_bytes().count(b"\n") for path in out.glob("signals/acks/*/ack-*.jsonl"))


@pytest.mark.parametrize(
    ("signum", "group"),
    [
        (signal.SIGTERM, False),  # timeout(1), a CI runner: the job's process only
        (signal.SIGHUP, True),  # a closed terminal: the foreground process group
        (signal.SIGINT, True),  # Ctrl-C: the foreground process group
    ],
    ids=["SIGTERM", "SIGHUP", "SIGINT"],
)
def test_a_signal_mid_drain_stops_everything_the_job_started(
    tmp_path: Path, signum: signal.Signals, group: bool
) -> None:
    out = tmp_path / "out"
    job, log = _launch(tmp_path, out)
    started: dict[int, str] = {}
    try:
        while acknowledged(out) < PUBLISHERS * MESSAGES:  # (the test's timeout bounds it)
            assert job.poll() is None, log.read_text()[-3000:]
            started.update(descendants(job.pid))
            time.sleep(0.2)
        settled = time.monotonic() + 3  # the load is in: the drain runs (idle 120 s)
        while time.monotonic() < settled:
            started.update(descendants(job.pid))
            time.sleep(0.2)
        assert job.poll() is None, log.read_text()[-3000:]
        commands = list(alive(started).values())
        nodes = [c for c in commands if " start " in c and "--name" in c]
        assert len(nodes) == 4, commands  # FR1, HOSTA1, PUB1, SUB1
        assert any("java" in c.split()[0] for c in commands), commands
        if group:
            os.killpg(job.pid, signum)
        else:
            job.send_signal(signum)
        code = job.wait(60)
        text = log.read_text()
        assert code == 128 + signum, text[-3000:]
        assert f"stopped by {signum.name}" in text, text[-3000:]
        assert f'File "{ROOT / "qmgr"}' not in text, text[-3000:]  # no traceback of the job's
        if not group:  # a signal to the group reaches Spark's JVM and Python workers too:
            # PySpark may report the connections it lost (never qmgr's code, checked above)
            assert "Traceback" not in text, text[-3000:]
        assert _outlived(started) == {}
    finally:
        _reap(job, started)


def test_a_signal_while_spark_starts_stops_its_jvm_once_up(tmp_path: Path) -> None:
    """SIGTERM while Spark's JVM is starting: the job waits until it is up, then stops it (a
    JVM cut short in its start-up would stay behind) and starts no node."""
    out = tmp_path / "out"
    job, log = _launch(tmp_path, out)
    started: dict[int, str] = {}
    try:
        while not any(c.split()[0].endswith("java") for c in alive(started).values()):
            assert job.poll() is None, log.read_text()[-3000:]
            started.update(descendants(job.pid))
            time.sleep(0.05)
        job.send_signal(signal.SIGTERM)
        while job.poll() is None:
            started.update(descendants(job.pid))
            time.sleep(0.05)
        code = job.wait(60)
        text = log.read_text()
        assert code == 128 + signal.SIGTERM, text[-3000:]
        assert "stopped by SIGTERM" in text and "Traceback" not in text, text[-3000:]
        assert not any(" start " in c and "--name" in c for c in alive(started).values())
        assert _outlived(started) == {}
    finally:
        _reap(job, started)


def test_jvm_options_java_refuses_fail_the_job_with_exit_2_and_start_nothing(
    tmp_path: Path,
) -> None:
    env = {**isolated_env(tmp_path), "QMGR_SPARK_JAVA_OPTIONS": "-Xssnot-a-size"}
    done = _refused_before_anything_starts(tmp_path, env)
    assert "Invalid thread stack size" in done.stderr  # the JVM's own reason
    last = [x for x in done.stderr.splitlines() if x.strip()][-1]
    assert last.startswith("Error: Spark's JVM exited as it started")
    assert "'-Xssnot-a-size' (QMGR_SPARK_JAVA_OPTIONS)" in last
