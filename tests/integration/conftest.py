"""Real `qmgr start` processes on loopback, each with its own data directory."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from qmgr.client import QueueManagerClient
from qmgr.launcher.launch import NodeProcess as LaunchedNode
from qmgr.launcher.launch import qmgr_command

QMGR = qmgr_command()[0]
NodeFactory = Callable[..., "NodeProcess"]


def kill9(proc: subprocess.Popen[str]) -> None:
    """kill -9 a child process, wait for it, and close the pipes the test held to it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):  # a write buffered for the dead child
                pipe.close()


class NodeProcess(LaunchedNode):
    """A node of one test under ``base``: its data in ``base/NAME`` (unless not
    ``persistent``), its log in ``base/NAME.log``, QMGR_HOME in ``base/home``."""

    def __init__(self, name: str, base: Path, *, persistent: bool = True) -> None:
        super().__init__(
            name,
            log=base / f"{name}.log",
            data_dir=base / name if persistent else None,
            env={**os.environ, "QMGR_HOME": str(base / "home")},
        )
        self.base = base
        self.env: dict[str, str]

    @property
    def sb_address(self) -> str:
        """Its Service Bus port (HOST:PORT), when it hosts a namespace."""
        return self.servicebus

    def client(self) -> QueueManagerClient:
        return QueueManagerClient(self.address, timeout=20)

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


@pytest.fixture(scope="module")
def module_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    """One node QM1 for the tests of a module that leave it running: each names its own queues,
    topics and subscriptions, so what one leaves behind is nothing another looks at. Tests that
    kill, stop or restart the node keep their own (``node``)."""
    node = NodeProcess("QM1", tmp_path_factory.mktemp("module_node"))
    node.start()
    yield node
    node.kill()


@pytest.fixture
def shared_node(module_node: NodeProcess) -> NodeProcess:
    """The module's node, started again should an earlier test have left it down (one failure
    then does not fail the tests after it)."""
    if module_node.proc is None or module_node.proc.poll() is not None:
        module_node.start()
    return module_node
