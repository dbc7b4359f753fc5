"""A cluster of real `qmgr start` processes on loopback for the integration tests: full
repositories on fixed Raft ports, partial repositories joining through them, restart on the
same address, helpers to wait for what the nodes report through MQSC."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from qmgr.client.sync import Subscription
from qmgr.launcher.cluster_launch import free_ports
from qmgr.launcher.launch import start_together
from qmgr.launcher.poll import wait_for
from qmgr.security.files import generate_secret
from qmgr.security.keys import member_secret
from tests.integration.conftest import NodeProcess


def exactly_once(publisher: ClusterNode, sub: Subscription, topic: str, body: bytes) -> None:
    """``body`` published on ``publisher`` arrives at ``sub`` once, then the marker published
    after it: nothing more arrived (a late duplicate would come before the marker)."""
    publisher.c.publish(topic, body)
    publisher.c.publish(topic, b"marker:" + body)
    got: list[bytes] = []

    def marker_seen() -> bool:
        got.extend(m.body for m in sub.receive_batch(timeout=0.5))
        return b"marker:" + body in got

    wait_for(marker_seen, 20.0, what=f"marker after {body!r}", retry=Exception)
    assert got == [body, b"marker:" + body]


class ClusterNode(NodeProcess):
    """A cluster member on a fixed port (a restart comes back on the same address) with the
    `qmgr start` options ``args``."""

    def __init__(self, name: str, base: Path, port: int, args: list[str]) -> None:
        super().__init__(name, base)
        self.port = port
        self.listen = f"127.0.0.1:{port}"
        self.extra_args = args
        self.start_timeout = 40.0

    @property
    def args(self) -> list[str]:
        return self.extra_args

    def tcluster(self) -> set[tuple[str, str]]:
        """(object name, hosting queue manager) of every clustered definition known here."""
        ok, records = self.c.mqsc_ok("DISPLAY TCLUSTER(*)")
        if not ok:
            return set()
        return {
            (r.attrs["TOPIC"], r.attrs["CLUSQMGR"])
            for r in records
            if r.attrs.get("CLSTATE") == "ACTIVE"
        }


class Cluster:
    """Nodes of one cluster; FRs first (started together), then partial repositories.

    Full repositories get the cluster secret (``secret``, or one generated for this cluster)
    in ``QMGR_CLUSTER_SECRET``, partial repositories the member secret derived from it (the
    cluster secret too with ``partials_hold_cluster_secret=True``); ``insecure=True`` runs them
    without one (``--insecure``)."""

    def __init__(
        self,
        base: Path,
        name: str = "DEMO",
        secret: str | None = None,
        *,
        insecure: bool = False,
        partials_hold_cluster_secret: bool = False,
    ) -> None:
        if insecure and secret is not None:
            raise ValueError("a cluster is either insecure or has a secret")
        self.base = base
        self.name = name
        self.insecure = insecure
        self.secret = None if insecure else secret or generate_secret()
        self.member_secret = None if self.secret is None else member_secret(self.secret).text
        self.partial_secret = self.secret if partials_hold_cluster_secret else self.member_secret
        self.nodes: dict[str, ClusterNode] = {}
        self.frs: list[str] = []

    def start(
        self,
        full: Iterable[str],
        partial: Iterable[str],
        join_first: Callable[[Cluster], str] | None = None,
    ) -> Cluster:
        """Start the full repositories together, then the partial repositories, which join
        through ``join_first(self)`` (default: the first full repository) before the others."""
        full = list(full)
        partial = list(partial)
        ports = free_ports(2 * len(full) + len(partial))
        raft = [f"127.0.0.1:{p}" for p in ports[len(full) : 2 * len(full)]]
        grpc_addrs = [f"127.0.0.1:{p}" for p in ports[: len(full)]]
        for i, name in enumerate(full):
            args = ["--cluster", self.name, "--full-repository", "--raft", raft[i]]
            args += ["--raft-peers", ",".join(raft)]
            self.nodes[name] = self._node(name, ports[i], args)
            self.frs.append(name)
        start_together([self.nodes[n] for n in full])
        first = join_first(self) if join_first is not None else full[0]
        order = [grpc_addrs[full.index(first)]] + [
            a for n, a in zip(full, grpc_addrs, strict=True) if n != first
        ]
        join = ["--cluster", self.name, "--join", ",".join(order)]
        for j, name in enumerate(partial):
            self.nodes[name] = self._node(name, ports[2 * len(full) + j], join)
        start_together([self.nodes[n] for n in partial])
        return self

    def _node(self, name: str, port: int, args: list[str]) -> ClusterNode:
        secret = self.secret if "--full-repository" in args else self.partial_secret
        if self.insecure:
            args = [*args, "--insecure"]
        node = ClusterNode(name, self.base, port, args)
        node.env.pop("QMGR_CLUSTER_SECRET_FILE", None)
        if secret is not None:
            node.env["QMGR_CLUSTER_SECRET"] = secret
        else:
            node.env.pop("QMGR_CLUSTER_SECRET", None)
        return node

    def bare(self, name: str) -> ClusterNode:
        """A partial repository started with its member secret only (no ``--cluster`` nor
        ``--join``): it joins with DEFINE CHANNEL. Not started yet."""
        node = self._node(name, free_ports(1)[0], [])
        self.nodes[name] = node
        return node

    def fr_address(self, name: str) -> str:
        """The MQ CONNAME of a full repository's port: ``host(port)``."""
        host, _, port = self[name].address.rpartition(":")
        return f"{host}({port})"

    def __getitem__(self, name: str) -> ClusterNode:
        return self.nodes[name]

    def define_topic(
        self, host: str, name: str, topic: str, clroute: str = "TOPICHOST", extra: str = ""
    ) -> None:
        self[host].c.mqsc(
            f"DEFINE TOPIC({name}) TOPICSTR('{topic}') CLUSTER({self.name}) "
            f"CLROUTE({clroute}) {extra}"
        )

    def wait_definition(
        self, name: str, hosts: Iterable[str], on: Iterable[str] | None = None
    ) -> None:
        want = {(name, h) for h in hosts}
        for node in on or self.nodes:
            n = self[node]
            wait_for(
                lambda n=n: want <= n.tcluster(),
                20.0,
                what=f"{name} hosted by {sorted(want)} on {node}",
                retry=Exception,
            )

    def wait_proxy(self, host: str, origin: str, topic: str, present: bool = True) -> None:
        n = self[host]
        wait_for(
            lambda: ((origin, topic) in n.proxies()) == present,
            20.0,
            what=f"proxy {origin}:{topic} {'at' if present else 'gone from'} {host}",
            retry=Exception,
        )

    def two_hosts_and_a_subscription(
        self, hosts: tuple[str, str], topic: str, name: str, on: str = "SUB1"
    ) -> None:
        """PRICES ('Prices') hosted by both ``hosts`` and seen by PUB1 and ``on``; durable
        subscription ``name`` on ``topic`` made on ``on``, its proxy at both hosts."""
        for host in hosts:
            self.define_topic(host, "PRICES", "Prices")
        self.wait_definition("PRICES", hosts, on=["PUB1", on])
        self[on].c.create_subscription(topic, name=name)
        for host in hosts:
            self.wait_proxy(host, on, topic)

    def stop(self) -> None:
        for node in self.nodes.values():
            node.kill()


@contextmanager
def cluster_with_topics(
    base: Path, partial: Sequence[str], topics: Sequence[tuple[str, str, str]]
) -> Iterator[Cluster]:
    """FR1 and the ``partial`` repositories running, each (host, object, topic string) of
    ``topics`` defined on its host and seen by every member; every node stopped afterwards."""
    cluster = Cluster(base).start(["FR1"], partial)
    try:
        hosts: dict[str, list[str]] = {}
        for host, name, topic in topics:
            cluster.define_topic(host, name, topic)
            hosts.setdefault(name, []).append(host)
        for name, named in hosts.items():
            cluster.wait_definition(name, named)
        yield cluster
    finally:
        cluster.stop()
