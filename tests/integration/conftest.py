"""Real `qmgr start` processes on loopback, each with its own data directory."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from qmgr.client import QueueManagerClient
from qmgr.launcher.launch import qmgr_command, start_node

QMGR = qmgr_command()[0]


def kill9(proc: subprocess.Popen[str]) -> None:
    """kill -9 a child process, wait for it, and close the pipes the test held to it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):  # a write buffered for the dead child
                pipe.close()


class NodeProcess:
    def __init__(self, name: str, base: Path, *, persistent: bool = True) -> None:
        self.name = name
        self.base = base
        self.data_dir = base / name if persistent else None
        self.proc: subprocess.Popen[str] | None = None
        self.address = ""
        self.sb_address = ""  # its Service Bus port (HOST:PORT), when it hosts a namespace
        self.env = {**os.environ, "QMGR_HOME": str(base / "home")}
        self.log = base / f"{name}.log"
        self.extra_args: list[str] = []  # more `qmgr start` options (kept across restarts)

    def start(self, timeout: float = 30.0) -> str:
        launched = start_node(
            self.name,
            data_dir=self.data_dir,
            log=self.log,
            env=self.env,
            timeout=timeout,
            extra_args=self.extra_args,
        )
        self.proc = launched.proc
        self.address = launched.address
        self.sb_address = launched.servicebus
        return self.address

    def client(self) -> QueueManagerClient:
        return QueueManagerClient(self.address, timeout=20)

    def kill(self) -> None:
        """kill -9: no chance to flush anything."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(20)

    def restart(self) -> str:
        self.kill()
        return self.start()

    def cli(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [QMGR, *args], input=input, capture_output=True, text=True, env=self.env, timeout=60
        )


@pytest.fixture
def node_factory(tmp_path: Path) -> Iterator[object]:
    nodes: list[NodeProcess] = []

    def make(name: str = "QM1", persistent: bool = True, args: tuple[str, ...] = ()) -> NodeProcess:
        node = NodeProcess(name, tmp_path, persistent=persistent)
        node.extra_args = list(args)
        node.start()
        nodes.append(node)
        return node

    yield make
    for node in nodes:
        node.kill()


@pytest.fixture
def node(node_factory: object) -> NodeProcess:
    return node_factory("QM1")  # type: ignore[operator,no-any-return]
