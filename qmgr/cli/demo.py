"""`qmgr demo`: the main job. A local cluster (default: the DEMO topology of `qmgr cluster up`:
three full repositories, two topic hosts for 'Prices', one for 'Orders', a publisher and two
subscriber nodes) with a load published through it, and the delivery report: per subscriber
and topic string, loss, duplicates, order, latency and which host each copy went through."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import click

from qmgr.cli.demo_report import build_report, latencies_by_route
from qmgr.cli.demo_report import report_json as make_json
from qmgr.cli.demo_run import PUBLISHER, SUBSCRIPTIONS, DemoRun
from qmgr.cli.edge import LaunchCommand
from qmgr.launcher import cluster_start
from qmgr.launcher.launch import home_for_nodes


@contextlib.contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """SIGTERM ends the run like Ctrl-C does, through the clean-up that stops the nodes
    (they run in their own sessions, so no terminal signal reaches them)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _console() -> Any:
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=160)


@click.command(cls=LaunchCommand)
@click.option(
    "--messages",
    default=20_000,
    show_default=True,
    type=click.IntRange(min=1),
    help="Publications to send.",
)
@click.option(
    "--topology",
    "topology_file",
    type=click.Path(dir_okay=False),
    help="Topology TOML (as for `qmgr cluster up`); it needs nodes PUB1, SUB1 and SUB2. "
    "Default: the built-in DEMO cluster (compose/cluster.toml).",
)
@click.option(
    "--keep",
    type=click.Path(file_okay=False),
    help="Keep the cluster: its state, data and logs go in this directory and the nodes keep "
    "running afterwards (stop them with `qmgr cluster down` when the directory is the "
    "cluster's, e.g. ~/.qmgr/clusters/DEMO, else by their pids).",
)
@click.option("--json-out", type=click.Path(dir_okay=False), help="Write the report as JSON.")
@click.option(
    "--chart",
    type=click.Path(dir_okay=False),
    default="demo-report.png",
    show_default=True,
    help="PNG chart (latency CDF per route, route split); needs matplotlib.",
)
@click.option(
    "--timeout",
    default=60.0,
    show_default=True,
    help="Seconds each start-up step (nodes ready, topics known, proxies in place) may take.",
)
def demo(
    messages: int,
    topology_file: str | None,
    keep: str | None,
    json_out: str | None,
    chart: str,
    timeout: float,
) -> None:
    """Start a local cluster, subscribe on SUB1 ('Prices/#', 'Orders/#') and SUB2
    ('Prices/Fruit/+'), publish a load from PUB1 on topic strings under Prices/ and Orders/
    (half persistent), and report per subscriber and topic string: lost, duplicates, out of
    order, latency and the route split across the topic hosts. Every node is stopped at the
    end unless --keep. Exit code 1 when anything was lost or duplicated."""
    from rich.markup import escape

    from qmgr.cli.demo_render import print_report, write_chart
    from qmgr.launcher.topology import DEFAULT_SOURCE, load_topology

    topology = load_topology(Path(topology_file) if topology_file else None)
    names = {n.name for n in topology.nodes}
    missing = sorted({PUBLISHER, *(node for node, _ in SUBSCRIPTIONS)} - names)
    if missing:
        raise click.ClickException(f"the topology has no node {', '.join(missing)}")
    console = _console()
    with contextlib.ExitStack() as stack:
        if keep:
            base = Path(keep).resolve()
            home = None
        else:
            base = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="qmgr-demo-")))
            home = base / "home"
        stack.enter_context(home_for_nodes(home))
        stack.enter_context(_sigterm_as_exit())
        if keep:
            cluster_start.refuse_running(base)
        source = str(Path(topology_file).resolve()) if topology_file else DEFAULT_SOURCE
        run = DemoRun(topology, source, base, console, timeout)
        try:
            summary = run.execute(messages)
        finally:
            run.close(keep=bool(keep))
    report = build_report(summary["results"], summary["sent"])
    print_report(console, report, summary["title"])
    for receiver in run.receivers:
        if receiver.error is not None:
            why = escape(f"{receiver.node} {receiver.pattern}: {receiver.error}")
            console.print(f"[red]receiving stopped early: {why}[/]")
    if json_out:
        data = make_json(report, **summary["meta"])
        Path(json_out).write_text(json.dumps(data, indent=2) + "\n")
        console.print(f"report written to {json_out}")
    why_not = write_chart(Path(chart), report, latencies_by_route(summary["results"]))
    console.print(f"chart not written: {why_not}" if why_not else f"chart written to {chart}")
    if keep:
        console.print(cluster_start.kept_message(topology.cluster, base, run.launches))
    click.get_current_context().exit(0 if report.ok else 1)
