"""What ``qmgr cluster up`` and ``qmgr cluster status`` print: the summary of a cluster just
started, and the status of a running one (its members, each node's channels and the topic
hosts each node knows), collected as JSON-ready data and rendered as rich tables."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from qmgr.launcher.cluster_launch import Launch
from qmgr.launcher.cluster_secrets import admin_client_options
from qmgr.launcher.cluster_state import ClusterState, node_alive, state_dir
from qmgr.launcher.topology import Topology
from qmgr.node.ready import READY_SERVICE

NOTHING_FOUND = {"AMQ8147E", "AMQ8420I"}  # "object not found", "channel status not found"

# columns: (heading, attribute names tried in order)
Columns = tuple[tuple[str, tuple[str, ...]], ...]


def _columns(*columns: str | tuple[str, tuple[str, ...]]) -> Columns:
    """Columns; a bare attribute name is also its column's heading."""
    return tuple((c, (c,)) if isinstance(c, str) else c for c in columns)


MEMBER_COLUMNS = _columns("CLUSQMGR", "QMTYPE", "CONNAME", "STATUS", "SUSPEND")
CHANNEL_COLUMNS = _columns(
    "CHANNEL",
    "CHLTYPE",
    "RQMNAME",
    "CONNAME",
    "STATUS",
    "MSGS",
    ("waiting", ("CURDEPTH", "XQMSGSA")),
)
BRIDGE_COLUMNS = _columns(
    "BRIDGE",
    "DIRECTION",
    "TOPICSTR",
    "SBENTITY",
    "STATUS",
    "MSGS",
    ("waiting", ("CURDEPTH",)),
    "LASTERR",
)
TOPIC_COLUMNS = _columns("TOPIC", "TOPICSTR", ("host", ("CLUSQMGR",)), "CLROUTE", "CLSTATE", "PUB")


def wide_console() -> Any:
    """A rich console; when the output is not a terminal, wide enough that addresses and
    reasons are never cut."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=160)


def print_summary(
    console: Any, topology: Topology, source: str, launches: list[Launch], mqsc: dict[str, str]
) -> None:
    """The table `qmgr cluster up` ends with: every node started and the MQSC run on it."""
    from rich.table import Table

    table = Table(title=f"cluster {topology.cluster} is up: {source}")
    for col in ("node", "role", "address", "raft", "service bus", "pid", "MQSC run"):
        table.add_column(col, no_wrap=True)
    described = any(x.spec.description for x in launches)
    if described:
        table.add_column("description")
    for x in launches:
        row = [x.spec.name, x.spec.role, x.address, x.addrs.raft or "-", x.servicebus or "-"]
        row.append(str(x.proc.pid))
        row.append(mqsc.get(x.spec.name, "-"))
        table.add_row(*row, *([x.spec.description] if described else []))
    console.print(table)
    first = topology.nodes[0].name
    console.print(
        f"state, data and logs: {state_dir(topology.cluster)}\n"
        f"try: qmgr runmqsc {first}   |   qmgr cluster status   |   qmgr cluster down"
    )


# -- collecting ---------------------------------------------------------------------------------


def _query(client: Any, command: str) -> tuple[list[dict[str, str]] | None, str | None]:
    """(records, None) or (None, why not): never raises."""
    try:
        ok, records = client.mqsc_ok(command)
    except Exception as exc:  # any failure becomes "-" in the output
        return None, str(exc)
    if ok:
        return [dict(r.attrs) for r in records], None
    if records and records[0].code in NOTHING_FOUND:
        return [], None
    first = records[0] if records else None
    return None, f"{first.code}: {first.text}" if first else "command failed"


@contextlib.contextmanager
def _client(address: str, options: dict[str, Any]) -> Iterator[Any]:
    from qmgr.client import QueueManagerClient

    client = QueueManagerClient(address, timeout=5, **options)
    try:
        yield client
    finally:
        client.close()


def _ready(address: str, options: dict[str, Any]) -> str:
    """The node's own answer for the health service it sets SERVING once it printed READY (in
    a cluster: once it joined), e.g. ``SERVING``; ``UNREACHABLE: ...`` without an answer."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from qmgr.client.connect import open_channel

    keys = ("tls_ca", "tls_cert", "tls_key")
    with open_channel(grpc, address, [], *(options.get(k) for k in keys)) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=READY_SERVICE), timeout=5)
        except grpc.RpcError as exc:
            code = exc.code()
            return f"UNREACHABLE: {code.name if code else 'error'} {exc.details() or ''}".strip()
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))


def _health(entry: dict[str, Any], cluster: str) -> None:
    """Add the node's own view to ``entry``: ``ready`` (its READY health answer), ``joined``
    (it lists itself as a member of ``cluster``) and ``healthy`` (running, ready and joined)."""
    members = entry["members"]
    entry["joined"] = (
        None
        if members is None
        else any(
            m.get("CLUSQMGR") == entry["name"] and m.get("CLUSTER") == cluster for m in members
        )
    )
    entry["healthy"] = bool(entry["alive"] and entry["ready"] == "SERVING" and entry["joined"])


def collect_status(directory: Path, state: ClusterState) -> dict[str, Any]:
    """Everything `status` shows, as JSON-ready data; what cannot be had is None plus a reason."""
    nodes: list[dict[str, Any]] = []
    options = admin_client_options(directory, state.tls)
    for n in state.nodes:
        entry: dict[str, Any] = {**asdict(n), "alive": node_alive(n.pid, n.name)}
        entry["ready"] = _ready(n.address, options) if entry["alive"] else None
        for key, command in (
            ("members", "DISPLAY CLUSQMGR(*) ALL"),
            ("channels", "DISPLAY CHSTATUS(*) ALL"),
            ("topic_hosts", "DISPLAY TCLUSTER(*) ALL"),
            ("bridges", "DISPLAY BRIDGE(*) ALL"),
        ):
            records: list[dict[str, str]] | None = None
            error: str | None = "node is not running"
            if entry["alive"]:
                with _client(n.address, options) as client:
                    records, error = _query(client, command)
            entry[key] = records
            entry[key + "_error"] = error
        _health(entry, state.cluster)
        nodes.append(entry)
    members: dict[str, Any] = {"seen_by": None, "records": None, "error": "no node is running"}
    order = sorted(nodes, key=lambda e: e["role"] != "full")
    for entry in order:
        if entry["alive"]:
            members = {
                "seen_by": entry["name"],
                "records": entry["members"],
                "error": entry["members_error"],
            }
            break
    return {
        "cluster": state.cluster,
        "topology": state.topology,
        "state_dir": str(directory),
        "members": members,
        "nodes": nodes,
    }


# -- rendering ----------------------------------------------------------------------------------


def _cells(record: dict[str, str], columns: Columns) -> list[str]:
    return [next((record[k] for k in keys if record.get(k)), "-") for _, keys in columns]


def print_status(status: dict[str, Any]) -> None:
    """``status`` (from :func:`collect_status`) as tables: nodes, members, channels, topic
    hosts; under each, the nodes that could not answer and why."""
    from rich.table import Table

    console = wide_console()
    nodes = status["nodes"]
    table = Table(title=f"cluster {status['cluster']}: {status['topology']}")
    for col in ("node", "role", "address", "raft", "service bus", "pid", "alive"):
        table.add_column(col, no_wrap=True)
    for n in nodes:
        alive = "[green]yes[/]" if n["alive"] else "[red]no[/]"
        table.add_row(
            n["name"],
            n["role"],
            n["address"],
            n["raft_address"] or "-",
            n.get("servicebus") or "-",
            str(n["pid"]),
            alive,
        )
    console.print(table)
    _print_members(console, status)

    table = _table("channels (DISPLAY CHSTATUS on each node)", CHANNEL_COLUMNS, "node")
    for n in nodes:
        for record in n["channels"] or []:
            table.add_row(n["name"], *_cells(record, CHANNEL_COLUMNS))
    _print_table(console, table, _missing(nodes, "channels"))

    # one row per (topic, host) with the nodes that know it: propagation gaps stand out
    seen: dict[tuple[str, ...], list[str]] = {}
    for n in nodes:
        for record in n["topic_hosts"] or []:
            seen.setdefault(tuple(_cells(record, TOPIC_COLUMNS)), []).append(n["name"])
    answered = [n["name"] for n in nodes if n["topic_hosts"] is not None]
    table = _table("topic hosts (DISPLAY TCLUSTER on each node)", TOPIC_COLUMNS)
    table.add_column("known by")
    for cells, names in sorted(seen.items()):
        known = "all" if names == answered else " ".join(names)
        table.add_row(*cells, known)
    _print_table(console, table, _missing(nodes, "topic_hosts"))

    table = _table("bridges to Service Bus (DISPLAY BRIDGE on each node)", BRIDGE_COLUMNS, "node")
    for n in nodes:
        for record in n["bridges"] or []:
            table.add_row(n["name"], *_cells(record, BRIDGE_COLUMNS))
    _print_table(console, table, _missing(nodes, "bridges"))


def _own_view(node: dict[str, Any] | None) -> list[str]:
    """The member's own answers: READY, joined, and health in a word (or what is wrong)."""
    if node is None:
        return ["-", "-", "[yellow]not started by qmgr cluster up[/]"]
    ready = node["ready"] or "-"
    joined = {True: "yes", False: "[red]no[/]", None: "-"}[node["joined"]]
    if node["healthy"]:
        health = "[green]healthy[/]"
    elif not node["alive"]:
        health = "[red]not running[/]"
    elif node["ready"] != "SERVING":
        health = f"[red]not ready ({ready})[/]"
    elif node["joined"] is None:
        health = f"[red]cannot tell ({node['members_error']})[/]"
    else:
        health = "[red]not joined[/]"
    return ["yes" if ready == "SERVING" else f"[red]{ready}[/]", joined, health]


def _print_members(console: Any, status: dict[str, Any]) -> None:
    """The members as one full repository sees them (DISPLAY CLUSQMGR), each with its own view
    of itself, and what STATUS(INACTIVE) means there."""
    members = status["members"]
    seen_by = members["seen_by"] or "-"
    nodes = {n["name"]: n for n in status["nodes"]}
    title = f"cluster members as {seen_by} sees them (DISPLAY CLUSQMGR), each as it sees itself"
    table = _table(title, MEMBER_COLUMNS)
    for heading in ("READY", "joined", "health"):
        table.add_column(heading)
    listed = set()
    for record in members["records"] or []:
        listed.add(record.get("CLUSQMGR"))
        own = _own_view(nodes.get(record.get("CLUSQMGR", "")))
        table.add_row(*_cells(record, MEMBER_COLUMNS), *own)
    if members["records"] is not None:  # started here, and not (yet) a member for seen_by
        for name, node in nodes.items():
            if name not in listed:
                table.add_row(name, "-", node["address"], "-", "-", *_own_view(node))
    _print_table(console, table, {members["error"]: []} if members["error"] else {})
    if table.row_count:
        console.print(
            f"  [dim]STATUS: {seen_by}'s cluster-sender channel to the member, INACTIVE until "
            f"{seen_by} has something to send there (as in MQ; no fault).[/]\n"
            f"  [dim]READY, joined, health: the member's own answers (its {READY_SERVICE} "
            f"health service; whether it lists itself in cluster {status['cluster']}).[/]"
        )


def _table(title: str, columns: Columns, first: str | None = None) -> Any:
    from rich.table import Table

    table = Table(title=title)
    for heading in ([first] if first else []) + [h for h, _ in columns]:
        table.add_column(heading)
    return table


def _missing(nodes: list[dict[str, Any]], key: str) -> dict[str, list[str]]:
    """Reason -> names of the nodes that could not answer ``key``."""
    out: dict[str, list[str]] = {}
    for n in nodes:
        if n[key] is None:
            out.setdefault(n[key + "_error"] or "no answer", []).append(n["name"])
    return out


def _print_table(console: Any, table: Any, missing: dict[str, list[str]]) -> None:
    """The table if it has rows, else its title and '-' (or 'none'); then each reason some
    nodes could not answer, with those nodes."""
    if table.row_count:
        console.print(table)
    else:
        console.print(f"[bold]{table.title}[/]: " + ("-" if missing else "none"))
    for reason, names in missing.items():
        console.print(f"  - {', '.join(names) + ': ' if names else ''}[dim]{reason}[/]")
