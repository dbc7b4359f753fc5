"""Delivery plans, memoised: a node routes the same topic strings over and over, and the plan of
a publication depends only on the topology, the proxies held, the channel states, the route it
carries and why it came, plus the workload choice when it goes to a host. Plans are kept until
any of those inputs change (``invalidate``); for publications that go to a host only the
candidate list is kept and the workload algorithm runs for each publication, so round robin and
weights work exactly as without the memo."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from cluster.proxies import ProxyTable
from cluster.records import ChannelStatus, ClusterTopology
from cluster.routing import (
    DeliveryPlan,
    Purpose,
    Reason,
    branch_candidates,
    plan_publication,
    publication_refused,
)
from cluster.workload import HostCandidate, WorkloadBalancer

_LIMIT = 50_000
# the purpose received as: None, or whether ROUTE (an enum member hashes in Python, a bool
# does not, and the key is hashed for every publication)
PlanKey = tuple[str, tuple[str, ...], bool | None, bool]


class PlanCache:
    def __init__(
        self,
        topology: Callable[[], ClusterTopology],
        table: ProxyTable,
        balancer: WorkloadBalancer,
        statuses: Callable[[], Mapping[str, ChannelStatus]],
    ) -> None:
        self._topology = topology
        self._table = table
        self._balancer = balancer
        self._statuses = statuses
        self._fixed: dict[PlanKey, DeliveryPlan] = {}
        self._to_host: dict[PlanKey, tuple[DeliveryPlan, list[HostCandidate], str]] = {}
        self._groups: dict[str, str] = {}
        self._refused: dict[tuple[str, bool], bool] = {}

    def invalidate(self) -> None:
        self._fixed.clear()
        self._to_host.clear()
        self._groups.clear()
        self._refused.clear()

    def fixed(
        self,
        topic: str,
        route: tuple[str, ...] = (),
        received_as: Purpose | None = None,
        scope_qmgr: bool = False,
    ) -> DeliveryPlan | None:
        """The plan ``plan`` has kept for these arguments when it involves no choice of host
        (so it is the same for a run of publications); None when there is none yet or the
        workload algorithm chooses a host for each publication."""
        purpose = None if received_as is None else received_as is Purpose.ROUTE
        return self._fixed.get((topic, route, purpose, scope_qmgr))

    def hosted(
        self, topic: str, scope_qmgr: bool = False
    ) -> tuple[DeliveryPlan, list[HostCandidate], str] | None:
        """For an application's publication on ``topic``: the plan ``plan`` has kept when the
        workload algorithm chooses a host for each publication (the plan of the first, the
        candidate hosts, the group whose balancer state chooses); None otherwise."""
        return self._to_host.get((topic, (), None, scope_qmgr))

    def choose(self, candidates: list[HostCandidate], group: str) -> str | None:
        """The host the workload algorithm chooses for one publication, as ``plan`` does."""
        chosen = self._balancer.choose(candidates, group)
        return None if chosen is None else chosen.name

    def refused(self, topic: str, scope_qmgr: bool) -> bool:
        """Whether ``plan`` would reject an application's publication on ``topic``
        (``publication_refused``: it depends on the topology only, and moves no balancer)."""
        key = (topic, scope_qmgr)
        refused = self._refused.get(key)
        if refused is None:
            if len(self._refused) > _LIMIT:
                self._refused.clear()
            refused = publication_refused(self._topology(), topic, scope_qmgr=scope_qmgr)
            self._refused[key] = refused
        return refused

    def group(self, topic: str) -> str:
        """The clustered topic object ``topic`` belongs to ("" if none)."""
        group = self._groups.get(topic)
        if group is None:
            topology = self._topology()
            point = topology.clustered_point(topology.objects.resolve(topic))
            group = point.name if point is not None else ""
            if len(self._groups) > _LIMIT:
                self._groups.clear()
            self._groups[topic] = group
        return group

    def plan(
        self,
        topic: str,
        route: tuple[str, ...] = (),
        received_as: Purpose | None = None,
        scope_qmgr: bool = False,
    ) -> DeliveryPlan:
        key = (
            topic,
            route,
            None if received_as is None else received_as is Purpose.ROUTE,
            scope_qmgr,
        )
        fixed = self._fixed.get(key)
        if fixed is not None:
            return fixed
        hosted = self._to_host.get(key)
        if hosted is not None:
            template, candidates, group = hosted
            chosen = self._balancer.choose(candidates, group)
            if chosen is not None:
                t = template
                return DeliveryPlan(t.deliver_locally, (chosen.name,), t.purpose, t.reason, t.route)
        topology = self._topology()
        statuses = self._statuses()
        plan = plan_publication(
            topology,
            topic,
            self._table,
            self._balancer,
            route=route,
            received_as=received_as,
            channels=statuses,
            scope_qmgr=scope_qmgr,
        )
        if len(self._fixed) + len(self._to_host) > _LIMIT:
            self.invalidate()
        if plan.reason in (Reason.TO_HOST, Reason.REROUTED):
            group = self.group(topic)
            candidates = branch_candidates(topology, group, plan.route, statuses)
            self._to_host[key] = (plan, candidates, group)
        elif plan.reason is not Reason.NO_HOST:
            self._fixed[key] = plan
        return plan
