"""A local cluster's topology: one TOML file, parsed and checked once into frozen dataclasses.

Every problem in the file is collected and reported together (:class:`TopologyError`) before
anything starts. The same file drives ``qmgr cluster up`` (processes on loopback) and
``qmgr cluster compose`` (containers: :func:`qmgr.launcher.compose.compose_files` renders
docker-compose.yml and the per-node init scripts from it)::

    cluster = "DEMO"              # required: the cluster name (MQ object name rules)
    base_port = 17000             # optional: node i (0-based, file order) listens on
                                  # base_port+i, its Raft transport on base_port+100+i
    secret_file = "cluster.secret"  # optional: file with the cluster secret (mode 0600;
                                  # relative to this file); without it `qmgr cluster up`
                                  # generates one in the cluster's state directory
    tls = false                   # optional: nodes serve TLS with member certificates of
                                  # the cluster CA that `qmgr cluster up` creates

    [[node]]
    name = "FR1"                  # required: queue manager name
    role = "full"                 # "full" (full repository) or "partial" (the default)
    description = "..."           # optional, shown by `qmgr cluster up`
    mqsc = "DEFINE TOPIC(..)"     # optional: MQSC run on this node once the cluster is up
    servicebus = true             # optional: the node hosts a Service Bus namespace (its
                                  # port is chosen at start and kept in the cluster state);
                                  # or "Config.json": the emulator's Config.json (relative
                                  # to this file) defining the namespace and its entities
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from qmgr.launcher.errors import LaunchError
from qmgr.node.config import NAME_RE

Role = Literal["full", "partial"]
ROLES: tuple[Role, ...] = ("full", "partial")
TOP_KEYS = ("cluster", "base_port", "secret_file", "tls", "node")
NODE_KEYS = ("name", "role", "mqsc", "description", "servicebus")
RAFT_OFFSET = 100  # with base_port: the Raft port of node i is base_port + RAFT_OFFSET + i
DEFAULT_SOURCE = "(built-in default topology)"
# where the built-in default's relative paths (its Config.json) are read: files shipped with
# qmgr, copies of those next to compose/cluster.toml
DEFAULT_DIRECTORY = Path(__file__).parent / "defaults"


class ProblemsError(ValueError):
    """A file that cannot be used; ``problems`` lists every reason, one sentence each.
    ``WHAT`` names the kind of file in the message."""

    WHAT = "file"

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = tuple(problems)
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"invalid {self.WHAT} {source}:\n{lines}")


class TopologyError(ProblemsError, LaunchError):
    """A topology that cannot be used."""

    WHAT = "topology"


@dataclass(frozen=True)
class NodeSpec:
    name: str
    role: Role = "partial"
    mqsc: str = ""
    description: str = ""
    servicebus: bool = False  # hosts a Service Bus namespace
    servicebus_config: Path | None = None  # its Config.json (implies servicebus)

    @property
    def full_repository(self) -> bool:
        return self.role == "full"

    @property
    def hosts_servicebus(self) -> bool:
        return self.servicebus or self.servicebus_config is not None


@dataclass(frozen=True)
class Topology:
    cluster: str
    nodes: tuple[NodeSpec, ...]
    base_port: int | None = None
    secret_file: Path | None = None  # the cluster secret's file; None: the state directory's
    tls: bool = False  # nodes serve TLS with certificates of the cluster CA (`up --tls`)

    @property
    def full_repositories(self) -> tuple[NodeSpec, ...]:
        return tuple(n for n in self.nodes if n.full_repository)

    @property
    def partial_repositories(self) -> tuple[NodeSpec, ...]:
        return tuple(n for n in self.nodes if not n.full_repository)

    def node(self, name: str) -> NodeSpec:
        for spec in self.nodes:
            if spec.name == name:
                return spec
        raise KeyError(name)


@dataclass(frozen=True)
class NodeAddresses:
    """Where one node listens (gRPC) and, for a full repository, where its Raft binds."""

    listen: str
    raft: str | None


def load_topology(path: Path | None = None) -> Topology:
    """The topology in ``path``, or the built-in default (compose/cluster.toml) when None."""
    if path is None:
        return parse_topology(DEFAULT_TOPOLOGY_TOML, DEFAULT_SOURCE, DEFAULT_DIRECTORY)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TopologyError(str(path), [f"cannot be read: {exc}"]) from None
    return parse_topology(text, str(path), path.parent)


PASSWORD_GONE = (
    "'password' is no longer read: a secret written in a topology file ends up committed "
    "with it. Put the secret in a file of its own (mode 0600, not committed) and name it with "
    'secret_file = "PATH", or leave both out: `qmgr cluster up` then generates one in the '
    "cluster's state directory"
)


def parse_topology(
    text: str, source: str = "<topology>", directory: Path | None = None
) -> Topology:
    """``directory``: where a relative ``secret_file`` is looked for (default: as given)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TopologyError(source, [f"not valid TOML: {exc}"]) from None
    problems: list[str] = []
    if "password" in data:
        problems.append(PASSWORD_GONE)
    _unknown_keys(
        {k: v for k, v in data.items() if k != "password"}, TOP_KEYS, "top level", problems
    )
    cluster = _cluster_name(data.get("cluster"), problems)
    nodes = _nodes(data.get("node"), cluster, problems, directory)
    base_port = _base_port(data.get("base_port"), len(nodes), problems)
    secret = _optional_text(data.get("secret_file"), "secret_file", problems, allow_empty=False)
    tls = data.get("tls", False)
    if not isinstance(tls, bool):
        problems.append(f"'tls' must be true or false, got {_kind(tls)}")
    if problems:
        raise TopologyError(source, problems)
    secret_file = None
    if secret is not None:
        secret_file = Path(secret).expanduser()
        if directory is not None and not secret_file.is_absolute():
            secret_file = directory / secret_file
    return Topology(
        cluster=cluster,
        nodes=tuple(nodes),
        base_port=base_port,
        secret_file=secret_file,
        tls=bool(tls),
    )


def plan_addresses(
    topology: Topology, host: str, free_ports: Callable[[int], list[int]]
) -> dict[str, NodeAddresses]:
    """Listen and Raft addresses per node name: from ``base_port`` when the topology sets it,
    else ``free_ports(n)`` supplies n distinct ports (listen ports in node order, then one Raft
    port per full repository)."""
    if topology.base_port is not None:
        base = topology.base_port
        return {
            spec.name: NodeAddresses(
                f"{host}:{base + i}",
                f"{host}:{base + RAFT_OFFSET + i}" if spec.full_repository else None,
            )
            for i, spec in enumerate(topology.nodes)
        }
    ports = iter(free_ports(len(topology.nodes) + len(topology.full_repositories)))
    listen = {spec.name: f"{host}:{next(ports)}" for spec in topology.nodes}
    return {
        spec.name: NodeAddresses(
            listen[spec.name], f"{host}:{next(ports)}" if spec.full_repository else None
        )
        for spec in topology.nodes
    }


def mqsc_commands(spec: NodeSpec) -> list[str]:
    """The node's MQSC as the command texts to send, in order (stops at END)."""
    from qmgr.mqsc import MqscCommand, parse_script

    out: list[str] = []
    for command, parsed in parse_script(spec.mqsc):
        if isinstance(parsed, MqscCommand) and parsed.verb == "END":
            break
        out.append(command.text)
    return out


# -- validation --------------------------------------------------------------------------------


def _unknown_keys(
    table: Mapping[str, Any], allowed: tuple[str, ...], where: str, problems: list[str]
) -> None:
    for key in table:
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            problems.append(f"{where}: unknown key '{key}' (allowed: {', '.join(allowed)}){hint}")


def _name_problem(value: str, what: str) -> str | None:
    if NAME_RE.match(value):
        return None
    return f"{what} '{value}' must be 1-48 characters of A-Z a-z 0-9 . _ % /"


def _cluster_name(value: Any, problems: list[str]) -> str:
    if value is None:
        problems.append("'cluster' (the cluster name) is missing")
        return ""
    if not isinstance(value, str):
        problems.append(f"'cluster' must be a string, got {_kind(value)}")
        return ""
    problem = _name_problem(value, "cluster name")
    if problem:
        problems.append(problem)
    return value


def _base_port(value: Any, nodes: int, problems: list[str]) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        problems.append(f"'base_port' must be an integer, got {_kind(value)}")
        return None
    if nodes > RAFT_OFFSET:
        problems.append(
            f"'base_port' cannot number {nodes} nodes: listen ports would run into the Raft "
            f"ports at base_port+{RAFT_OFFSET} (at most {RAFT_OFFSET} nodes)"
        )
        return None
    highest = value + RAFT_OFFSET + max(nodes - 1, 0)
    if value < 1 or highest > 65535:
        problems.append(
            f"'base_port' {value} is out of range: the ports used run from base_port to "
            f"base_port+{RAFT_OFFSET}+{max(nodes - 1, 0)}, which must lie within 1-65535"
        )
        return None
    return value


def _optional_text(
    value: Any, what: str, problems: list[str], *, where: str = "", allow_empty: bool = True
) -> str | None:
    prefix = f"{where}: " if where else ""
    if value is None:
        return None
    if not isinstance(value, str):
        problems.append(f"{prefix}'{what}' must be a string, got {_kind(value)}")
        return None
    if not value and not allow_empty:
        problems.append(f"{prefix}'{what}' must not be empty (leave it out for no {what})")
        return None
    return value


def _nodes(
    value: Any, cluster: str, problems: list[str], directory: Path | None = None
) -> list[NodeSpec]:
    if value is None or value == []:
        problems.append("no nodes: add at least one [[node]] table")
        return []
    if not isinstance(value, list):
        problems.append(f"'node' must be an array of tables ([[node]]), got {_kind(value)}")
        return []
    nodes: list[NodeSpec] = []
    seen: dict[str, str] = {}
    for i, table in enumerate(value, 1):
        spec = _node(i, table, cluster, problems, directory)
        if spec is None:
            continue
        other = seen.get(spec.name.upper())
        if other == spec.name:
            problems.append(f"node {i}: duplicate name '{spec.name}'")
        elif other is not None:
            problems.append(
                f"node {i}: name '{spec.name}' differs from '{other}' only in case; the two "
                "would share a host name, a registry entry and files"
            )
        else:
            seen[spec.name.upper()] = spec.name
        nodes.append(spec)
    if nodes and not any(n.full_repository for n in nodes):
        problems.append(
            'no full repository: give at least one node role = "full" (3 tolerate the loss '
            "of one; 1 works without fault tolerance)"
        )
    return nodes


def _node(
    i: int, table: Any, cluster: str, problems: list[str], directory: Path | None = None
) -> NodeSpec | None:
    if not isinstance(table, dict):
        problems.append(f"node {i}: must be a table ([[node]]), got {_kind(table)}")
        return None
    name = table.get("name")
    label = f"node {i}" + (f" ({name})" if isinstance(name, str) and name else "")
    _unknown_keys(table, NODE_KEYS, label, problems)
    ok = True
    if name is None:
        problems.append(f"{label}: 'name' is missing")
        ok = False
    elif not isinstance(name, str):
        problems.append(f"{label}: 'name' must be a string, got {_kind(name)}")
        ok = False
    elif problem := _name_problem(name, "queue manager name"):
        problems.append(f"{label}: {problem}")
        ok = False
    role = table.get("role", "partial")
    if role not in ROLES:
        problems.append(f'{label}: role must be "full" or "partial", got {role!r}')
        ok = False
    before = len(problems)
    mqsc = _optional_text(table.get("mqsc"), "mqsc", problems, where=label) or ""
    description = _optional_text(table.get("description"), "description", problems, where=label)
    problems.extend(_mqsc_problems(label, mqsc, cluster))
    servicebus, config = _servicebus(table.get("servicebus", False), label, problems, directory)
    if not ok or len(problems) > before or not isinstance(name, str):
        return None
    return NodeSpec(
        name=name,
        role=role,
        mqsc=mqsc,
        description=description or "",
        servicebus=servicebus,
        servicebus_config=config,
    )


def _servicebus(
    value: Any, label: str, problems: list[str], directory: Path | None
) -> tuple[bool, Path | None]:
    """``servicebus = true | false | "path/to/Config.json"`` (relative to the topology file);
    a Config.json is checked here, so a bad one is reported before anything starts."""
    if isinstance(value, bool):
        return value, None
    if not isinstance(value, str) or not value:
        problems.append(
            f"{label}: 'servicebus' must be true, false or the path of a Config.json, "
            f"got {_kind(value) if value != '' else 'an empty string'}"
        )
        return False, None
    path = Path(value).expanduser()
    if directory is not None and not path.is_absolute():
        path = directory / path
    from qmgr.node.servicebus import ServiceBusStartError, read_config_file

    try:
        read_config_file(path)
    except ServiceBusStartError as exc:
        problems.append(f"{label}: 'servicebus': {exc}")
        return False, None
    return True, path.resolve()


def _mqsc_problems(label: str, text: str, cluster: str) -> list[str]:
    """Each command that does not parse, with its line in the node's mqsc, the position in
    the command and a caret display; plus clustered topics naming another cluster."""
    from qmgr.mqsc import MqscError, parse_script

    problems: list[str] = []
    try:
        results = parse_script(text)
    except MqscError as exc:
        return [f"{label}: mqsc cannot be read: {exc.code}: {exc.message}"]
    for command, parsed in results:
        where = f"{label}: mqsc line {command.line}"
        if isinstance(parsed, MqscError):
            caret = parsed.with_text(command.text).render("      ")
            problems.append(
                f"{where}, position {parsed.position + 1}: {parsed.code}: {parsed.message}\n"
                + caret
            )
            continue
        named = parsed.params.get("CLUSTER")
        if cluster and parsed.obj == "TOPIC" and named and named != cluster:
            problems.append(
                f"{where}: {parsed.verb} TOPIC({parsed.name}) names CLUSTER({named}) but the "
                f"nodes of this topology belong to cluster {cluster}"
            )
    return problems


def _kind(value: Any) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "a table",
    }.get(type(value), type(value).__name__)


DEFAULT_TOPOLOGY_TOML = """\
# The default local cluster: `qmgr cluster up` starts it as processes on loopback, and
# compose/docker-compose.yml runs the same topology as containers. After editing this file,
# regenerate the compose files: qmgr cluster compose compose/cluster.toml
#
# Keys: cluster (name), base_port (optional: node i listens on base_port+i and binds Raft on
# base_port+100+i; without it free ports are chosen), secret_file (optional: a file, mode 0600
# and never committed, holding the cluster secret; without it `qmgr cluster up` generates one
# in the cluster's state directory), tls (optional: true makes `qmgr cluster up` start the
# nodes with TLS and certificates of the cluster CA it creates), and one [[node]] table per
# queue manager with name, role ("full" repository or "partial", the default), description,
# mqsc (commands run on that node once the whole cluster is up, in node order) and servicebus
# (true, or the emulator's Config.json relative to this file: the node hosts a Service Bus
# namespace; `qmgr cluster up` gives it a free port, the compose file publishes it on 5672).

cluster = "DEMO"

[[node]]
name = "FR1"
role = "full"
description = "Full repository (one of three Raft members)"

[[node]]
name = "FR2"
role = "full"
description = "Full repository (one of three Raft members)"

[[node]]
name = "FR3"
role = "full"
description = "Full repository (one of three Raft members)"

[[node]]
name = "HOSTA1"
description = "Topic host for Prices (one of two: publications are shared between them)"
mqsc = \"\"\"
DEFINE TOPIC(PRICES) TOPICSTR('Prices') CLUSTER(DEMO) CLROUTE(TOPICHOST)
\"\"\"

[[node]]
name = "HOSTA2"
description = "Topic host for Prices (one of two: publications are shared between them)"
mqsc = \"\"\"
DEFINE TOPIC(PRICES) TOPICSTR('Prices') CLUSTER(DEMO) CLROUTE(TOPICHOST)
\"\"\"

[[node]]
name = "HOSTB1"
description = "Topic host for Orders (the only one: order is kept)"
mqsc = \"\"\"
DEFINE TOPIC(ORDERS) TOPICSTR('Orders') CLUSTER(DEMO) CLROUTE(TOPICHOST)
\"\"\"

[[node]]
name = "PUB1"
description = "Publisher: applications publish on Prices/... and Orders/... here"

[[node]]
name = "SUB1"
description = "Subscriber: applications subscribe here"

[[node]]
name = "SUB2"
description = "Subscriber: applications subscribe here"

[[node]]
name = "SB1"
description = "Service Bus namespace (entities from servicebus/SB1.json); bridges Prices/# into its topic 'prices'"
servicebus = "servicebus/SB1.json"
mqsc = \"\"\"
DEFINE BRIDGE(PRICES.SB) DIRECTION(TOSB) TOPICSTR('Prices/#') SBENTITY('prices') +
       SESSPROP('LoadPublisher') DESCR('Prices to the Service Bus topic prices')
\"\"\"
"""
