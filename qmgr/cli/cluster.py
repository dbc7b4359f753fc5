"""`qmgr cluster up/status/restart/down/compose`: a whole cluster on this machine as `qmgr start`
processes, described by a topology file (:mod:`qmgr.launcher.topology`).

The parts: what a cluster keeps on disk (:mod:`qmgr.launcher.cluster_state`), starting and
stopping its nodes (:mod:`qmgr.launcher.cluster_launch`), each node's MQSC
(:mod:`qmgr.launcher.cluster_mqsc`), what `up` and `status` print (:mod:`qmgr.cli.cluster_status`)
and the docker compose files (:mod:`qmgr.launcher.compose`). The launcher's errors become
click's at :mod:`qmgr.cli.edge`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from qmgr.cli.cluster_status import collect_status, print_status, print_summary, wide_console
from qmgr.cli.edge import LaunchGroup
from qmgr.launcher.cluster_launch import (
    Launch,
    StartFailure,
    abort,
    await_ready,
    log_tail,
    plan_ports,
    spawn,
    state_of,
    stop_nodes,
)
from qmgr.launcher.cluster_mqsc import MqscFailure, apply_all_mqsc
from qmgr.launcher.cluster_secrets import prepare, private_files
from qmgr.launcher.cluster_state import (
    clear_state,
    find_cluster,
    node_alive,
    read_state,
    saved_addresses,
    state_dir,
    write_state,
)
from qmgr.launcher.compose import ENV_FILE, compose_files, ensure_env_files
from qmgr.launcher.errors import ClusterRunningError, NodeStartError
from qmgr.launcher.registry import register
from qmgr.launcher.topology import DEFAULT_SOURCE, Topology, load_topology
from qmgr.security.files import SecretError

_F = TypeVar("_F", bound=Callable[..., Any])


@click.group(cls=LaunchGroup)
def cluster() -> None:
    """Run a whole cluster on this machine (processes on loopback), described by a topology
    file; or generate the same cluster as docker compose files."""


_which_cluster = click.option(
    "--cluster", "name", help="Which cluster (may be left out when only one is up)."
)


def _timeout(default: float, meaning: str) -> Callable[[_F], _F]:
    """The --timeout option (seconds), with this command's default and meaning."""
    return click.option("--timeout", default=default, show_default=True, help=meaning)


def _load(path: str | None) -> tuple[Topology, str]:
    topology = load_topology(Path(path) if path else None)
    return topology, str(Path(path).resolve()) if path else DEFAULT_SOURCE


@cluster.command()
@click.argument("topology_file", metavar="[TOPOLOGY]", required=False, type=click.Path())
@_timeout(60.0, "Seconds each group of nodes may take to print READY.")
@click.option(
    "--secret-file",
    type=click.Path(dir_okay=False, exists=True),
    help="File holding the cluster secret (mode 0600); replaces the topology's secret_file. "
    "Default: one generated in the cluster's state directory and kept for the next `up`.",
)
@click.option(
    "--tls",
    is_flag=True,
    help="Nodes serve TLS with member certificates of the cluster CA (as `tls = true` in the "
    "topology); administer them with pki/client-admin.pem in the state directory.",
)
def up(topology_file: str | None, timeout: float, secret_file: str | None, tls: bool) -> None:
    """Start every node of TOPOLOGY (a TOML file; default: the built-in DEMO cluster, the same
    as compose/cluster.toml): full repositories together, then the partial repositories, then
    each node's MQSC in node order. Nodes keep running after this command returns.

    Full repositories get the cluster secret, partial repositories the member secret derived
    from it (the file's path in QMGR_CLUSTER_SECRET_FILE: cluster.secret, member.secret); the
    state directory also holds the cluster CA and a certificate per node and for admin."""
    topology, source = _load(topology_file)
    if secret_file is not None:
        topology = dataclasses.replace(topology, secret_file=Path(secret_file).resolve())
    if tls:
        topology = dataclasses.replace(topology, tls=True)
    with private_files():
        _up(topology, source, timeout)


def _up(topology: Topology, source: str, timeout: float) -> None:
    from rich.progress import Progress, SpinnerColumn, TextColumn

    base = state_dir(topology.cluster)
    old = read_state(base)
    if old is not None:
        running = [n.name for n in old.nodes if node_alive(n.pid, n.name)]
        if running:
            raise ClusterRunningError(
                f"cluster {topology.cluster} is already up ({', '.join(running)} running); "
                "stop it first with: qmgr cluster down --cluster " + topology.cluster
            )
    plan = plan_ports(topology, base)
    prepare(topology, base)
    console = wide_console()
    launches: list[Launch] = []
    try:
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), console=console) as bar:
            tasks = {
                n.name: bar.add_task(f"{n.name} ({n.role}) starting", total=1)
                for n in topology.nodes
            }
            for group in (topology.full_repositories, topology.partial_repositories):
                batch = [spawn(topology, spec, plan, base) for spec in group]
                launches += batch
                write_state(base, state_of(topology, source, launches))
                await_ready(batch, timeout, bar, tasks)
        for x in launches:
            register(x.spec.name, x.address, x.proc.pid, str(x.servicebus or ""))
        write_state(base, state_of(topology, source, launches))
        mqsc_done = apply_all_mqsc(topology, launches, base, console)
    except StartFailure as exc:
        abort(base, launches)
        raise NodeStartError(
            f"node {exc.launch.spec.name} failed to start: {exc.reason}; every node started "
            f"was stopped. Its log {exc.launch.log} ends with:\n{log_tail(exc.launch)}"
        ) from None
    except MqscFailure as exc:
        abort(base, launches)
        raise MqscFailure(
            f"MQSC failed, so the cluster was stopped (data and logs kept under {base}):\n{exc}"
        ) from None
    except BaseException:
        abort(base, launches)
        raise
    print_summary(console, topology, source, launches, mqsc_done)


@cluster.command()
@_which_cluster
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def status(name: str | None, output: str) -> None:
    """Show the members of a running cluster, each node's channels and the topic hosts it
    knows. What a node cannot answer is shown as '-'."""
    directory, state = find_cluster(name)
    result = collect_status(directory, state)
    if output == "json":
        click.echo(json.dumps(result, indent=2))
    else:
        print_status(result)


@cluster.command()
@click.argument("node")
@_which_cluster
@click.option("--kill", is_flag=True, help="Stop it with SIGKILL (as kill -9) instead of SIGTERM.")
@_timeout(60.0, "Seconds to wait for it to stop (then SIGKILL) and to print READY again.")
def restart(node: str, name: str | None, kill: bool, timeout: float) -> None:
    """Stop NODE of a running cluster and start it again on its data and ports: what it holds
    durably (definitions, durable subscriptions, persistent messages, its Service Bus
    namespace) comes back, and it rejoins the cluster. --kill stops it the hard way."""
    from rich.progress import Progress, SpinnerColumn, TextColumn

    directory, state = find_cluster(name)
    try:
        old = state.node(node)
    except KeyError:
        known = ", ".join(n.name for n in state.nodes)
        raise click.ClickException(
            f"cluster {state.cluster} has no node {node} ({known})"
        ) from None
    source = state.topology
    topology, _ = _load(None if source == DEFAULT_SOURCE else source)
    if state.tls:
        topology = dataclasses.replace(topology, tls=True)
    if node_alive(old.pid, old.name):
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.kill(old.pid, signal.SIGKILL)
        stop_nodes([(old.name, old.pid)], 0.0 if kill else timeout)
    console = wide_console()
    try:
        with private_files():
            launch = spawn(topology, topology.node(node), saved_addresses(directory), directory)
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), console=console) as bar:
            await_ready([launch], timeout, bar, {node: bar.add_task(f"{node} starting", total=1)})
    except StartFailure as exc:
        raise NodeStartError(
            f"node {node} did not start again: {exc.reason}. Its log {exc.launch.log} ends "
            f"with:\n{log_tail(exc.launch)}"
        ) from None
    register(node, launch.address, launch.proc.pid, str(launch.servicebus or ""))
    renewed = dataclasses.replace(old, pid=launch.proc.pid, servicebus=launch.servicebus or None)
    nodes = tuple(renewed if n.name == node else n for n in state.nodes)
    write_state(directory, dataclasses.replace(state, nodes=nodes))
    how = "killed" if kill else "stopped"
    click.echo(
        f"{node} {how} (pid {old.pid}) and started again (pid {launch.proc.pid}) at "
        f"{launch.address}"
    )


@cluster.command()
@_which_cluster
@click.option("--purge", is_flag=True, help="Also delete the nodes' data and logs.")
@_timeout(20.0, "Seconds to wait after SIGTERM before SIGKILL.")
def down(name: str | None, purge: bool, timeout: float) -> None:
    """Stop every node of a cluster (SIGTERM, then SIGKILL after --timeout). Data and logs are
    kept for the next `up` unless --purge."""
    directory, state = find_cluster(name)
    stopped, killed = stop_nodes([(n.name, n.pid) for n in state.nodes], timeout)
    clear_state(directory, [(n.name, n.pid) for n in state.nodes])
    if purge:
        shutil.rmtree(directory, ignore_errors=True)
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
    """Write docker-compose.yml, init/NODE.mqsc and servicebus/NODE.json (a copy of a node's
    Config.json) for TOPOLOGY (default: the built-in DEMO cluster), cluster.env with the cluster secret (for full repositories) when it is missing,
    and member.env with the member secret derived from it (for partial repositories); both
    mode 0600, never committed. The compose file builds compose/Dockerfile from the repository root, so it is
    meant to live in the repository's compose/ directory."""
    topology, _ = _load(topology_file)
    target = Path(out) if out else (Path(topology_file).parent if topology_file else Path("."))
    label = Path(topology_file).name if topology_file else "(built-in default)"
    files = compose_files(topology, label)
    for rel, text in files.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        click.echo(f"wrote {path}")
    try:
        written = ensure_env_files(target, topology)
    except SecretError as exc:
        raise click.ClickException(str(exc)) from None
    for path in written:
        what = "the cluster secret" if path.name == ENV_FILE else "the member secret"
        click.echo(f"wrote {path} ({what}, mode 0600: keep it out of git)")
    stale = sorted(p for p in (target / "init").glob("*.mqsc") if f"init/{p.name}" not in files)
    for path in stale:
        click.echo(f"note: {path} is not part of this topology (left alone)", err=True)


@cluster.command()
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    help="Write the secret to this file (mode 0600) instead of standard output.",
)
@click.option(
    "--member",
    is_flag=True,
    help="Derive the member secret (for partial repositories) from the cluster secret in --from.",
)
@click.option(
    "--from",
    "source",
    type=click.Path(dir_okay=False, exists=True),
    help="With --member: the file holding the cluster secret.",
)
def secret(out: str | None, member: bool, source: str | None) -> None:
    """Make a new cluster secret, for the full repositories (a file named by
    QMGR_CLUSTER_SECRET_FILE or --cluster-secret-file; never on a command line).

    With --member --from FILE: the member secret of the cluster secret in FILE, for partial
    repositories. It proves membership but cannot key Raft, so a partial repository cannot act
    as a full repository; a full repository refuses it."""
    from qmgr.security.files import generate_secret, read_secret, write_private
    from qmgr.security.keys import SecretFormatError, member_secret

    if member != (source is not None):
        raise click.UsageError("--member and --from FILE go together")
    try:
        value = member_secret(read_secret(Path(source))).text if source else generate_secret()
        if out is None:
            click.echo(value)
            return
        write_private(Path(out), value + "\n")
    except (SecretError, SecretFormatError) as exc:
        raise click.ClickException(str(exc)) from None
    what = "the member secret, for partial repositories" if member else "the cluster secret"
    click.echo(f"wrote {out} ({what}; mode 0600)")
