"""The load job on the compose cluster: the nodes' addresses from this machine (published ports)
and from inside the compose network (service names), the refusal of a kill fault outside the
load service, and the Docker Engine API requests that kill and start a node's container (here
against a stand-in engine on a unix socket; tests/integration/test_docker_compose.py runs them
against a real one)."""

from __future__ import annotations

import http.server
import json
import socket
import socketserver
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from qmgr.launcher.topology import load_topology
from qmgr.spark.containers import ComposeContainers, EngineError, socket_path
from qmgr.spark.nodes import ClusterError, compose_addresses, compose_nodes

TOPOLOGY = Path(__file__).resolve().parents[3] / "compose" / "cluster.toml"


def test_published_ports_from_this_machine_and_service_names_inside_the_network() -> None:
    topology = load_topology(TOPOLOGY)
    env = {"QMGR_PORT_SUB1": "20001", "QMGR_PUBLISH_ADDRESS": "0.0.0.0"}
    addresses, servicebus = compose_addresses(topology, env)
    assert addresses["FR1"] == "127.0.0.1:17000" and addresses["SUB1"] == "127.0.0.1:20001"
    assert servicebus == {"SB1": "127.0.0.1:5672"}
    addresses, servicebus = compose_addresses(topology, {**env, "QMGR_COMPOSE_NETWORK": "1"})
    assert addresses == {n.name: f"{n.name}:7000" for n in topology.nodes}
    assert servicebus == {"SB1": "SB1:5672"}


def test_a_kill_fault_on_the_compose_cluster_is_refused_outside_its_load_service() -> None:
    with pytest.raises(ClusterError, match="needs a cluster the job starts .* load service"):
        compose_nodes(load_topology(TOPOLOGY), {}, faults=True)


def test_docker_host_names_the_socket() -> None:
    assert socket_path({}) == "/var/run/docker.sock"
    assert socket_path({"DOCKER_HOST": "unix:///run/user/1000/docker.sock"}) == (
        "/run/user/1000/docker.sock"
    )
    with pytest.raises(EngineError, match="only a unix:// socket"):
        socket_path({"DOCKER_HOST": "tcp://127.0.0.1:2375"})


class _Engine(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """Answers the few Engine API requests the load job makes, for one compose project whose
    service HOSTA1 has one container (and a `run` container that must not be taken for it)."""

    daemon_threads = True

    def __init__(self, path: str) -> None:
        self.requests: list[tuple[str, str]] = []
        self.running = True
        super().__init__(path, _Handler)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Engine

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _answer(self, status: int, body: Any = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        url = urllib.parse.urlparse(self.path)
        self.server.requests.append(("GET", url.path))
        if url.path == f"/containers/{socket.gethostname()}/json":
            self._answer(200, {"Config": {"Labels": {"com.docker.compose.project": "demo"}}})
        elif url.path == "/containers/json":
            filters = json.loads(urllib.parse.parse_qs(url.query)["filters"][0])
            labels = set(filters["label"])
            want = {
                "com.docker.compose.project=demo",
                "com.docker.compose.service=HOSTA1",
                "com.docker.compose.oneoff=False",
            }
            self._answer(200, [{"Id": "c1"}] if labels == want else [])
        else:
            self._answer(404, {"message": "page not found"})

    def do_POST(self) -> None:
        url = urllib.parse.urlparse(self.path)
        self.server.requests.append(("POST", self.path))
        if url.path == "/containers/c1/kill":
            if not self.server.running:
                self._answer(409, {"message": "Container c1 is not running"})
                return
            self.server.running = False
            self._answer(204)
        elif url.path == "/containers/c1/wait":
            self._answer(200, {"StatusCode": 137})
        elif url.path == "/containers/c1/start":
            started, self.server.running = not self.server.running, True
            self._answer(204 if started else 304)
        else:
            self._answer(404, {"message": "page not found"})


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[tuple[_Engine, dict[str, str]]]:
    path = str(tmp_path / "docker.sock")
    server = _Engine(path)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, {"DOCKER_HOST": f"unix://{path}"}
    finally:
        server.shutdown()
        server.server_close()


def test_a_node_container_is_killed_and_started_through_the_engine(
    engine: tuple[_Engine, dict[str, str]],
) -> None:
    server, env = engine
    containers = ComposeContainers.of_this_container(env)
    assert containers.project == "demo"
    containers.kill("HOSTA1")
    assert server.requests[-2:] == [
        ("POST", "/containers/c1/kill?signal=SIGKILL"),
        ("POST", "/containers/c1/wait?condition=not-running"),
    ]
    with pytest.raises(EngineError, match="409 Container c1 is not running"):
        containers.kill("HOSTA1")
    containers.start("HOSTA1")
    containers.start("HOSTA1")  # running already: nothing to do
    assert server.requests[-1] == ("POST", "/containers/c1/start")
    with pytest.raises(EngineError, match="0 containers of service SUB1"):
        containers.kill("SUB1")


def test_an_engine_that_does_not_answer_is_a_clear_error(tmp_path: Path) -> None:
    env = {"DOCKER_HOST": f"unix://{tmp_path / 'none.sock'}"}
    with pytest.raises(EngineError, match="does not answer"):
        ComposeContainers.of_this_container(env)
