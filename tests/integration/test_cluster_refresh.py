"""REFRESH CLUSTER on real node processes (reference docs/mq-semantics.md §5): a partial
repository discards its cluster view and rebuilds it from a full repository, its proxy
subscriptions are sent again, and publications keep arriving exactly once; a full repository
refuses REPOS(YES); an unknown cluster name is refused."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from qmgr.client import MQClientError
from qmgr.client.sync import Subscription
from tests.integration.cluster_nodes import (
    Cluster,
    cluster_with_topics,
    exactly_once,
)


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster_with_topics(
        tmp_path_factory.mktemp("refresh"),
        ["HOSTB1", "PUB1", "SUB1"],
        [("HOSTB1", "ORDERS", "Orders")],
    ) as cluster:
        yield cluster


def _members(cl: Cluster, node: str) -> set[tuple[str, str]]:
    return {(r["CLUSQMGR"], r["QMTYPE"]) for r in cl[node].mqsc("DISPLAY CLUSQMGR(*) QMTYPE")}


def _proxy_count(cl: Cluster, host: str, origin: str, topic: str) -> int:
    records = cl[host].c.mqsc("DISPLAY SUB(*) SUBTYPE(PROXY)")
    return sum(1 for r in records if r.attrs["DESTQMGR"] == origin and r.attrs["TOPICSTR"] == topic)


def _exactly_once(cl: Cluster, sub: Subscription, topic: str, body: bytes) -> None:
    exactly_once(cl["PUB1"], sub, topic, body)


@pytest.mark.parametrize("repos", ["NO", "YES"])
def test_refresh_cluster_rebuilds_the_view_and_resends_proxies(cl: Cluster, repos: str) -> None:
    topic = f"Orders/Refresh/{repos}"
    sub = cl["SUB1"].c.subscribe(topic)
    try:
        cl.wait_proxy("HOSTB1", "SUB1", topic)
        _exactly_once(cl, sub, topic, b"before")
        members, topics = _members(cl, "SUB1"), cl["SUB1"].tcluster()
        assert ("FR1", "REPOS") in members and ("ORDERS", "HOSTB1") in topics

        records = cl["SUB1"].c.mqsc(f"REFRESH CLUSTER(DEMO) REPOS({repos})")
        assert records[0].code == "AMQ8441I"
        assert "no full repository" not in records[0].text

        assert _members(cl, "SUB1") == members
        assert cl["SUB1"].tcluster() == topics
        assert _proxy_count(cl, "HOSTB1", "SUB1", topic) == 1  # re-sent, still one proxy
        _exactly_once(cl, sub, topic, b"after")
    finally:
        sub.close()


def test_refresh_cluster_generic_name_and_unknown_cluster(cl: Cluster) -> None:
    records = cl["SUB1"].c.mqsc("REFRESH CLUSTER(*)")
    assert records[0].code == "AMQ8441I"
    with pytest.raises(MQClientError, match="MQRCCF_CLUSTER_NAME_ERROR"):
        cl["SUB1"].c.mqsc("REFRESH CLUSTER(OTHER)")


def test_full_repository_refuses_repos_yes_and_keeps_its_view(cl: Cluster) -> None:
    members = _members(cl, "FR1")
    with pytest.raises(MQClientError, match="MQRCCF_REPOS_NAME_CONFLICT"):
        cl["FR1"].c.mqsc("REFRESH CLUSTER(DEMO) REPOS(YES)")
    records = cl["FR1"].c.mqsc("REFRESH CLUSTER(DEMO)")
    assert records[0].code == "AMQ8441I"
    assert _members(cl, "FR1") == members
    assert ("ORDERS", "HOSTB1") in cl["FR1"].tcluster()


def test_refresh_with_no_full_repository_keeps_the_view_and_routing(cl: Cluster) -> None:
    """Last in the module: FR1 is stopped. The command is accepted and says no full repository
    answered; the node keeps its view and publications through the topic host still arrive."""
    topic = "Orders/Refresh/Alone"
    sub = cl["SUB1"].c.subscribe(topic)
    try:
        cl.wait_proxy("HOSTB1", "SUB1", topic)
        members, topics = _members(cl, "SUB1"), cl["SUB1"].tcluster()
        cl["FR1"].kill()
        records = cl["SUB1"].c.mqsc("REFRESH CLUSTER(DEMO)")
        assert records[0].code == "AMQ8441I"
        assert "no full repository" in records[0].text
        assert _members(cl, "SUB1") == members
        assert cl["SUB1"].tcluster() == topics
        assert _proxy_count(cl, "HOSTB1", "SUB1", topic) == 1
        _exactly_once(cl, sub, topic, b"alone")
    finally:
        sub.close()
