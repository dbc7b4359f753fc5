"""The scenarios of IBM's "Topic host routing in publish/subscribe clusters" (the seed), end to
end over the pure modules (tests/unit/cluster/net.py wires them like a node does)."""

from __future__ import annotations

from collections import Counter

import pytest

from cluster.records import ChannelStatus
from cluster.routing import Purpose, Reason, publication_refused

from .net import Net


def one_host() -> Net:
    net = Net(("TH", "P", "S", "Q"))
    net.define("T1", "TH", "Sport/Football")
    return net


def test_subscription_creates_proxy_only_on_the_topic_host() -> None:
    net = one_host()
    diff = net.subscribe("S", "s1", "Sport/Football/Scores")
    assert diff.add == (("TH", "Sport/Football/Scores"),)
    assert net.proxies_at("TH") == [("S", "Sport/Football/Scores")]
    for other in ("FR1", "FR2", "P", "Q"):
        assert net.proxies_at(other) == []


def test_publication_is_routed_through_the_single_host_to_the_subscriber() -> None:
    net = one_host()
    net.subscribe("S", "s1", "Sport/Football/Scores")
    trace = net.publish("P", "Sport/Football/Scores")
    assert trace.hops == [("P", "TH", Purpose.ROUTE), ("TH", "S", Purpose.DELIVER)]
    assert trace.deliveries == Counter({("S", "s1"): 1})


def test_publication_with_no_subscribers_still_goes_to_the_host() -> None:
    net = one_host()
    trace = net.publish("P", "Sport/Football/Scores")
    assert trace.hops == [("P", "TH", Purpose.ROUTE)]
    assert trace.plans[-1][1].forwards == ()
    assert not trace.deliveries


def test_subscriptions_on_the_publishing_node_are_satisfied_directly_and_not_echoed() -> None:
    net = one_host()
    net.subscribe("P", "local", "Sport/Football/#")
    net.subscribe("S", "s1", "Sport/Football/#")
    trace = net.publish("P", "Sport/Football/Scores")
    # P delivers itself; the host sends to S but never back to the origin P.
    assert trace.deliveries == Counter({("P", "local"): 1, ("S", "s1"): 1})
    assert ("TH", "P") not in trace.links()
    assert trace.links() == [("P", "TH"), ("TH", "S")]


def test_one_copy_per_node_whatever_its_subscription_count() -> None:
    net = one_host()
    for i in range(3):
        net.subscribe("S", f"s{i}", "Sport/Football/Scores")
    net.subscribe("S", "wild", "Sport/Football/+")
    trace = net.publish("P", "Sport/Football/Scores")
    assert trace.links().count(("TH", "S")) == 1
    assert sum(trace.deliveries.values()) == 4


def test_two_branches_on_two_hosts() -> None:
    net = Net(("H1", "H2", "P", "S"))
    net.define("T1", "H1", "/USA/Alabama")
    net.define("T2", "H2", "/USA/Alaska")
    net.subscribe("S", "al", "/USA/Alabama/#")
    assert net.proxies_at("H1") == [("S", "/USA/Alabama/#")]
    assert net.proxies_at("H2") == []
    mobile = net.publish("P", "/USA/Alabama/Mobile")
    juneau = net.publish("P", "/USA/Alaska/Juneau")
    assert mobile.links() == [("P", "H1"), ("H1", "S")]
    assert juneau.links() == [("P", "H2")]
    assert mobile.deliveries == Counter({("S", "al"): 1})
    assert not juneau.deliveries


def two_hosts() -> Net:
    net = Net(("H1", "H2", "P", "S1", "S2"))
    net.define("T1", "H1", "Price")
    net.define("T1", "H2", "Price")
    return net


def test_two_hosts_for_one_topic_get_proxies_and_share_publications_round_robin() -> None:
    net = two_hosts()
    net.subscribe("S1", "a", "Price/#")
    assert net.proxies_at("H1") == [("S1", "Price/#")]
    assert net.proxies_at("H2") == [("S1", "Price/#")]
    first_hops = []
    for i in range(10):
        trace = net.publish("P", f"Price/{i}")
        assert trace.deliveries == Counter({("S1", "a"): 1})
        first_hops.append(trace.hops[0][1])
    assert first_hops == ["H1", "H2"] * 5


def test_publisher_on_a_host_routes_through_itself() -> None:
    net = two_hosts()
    net.subscribe("S1", "a", "Price/#")
    for i in range(4):
        trace = net.publish("H1", f"Price/{i}")
        assert trace.links() == [("H1", "S1")]
        assert trace.deliveries == Counter({("S1", "a"): 1})


def test_subscriber_on_a_host_gets_each_publication_once_and_the_host_does_not_reroute() -> None:
    net = two_hosts()
    net.subscribe("H1", "local", "Price/#")
    net.subscribe("S2", "remote", "Price/#")
    # H1's subscription is proxied to the other host only.
    assert net.proxies_at("H2") == [("H1", "Price/#"), ("S2", "Price/#")]
    assert net.proxies_at("H1") == [("S2", "Price/#")]
    direct = 0
    for i in range(6):
        trace = net.publish("P", f"Price/{i}")
        assert trace.deliveries == Counter({("H1", "local"): 1, ("S2", "remote"): 1})
        if trace.hops[0][1] == "H1":
            direct += 1
        else:
            # routed via H2: H2 -> H1 is a delivery copy, H1 must not fan it out again.
            assert ("H2", "H1", Purpose.DELIVER) in trace.hops
            assert not [h for h in trace.hops if h[0] == "H1"]
    assert direct == 3  # only a proportion avoids the extra hop


def test_wildcard_above_all_clustered_points_gets_local_publications_only() -> None:
    net = Net(("H1", "H2", "P", "S"))
    net.define("FOOT", "H1", "Sport/Football")
    net.define("TENNIS", "H2", "Sport/Tennis")
    diff = net.subscribe("S", "all", "Sport/#")
    assert not diff
    assert not net.subscribe("S", "everything", "#")
    remote = net.publish("P", "Sport/Football/Goal")
    assert not remote.deliveries
    local = net.publish("S", "Sport/Tennis/Ace")
    assert local.deliveries == Counter({("S", "all"): 1, ("S", "everything"): 1})
    # A subscription below a clustered point brings proxies; what arrives also reaches the
    # high wildcard (WILDCARD(PASSTHRU) default).
    net.subscribe("S", "goals", "Sport/Football/Goal")
    remote = net.publish("P", "Sport/Football/Goal")
    assert remote.deliveries == Counter(
        {("S", "all"): 1, ("S", "everything"): 1, ("S", "goals"): 1}
    )


def test_direct_routing_sends_proxies_everywhere_and_publications_straight_to_subscribers() -> None:
    net = Net(("A", "B", "C", "D"))
    net.define("T1", "A", "News", clroute="DIRECT")
    net.subscribe("C", "c1", "News/#")
    net.subscribe("C", "c2", "News/World")
    assert sorted(p for p, _ in net.nodes["C"].planner.full_set()) == [
        "A", "A", "B", "B", "D", "D", "FR1", "FR1", "FR2", "FR2"
    ]  # fmt: skip
    trace = net.publish("B", "News/World")
    assert trace.links() == [("B", "C")]
    assert trace.hops[0][2] is Purpose.DELIVER
    assert trace.deliveries == Counter({("C", "c1"): 1, ("C", "c2"): 1})
    # No proxy, nothing sent.
    net.unsubscribe("C", "c1")
    net.unsubscribe("C", "c2")
    assert net.proxies_at("B") == []
    assert net.publish("B", "News/World").hops == []


def test_pub_disabled_host_is_never_chosen_and_its_local_subscribers_miss_remote_publications() -> (
    None
):
    net = two_hosts()
    net.alter("T1", "H1", PUB="DISABLED")
    net.subscribe("H1", "local", "Price/#")
    net.subscribe("S1", "a", "Price/#")
    for i in range(4):
        trace = net.publish("P", f"Price/{i}")
        assert trace.hops[0][:2] == ("P", "H2")
        assert trace.deliveries == Counter({("S1", "a"): 1})
    plan = net.publish("H1", "Price/x").plans[0][1]
    assert plan.rejected and plan.reason is Reason.PUB_DISABLED


def test_all_hosts_pub_disabled_refuses_the_publication() -> None:
    net = one_host()
    net.alter("T1", "TH", PUB="DISABLED")
    net.subscribe("P", "local", "Sport/Football/#")
    trace = net.publish("P", "Sport/Football/x")
    assert trace.hops == []
    plan = trace.plans[0][1]
    assert plan.rejected and plan.reason is Reason.PUB_DISABLED
    assert publication_refused(net.topology("P"), "Sport/Football/x")
    assert not publication_refused(net.topology("P"), "Sport/Football/x", scope_qmgr=True)


def test_one_enabled_host_is_enough_to_publish() -> None:
    net = two_hosts()
    net.alter("T1", "H1", PUB="DISABLED")
    assert not publication_refused(net.topology("P"), "Price/x")
    net.alter("T1", "H2", PUB="DISABLED")
    assert publication_refused(net.topology("P"), "Price/x")
    assert publication_refused(net.topology("H1"), "Price/x")
    assert not publication_refused(net.topology("P"), "Weather/x")


def test_failover_to_the_remaining_host_when_a_channel_fails() -> None:
    net = two_hosts()
    net.subscribe("S1", "a", "Price/#")
    net.nodes["P"].channels["H1"] = ChannelStatus.RETRYING
    for i in range(3):
        trace = net.publish("P", f"Price/{i}")
        assert trace.hops[0][1] == "H2"
        assert trace.deliveries == Counter({("S1", "a"): 1})


@pytest.mark.parametrize("via", ["attribute", "option"])
def test_pubscope_qmgr_keeps_publications_local(via: str) -> None:
    net = one_host()
    net.subscribe("P", "local", "Sport/Football/#")
    net.subscribe("S", "remote", "Sport/Football/#")
    if via == "attribute":
        net.alter("T1", "TH", PUBSCOPE="QMGR")
        # P resolves PUBSCOPE from the clustered object it sees.
    trace = net.publish("P", "Sport/Football/x", scope_qmgr=via == "option")
    assert trace.hops == []
    assert trace.deliveries == Counter({("P", "local"): 1})


def test_non_clustered_topic_stays_local() -> None:
    net = one_host()
    net.subscribe("S", "s", "Weather/#")
    assert net.proxies_at("TH") == []
    trace = net.publish("S", "Weather/Rain")
    assert trace.hops == [] and trace.deliveries == Counter({("S", "s"): 1})


def test_removing_a_host_withdraws_its_proxies_and_routes_to_the_other() -> None:
    net = two_hosts()
    net.subscribe("S1", "a", "Price/#")
    net.delete("T1", "H1")
    assert net.nodes["S1"].planner.full_set() == [("H2", "Price/#")]
    assert net.proxies_at("H1") == []
    assert [net.publish("P", "Price/x").hops[0][1] for _ in range(3)] == ["H2"] * 3


def test_adding_a_host_pub_disabled_lets_it_learn_proxies_before_it_routes() -> None:
    net = one_host()
    net.subscribe("S", "s1", "Sport/Football/#")
    net.add("TH2")
    net.define("T1", "TH2", "Sport/Football", PUB="DISABLED")
    assert net.proxies_at("TH2") == [("S", "Sport/Football/#")]
    assert {net.publish("P", "Sport/Football/x").hops[0][1] for _ in range(4)} == {"TH"}
    net.alter("T1", "TH2", PUB="ENABLED")
    firsts = [net.publish("P", "Sport/Football/x").hops[0][1] for _ in range(4)]
    assert sorted(firsts) == ["TH", "TH", "TH2", "TH2"]
