"""Delivery plan for one publication at one node (pure).

``plan_publication`` says whether node X hands a publication to its own subscriptions and to
which peers it sends one copy each (reference docs/mq-semantics.md §2, §2.4, §2.5).
Inputs: X's ``ClusterTopology``, the proxies X has received (``ProxyTable``), the route
fingerprint list the publication carries (the nodes it has passed through, origin first, X not
yet added), why a peer sent it to X (``Purpose``), the workload balancer and X's channel
states.

Rules, in order:

1. X already in the fingerprint -> drop (a loop; MQ discards and logs an error).
2. Not clustered in this cluster, or PUBSCOPE(QMGR) (resolved, or asked for by the publisher)
   -> local delivery only.
3. DIRECT: from a local application -> deliver locally and one copy straight to each peer with a
   matching proxy; arriving from a peer -> local delivery only (only the origin fans out).
4. TOPICHOST, X is not a host, local application -> deliver locally (local subscriptions are
   satisfied directly) and send one copy to exactly one host chosen by the workload algorithm,
   even when nobody subscribed anywhere; never a PUB(DISABLED) host. When every host's
   definition is PUB(DISABLED) the publication is refused (the plan rejects: MQRC_PUT_INHIBITED;
   MQ accepts a publication if at least one definition is PUB(ENABLED), rejects it only if all
   are DISABLED). Hosts usable but none chosen -> local only.
5. TOPICHOST, X is a host, local application -> X routes through itself: deliver locally and one
   copy to each peer with a matching proxy.
6. TOPICHOST, arriving from a peer *for routing* (X was chosen as the host) -> deliver locally and
   one copy to each peer with a matching proxy, never back to the origin or to any node in the
   fingerprint.
7. TOPICHOST, arriving from a peer *for delivery* (a host forwarded it because X holds a proxy
   there) -> local delivery only.
8. While X hosts the topic as PUB(DISABLED): applications on X cannot publish to it (the plan
   rejects), and X's local subscriptions do not get publications made on other queue managers
   (no local delivery). It still routes publications that reach it for routing, so in-flight
   publications drain while a host is being moved (§2.5).

One copy per peer, however many subscriptions it has: forwards are a set of peer names.

Choices where MQ leaves it open:

- Each forwarded copy says why it was sent (``Purpose.ROUTE`` to a host, ``Purpose.DELIVER`` to a
  subscriber); a host that also subscribes via another host must not route a delivery copy
  again (that would duplicate it at every other subscriber). If the purpose is unknown it is
  inferred: a copy reaching a host is a delivery copy when a current host of the branch is
  already in its fingerprint.
- A copy sent for routing that reaches a node which is no longer a host (its definition was
  deleted in flight) is delivered locally and re-routed to a current host not in the
  fingerprint, rather than lost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from cluster.proxies import ProxyTable
from cluster.records import ChannelStatus, ClRoute, ClusterTopology, TopicHost
from cluster.workload import HostCandidate, WorkloadBalancer


class Purpose(StrEnum):
    """Why a copy is sent to a peer."""

    ROUTE = "ROUTE"  # to a topic host, which fans it out
    DELIVER = "DELIVER"  # to a node with a matching proxy, for its local subscriptions


class Reason(StrEnum):
    """Which rule produced a plan (for logs, DISPLAY output and tests)."""

    LOOP = "LOOP"
    NOT_CLUSTERED = "NOT_CLUSTERED"
    SCOPE_QMGR = "SCOPE_QMGR"
    DIRECT_ORIGIN = "DIRECT_ORIGIN"
    DIRECT_RECEIVED = "DIRECT_RECEIVED"
    TO_HOST = "TO_HOST"
    NO_HOST = "NO_HOST"
    HOST_FANOUT = "HOST_FANOUT"
    DELIVERED_BY_HOST = "DELIVERED_BY_HOST"
    REROUTED = "REROUTED"
    PUB_DISABLED = "PUB_DISABLED"


@dataclass(frozen=True)
class DeliveryPlan:
    """What node X does with one publication.

    ``forwards`` are peers (sorted) that each get one copy sent for ``purpose``, carrying the
    fingerprint list ``route``, which already ends with X. ``reason`` names the rule applied.
    """

    deliver_locally: bool
    forwards: tuple[str, ...] = ()
    purpose: Purpose | None = None
    reason: Reason = Reason.NOT_CLUSTERED
    route: tuple[str, ...] = ()
    rejected: bool = False


def host_candidates(
    hosts: Sequence[TopicHost], channels: Mapping[str, ChannelStatus]
) -> list[HostCandidate]:
    """Workload candidates for ``hosts`` with this node's channel status to each (default
    INACTIVE: no channel started yet is as good as a running one)."""
    return [HostCandidate.from_host(h, channels.get(h.qmgr, ChannelStatus.INACTIVE)) for h in hosts]


def branch_candidates(
    topology: ClusterTopology,
    name: str,
    exclude: Sequence[str],
    channels: Mapping[str, ChannelStatus] | None,
) -> list[HostCandidate]:
    """Workload candidates among the hosts of clustered object ``name``, leaving out the nodes
    in ``exclude`` (the route so far, or this node)."""
    hosts = [h for h in topology.hosts.get(name, ()) if h.qmgr not in exclude]
    return host_candidates(hosts, channels or {})


def plan_publication(
    topology: ClusterTopology,
    topic: str,
    proxies: ProxyTable,
    balancer: WorkloadBalancer,
    *,
    route: Sequence[str] = (),
    received_as: Purpose | None = None,
    channels: Mapping[str, ChannelStatus] | None = None,
    scope_qmgr: bool = False,
) -> DeliveryPlan:
    """The delivery plan for a publication on ``topic`` at ``topology.local`` (rules above).

    ``route`` is empty for a publication from a local application. The balancer's state is
    updated when a host is chosen (rule 4).
    """
    me = topology.local
    fingerprint = tuple(route)
    if me in fingerprint:
        return DeliveryPlan(False, reason=Reason.LOOP, route=fingerprint)
    out_route = (*fingerprint, me)
    from_peer = bool(fingerprint)
    resolved = topology.objects.resolve(topic)
    point = topology.clustered_point(resolved)
    if point is None:
        return DeliveryPlan(True, reason=Reason.NOT_CLUSTERED, route=out_route)
    if not from_peer and (scope_qmgr or resolved["PUBSCOPE"] == "QMGR"):
        return DeliveryPlan(True, reason=Reason.SCOPE_QMGR, route=out_route)

    def fan_out(reason: Reason, deliver: bool) -> DeliveryPlan:
        peers = proxies.match(topic) - {me} - set(fingerprint)
        return DeliveryPlan(deliver, tuple(sorted(peers)), Purpose.DELIVER, reason, out_route)

    if topology.route_of(point) is ClRoute.DIRECT:
        if from_peer:
            return DeliveryPlan(True, reason=Reason.DIRECT_RECEIVED, route=out_route)
        return fan_out(Reason.DIRECT_ORIGIN, True)

    own = topology.local_host(point.name)
    if not from_peer:
        if own is None:
            if _all_hosts_disabled(topology, point.name):
                return DeliveryPlan(
                    False, reason=Reason.PUB_DISABLED, route=out_route, rejected=True
                )
            return _to_host(topology, point.name, balancer, channels, out_route, deliver=True)
        if not own.pub_enabled:
            return DeliveryPlan(False, reason=Reason.PUB_DISABLED, route=out_route, rejected=True)
        return fan_out(Reason.HOST_FANOUT, True)

    purpose = received_as or _infer_purpose(topology, point.name, fingerprint, own)
    local_ok = own is None or own.pub_enabled
    if purpose is Purpose.DELIVER:
        return DeliveryPlan(local_ok, reason=Reason.DELIVERED_BY_HOST, route=out_route)
    if own is not None:
        return fan_out(Reason.HOST_FANOUT, local_ok)
    return _to_host(
        topology, point.name, balancer, channels, out_route, deliver=True, rerouted=True
    )


def _all_hosts_disabled(topology: ClusterTopology, name: str) -> bool:
    hosts = topology.hosts.get(name, ())
    return bool(hosts) and not any(h.pub_enabled for h in hosts)


def publication_refused(topology: ClusterTopology, topic: str, *, scope_qmgr: bool = False) -> bool:
    """True when ``plan_publication`` rejects a publication on ``topic`` from an application
    on ``topology.local``: the clustered TOPICHOST object it resolves to is PUB(DISABLED) on this
    node if this node hosts it, else on every host (MQ accepts a publication if at least one
    definition is enabled). Changes no balancer state."""
    resolved = topology.objects.resolve(topic)
    point = topology.clustered_point(resolved)
    if point is None or topology.route_of(point) is ClRoute.DIRECT:
        return False
    if scope_qmgr or resolved["PUBSCOPE"] == "QMGR":
        return False
    own = topology.local_host(point.name)
    if own is not None:
        return not own.pub_enabled
    return _all_hosts_disabled(topology, point.name)


def _infer_purpose(
    topology: ClusterTopology, name: str, fingerprint: tuple[str, ...], own: TopicHost | None
) -> Purpose:
    if own is None:
        return Purpose.DELIVER
    hosts = set(topology.host_names(name))
    return Purpose.DELIVER if hosts.intersection(fingerprint) else Purpose.ROUTE


def _to_host(
    topology: ClusterTopology,
    name: str,
    balancer: WorkloadBalancer,
    channels: Mapping[str, ChannelStatus] | None,
    out_route: tuple[str, ...],
    *,
    deliver: bool,
    rerouted: bool = False,
) -> DeliveryPlan:
    chosen = balancer.choose(branch_candidates(topology, name, out_route, channels), group=name)
    if chosen is None:
        return DeliveryPlan(deliver, reason=Reason.NO_HOST, route=out_route)
    reason = Reason.REROUTED if rerouted else Reason.TO_HOST
    return DeliveryPlan(deliver, (chosen.name,), Purpose.ROUTE, reason, out_route)
