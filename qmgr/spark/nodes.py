"""The cluster a load scenario runs on: started by the job from its topology file with the
launcher of ``qmgr cluster up`` (and stopped at the end), one already running that ``qmgr
cluster up`` started (found by its cluster name), or the compose cluster of the topology
(reached through the ports ``qmgr cluster compose`` publishes, or by service name from inside
the compose network). Gives the nodes' addresses, clients, and the ``kill -9`` / restart of a
node for fault injection (on the compose cluster: of its container, through the Docker
engine, :mod:`qmgr.spark.containers`)."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qmgr.client import QueueManagerClient
from qmgr.launcher import cluster_start
from qmgr.launcher.cluster_launch import Launch, StartFailure, await_ready, log_tail, spawn
from qmgr.launcher.cluster_secrets import private_files
from qmgr.launcher.cluster_state import find_cluster, node_alive, saved_addresses
from qmgr.launcher.errors import StateError, WaitTimeout
from qmgr.launcher.topology import Topology
from qmgr.spark.containers import ComposeContainers, EngineError

CLIENT_TIMEOUT = 20.0


class ClusterError(RuntimeError):
    """The cluster cannot be started, found or changed as the scenario needs."""


@dataclass
class Nodes:
    """The nodes of one cluster, by name."""

    topology: Topology
    addresses: dict[str, str]
    servicebus: dict[str, str]  # node -> HOST:PORT of its Service Bus port
    pids: dict[str, int]
    base: Path | None = None  # the state directory, when the job started the cluster
    launches: list[Launch] = field(default_factory=list)
    containers: ComposeContainers | None = None  # the compose cluster's, for a kill fault
    _clients: dict[str, QueueManagerClient] = field(default_factory=dict)

    @property
    def started(self) -> bool:
        return self.base is not None

    def client(self, name: str) -> QueueManagerClient:
        if name not in self._clients:
            self._clients[name] = QueueManagerClient(self.addresses[name], timeout=CLIENT_TIMEOUT)
        return self._clients[name]

    def servicebus_address(self, name: str) -> str:
        address = self.servicebus.get(name)
        if not address:
            raise ClusterError(f"node {name} hosts no Service Bus namespace")
        return address

    def kill(self, name: str) -> None:
        """``kill -9`` node ``name`` (``docker kill`` of its container on the compose cluster)."""
        if self.containers is not None:
            try:
                self.containers.kill(name)
            except EngineError as exc:
                raise ClusterError(f"cannot kill node {name}'s container: {exc}") from None
            self._forget_client(name)
            return
        pid = self.pids[name]
        if not node_alive(pid, name):
            raise ClusterError(f"node {name} (pid {pid}) is not running")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        for launch in self.launches:
            if launch.spec.name == name:
                launch.proc.wait(10)
        self._forget_client(name)

    def restart(self, name: str, progress: Any, timeout: float) -> None:
        """Start node ``name`` again on its data and ports (the job must have started it, or it
        is a compose cluster's node, whose container is started again)."""
        if self.containers is not None:
            self._start_container(name, progress, timeout)
            return
        if self.base is None:
            raise ClusterError("only a cluster the job started can have a node restarted")
        plan = saved_addresses(self.base)
        spec = self.topology.node(name)
        with private_files():
            launch = spawn(self.topology, spec, plan, self.base)
        self.launches = [x for x in self.launches if x.spec.name != name] + [launch]
        tasks = {name: progress.add_task(f"{name} restarting", total=1)}
        try:
            await_ready([launch], timeout, progress, tasks)
        except StartFailure as exc:
            raise ClusterError(
                f"node {name} did not start again: {exc.reason}\n{log_tail(launch)}"
            ) from None
        self.addresses[name] = launch.address
        self.pids[name] = launch.proc.pid
        servicebus = str(getattr(launch, "servicebus", "") or "")
        if servicebus:
            self.servicebus[name] = servicebus
        self._forget_client(name)

    def _start_container(self, name: str, progress: Any, timeout: float) -> None:
        """``docker start`` node ``name``'s container and wait until the node is ready."""
        from qmgr.launcher.health import check
        from qmgr.node.ready import READY_SERVICE

        assert self.containers is not None
        try:
            self.containers.start(name)
        except EngineError as exc:
            raise ClusterError(f"cannot start node {name}'s container again: {exc}") from None
        address = self.addresses[name]
        try:
            cluster_start.wait_until(
                f"{name} restarting",
                {name: lambda: check(address, READY_SERVICE) == "SERVING"},
                progress,
                timeout,
            )
        except WaitTimeout as exc:
            raise ClusterError(str(exc)) from None
        self._forget_client(name)

    def _forget_client(self, name: str) -> None:
        client = self._clients.pop(name, None)
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()

    def _close_clients(self) -> None:
        for name in list(self._clients):
            self._forget_client(name)

    def keep(self, source: str) -> str:
        """Close the clients and leave the nodes the job started running, with the cluster
        state `qmgr cluster status/down` read written beside them; says how to stop them."""
        self._close_clients()
        if self.base is None or not self.launches:
            return ""
        from qmgr.launcher.cluster_state import write_state

        write_state(self.base, cluster_start.state(self.topology, source, self.launches))
        return cluster_start.kept_message(self.topology.cluster, self.base, self.launches)

    def close(self) -> None:
        """Close the clients; stop the nodes if the job started them."""
        self._close_clients()
        if self.base is not None and self.launches:
            cluster_start.stop(self.base, self.launches)
            self.launches = []


def start_nodes(topology: Topology, base: Path, progress: Any, timeout: float) -> Nodes:
    """Start every node of ``topology`` with its state, data and logs under ``base`` and run
    the topology's MQSC, as ``qmgr cluster up`` does. On failure every node started is
    stopped."""
    if topology.tls:
        raise ClusterError("the load job does not run topologies with tls = true")
    launches: list[Launch] = []
    try:
        cluster_start.start(topology, base, launches, progress, timeout)
    except BaseException:
        cluster_start.stop(base, launches)
        raise
    return Nodes(
        topology=topology,
        addresses={x.spec.name: x.address for x in launches},
        servicebus={
            x.spec.name: str(getattr(x, "servicebus", "") or "")
            for x in launches
            if getattr(x, "servicebus", "")
        },
        pids={x.spec.name: x.proc.pid for x in launches},
        base=base,
        launches=launches,
    )


def compose_addresses(
    topology: Topology, env: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """HOST:PORT of every node of ``topology``'s compose cluster, and of the Service Bus port of
    each node hosting a namespace: the ports it publishes on this machine (the same variables
    ``QMGR_PUBLISH_ADDRESS``, ``QMGR_PORT_NODE``, ``QMGR_SB_PORT_NODE`` and defaults as the
    compose file) or, inside the compose network (``QMGR_COMPOSE_NETWORK=1``, as the compose
    file's load service has it), the service name and the container's own port."""
    from qmgr.launcher.compose import (
        IN_NETWORK_VAR,
        PUBLISH_ADDRESS,
        PUBLISH_ADDRESS_VAR,
        published_ports,
    )

    inside = env.get(IN_NETWORK_VAR) == "1"
    host = env.get(PUBLISH_ADDRESS_VAR) or PUBLISH_ADDRESS
    if host in ("0.0.0.0", "::"):  # published on every address: reach it on this machine
        host = "127.0.0.1"
    addresses: dict[str, str] = {}
    servicebus: dict[str, str] = {}
    for published in published_ports(topology):
        port = env.get(published.variable) or str(published.port)
        address = f"{published.node}:{published.target}" if inside else f"{host}:{port}"
        (servicebus if published.servicebus else addresses)[published.node] = address
    return addresses, servicebus


def compose_nodes(
    topology: Topology, env: Mapping[str, str] | None = None, *, faults: bool = False
) -> Nodes:
    """The compose cluster of ``topology`` (``docker compose up`` of the file ``qmgr cluster
    compose`` made) at :func:`compose_addresses`. Every node must answer. With ``faults`` (a
    scenario kills a node), its containers are reached through the Docker engine, which only
    the compose file's load service can do."""
    if topology.tls:
        raise ClusterError("the load job does not run on clusters with TLS")
    env = os.environ if env is None else env
    containers = _compose_containers(env) if faults else None
    addresses, servicebus = compose_addresses(topology, env)
    nodes = Nodes(
        topology=topology,
        addresses=addresses,
        servicebus=servicebus,
        pids={},
        containers=containers,
    )
    for name, address in addresses.items():
        try:
            nodes.client(name).mqsc("DISPLAY QMGR")
        except Exception as exc:  # noqa: BLE001 - any failure: the node is not there
            nodes.close()
            raise ClusterError(
                f"no node {name} answers on {address} (is the compose cluster of "
                f"{topology.cluster} up?): {exc}"
            ) from None
    return nodes


def _compose_containers(env: Mapping[str, str]) -> ComposeContainers:
    """The compose project's containers, for a kill fault: only from inside the compose
    network, through the engine's socket the load service mounts."""
    from qmgr.launcher.compose import IN_NETWORK_VAR, LOAD_SERVICE

    if env.get(IN_NETWORK_VAR) != "1":
        raise ClusterError(
            "a scenario with a kill fault needs a cluster the job starts (no --compose) or, on "
            f"the compose cluster, the compose file's {LOAD_SERVICE} service (docker compose "
            f"--profile {LOAD_SERVICE} run --rm {LOAD_SERVICE} qmgr load SCENARIO... --compose), "
            "which kills and starts the node's container through the Docker engine"
        )
    try:
        return ComposeContainers.of_this_container(env)
    except EngineError as exc:
        raise ClusterError(
            f"a kill fault on the compose cluster needs the Docker engine's socket (the "
            f"{LOAD_SERVICE} service mounts it): {exc}"
        ) from None


def attach_nodes(cluster: str, topology: Topology) -> Nodes:
    """The running cluster ``cluster`` (started by ``qmgr cluster up``); it must have every
    node of ``topology`` running."""
    try:
        _, state = find_cluster(cluster)
    except StateError as exc:
        raise ClusterError(str(exc)) from None
    if state.tls:
        raise ClusterError("the load job does not run on clusters with TLS")
    running = {n.name: n for n in state.nodes if node_alive(n.pid, n.name)}
    missing = [n.name for n in topology.nodes if n.name not in running]
    if missing:
        raise ClusterError(
            f"cluster {cluster} has no running node {', '.join(missing)} of the scenario's topology"
        )
    return Nodes(
        topology=topology,
        addresses={name: n.address for name, n in running.items()},
        servicebus={
            name: str(getattr(n, "servicebus", "") or "")
            for name, n in running.items()
            if getattr(n, "servicebus", "")
        },
        pids={name: n.pid for name, n in running.items()},
    )
