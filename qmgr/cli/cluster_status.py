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

from qmgr.cli.cluster_launch import Launch
from qmgr.cli.cluster_secrets import admin_client_options
from qmgr.cli.cluster_state import ClusterState, node_alive, state_dir
from qmgr.cli.topology import Topology

NOTHING_FOUND = {"AMQ8147E", "AMQ8420I"}  # "object not found", "channel status not found"

# columns: (heading, attribute names tried in order)
Columns = tuple[tuple[str, tuple[str, ...]], ...]
MEMBER_COLUMNS: Columns = (
    ("CLUSQMGR", ("CLUSQMGR",)),
    ("QMTYPE", ("QMTYPE",)),
    ("CONNAME", ("CONNAME",)),
    ("STATUS", ("STATUS",)),
    ("SUSPEND", ("SUSPEND",)),
)
CHANNEL_COLUMNS: Columns = (
    ("CHANNEL", ("CHANNEL",)),
    ("CHLTYPE", ("CHLTYPE",)),
    ("RQMNAME", ("RQMNAME",)),
    ("CONNAME", ("CONNAME",)),
    ("STATUS", ("STATUS",)),
    ("MSGS", ("MSGS",)),
    ("waiting", ("CURDEPTH", "XQMSGSA")),
)
BRIDGE_COLUMNS: Columns = (
    ("BRIDGE", ("BRIDGE",)),
    ("DIRECTION", ("DIRECTION",)),
    ("TOPICSTR", ("TOPICSTR",)),
    ("SBENTITY", ("SBENTITY",)),
    ("STATUS", ("STATUS",)),
    ("MSGS", ("MSGS",)),
    ("waiting", ("CURDEPTH",)),
    ("LASTERR", ("LASTERR",)),
)
TOPIC_COLUMNS: Columns = (
    ("TOPIC", ("TOPIC",)),
    ("TOPICSTR", ("TOPICSTR",)),
    ("host", ("CLUSQMGR",)),
    ("CLROUTE", ("CLROUTE",)),
    ("CLSTATE", ("CLSTATE",)),
    ("PUB", ("PUB",)),
)


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


def collect_status(directory: Path, state: ClusterState) -> dict[str, Any]:
    """Everything `status` shows, as JSON-ready data; what cannot be had is None plus a reason."""
    nodes: list[dict[str, Any]] = []
    options = admin_client_options(directory, state.tls)
    for n in state.nodes:
        entry: dict[str, Any] = {**asdict(n), "alive": node_alive(n.pid, n.name)}
        for key, command in (
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
        nodes.append(entry)
    members: dict[str, Any] = {"seen_by": None, "records": None, "error": "no node is running"}
    order = sorted(nodes, key=lambda e: e["role"] != "full")
    for entry in order:
        if entry["alive"]:
            with _client(entry["address"], options) as client:
                found, why = _query(client, "DISPLAY CLUSQMGR(*) ALL")
            members = {"seen_by": entry["name"], "records": found, "error": why}
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
    members = status["members"]
    title = f"cluster members as {members['seen_by'] or '-'} sees them (DISPLAY CLUSQMGR)"
    table = _table(title, MEMBER_COLUMNS)
    for record in members["records"] or []:
        table.add_row(*_cells(record, MEMBER_COLUMNS))
    _print_table(console, table, {members["error"]: []} if members["error"] else {})

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
