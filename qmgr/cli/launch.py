"""Starting node processes and waiting for their READY line (demo, cluster, benchmarks)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path


def qmgr_command() -> list[str]:
    exe = Path(sys.executable).parent / "qmgr"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("qmgr")
    return [found] if found else [sys.executable, "-m", "qmgr.cli.main"]


@dataclass
class Launched:
    name: str
    proc: subprocess.Popen[str]
    address: str
    log: Path


def start_node(
    name: str,
    *,
    data_dir: Path | None,
    log: Path,
    listen: str = "127.0.0.1:0",
    extra_args: list[str] | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> Launched:
    """Start ``qmgr start`` as a child process; return once it printed READY."""
    args = [*qmgr_command(), "start", "--name", name, "--listen", listen]
    if data_dir is not None:
        args += ["--data-dir", str(data_dir)]
    args += extra_args or []
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as log_file:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=log_file, text=True, env=env or dict(os.environ)
        )
    ready: list[str] = []
    done = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("READY ") and not ready:
                ready.append(line)
                done.set()
        done.set()

    threading.Thread(target=read, daemon=True).start()
    if not done.wait(timeout) or not ready:
        proc.kill()
        tail = log.read_text()[-2000:] if log.exists() else ""
        raise RuntimeError(f"node {name} did not become ready:\n{tail}")
    fields = dict(part.split("=", 1) for part in ready[0].split()[1:])
    return Launched(name, proc, fields["addr"], log)
