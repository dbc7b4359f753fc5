"""docker compose files for a topology (:mod:`qmgr.launcher.topology`): ``docker-compose.yml`` with
one service per node (the arguments ``qmgr cluster up`` gives it, its ports published on the
host), a ``mqsc-init`` service and the Spark load job behind the profile ``load`` (on the
compose nodes, by service name; a kill fault through the Docker engine's socket it mounts);
``init/NODE.mqsc`` for each node with MQSC and ``servicebus/NODE.json`` for each node with a
Config.json. Written by ``qmgr cluster compose``.

The secrets are in none of them: full repositories read the cluster secret from ``cluster.env``
and partial repositories the member secret derived from it (:mod:`qmgr.security.keys`) from
``member.env`` (both ``QMGR_CLUSTER_SECRET=...``, mode 0600, ignored by git), env files that
``qmgr cluster compose`` creates next to the compose file (:func:`ensure_env_files`):
``cluster.env`` when it is missing, ``member.env`` when it is missing or no longer matches
``cluster.env``. So a partial repository can prove membership but never speak Raft. Env files
rather than Docker secrets: outside swarm a file secret is a bind mount that keeps the host
file's owner and mode (compose ignores ``uid``/``mode`` there), so a 0600 file of the host user
could not be read by the image's non-root user (uid ``IMAGE_UID``); compose reads an env file
itself, as the host user.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qmgr.launcher.topology import NodeAddresses, NodeSpec, Topology, TopologyError, mqsc_commands
from qmgr.security.files import SecretError, generate_secret, read_secret, write_private
from qmgr.security.keys import SecretFormatError, member_secret

COMPOSE_PORT = 7000  # every container listens here (gRPC)
COMPOSE_RAFT_PORT = 7100  # and a full repository binds Raft here
COMPOSE_SB_PORT = 5672  # and a node hosting a Service Bus namespace serves it here
COMPOSE_IMAGE = "qmgr:local"
BASE_IMAGE_VAR = "QMGR_BASE_IMAGE"  # the image's base, as compose/build-image names it too
DEFAULT_BASE_IMAGE = "python:3.11-slim"  # compose/Dockerfile's default BASE_IMAGE
LOAD_IMAGE = "qmgr-load:local"  # the node image plus Java and the [spark] extra
CONFIG_MOUNT = "/config/Config.json"  # where a node's Service Bus Config.json is mounted
SB_CONFIG_DIR = "servicebus"  # the compose directory's copies of the nodes' Config.json files
HOST_PORT_BASE = 17000  # published port of node i when the topology has no base_port
SB_HOST_PORT = 5672  # published Service Bus port of the first node hosting one (then 5673...)
PUBLISH_ADDRESS_VAR = "QMGR_PUBLISH_ADDRESS"  # host address ports are published on
PUBLISH_ADDRESS = "127.0.0.1"  # by default: application ports carry no authentication
ENV_FILE = "cluster.env"  # the cluster secret, for full repositories (never committed)
MEMBER_ENV_FILE = "member.env"  # the member secret, for partial repositories (never committed)
SECRET_VAR = "QMGR_CLUSTER_SECRET"
IMAGE_UID = 10001  # the non-root user of compose/Dockerfile
INIT_SERVICE = "mqsc-init"  # '-' cannot occur in a node name, so no node service can clash
# `qmgr health --quiet ADDR` as a module: every container runs it every interval, and this
# way it costs half the CPU (0.1 s instead of 0.2 s: no imports of the other commands)
HEALTHCHECK = ["CMD", "python3", "-m", "qmgr.cli.health", "--quiet"]
LOAD_SERVICE = "load"  # the Spark load job, one shot, behind the profile of the same name
# scenarios/NAME.toml it runs by default: the demo's, on the compose cluster's topology
LOAD_SCENARIOS = ("demo/1-orders-one-host", "demo/2-prices-two-hosts", "demo/3-kill-host")
IN_NETWORK_VAR = "QMGR_COMPOSE_NETWORK"  # "1": `qmgr load --compose` runs inside the network
DOCKER_SOCKET_VAR = "QMGR_DOCKER_SOCKET"  # the engine's socket on the host, for the load job
DOCKER_SOCKET = "/var/run/docker.sock"  # its default, and where the load service mounts it
COMPOSE_HEADER = """\
# GENERATED from {source} by `qmgr cluster compose`: edit that file and regenerate.
# Run from this directory: docker compose -p {project} up --build -d
# (docker-compose 1.29: docker-compose -p {project} up --build -d; `compose/build-image` builds the
# image without a registry). The Spark load job on these nodes: docker compose -p {project}
# --profile load run --rm load (`compose/build-image --load` builds its image; its report goes
# to the volume load-reports; it mounts the Docker engine's socket, ${docker_socket_var}, to
# kill and start a node's container for a scenario's kill fault).
# Published on {publish_default} (${publish_var} to change; each port has a variable too):
{ports}
# Admin from the host: qmgr runmqsc localhost:PORT. Service Bus applications: the connection
# string Endpoint=sb://localhost[:PORT];SharedAccessKeyName=RootManageSharedAccessKey;
# SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;
# Full repositories read the cluster secret from {env_file}, partial repositories the member
# secret from {member_env_file} (mode 0600, not committed); `qmgr cluster compose` creates them.
"""
_HOST_NAME = re.compile(r"^[A-Za-z0-9]{1,48}$")
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_YAML_WORDS = {"y", "yes", "n", "no", "true", "false", "on", "off", "null"}


@dataclass(frozen=True)
class Published:
    """A port a node's container publishes on the host: ``variable`` (default ``port``) names
    the host port, ``target`` the container's."""

    node: str
    variable: str
    port: int
    target: int
    servicebus: bool = False

    def mapping(self) -> str:
        return (
            f"${{{PUBLISH_ADDRESS_VAR}:-{PUBLISH_ADDRESS}}}:"
            f"${{{self.variable}:-{self.port}}}:{self.target}"
        )


def published_ports(topology: Topology) -> list[Published]:
    """Node i (file order) publishes its gRPC port on ``base_port + i`` (the port `qmgr cluster
    up` gives it with the same topology) or ``HOST_PORT_BASE + i``; the nodes hosting a Service
    Bus namespace publish it on 5672, 5673, ... in file order."""
    base = topology.base_port if topology.base_port is not None else HOST_PORT_BASE
    out: list[Published] = []
    hosts = 0
    for i, spec in enumerate(topology.nodes):
        out.append(Published(spec.name, f"QMGR_PORT_{spec.name}", base + i, COMPOSE_PORT))
        if spec.hosts_servicebus:
            sb = Published(
                spec.name, f"QMGR_SB_PORT_{spec.name}", SB_HOST_PORT + hosts, COMPOSE_SB_PORT, True
            )
            out.append(sb)
            hosts += 1
    return out


def node_command(topology: Topology, spec: NodeSpec) -> list[str]:
    """The container's command: `qmgr` and the arguments `qmgr cluster up` gives the node
    (:func:`qmgr.launcher.cluster_launch.node_args`) with container addresses (host names = node
    names), the data volume, and the Config.json where the compose file mounts it."""
    from qmgr.launcher.cluster_launch import node_args

    plan = {
        n.name: NodeAddresses(
            f"{n.name}:{COMPOSE_PORT}",
            f"{n.name}:{COMPOSE_RAFT_PORT}" if n.full_repository else None,
        )
        for n in topology.nodes
    }
    args = node_args(topology, spec, plan)
    args[args.index("--listen") + 1] = f"0.0.0.0:{COMPOSE_PORT}"
    if "--servicebus-config" in args:
        args[args.index("--servicebus-config") + 1] = CONFIG_MOUNT
    if "--servicebus-port" in args:
        args[args.index("--servicebus-port") + 1] = f"0.0.0.0:{COMPOSE_SB_PORT}"
    listen = args.index("--listen")
    return ["qmgr", *args[: listen + 2], "--data-dir", "/data", *args[listen + 2 :]]


def compose_document(topology: Topology) -> dict[str, Any]:
    """The docker-compose.yml content as plain data: one service per node (service and host
    name = node name), a named data volume each (and the copy of its Config.json, read-only), a
    ``mqsc-init`` service that runs each node's MQSC once (a marker per node in its own volume)
    after every node is healthy, and the Spark load job behind the ``load`` profile."""
    bad = [n.name for n in topology.nodes if not _HOST_NAME.match(n.name)]
    if bad:
        raise TopologyError(
            "compose",
            [
                f"node name '{b}' cannot be a container host name: use letters and digits only"
                for b in bad
            ],
        )
    frs = topology.full_repositories
    ports = published_ports(topology)
    services: dict[str, Any] = {}
    for spec in topology.nodes:
        service: dict[str, Any] = {**_image(), "hostname": spec.name, "init": True}
        service["command"] = node_command(topology, spec)
        service["environment"] = _environment()
        service["env_file"] = [ENV_FILE if spec.full_repository else MEMBER_ENV_FILE]
        service["ports"] = [p.mapping() for p in ports if p.node == spec.name]
        service["volumes"] = [f"{spec.name}-data:/data"]
        if spec.servicebus_config is not None:
            service["volumes"].append(f"./{sb_config_file(spec.name)}:{CONFIG_MOUNT}:ro")
        service["healthcheck"] = {
            "test": HEALTHCHECK + [f"127.0.0.1:{COMPOSE_PORT}"],
            "interval": "5s",
            "timeout": "5s",
            "retries": 40,
        }
        if not spec.full_repository:
            service["depends_on"] = {n.name: {"condition": "service_healthy"} for n in frs}
        service["restart"] = "on-failure"
        services[spec.name] = service
    steps = [
        f"if [ ! -f /state/{n.name}.done ]; then qmgr runmqsc {n.name}:{COMPOSE_PORT} "
        f"-f /init/{n.name}.mqsc && touch /state/{n.name}.done; fi"
        for n in topology.nodes
        if mqsc_commands(n)
    ]
    services[INIT_SERVICE] = {
        **_image(),
        "command": ["sh", "-c", " && ".join(steps) if steps else "true"],
        "environment": _environment(),
        "volumes": ["./init:/init:ro", f"{INIT_SERVICE}-state:/state"],
        "depends_on": {n.name: {"condition": "service_healthy"} for n in topology.nodes},
        "restart": "no",
    }
    services[LOAD_SERVICE] = load_service()
    volumes: dict[str, Any] = {f"{n.name}-data": {} for n in topology.nodes}
    volumes[f"{INIT_SERVICE}-state"] = {}
    volumes["load-reports"] = {}
    return {"services": services, "volumes": volumes}


def load_service() -> dict[str, Any]:
    """The Spark load job, one shot behind its profile, on the compose nodes: `qmgr load
    --compose` inside the compose network (``QMGR_COMPOSE_NETWORK=1``: the nodes by service
    name on their container ports). It sees the repository's scenarios/ at /scenarios and this
    directory at /compose, so a scenario's topology path (``../../compose/cluster.toml``)
    means the same file as on the host; its report goes to the volume load-reports. For a
    kill fault it kills and starts the node's container through the Docker engine's socket,
    mounted from the host (``$QMGR_DOCKER_SOCKET``); that socket belongs to root, so the job
    runs as root in its container (whoever holds the socket is root on the host anyway). It
    starts once mqsc-init has run (which waits for every node to be healthy)."""
    return {
        "image": LOAD_IMAGE,
        "build": _build("load"),
        "profiles": [LOAD_SERVICE],
        "user": "root",
        "command": [
            "qmgr",
            "load",
            *(f"/scenarios/{name}.toml" for name in LOAD_SCENARIOS),
            "--compose",
            "--out",
            "/reports",
        ],
        "environment": {
            **_environment(),
            IN_NETWORK_VAR: "1",
            "DOCKER_HOST": f"unix://{DOCKER_SOCKET}",
        },
        "volumes": [
            "../scenarios:/scenarios:ro",
            ".:/compose:ro",
            "load-reports:/reports",
            f"${{{DOCKER_SOCKET_VAR}:-{DOCKER_SOCKET}}}:{DOCKER_SOCKET}",
        ],
        "depends_on": {INIT_SERVICE: {"condition": "service_completed_successfully"}},
        "restart": "no",
    }


def project_name(topology: Topology) -> str:
    """The compose project (``-p``): given on the command line rather than as the top-level
    ``name`` key, which docker-compose 1.29 refuses."""
    return re.sub(r"[^a-z0-9_-]", "-", f"qmgr-{topology.cluster.lower()}")


def sb_config_file(node: str) -> str:
    """Where the compose directory keeps the copy of ``node``'s Config.json."""
    return f"{SB_CONFIG_DIR}/{node}.json"


def compose_files(topology: Topology, source: str) -> dict[str, str]:
    """Relative path -> content: docker-compose.yml, init/NODE.mqsc for each node that has
    MQSC and servicebus/NODE.json, a copy of the Config.json of each node that names one (so
    the compose directory is complete on another machine). ``source`` names the topology file
    in the generated header."""
    ports = published_ports(topology)
    width = max(len(p.node) for p in ports)
    listing = "\n".join(
        f"#   {p.node:<{width}}  {'Service Bus (AMQP, HTTP)' if p.servicebus else 'gRPC'} "
        f"{p.port} (${p.variable})"
        for p in ports
    )
    header = COMPOSE_HEADER.format(
        source=source,
        env_file=ENV_FILE,
        member_env_file=MEMBER_ENV_FILE,
        project=project_name(topology),
        publish_default=PUBLISH_ADDRESS,
        publish_var=PUBLISH_ADDRESS_VAR,
        ports=listing,
        docker_socket_var=DOCKER_SOCKET_VAR,
    )
    files = {"docker-compose.yml": header + to_yaml(compose_document(topology))}
    for spec in topology.nodes:
        commands = mqsc_commands(spec)
        if commands:
            files[f"init/{spec.name}.mqsc"] = (
                f"* MQSC for {spec.name}, generated from {source}\n" + "\n".join(commands) + "\n"
            )
        if spec.servicebus_config is not None:
            try:
                files[sb_config_file(spec.name)] = spec.servicebus_config.read_text(
                    encoding="utf-8"
                )
            except (OSError, UnicodeDecodeError) as exc:
                raise TopologyError(
                    source, [f"node {spec.name}: 'servicebus': cannot read: {exc}"]
                ) from None
    return files


def _image() -> dict[str, Any]:
    return {"image": COMPOSE_IMAGE, "build": _build("node")}


def _build(target: str) -> dict[str, Any]:
    """compose/Dockerfile's stage ``target``, on ``$QMGR_BASE_IMAGE`` (default: the Dockerfile's
    python:3.11-slim; qmgr-base:bookworm, which compose/build-image makes, needs no registry)."""
    return {
        "context": "..",
        "dockerfile": "compose/Dockerfile",
        "target": target,
        "args": {"BASE_IMAGE": f"${{{BASE_IMAGE_VAR}:-{DEFAULT_BASE_IMAGE}}}"},
    }


def _environment() -> dict[str, str]:
    return {"QMGR_LOG": "INFO"}


def ensure_env_files(directory: Path, topology: Topology) -> list[Path]:
    """Create ``directory/cluster.env`` (mode 0600) holding the cluster secret unless it exists
    (the topology's ``secret_file`` when it names one, else a new secret), and write
    ``directory/member.env`` (0600) with the member secret derived from it when it is missing
    or does not match. Returns the paths written."""
    path = directory / ENV_FILE
    written = []
    if not path.exists():
        secret = (
            read_secret(topology.secret_file)
            if topology.secret_file is not None
            else generate_secret()
        )
        if any(c.isspace() or c in "\"'$#\\" for c in secret):
            raise SecretError(
                f"the cluster secret in {topology.secret_file} cannot go into an env file as it "
                "is (spaces, quotes, '$', '#' or backslashes); use letters, digits, '-' and '_'"
            )
        _member_line(secret, topology.secret_file or path)  # refuse a member secret here
        written.append(write_private(path, f"{SECRET_VAR}={secret}\n"))
    line = _member_line(_env_secret(path), path)
    member = directory / MEMBER_ENV_FILE
    if not member.exists() or member.read_text(encoding="utf-8") != line:
        written.append(write_private(member, line))
    return written


def _env_secret(path: Path) -> str:
    """The value of ``QMGR_CLUSTER_SECRET`` in env file ``path``."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise SecretError(f"cannot read {path}: {exc}") from None
    for text in lines:
        key, sep, value = text.strip().partition("=")
        if sep and key.strip() == SECRET_VAR and value.strip():
            return value.strip()
    raise SecretError(f"{path} has no {SECRET_VAR}=... line")


def _member_line(secret: str, source: Path) -> str:
    try:
        return f"{SECRET_VAR}={member_secret(secret).text}\n"
    except SecretFormatError as exc:
        raise SecretError(
            f"{source}: {exc}; the full repositories need the cluster secret "
            "(`qmgr cluster secret`)"
        ) from None


def to_yaml(value: Mapping[str, Any], indent: int = 0) -> str:
    """Block-style YAML for nested mappings whose leaves are strings, integers, booleans,
    lists of those, or empty mappings. Strings are always double-quoted (JSON escapes are
    valid YAML), so no value can change type on the way through a YAML 1.1 or 1.2 reader."""
    pad = " " * indent
    lines: list[str] = []
    for key, item in value.items():
        head = f"{pad}{_yaml_key(key)}:"
        if isinstance(item, Mapping):
            if item:
                lines.append(head)
                lines.append(to_yaml(item, indent + 2).rstrip("\n"))
            else:
                lines.append(head + " {}")
        elif isinstance(item, list | tuple):
            if item:
                lines.append(head)
                lines.extend(f"{pad}  - {_yaml_scalar(x)}" for x in item)
            else:
                lines.append(head + " []")
        else:
            lines.append(f"{head} {_yaml_scalar(item)}")
    return "\n".join(lines) + "\n"


def _yaml_key(key: str) -> str:
    if _PLAIN_KEY.match(key) and key.lower() not in _YAML_WORDS:
        return key
    return json.dumps(key)


def _yaml_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    raise TypeError(f"cannot write {type(value).__name__} as a YAML scalar")
