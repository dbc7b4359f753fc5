"""``plan_publication`` rule by rule (scenarios end to end are in test_routing_scenarios)."""

from __future__ import annotations

from typing import Any

from cluster.proxies import ProxyTable
from cluster.records import ClusterTopology, Role
from cluster.repository import ClusterRepository, Cmd
from cluster.routing import DeliveryPlan, Purpose, Reason, plan_publication
from cluster.topics import TopicObject
from cluster.workload import WorkloadBalancer

C = "DEMO"


def repo(route: str = "TOPICHOST", hosts: tuple[str, ...] = ("H1", "H2")) -> ClusterRepository:
    r = ClusterRepository(C)
    r.apply(Cmd.join_member("FR1", "FR1_1", "h", Role.REPOS))
    for name in ("H1", "H2", "P", "S1", "S2"):
        r.apply(Cmd.join_member(name, f"{name}_1", "h"))
    for host in hosts:
        assert r.apply(Cmd.define_topic("T1", host, "Sport", C, route)).ok
    return r


def topo(r: ClusterRepository, local: str) -> ClusterTopology:
    objs = []
    for t in r.topics():
        if t.qmgr == local:
            objs.append(TopicObject(t.name, t.topic_str, t.object_attrs()))
    return ClusterTopology.build(local, r, objs)


def table(*entries: tuple[str, str]) -> ProxyTable:
    t = ProxyTable()
    for peer, topic in entries:
        t.add(peer, topic)
    return t


def plan(
    r: ClusterRepository, local: str, proxies: ProxyTable | None = None, **kw: Any
) -> DeliveryPlan:
    return plan_publication(
        topo(r, local),
        "Sport/Goal",
        proxies or ProxyTable(),
        WorkloadBalancer(),
        **kw,
    )


def test_fingerprint_containing_this_node_is_dropped() -> None:
    p = plan(repo(), "H1", table(("S1", "Sport/#")), route=("P", "H1", "S2"))
    assert p == DeliveryPlan(False, (), None, Reason.LOOP, ("P", "H1", "S2"))


def test_host_never_sends_back_to_the_origin_or_any_node_in_the_fingerprint() -> None:
    proxies = table(("P", "Sport/#"), ("S1", "Sport/#"), ("S2", "Sport/Goal"))
    p = plan(repo(), "H1", proxies, route=("P",), received_as=Purpose.ROUTE)
    assert p.forwards == ("S1", "S2") and p.deliver_locally
    assert p.purpose is Purpose.DELIVER and p.route == ("P", "H1")
    p = plan(repo(), "H1", proxies, route=("P", "S1"), received_as=Purpose.ROUTE)
    assert p.forwards == ("S2",)


def test_non_host_sends_exactly_one_copy_to_a_host_and_delivers_locally() -> None:
    p = plan(repo(), "P")
    assert p.deliver_locally and p.purpose is Purpose.ROUTE and p.reason is Reason.TO_HOST
    assert p.forwards in (("H1",), ("H2",))


def test_copy_from_a_host_is_delivered_locally_only() -> None:
    proxies = table(("S2", "Sport/#"))
    p = plan(repo(), "S1", proxies, route=("P", "H1"), received_as=Purpose.DELIVER)
    assert p == DeliveryPlan(True, (), None, Reason.DELIVERED_BY_HOST, ("P", "H1", "S1"))
    # also when the purpose must be inferred
    p = plan(repo(), "S1", proxies, route=("P", "H1"))
    assert p.forwards == () and p.deliver_locally


def test_host_infers_purpose_from_the_fingerprint_when_not_told() -> None:
    proxies = table(("S1", "Sport/#"))
    routed = plan(repo(), "H2", proxies, route=("P",))
    assert routed.forwards == ("S1",) and routed.reason is Reason.HOST_FANOUT
    delivered = plan(repo(), "H2", proxies, route=("P", "H1"))
    assert delivered.forwards == () and delivered.reason is Reason.DELIVERED_BY_HOST


def test_routing_copy_reaching_a_former_host_is_rerouted_not_lost() -> None:
    r = repo(hosts=("H1", "H2"))
    r.apply(Cmd.delete_topic("T1", "H1"))
    p = plan(r, "H1", route=("P",), received_as=Purpose.ROUTE)
    assert p.deliver_locally and p.forwards == ("H2",) and p.reason is Reason.REROUTED
    # never to a node already in the fingerprint
    p = plan(r, "H1", route=("H2", "P"), received_as=Purpose.ROUTE)
    assert p.forwards == () and p.reason is Reason.NO_HOST


def test_direct_fans_out_from_the_origin_only() -> None:
    r = repo(route="DIRECT", hosts=("H1",))
    proxies = table(("S1", "Sport/#"), ("S2", "Sport/#"), ("H2", "News"))
    p = plan(r, "P", proxies)
    assert p.forwards == ("S1", "S2") and p.purpose is Purpose.DELIVER
    assert p.reason is Reason.DIRECT_ORIGIN and p.deliver_locally
    received = plan(r, "S1", proxies, route=("P",))
    assert received == DeliveryPlan(True, (), None, Reason.DIRECT_RECEIVED, ("P", "S1"))


def test_pub_disabled_host_routes_in_flight_copies_but_its_subscribers_miss_them() -> None:
    r = repo()
    r.apply(Cmd.alter_topic("T1", "H1", {"PUB": "DISABLED"}))
    proxies = table(("S1", "Sport/#"))
    p = plan(r, "H1", proxies, route=("P",), received_as=Purpose.ROUTE)
    assert p.forwards == ("S1",) and not p.deliver_locally
    d = plan(r, "H1", proxies, route=("P", "H2"), received_as=Purpose.DELIVER)
    assert not d.deliver_locally and d.forwards == ()
    app = plan(r, "H1", proxies)
    assert app.rejected and not app.deliver_locally and app.forwards == ()


def test_scope_qmgr_option_on_a_host_keeps_it_local() -> None:
    p = plan(repo(), "H1", table(("S1", "Sport/#")), scope_qmgr=True)
    assert p.deliver_locally and p.forwards == () and p.reason is Reason.SCOPE_QMGR


def test_not_clustered() -> None:
    p = plan_publication(topo(repo(), "P"), "Weather", ProxyTable(), WorkloadBalancer())
    assert p.deliver_locally and p.forwards == () and p.reason is Reason.NOT_CLUSTERED
