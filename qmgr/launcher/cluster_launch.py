"""Starting and stopping the node processes of a local cluster: ports for this run, one
``qmgr start`` per node with its output in the node's log, the wait for each READY line, and
SIGTERM/SIGKILL on the way down. Used by ``qmgr cluster up/down``, ``qmgr demo`` and the load
job (through :mod:`qmgr.launcher.cluster_start`)."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qmgr.launcher.cluster_secrets import node_secret_path, node_tls_args
from qmgr.launcher.cluster_state import (
    ClusterState,
    NodeState,
    clear_state,
    node_alive,
    node_dir,
    pid_alive,
    save_addresses,
    saved_addresses,
)
from qmgr.launcher.errors import NodeStartError, PortError, WaitTimeout
from qmgr.launcher.launch import qmgr_command
from qmgr.launcher.poll import wait_for
from qmgr.launcher.topology import NodeAddresses, NodeSpec, Topology, plan_addresses

LOOPBACK = "127.0.0.1"
LOG_TAIL = 3000  # characters of a node's log shown when it fails


# -- ports ----------------------------------------------------------------------------------------


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PORT = 10_000


def _below_ephemeral() -> range | None:
    """Ports under the kernel's ephemeral range (Linux), or None when it is not known."""
    try:
        low = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return range(LOWEST_PORT, low) if low - LOWEST_PORT >= 1000 else None


def free_ports(count: int) -> list[int]:
    """``count`` distinct free loopback ports (all bound at once, then released), drawn at
    random from below the kernel's ephemeral range where it is known: a port the kernel hands
    out itself (an outgoing connection's, a bind to port 0) could be taken by another process
    between this check and the node's bind; one below that range only by a process choosing
    it on purpose."""
    candidates = _below_ephemeral()
    with contextlib.ExitStack() as stack:
        ports: list[int] = []
        for port in (
            random.sample(candidates, min(len(candidates), 20 * count)) if candidates else []
        ):
            if len(ports) == count:
                break
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            try:
                sock.bind((LOOPBACK, port))
            except OSError:
                continue
            ports.append(port)
        while len(ports) < count:  # none known below the range: the kernel's choice
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


def plan_ports(topology: Topology, base: Path) -> dict[str, NodeAddresses]:
    """Addresses for this run: from base_port; else the addresses of the previous run on the
    same data when every one of them fits and is free (a node comes back where the cluster
    knew it); else fresh free ports. Saved in ADDRESSES_FILE, which `down` keeps."""
    if topology.base_port is not None:
        plan = plan_addresses(topology, LOOPBACK, free_ports)
        if problems := _port_problems(plan):
            raise PortError(
                f"cannot use base_port {topology.base_port}:\n  - " + "\n  - ".join(problems)
            )
        return plan
    saved = saved_addresses(base)
    fits = list(saved) == [n.name for n in topology.nodes] and all(
        (saved[n.name].raft is not None) == n.full_repository for n in topology.nodes
    )
    if fits and not _port_problems(saved):
        return saved
    plan = plan_addresses(topology, LOOPBACK, free_ports)
    save_addresses(base, plan)
    return plan


# -- starting -------------------------------------------------------------------------------------


@dataclass
class Launch:
    """One node process started by :func:`spawn`."""

    spec: NodeSpec
    addrs: NodeAddresses
    proc: subprocess.Popen[bytes]
    log: Path
    data_dir: Path
    offset: int  # where this run's output starts in the (appended) log
    address: str = ""  # the address from its READY line, once it printed one
    servicebus: str = ""  # its Service Bus port (sb= of the READY line), if it hosts one


class StartFailure(NodeStartError):
    """A node exited, or printed no READY line in time (``reason`` says which)."""

    def __init__(self, launch: Launch, reason: str) -> None:
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
    if spec.servicebus_config is not None:
        args += ["--servicebus-config", str(spec.servicebus_config)]
    elif spec.servicebus:
        args += ["--servicebus"]
    if spec.hosts_servicebus:  # a free port each start: several nodes may host a namespace
        args += ["--servicebus-port", f"{LOOPBACK}:0"]
    return args


def spawn(topology: Topology, spec: NodeSpec, plan: dict[str, NodeAddresses], base: Path) -> Launch:
    """Start node ``spec`` in its own session, its output appended to its log under ``base``
    (0600), in ``QMGR_CLUSTER_SECRET_FILE`` the file of the cluster secret (a full repository)
    or of the member secret (a partial repository); returns at once (see
    :func:`await_ready`)."""
    data_dir = node_dir(base, spec.name) / "data"
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    log = node_dir(base, spec.name) / "node.log"
    env = {k: v for k, v in os.environ.items() if k != "QMGR_CLUSTER_SECRET"}
    env["PYTHONUNBUFFERED"] = "1"
    env["QMGR_CLUSTER_SECRET_FILE"] = str(node_secret_path(topology, spec, base))
    args = [*qmgr_command(), *node_args(topology, spec, plan), "--data-dir", str(data_dir)]
    if topology.tls:
        args += node_tls_args(base, spec.name)
    with open(os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab") as out:
        offset = out.tell()
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env=env,
            start_new_session=True,  # outlives `qmgr cluster up`; no terminal signals
        )
    return Launch(spec, plan[spec.name], proc, log, data_dir, offset)


def _this_run(launch: Launch) -> str | None:
    """What the node wrote to its log in this run; None if the log cannot be read."""
    try:
        with open(launch.log, "rb") as f:
            f.seek(launch.offset)
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return None


def _ready_fields(launch: Launch) -> dict[str, str] | None:
    """The key=value fields of the node's READY line in this run (addr, sb), or None."""
    text = _this_run(launch)
    if text is None:
        return None
    prefix = f"READY name={launch.spec.name} "
    for line in text.splitlines():
        if line.startswith(prefix):
            return dict(p.split("=", 1) for p in line.split()[1:] if "=" in p)
    return None


def await_ready(launches: list[Launch], timeout: float, progress: Any, tasks: Any) -> None:
    """Wait until every launch printed READY; raise StartFailure for the first that exits
    or is still not ready after ``timeout`` seconds. ``progress`` is a rich Progress and
    ``tasks`` its task per node name."""
    pending = list(launches)

    def all_ready() -> bool:
        for launch in list(pending):
            ready = _ready_fields(launch) or {}
            address = ready.get("addr")
            if address:
                launch.address = address
                launch.servicebus = ready.get("sb", "")
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
                raise StartFailure(launch, reason)
        return not pending

    try:
        wait_for(all_ready, timeout, 0.05, "READY lines")
    except WaitTimeout:
        reason = f"printed no READY line within {timeout:g} s"
        progress.update(
            tasks[pending[0].spec.name], description=f"[red]{pending[0].spec.name}[/] {reason}"
        )
        raise StartFailure(pending[0], reason) from None


def log_tail(launch: Launch) -> str:
    """The end of what the node wrote to its log in this run."""
    text = _this_run(launch)
    if text is None:
        return "(no log)"
    tail = text[-LOG_TAIL:]
    return ("..." if len(text) > LOG_TAIL else "") + tail.rstrip() or "(log is empty)"


def state_of(topology: Topology, source: str, launches: list[Launch]) -> ClusterState:
    """The state file's content for the nodes started so far (``source`` names the topology)."""
    return ClusterState(
        cluster=topology.cluster,
        topology=source,
        tls=topology.tls,
        nodes=tuple(
            NodeState(
                name=x.spec.name,
                role=x.spec.role,
                address=x.address or x.addrs.listen,
                raft_address=x.addrs.raft,
                pid=x.proc.pid,
                log=str(x.log),
                data_dir=str(x.data_dir),
                servicebus=x.servicebus or None,
            )
            for x in launches
        ),
    )


# -- stopping -------------------------------------------------------------------------------------


def stop_nodes(nodes: list[tuple[str, int]], timeout: float) -> tuple[int, int]:
    """SIGTERM every live node, wait up to ``timeout`` seconds for all of them, SIGKILL the
    rest. Returns (stopped, killed)."""
    live = [(name, pid) for name, pid in nodes if node_alive(pid, name)]
    for _, pid in live:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    _wait_gone(live, timeout)
    killed = 0
    for _, pid in live:
        if pid_alive(pid):
            killed += 1
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    _wait_gone(live, 10)
    return len(live), killed


def _wait_gone(nodes: list[tuple[str, int]], timeout: float) -> None:
    """Until none of ``nodes`` runs, or ``timeout`` seconds have passed."""
    with contextlib.suppress(WaitTimeout):
        wait_for(lambda: not any(pid_alive(pid) for _, pid in nodes), timeout, 0.05, "exits")


def abort(base: Path, launches: list[Launch]) -> None:
    """Stop every node started (SIGTERM, SIGKILL after 10 s), unregister them and remove the
    state file; data and logs stay."""
    stop_nodes([(x.spec.name, x.proc.pid) for x in launches], timeout=10)
    for x in launches:
        x.proc.poll()
    clear_state(base, [(x.spec.name, x.proc.pid) for x in launches])
