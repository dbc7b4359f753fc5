"""A tiny in-memory cluster for routing tests: the pure modules wired the way a node wires them.

Proxy diffs are applied to the peers' ProxyTables at once (no latency), and a publication is
followed hop by hop with ``plan_publication`` so tests can check end-to-end outcomes: who
delivered to which local subscription, and which copies crossed which link.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from cluster.proxies import ProxyDiff, ProxyPlanner, ProxyTable
from cluster.records import ChannelStatus, ClusterTopology, Role
from cluster.repository import ClusterRepository, Cmd
from cluster.routing import DeliveryPlan, Purpose, plan_publication
from cluster.topics import TopicObject, topic_matches
from cluster.workload import WorkloadBalancer

CLUSTER = "DEMO"


@dataclass
class Node:
    name: str
    planner: ProxyPlanner
    table: ProxyTable = field(default_factory=ProxyTable)
    balancer: WorkloadBalancer = field(default_factory=WorkloadBalancer)
    subs: dict[str, str] = field(default_factory=dict)
    objects: list[TopicObject] = field(default_factory=list)
    channels: dict[str, ChannelStatus] = field(default_factory=dict)


@dataclass
class Trace:
    deliveries: Counter[tuple[str, str]] = field(default_factory=Counter)  # (node, sub) -> n
    hops: list[tuple[str, str, Purpose | None]] = field(default_factory=list)
    plans: list[tuple[str, DeliveryPlan]] = field(default_factory=list)

    def links(self) -> list[tuple[str, str]]:
        return [(a, b) for a, b, _ in self.hops]


class Net:
    def __init__(
        self, members: tuple[str, ...] = (), full_repositories: tuple[str, ...] = ("FR1", "FR2")
    ) -> None:
        """The full repositories, then ``members`` (partial repositories), all joined."""
        self.repo = ClusterRepository(CLUSTER)
        self.nodes: dict[str, Node] = {}
        for name in full_repositories:
            self.add(name, role=Role.REPOS)
        for name in members:
            self.add(name)

    def cmd(self, command: dict[str, object]) -> None:
        result = self.repo.apply(command)
        assert result.ok, result.error

    def add(self, name: str, role: Role = Role.NORMAL, **workload: int) -> None:
        self.cmd(Cmd.join_member(name, f"{name}_QMID", f"host:{name}", role, workload or None))
        topo = ClusterTopology.build(name, self.repo)
        self.nodes[name] = Node(name, ProxyPlanner(topo))
        self.refresh()

    def define(
        self, name: str, qmgr: str, topic_str: str, clroute: str = "TOPICHOST", **attrs: str
    ) -> None:
        self.cmd(Cmd.define_topic(name, qmgr, topic_str, CLUSTER, clroute, attrs))
        obj = TopicObject(name, topic_str, {**attrs, "CLUSTER": CLUSTER, "CLROUTE": clroute})
        self.nodes[qmgr].objects.append(obj)
        self.refresh()

    def alter(self, name: str, qmgr: str, **attrs: str) -> None:
        self.cmd(Cmd.alter_topic(name, qmgr, attrs))
        node = self.nodes[qmgr]
        node.objects = [o.altered(attrs) if o.name == name else o for o in node.objects]
        self.refresh()

    def delete(self, name: str, qmgr: str) -> None:
        self.cmd(Cmd.delete_topic(name, qmgr))
        node = self.nodes[qmgr]
        node.objects = [o for o in node.objects if o.name != name]
        self.refresh()

    def topology(self, name: str) -> ClusterTopology:
        return ClusterTopology.build(name, self.repo, self.nodes[name].objects)

    def refresh(self) -> None:
        for node in list(self.nodes.values()):
            self._send(node.name, node.planner.set_topology(self.topology(node.name)))

    def _send(self, origin: str, diff: ProxyDiff) -> None:
        for peer, topic in diff.remove:
            self.nodes[peer].table.remove(origin, topic)
        for peer, topic in diff.add:
            self.nodes[peer].table.add(origin, topic)

    def subscribe(self, node: str, sub_id: str, topic: str, **kw: bool) -> ProxyDiff:
        self.nodes[node].subs[sub_id] = topic
        diff = self.nodes[node].planner.subscribe(sub_id, topic, **kw)
        self._send(node, diff)
        return diff

    def unsubscribe(self, node: str, sub_id: str) -> ProxyDiff:
        del self.nodes[node].subs[sub_id]
        diff = self.nodes[node].planner.unsubscribe(sub_id)
        self._send(node, diff)
        return diff

    def proxies_at(self, node: str) -> list[tuple[str, str]]:
        return self.nodes[node].table.entries()

    def publish(self, origin: str, topic: str, scope_qmgr: bool = False) -> Trace:
        trace = Trace()
        queue: list[tuple[str, tuple[str, ...], Purpose | None]] = [(origin, (), None)]
        while queue:
            name, route, purpose = queue.pop(0)
            node = self.nodes[name]
            plan = plan_publication(
                self.topology(name),
                topic,
                node.table,
                node.balancer,
                route=route,
                received_as=purpose,
                channels=node.channels,
                scope_qmgr=scope_qmgr and not route,
            )
            trace.plans.append((name, plan))
            if plan.deliver_locally:
                for sub_id, pattern in node.subs.items():
                    if topic_matches(pattern, topic):
                        trace.deliveries[(name, sub_id)] += 1
            for peer in plan.forwards:
                trace.hops.append((name, peer, plan.purpose))
                queue.append((peer, plan.route, plan.purpose))
        return trace
