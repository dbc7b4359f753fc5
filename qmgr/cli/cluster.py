"""`qmgr cluster up/status/down/compose`: a whole cluster on this machine as `qmgr start`
processes, described by a topology file (:mod:`qmgr.cli.topology`).

Everything about a cluster lives in ``$QMGR_HOME/clusters/<cluster>/``:

- ``state.json``: what ``status`` and ``down`` read (removed by ``down``);
- ``addresses.json``: the ports chosen, reused by the next ``up`` on the same data so nodes
  come back where the cluster knew them;
- per node, ``<NODE>/data`` (its --data-dir), ``<NODE>/node.log`` (its stdout and stderr) and
  ``<NODE>/mqsc-applied.json`` (the MQSC commands already applied to that data, so an ``up`` on
  kept data does not define things twice).

``down --purge`` removes the whole directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import click

from qmgr.cli.launch import qmgr_command
from qmgr.cli.registry import home, register, unregister
from qmgr.cli.topology import (
    DEFAULT_SOURCE,
    NodeAddresses,
    NodeSpec,
    Topology,
    TopologyError,
    compose_files,
    load_topology,
    mqsc_commands,
    plan_addresses,
)

STATE_FILE = "state.json"
ADDRESSES_FILE = "addresses.json"  # kept by `down`: the next `up` reuses the same ports
LOOPBACK = "127.0.0.1"
LOG_TAIL = 3000  # characters of a node's log shown when it fails


# -- state on disk ------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeState:
    name: str
    role: str
    address: str
    raft_address: str | None
    pid: int
    log: str
    data_dir: str


@dataclass(frozen=True)
class ClusterState:
    cluster: str
    topology: str
    nodes: tuple[NodeState, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "topology": self.topology,
            "nodes": [asdict(n) for n in self.nodes],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClusterState:
        return cls(
            cluster=str(data["cluster"]),
            topology=str(data.get("topology", "")),
            nodes=tuple(NodeState(**n) for n in data["nodes"]),
        )


def clusters_dir() -> Path:
    return home() / "clusters"


def _file_name(name: str) -> str:
    """A name as one path component ('/' and '%' are legal in MQ names)."""
    return quote(name, safe="")


def state_dir(cluster: str) -> Path:
    return clusters_dir() / _file_name(cluster)


def read_state(directory: Path) -> ClusterState | None:
    try:
        return ClusterState.from_json(json.loads((directory / STATE_FILE).read_text()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise click.ClickException(f"{directory / STATE_FILE} is unreadable: {exc}") from None


def write_state(directory: Path, state: ClusterState) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(state.to_json(), indent=2) + "\n")
    tmp.replace(directory / STATE_FILE)


def _known_clusters() -> list[Path]:
    if not clusters_dir().is_dir():
        return []
    return sorted(d for d in clusters_dir().iterdir() if (d / STATE_FILE).is_file())


def find_cluster(name: str | None) -> tuple[Path, ClusterState]:
    """The state of cluster ``name``, or of the only cluster that is up when ``name`` is None."""
    if name is not None:
        directory = state_dir(name)
        state = read_state(directory)
        if state is None:
            raise click.ClickException(f"cluster {name} is not up (no {directory / STATE_FILE})")
        return directory, state
    known = [(d, s) for d in _known_clusters() if (s := read_state(d)) is not None]
    if len(known) == 1:
        return known[0]
    if not known:
        raise click.ClickException(f"no cluster is up (nothing under {clusters_dir()})")
    live = [(d, s) for d, s in known if any(node_alive(n.pid, n.name) for n in s.nodes)]
    if len(live) == 1:
        return live[0]
    names = ", ".join(s.cluster for _, s in (live or known))
    raise click.ClickException(f"several clusters are up ({names}): choose one with --cluster")


# -- processes ----------------------------------------------------------------------------------


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    if pid <= 0:
        return False
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)  # reap it if it is our own child that has exited
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (macOS): trust kill(0)
    return stat.rpartition(")")[2].split()[:1] not in (["Z"], ["X"])


def node_alive(pid: int, name: str) -> bool:
    """True if ``pid`` is alive and still the ``qmgr start --name NAME`` we launched (a pid
    reused by another program after a reboot does not count)."""
    if not pid_alive(pid):
        return False
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return True
    want = [b"--name", name.encode()]
    return b"start" in args and any(args[i : i + 2] == want for i in range(len(args) - 1))


def stop_nodes(nodes: list[tuple[str, int]], timeout: float) -> tuple[int, int]:
    """SIGTERM every live node, wait up to ``timeout`` seconds for all of them, SIGKILL the
    rest. Returns (stopped, killed)."""
    live = [(name, pid) for name, pid in nodes if node_alive(pid, name)]
    for _, pid in live:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(pid_alive(pid) for _, pid in live) and time.monotonic() < deadline:
        time.sleep(0.05)
    killed = 0
    for _, pid in live:
        if pid_alive(pid):
            killed += 1
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(pid_alive(pid) for _, pid in live) and time.monotonic() < deadline:
        time.sleep(0.05)
    return len(live), killed


def free_ports(count: int) -> list[int]:
    """``count`` distinct free loopback ports (all bound at once, then released)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((LOOPBACK, 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


def _port_problems(plan: dict[str, NodeAddresses]) -> list[str]:
    problems = []
    for name, addrs in plan.items():
        for what, address in (("listen", addrs.listen), ("Raft", addrs.raft)):
            if address is None:
                continue
            host, _, port = address.rpartition(":")
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                # as the node's servers do: a port whose old connections linger in TIME_WAIT
                # is free; one with a listener is not
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    sock.bind((host, int(port)))
                except OSError as exc:
                    problems.append(f"{what} port {port} of {name} is not free: {exc.strerror}")
    return problems


def _plan(topology: Topology, base: Path) -> dict[str, NodeAddresses]:
    """Addresses for this run: from base_port; else the addresses of the previous run on the
    same data when every one of them fits and is free (a node comes back where the cluster
    knew it); else fresh free ports. Saved in ADDRESSES_FILE, which `down` keeps."""
    if topology.base_port is not None:
        plan = plan_addresses(topology, LOOPBACK, free_ports)
        if problems := _port_problems(plan):
            raise click.ClickException(
                f"cannot use base_port {topology.base_port}:\n  - " + "\n  - ".join(problems)
            )
        return plan
    saved = _saved_addresses(base)
    fits = list(saved) == [n.name for n in topology.nodes] and all(
        (saved[n.name].raft is not None) == n.full_repository for n in topology.nodes
    )
    if fits and not _port_problems(saved):
        return saved
    plan = plan_addresses(topology, LOOPBACK, free_ports)
    base.mkdir(parents=True, exist_ok=True)
    (base / ADDRESSES_FILE).write_text(
        json.dumps({name: asdict(a) for name, a in plan.items()}, indent=2) + "\n"
    )
    return plan


def _saved_addresses(base: Path) -> dict[str, NodeAddresses]:
    try:
        data = json.loads((base / ADDRESSES_FILE).read_text())
        return {str(name): NodeAddresses(a["listen"], a["raft"]) for name, a in data.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


@dataclass
class _Launch:
    spec: NodeSpec
    addrs: NodeAddresses
    proc: subprocess.Popen[bytes]
    log: Path
    data_dir: Path
    offset: int  # where this run's output starts in the (appended) log
    address: str = ""


class _StartFailure(Exception):
    def __init__(self, launch: _Launch, reason: str) -> None:
        super().__init__(reason)
        self.launch = launch
        self.reason = reason


def node_args(topology: Topology, spec: NodeSpec, plan: dict[str, NodeAddresses]) -> list[str]:
    """The `qmgr start` arguments after the program (data dir excluded)."""
    args = ["start", "--name", spec.name, "--listen", plan[spec.name].listen]
    args += ["--cluster", topology.cluster]
    frs = topology.full_repositories
    if spec.full_repository:
        peers = ",".join(str(plan[n.name].raft) for n in frs)
        args += ["--full-repository", "--raft", str(plan[spec.name].raft), "--raft-peers", peers]
    else:
        args += ["--join", ",".join(plan[n.name].listen for n in frs)]
    return args


def _spawn(
    topology: Topology, spec: NodeSpec, plan: dict[str, NodeAddresses], base: Path
) -> _Launch:
    node_dir = base / _file_name(spec.name)
    data_dir = node_dir / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    log = node_dir / "node.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if topology.password is not None:
        env["QMGR_CLUSTER_PASSWORD"] = topology.password
    args = [*qmgr_command(), *node_args(topology, spec, plan), "--data-dir", str(data_dir)]
    with open(log, "ab") as out:
        offset = out.tell()
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env=env,
            start_new_session=True,  # outlives `qmgr cluster up`; no terminal signals
        )
    return _Launch(spec, plan[spec.name], proc, log, data_dir, offset)


def _ready_address(launch: _Launch) -> str | None:
    try:
        with open(launch.log, "rb") as f:
            f.seek(launch.offset)
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    prefix = f"READY name={launch.spec.name} "
    for line in text.splitlines():
        if line.startswith(prefix):
            fields = dict(p.split("=", 1) for p in line.split()[1:] if "=" in p)
            return fields.get("addr")
    return None


def _await_ready(launches: list[_Launch], timeout: float, progress: Any, tasks: Any) -> None:
    """Wait until every launch printed READY; raise _StartFailure for the first that exits
    or is still not ready after ``timeout`` seconds."""
    pending = list(launches)
    deadline = time.monotonic() + timeout
    while pending:
        for launch in list(pending):
            address = _ready_address(launch)
            if address:
                launch.address = address
                pending.remove(launch)
                progress.update(
                    tasks[launch.spec.name],
                    completed=1,
                    description=f"[green]{launch.spec.name}[/] ready at {address}",
                )
            elif launch.proc.poll() is not None:
                reason = f"exited with code {launch.proc.returncode}"
                progress.update(
                    tasks[launch.spec.name], description=f"[red]{launch.spec.name}[/] {reason}"
                )
                raise _StartFailure(launch, reason)
        if pending and time.monotonic() > deadline:
            reason = f"printed no READY line within {timeout:g} s"
            progress.update(
                tasks[pending[0].spec.name], description=f"[red]{pending[0].spec.name}[/] {reason}"
            )
            raise _StartFailure(pending[0], reason)
        if pending:
            time.sleep(0.05)


def _log_tail(launch: _Launch) -> str:
    try:
        with open(launch.log, "rb") as f:
            f.seek(launch.offset)
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return "(no log)"
    tail = text[-LOG_TAIL:]
    return ("..." if len(text) > LOG_TAIL else "") + tail.rstrip() or "(log is empty)"


def _state(topology: Topology, source: str, launches: list[_Launch]) -> ClusterState:
    return ClusterState(
        cluster=topology.cluster,
        topology=source,
        nodes=tuple(
            NodeState(
                name=x.spec.name,
                role=x.spec.role,
                address=x.address or x.addrs.listen,
                raft_address=x.addrs.raft,
                pid=x.proc.pid,
                log=str(x.log),
                data_dir=str(x.data_dir),
            )
            for x in launches
        ),
    )


def _console() -> Any:
    """A rich console; when the output is not a terminal, wide enough that addresses and
    reasons are never cut."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=160)


# -- MQSC ---------------------------------------------------------------------------------------


class _MqscFailure(Exception):
    pass


def _apply_mqsc(spec: NodeSpec, address: str, marker: Path) -> tuple[int, int]:
    """Run the node's MQSC; commands recorded in ``marker`` as already applied to this data
    are skipped. Returns (applied, skipped); raises _MqscFailure on the first failure."""
    from qmgr.client import MQClientError, QueueManagerClient

    try:
        done: list[str] = json.loads(marker.read_text())
    except (OSError, ValueError):
        done = []
    earlier = Counter(done)  # a command given twice is run twice
    applied = skipped = 0
    with QueueManagerClient(address, timeout=30) as client:
        for text in mqsc_commands(spec):
            if earlier[text] > 0:
                earlier[text] -= 1
                skipped += 1
                continue
            try:
                ok, records = client.mqsc_ok(text)
            except MQClientError as exc:
                raise _MqscFailure(f"{spec.name}: {text}\n  {exc}") from None
            if not ok:
                answer = "\n".join("  " + r.render().replace("\n", "\n  ") for r in records)
                raise _MqscFailure(f"{spec.name}: {text}\n{answer}")
            applied += 1
            done.append(text)
            marker.write_text(json.dumps(done, indent=2) + "\n")
    return applied, skipped


# -- commands -----------------------------------------------------------------------------------


@click.group()
def cluster() -> None:
    """Run a whole cluster on this machine (processes on loopback), described by a topology
    file; or generate the same cluster as docker compose files."""


def _load(path: str | None) -> tuple[Topology, str]:
    try:
        topology = load_topology(Path(path) if path else None)
    except TopologyError as exc:
        raise click.ClickException(str(exc)) from None
    return topology, str(Path(path).resolve()) if path else DEFAULT_SOURCE


@cluster.command()
@click.argument("topology_file", metavar="[TOPOLOGY]", required=False, type=click.Path())
@click.option(
    "--timeout",
    default=60.0,
    show_default=True,
    help="Seconds each group of nodes may take to print READY.",
)
def up(topology_file: str | None, timeout: float) -> None:
    """Start every node of TOPOLOGY (a TOML file; default: the built-in DEMO cluster, the same
    as compose/cluster.toml): full repositories together, then the partial repositories, then
    each node's MQSC in node order. Nodes keep running after this command returns."""
    from rich.progress import Progress, SpinnerColumn, TextColumn

    topology, source = _load(topology_file)
    base = state_dir(topology.cluster)
    old = read_state(base)
    if old is not None:
        running = [n.name for n in old.nodes if node_alive(n.pid, n.name)]
        if running:
            raise click.ClickException(
                f"cluster {topology.cluster} is already up ({', '.join(running)} running); "
                "stop it first with: qmgr cluster down --cluster " + topology.cluster
            )
    plan = _plan(topology, base)
    console = _console()
    launches: list[_Launch] = []
    try:
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), console=console) as bar:
            tasks = {
                n.name: bar.add_task(f"{n.name} ({n.role}) starting", total=1)
                for n in topology.nodes
            }
            for group in (topology.full_repositories, topology.partial_repositories):
                batch = [_spawn(topology, spec, plan, base) for spec in group]
                launches += batch
                write_state(base, _state(topology, source, launches))
                _await_ready(batch, timeout, bar, tasks)
        for x in launches:
            register(x.spec.name, x.address, x.proc.pid)
        write_state(base, _state(topology, source, launches))
        mqsc_done = _run_all_mqsc(topology, launches, base, console)
    except _StartFailure as exc:
        _abort(base, launches)
        raise click.ClickException(
            f"node {exc.launch.spec.name} failed to start: {exc.reason}; every node started "
            f"was stopped. Its log {exc.launch.log} ends with:\n{_log_tail(exc.launch)}"
        ) from None
    except _MqscFailure as exc:
        _abort(base, launches)
        raise click.ClickException(
            f"MQSC failed, so the cluster was stopped (data and logs kept under {base}):\n{exc}"
        ) from None
    except BaseException:
        _abort(base, launches)
        raise
    _print_summary(console, topology, source, launches, mqsc_done)


def _run_all_mqsc(
    topology: Topology, launches: list[_Launch], base: Path, console: Any
) -> dict[str, str]:
    by_name = {x.spec.name: x for x in launches}
    out: dict[str, str] = {}
    for spec in topology.nodes:
        if not mqsc_commands(spec):
            out[spec.name] = "-"
            continue
        marker = base / _file_name(spec.name) / "mqsc-applied.json"
        with console.status(f"MQSC on {spec.name}"):
            applied, skipped = _apply_mqsc(spec, by_name[spec.name].address, marker)
        out[spec.name] = str(applied) + (f" (+{skipped} earlier)" if skipped else "")
    return out


def _abort(base: Path, launches: list[_Launch]) -> None:
    stop_nodes([(x.spec.name, x.proc.pid) for x in launches], timeout=10)
    for x in launches:
        x.proc.poll()
        unregister(x.spec.name, x.proc.pid)
    with contextlib.suppress(FileNotFoundError):
        (base / STATE_FILE).unlink()


def _print_summary(
    console: Any, topology: Topology, source: str, launches: list[_Launch], mqsc: dict[str, str]
) -> None:
    from rich.table import Table

    table = Table(title=f"cluster {topology.cluster} is up: {source}")
    for col in ("node", "role", "address", "raft", "pid", "MQSC run"):
        table.add_column(col, no_wrap=True)
    described = any(x.spec.description for x in launches)
    if described:
        table.add_column("description")
    for x in launches:
        row = [x.spec.name, x.spec.role, x.address, x.addrs.raft or "-", str(x.proc.pid)]
        row.append(mqsc.get(x.spec.name, "-"))
        table.add_row(*row, *([x.spec.description] if described else []))
    console.print(table)
    first = topology.nodes[0].name
    console.print(
        f"state, data and logs: {state_dir(topology.cluster)}\n"
        f"try: qmgr runmqsc {first}   |   qmgr cluster status   |   qmgr cluster down"
    )


# -- status -------------------------------------------------------------------------------------

NOTHING_FOUND = {"AMQ8147E", "AMQ8420I"}  # "object not found", "channel status not found"


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
def _client(address: str) -> Iterator[Any]:
    from qmgr.client import QueueManagerClient

    client = QueueManagerClient(address, timeout=5)
    try:
        yield client
    finally:
        client.close()


def collect_status(directory: Path, state: ClusterState) -> dict[str, Any]:
    """Everything `status` shows, as JSON-ready data; what cannot be had is None plus a reason."""
    nodes: list[dict[str, Any]] = []
    for n in state.nodes:
        entry: dict[str, Any] = {**asdict(n), "alive": node_alive(n.pid, n.name)}
        for key, command in (
            ("channels", "DISPLAY CHSTATUS(*) ALL"),
            ("topic_hosts", "DISPLAY TCLUSTER(*) ALL"),
        ):
            records: list[dict[str, str]] | None = None
            error: str | None = "node is not running"
            if entry["alive"]:
                with _client(n.address) as client:
                    records, error = _query(client, command)
            entry[key] = records
            entry[key + "_error"] = error
        nodes.append(entry)
    members: dict[str, Any] = {"seen_by": None, "records": None, "error": "no node is running"}
    order = sorted(nodes, key=lambda e: e["role"] != "full")
    for entry in order:
        if entry["alive"]:
            with _client(entry["address"]) as client:
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


# columns: (heading, attribute names tried in order)
MEMBER_COLUMNS = (
    ("CLUSQMGR", ("CLUSQMGR",)),
    ("QMTYPE", ("QMTYPE",)),
    ("CONNAME", ("CONNAME",)),
    ("STATUS", ("STATUS",)),
    ("SUSPEND", ("SUSPEND",)),
)
CHANNEL_COLUMNS = (
    ("CHANNEL", ("CHANNEL",)),
    ("CHLTYPE", ("CHLTYPE",)),
    ("RQMNAME", ("RQMNAME",)),
    ("CONNAME", ("CONNAME",)),
    ("STATUS", ("STATUS",)),
    ("MSGS", ("MSGS",)),
    ("waiting", ("CURDEPTH", "XQMSGSA")),
)
TOPIC_COLUMNS = (
    ("TOPIC", ("TOPIC",)),
    ("TOPICSTR", ("TOPICSTR",)),
    ("host", ("CLUSQMGR",)),
    ("CLROUTE", ("CLROUTE",)),
    ("CLSTATE", ("CLSTATE",)),
    ("PUB", ("PUB",)),
)
Columns = tuple[tuple[str, tuple[str, ...]], ...]


def _cells(record: dict[str, str], columns: Columns) -> list[str]:
    return [next((record[k] for k in keys if record.get(k)), "-") for _, keys in columns]


def _print_status(status: dict[str, Any]) -> None:
    from rich.table import Table

    console = _console()
    nodes = status["nodes"]
    table = Table(title=f"cluster {status['cluster']}: {status['topology']}")
    for col in ("node", "role", "address", "raft", "pid", "alive"):
        table.add_column(col, no_wrap=True)
    for n in nodes:
        alive = "[green]yes[/]" if n["alive"] else "[red]no[/]"
        table.add_row(
            n["name"], n["role"], n["address"], n["raft_address"] or "-", str(n["pid"]), alive
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


@cluster.command()
@click.option("--cluster", "name", help="Which cluster (may be left out when only one is up).")
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def status(name: str | None, output: str) -> None:
    """Show the members of a running cluster, each node's channels and the topic hosts it
    knows. What a node cannot answer is shown as '-'."""
    directory, state = find_cluster(name)
    result = collect_status(directory, state)
    if output == "json":
        click.echo(json.dumps(result, indent=2))
    else:
        _print_status(result)


@cluster.command()
@click.option("--cluster", "name", help="Which cluster (may be left out when only one is up).")
@click.option("--purge", is_flag=True, help="Also delete the nodes' data and logs.")
@click.option(
    "--timeout",
    default=20.0,
    show_default=True,
    help="Seconds to wait after SIGTERM before SIGKILL.",
)
def down(name: str | None, purge: bool, timeout: float) -> None:
    """Stop every node of a cluster (SIGTERM, then SIGKILL after --timeout). Data and logs are
    kept for the next `up` unless --purge."""
    directory, state = find_cluster(name)
    stopped, killed = stop_nodes([(n.name, n.pid) for n in state.nodes], timeout)
    for n in state.nodes:
        unregister(n.name, n.pid)
    if purge:
        shutil.rmtree(directory, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            (directory / STATE_FILE).unlink()
    detail = f" ({killed} needed SIGKILL)" if killed else ""
    kept = "data and logs deleted" if purge else f"data and logs kept in {directory}"
    click.echo(f"cluster {state.cluster}: stopped {stopped} node(s){detail}; {kept}")


@cluster.command()
@click.argument("topology_file", metavar="[TOPOLOGY]", required=False, type=click.Path())
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    help="Directory to write into (default: the topology file's directory, or the current "
    "directory for the built-in topology).",
)
def compose(topology_file: str | None, out: str | None) -> None:
    """Write docker-compose.yml and init/NODE.mqsc for TOPOLOGY (default: the built-in DEMO
    cluster). The compose file builds compose/Dockerfile from the repository root, so it is
    meant to live in the repository's compose/ directory."""
    topology, _ = _load(topology_file)
    target = Path(out) if out else (Path(topology_file).parent if topology_file else Path("."))
    label = Path(topology_file).name if topology_file else "(built-in default)"
    try:
        files = compose_files(topology, label)
    except TopologyError as exc:
        raise click.ClickException(str(exc)) from None
    for rel, text in files.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        click.echo(f"wrote {path}")
    stale = sorted(p for p in (target / "init").glob("*.mqsc") if f"init/{p.name}" not in files)
    for path in stale:
        click.echo(f"note: {path} is not part of this topology (left alone)", err=True)
