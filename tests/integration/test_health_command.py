"""`qmgr health ADDR`, the compose healthcheck: the node's standard gRPC health service, asked
over a real connection; exit code 0 only for SERVING."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from qmgr.launcher.health import check
from qmgr.node.ready import READY_SERVICE
from tests.integration.conftest import QMGR, NodeFactory, NodeProcess


@pytest.fixture
def node(shared_node: NodeProcess) -> NodeProcess:
    """The module's one node (see ``shared_node``); tests that kill or restart it use their own."""
    return shared_node


def _health(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [QMGR, "health", *args], capture_output=True, text=True, timeout=30, check=False
    )


def test_a_ready_node_is_serving(node: NodeProcess) -> None:
    result = _health(node.address)
    assert (result.returncode, result.stdout) == (0, "SERVING\n")
    assert check(node.address, "") == "SERVING"  # the server as a whole
    assert check(node.address, READY_SERVICE) == "SERVING"
    quiet = _health("--quiet", node.address)
    assert (quiet.returncode, quiet.stdout) == (0, "")
    module = subprocess.run(  # as the compose healthcheck runs it
        [sys.executable, "-m", "qmgr.cli.health", node.address],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert (module.returncode, module.stdout) == (0, "SERVING\n")


def test_an_unknown_service_is_not_healthy(node: NodeProcess) -> None:
    result = _health("--service", "no.such.Service", node.address)
    assert (result.returncode, result.stdout) == (1, "UNKNOWN_SERVICE\n")


def test_a_stopped_node_is_not_healthy(node_factory: NodeFactory) -> None:
    node = node_factory()
    address = node.address
    assert node.stop() == 0
    result = _health("--timeout", "2", address)
    assert result.returncode == 1 and result.stdout.startswith("UNREACHABLE: UNAVAILABLE")


def test_garbage_on_the_port_is_not_healthy() -> None:
    """A listener that answers with bytes that are not HTTP/2 (no gRPC server there)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        result = subprocess.Popen(
            [QMGR, "health", "--timeout", "2", f"127.0.0.1:{port}"],
            stdout=subprocess.PIPE,
            text=True,
        )
        conn, _ = server.accept()
        with conn:
            conn.sendall(b"SSH-2.0-not-grpc\r\n" * 4)
            out, _ = result.communicate(timeout=30)
    assert result.returncode == 1 and out.startswith("UNREACHABLE:")
