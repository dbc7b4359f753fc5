"""What `qmgr demo` waits for before publishing: the clustered topics a topology defines and
which nodes must hold a subscriber's proxy (mq-semantics: proxies go to the hosts of the
branch for TOPICHOST routing, to every member for DIRECT)."""

from __future__ import annotations

from qmgr.launcher.cluster_start import ClusteredTopic, clustered_topics, proxy_holders
from qmgr.launcher.topology import load_topology, parse_topology


def test_default_topology_defines_prices_on_two_hosts_and_orders_on_one() -> None:
    topics = clustered_topics(load_topology(None))
    assert sorted((t.name, t.topic, t.clroute, t.node) for t in topics) == [
        ("ORDERS", "Orders", "TOPICHOST", "HOSTB1"),
        ("PRICES", "Prices", "TOPICHOST", "HOSTA1"),
        ("PRICES", "Prices", "TOPICHOST", "HOSTA2"),
    ]


def test_local_topics_and_other_commands_are_not_clustered() -> None:
    topology = parse_topology(
        """
cluster = "C"
[[node]]
name = "FR1"
role = "full"
mqsc = '''
DEFINE TOPIC(LOCAL) TOPICSTR('Local')
DEFINE QLOCAL(Q1)
DEFINE TOPIC(D) TOPICSTR('Direct') CLUSTER(C)
'''
"""
    )
    assert clustered_topics(topology) == [ClusteredTopic("D", "Direct", "DIRECT", "FR1")]


TOPICS = [
    ClusteredTopic("PRICES", "Prices", "TOPICHOST", "HOSTA1"),
    ClusteredTopic("PRICES", "Prices", "TOPICHOST", "HOSTA2"),
    ClusteredTopic("FRUIT", "Prices/Fruit", "TOPICHOST", "HOSTF"),
    ClusteredTopic("ORDERS", "Orders", "TOPICHOST", "HOSTB1"),
    ClusteredTopic("DIRECT", "Direct", "DIRECT", "FR1"),
]


def test_proxies_go_to_every_host_of_the_closest_clustered_topic() -> None:
    assert proxy_holders(TOPICS, "Prices/#", "PUB1") == {"HOSTA1", "HOSTA2"}
    assert proxy_holders(TOPICS, "Prices", "PUB1") == {"HOSTA1", "HOSTA2"}
    assert proxy_holders(TOPICS, "Orders/#", "PUB1") == {"HOSTB1"}
    assert proxy_holders(TOPICS, "Prices/Fruit/+", "PUB1") == {"HOSTF"}


def test_a_level_prefix_is_not_a_parent_topic() -> None:
    # 'Pricesx/...' is not below 'Prices'
    assert proxy_holders(TOPICS, "Pricesx/#", "PUB1") == set()


def test_direct_routing_needs_the_proxy_on_the_publisher() -> None:
    assert proxy_holders(TOPICS, "Direct/a", "PUB1") == {"PUB1"}
