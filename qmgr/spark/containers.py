"""The compose cluster's containers, for a scenario's kill fault when the load job runs in the
compose file's ``load`` service: the Docker Engine API over the engine's unix socket (which
that service mounts; ``DOCKER_HOST=unix://PATH`` names another), with the standard library's
HTTP client. A node's container is the one of the node's service in the load service's own
compose project (the labels docker compose gives every container; the project is read from
this container's own labels); killing it is ``docker kill`` (SIGKILL, which the engine counts
as a manual stop: its restart policy does not start it again), restarting it ``docker
start``."""

from __future__ import annotations

import http.client
import json
import os
import socket
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DOCKER_HOST_VAR = "DOCKER_HOST"
DEFAULT_SOCKET = "/var/run/docker.sock"
PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"
ONEOFF_LABEL = "com.docker.compose.oneoff"  # True for `docker compose run` containers
API_TIMEOUT = 30.0


class EngineError(RuntimeError):
    """The Docker engine cannot be reached or refused a request."""


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def socket_path(env: Mapping[str, str] | None = None) -> str:
    """The engine's socket: ``DOCKER_HOST`` when it names a unix socket, else the default."""
    env = os.environ if env is None else env
    host = env.get(DOCKER_HOST_VAR) or ""
    if not host:
        return DEFAULT_SOCKET
    if not host.startswith("unix://"):
        raise EngineError(f"{DOCKER_HOST_VAR}={host}: only a unix:// socket is supported here")
    return host[len("unix://") :]


@dataclass(frozen=True)
class Engine:
    """The Docker Engine API on the unix socket ``path`` (no version prefix: the engine's own
    API version, so that old and new engines both answer)."""

    path: str = DEFAULT_SOCKET
    timeout: float = API_TIMEOUT

    def request(self, method: str, url: str, ok: tuple[int, ...] = (200,)) -> Any:
        """The decoded JSON answer (None when empty); EngineError for another status."""
        conn = _UnixConnection(self.path, self.timeout)
        try:
            conn.request(method, url, headers={"Host": "docker"})
            response = conn.getresponse()
            body = response.read()
        except OSError as exc:
            raise EngineError(f"the Docker engine on {self.path} does not answer: {exc}") from None
        finally:
            conn.close()
        if response.status not in ok:
            try:
                message = json.loads(body).get("message", "")
            except (ValueError, AttributeError):
                message = body.decode(errors="replace").strip()
            raise EngineError(f"{method} {url}: {response.status} {message}".rstrip())
        return json.loads(body) if body.strip() else None


@dataclass(frozen=True)
class ComposeContainers:
    """The containers of the services of compose project ``project``."""

    engine: Engine
    project: str

    @classmethod
    def of_this_container(cls, env: Mapping[str, str] | None = None) -> ComposeContainers:
        """The project of the container this process runs in (found by its host name, which
        Docker sets to the container's short id)."""
        engine = Engine(socket_path(env))
        me = socket.gethostname()
        try:
            labels = engine.request("GET", f"/containers/{urllib.parse.quote(me)}/json")
        except EngineError as exc:
            raise EngineError(
                f"cannot find this container ({me}) through the Docker engine: {exc}"
            ) from None
        project = ((labels or {}).get("Config") or {}).get("Labels", {}).get(PROJECT_LABEL)
        if not project:
            raise EngineError(f"this container ({me}) is not part of a compose project")
        return cls(engine, str(project))

    def container(self, service: str) -> str:
        """The id of the one container of ``service`` (not a `run` container of it)."""
        filters = {
            "label": [
                f"{PROJECT_LABEL}={self.project}",
                f"{SERVICE_LABEL}={service}",
                f"{ONEOFF_LABEL}=False",
            ]
        }
        query = urllib.parse.urlencode({"all": "true", "filters": json.dumps(filters)})
        found = self.engine.request("GET", f"/containers/json?{query}") or []
        if len(found) != 1:
            raise EngineError(
                f"compose project {self.project} has {len(found)} containers of service "
                f"{service} (expected one)"
            )
        return str(found[0]["Id"])

    def kill(self, service: str) -> None:
        """``docker kill`` (SIGKILL) the container of ``service`` and wait until it has stopped;
        EngineError when it is not running."""
        cid = self.container(service)
        self.engine.request("POST", f"/containers/{cid}/kill?signal=SIGKILL", ok=(204,))
        self.engine.request("POST", f"/containers/{cid}/wait?condition=not-running")

    def start(self, service: str) -> None:
        """``docker start`` the container of ``service`` (nothing when it runs already)."""
        cid = self.container(service)
        self.engine.request("POST", f"/containers/{cid}/start", ok=(204, 304))
