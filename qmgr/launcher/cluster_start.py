"""A whole local cluster from its topology, for `qmgr demo` and the load job: started,
configured and stopped with the machinery of `qmgr cluster up/down`, plus the two waits both
need before they publish: every member knows the clustered topics, and every topic host holds
the proxy subscriptions of the subscribers. Failures are :class:`LaunchError`s."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The launcher's building blocks, so these clusters start exactly as `qmgr cluster up`'s do.
from qmgr.launcher.cluster_launch import (
    Launch,
    StartFailure,
    abort,
    await_ready,
    log_tail,
    plan_ports,
    spawn,
    state_of,
)
from qmgr.launcher.cluster_mqsc import MqscFailure, apply_mqsc
from qmgr.launcher.cluster_secrets import prepare, private_files
from qmgr.launcher.cluster_state import ClusterState, mqsc_marker, node_alive, read_state, state_dir
from qmgr.launcher.errors import ClusterRunningError, NodeStartError, WaitTimeout
from qmgr.launcher.poll import wait_for
from qmgr.launcher.topology import Topology, mqsc_commands

POLL = 0.1  # seconds between two looks at what the nodes report


@dataclass(frozen=True)
class ClusteredTopic:
    """One DEFINE TOPIC ... CLUSTER(..) in the topology's MQSC, on the node that runs it."""

    name: str
    topic: str
    clroute: str
    node: str


def clustered_topics(topology: Topology) -> list[ClusteredTopic]:
    """The clustered topic objects the topology's MQSC defines, with the node defining each."""
    from qmgr.mqsc import MqscCommand, parse_script

    out = []
    for spec in topology.nodes:
        for _, parsed in parse_script(spec.mqsc):
            if not isinstance(parsed, MqscCommand):
                continue
            if parsed.verb == "DEFINE" and parsed.obj == "TOPIC" and parsed.params.get("CLUSTER"):
                out.append(
                    ClusteredTopic(
                        name=str(parsed.name),
                        topic=str(parsed.params.get("TOPICSTR", "")),
                        clroute=str(parsed.params.get("CLROUTE", "DIRECT")),
                        node=spec.name,
                    )
                )
    return out


def proxy_holders(topics: list[ClusteredTopic], pattern: str, publisher: str) -> set[str]:
    """The nodes that must hold a proxy for a subscription on ``pattern`` before a publication
    from ``publisher`` can reach it: the hosts of the closest clustered topic at or above the
    pattern (TOPICHOST), or the publisher itself (DIRECT). Empty when no clustered topic
    covers it."""
    covering = [
        t for t in topics if pattern == t.topic or pattern.startswith(t.topic.rstrip("/") + "/")
    ]
    if not covering:
        return set()
    closest = max(covering, key=lambda t: len(t.topic))
    if closest.clroute == "TOPICHOST":
        return {t.node for t in topics if t.name == closest.name}
    return {publisher}


def start(
    topology: Topology,
    base: Path,
    launches: list[Launch],
    progress: Any,
    timeout: float,
) -> None:
    """Start every node (full repositories together, then the others) and run each node's
    MQSC, as `qmgr cluster up` does; started nodes are appended to ``launches`` as they start,
    so the caller can stop them whatever happens."""
    with private_files():
        _start(topology, base, launches, progress, timeout)


def _start(
    topology: Topology, base: Path, launches: list[Launch], progress: Any, timeout: float
) -> None:
    plan = plan_ports(topology, base)
    prepare(topology, base)
    tasks = {
        n.name: progress.add_task(f"{n.name} ({n.role}) starting", total=1) for n in topology.nodes
    }
    try:
        for group in (topology.full_repositories, topology.partial_repositories):
            batch = [spawn(topology, spec, plan, base) for spec in group]
            launches += batch
            await_ready(batch, timeout, progress, tasks)
        with_mqsc = [n for n in topology.nodes if mqsc_commands(n)]
        task = progress.add_task("MQSC", total=len(with_mqsc))
        address = {x.spec.name: x.address for x in launches}
        for spec in with_mqsc:
            progress.update(task, description=f"MQSC on {spec.name}")
            apply_mqsc(spec, address[spec.name], mqsc_marker(base, spec.name))
            progress.advance(task)
        progress.update(task, description="[green]MQSC[/] applied")
    except StartFailure as exc:
        raise NodeStartError(
            f"node {exc.launch.spec.name} failed to start: {exc.reason}. Its log "
            f"{exc.launch.log} ends with:\n{log_tail(exc.launch)}"
        ) from None
    except MqscFailure as exc:
        raise MqscFailure(f"MQSC failed:\n{exc}") from None


def refuse_running(base: Path) -> None:
    """ClusterRunningError when ``base`` holds a cluster whose nodes still run."""
    old = read_state(base)
    if old is None:
        return
    running = [n.name for n in old.nodes if node_alive(n.pid, n.name)]
    if running:
        home = state_dir(old.cluster).resolve() == base.resolve()
        raise ClusterRunningError(
            f"a cluster in {base} is still running ({', '.join(running)}); stop it first"
            + (f": qmgr cluster down --cluster {old.cluster}" if home else "")
        )


def kept_message(cluster: str, base: Path, launches: list[Launch]) -> str:
    """What to tell the user about a cluster left running with --keep."""
    if state_dir(cluster).resolve() == base.resolve():
        how = f"qmgr cluster status / qmgr cluster down --cluster {cluster}"
    else:
        how = "kill " + " ".join(str(x.proc.pid) for x in launches)
        how += f" (or keep it in {state_dir(cluster)} to use qmgr cluster status/down)"
    return f"cluster {cluster} left running; state, data and logs in {base}; stop it with: {how}"


def state(topology: Topology, source: str, launches: list[Launch]) -> ClusterState:
    """What `qmgr cluster status/down` read, for a kept cluster."""
    return state_of(topology, source, launches)


def stop(base: Path, launches: list[Launch]) -> None:
    """Stop every node started (SIGTERM, SIGKILL after 10 s)."""
    abort(base, launches)


def wait_until(
    what: str,
    checks: dict[str, Callable[[], bool]],
    progress: Any,
    timeout: float,
) -> None:
    """Poll each named check until all hold, showing how many do; WaitTimeout naming the
    ones that still fail after ``timeout`` seconds. A check that raises counts as failing."""
    task = progress.add_task(what, total=len(checks))
    pending = dict(checks)

    def all_hold() -> bool:
        for name, check in list(pending.items()):
            try:
                done = check()
            except Exception:
                done = False
            if done:
                del pending[name]
                progress.advance(task)
        return not pending

    try:
        wait_for(all_hold, timeout, POLL, what)
    except WaitTimeout:
        raise WaitTimeout(
            f"timed out after {timeout:g} s waiting for {what}: not yet on "
            + ", ".join(sorted(pending))
        ) from None
    progress.update(task, description=f"[green]{what}[/]")


def progress_display(console: Any) -> Any:
    """The rich progress display a cluster start and its waits report to."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )


def knows_topics(client: Any, wanted: Iterable[tuple[str, str]]) -> Callable[[], bool]:
    """A check: DISPLAY TCLUSTER(*) on ``client`` shows every (object, host) of ``wanted``
    as ACTIVE."""
    want = set(wanted)

    def check() -> bool:
        ok, records = client.mqsc_ok("DISPLAY TCLUSTER(*)")
        known = {
            (r.attrs.get("TOPIC"), r.attrs.get("CLUSQMGR"))
            for r in records
            if ok and r.attrs.get("CLSTATE", "ACTIVE") == "ACTIVE"
        }
        return want <= known

    return check


def holds_proxies(client: Any, wanted: Iterable[tuple[str, str]]) -> Callable[[], bool]:
    """A check: DISPLAY SUB(*) SUBTYPE(PROXY) on ``client`` shows a proxy for every
    (subscribing node, topic string) of ``wanted``."""
    want = set(wanted)

    def check() -> bool:
        ok, records = client.mqsc_ok("DISPLAY SUB(*) SUBTYPE(PROXY)")
        held = {(r.attrs.get("DESTQMGR"), r.attrs.get("TOPICSTR")) for r in records if ok}
        return want <= held

    return check
