"""Topic-host routing, proxy subscriptions, workload choice and direct routing, observed on real
node processes through DISPLAY output and message receipt (reference docs/mq-semantics.md §2-§3).

One cluster serves the module: FR1 (full repository, also hosting the DIRECT topic 'Direct'),
HOSTA1 and HOSTA2 (topic hosts of PRICES 'Prices'), HOSTB1 (topic host of ORDERS 'Orders'),
a publisher node PUB1 and subscriber nodes SUB1 and SUB2. Every test uses its own topic strings
and removes what it created."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from qmgr.client import MQClientError, OutgoingMessage
from qmgr.client.sync import Subscription
from qmgr.launcher.poll import wait_for
from tests.integration.cluster_nodes import Cluster

ROUTE = "qmgr.route"


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base: Path = tmp_path_factory.mktemp("cluster")
    cluster = Cluster(base).start(["FR1"], ["HOSTA1", "HOSTA2", "HOSTB1", "PUB1", "SUB1", "SUB2"])
    try:
        cluster.define_topic("HOSTA1", "PRICES", "Prices")
        cluster.define_topic("HOSTA2", "PRICES", "Prices")
        cluster.define_topic("HOSTB1", "ORDERS", "Orders")
        cluster.define_topic("FR1", "DIRECT", "Direct", "DIRECT")
        cluster.wait_definition("PRICES", ["HOSTA1", "HOSTA2"])
        cluster.wait_definition("ORDERS", ["HOSTB1"])
        cluster.wait_definition("DIRECT", ["FR1"])
        yield cluster
    finally:
        cluster.stop()


def receive(sub: Subscription, n: int, timeout: float = 20.0) -> list:  # type: ignore[type-arg]
    got: list = []  # type: ignore[type-arg]
    while len(got) < n:
        batch = sub.receive_batch(timeout=timeout)
        if not batch:
            break
        got.extend(batch)
    return got


def sentinel(cl: Cluster, publisher: str, topic: str, sub: Subscription) -> None:
    """Publish one marker and wait for it: everything published before it has been routed."""
    cl[publisher].c.publish(topic, b"sentinel")
    for _ in range(200):
        batch = sub.receive_batch(timeout=10)
        if any(m.body == b"sentinel" for m in batch):
            return
        assert batch, "sentinel never arrived"


def test_proxies_go_to_the_hosts_of_the_branch_only_and_are_withdrawn(cl: Cluster) -> None:
    sub = cl["SUB1"].c.subscribe("Prices/Fruit/Apples")
    cl.wait_proxy("HOSTA1", "SUB1", "Prices/Fruit/Apples")
    cl.wait_proxy("HOSTA2", "SUB1", "Prices/Fruit/Apples")
    for other in ("HOSTB1", "PUB1", "SUB2", "FR1"):
        assert ("SUB1", "Prices/Fruit/Apples") not in cl[other].proxies()
    # plain DISPLAY SUB hides proxies; SUBTYPE(ALL) shows them with the user subscriptions
    plain = cl["HOSTA1"].c.mqsc("DISPLAY SUB(*)")
    assert all(r.attrs.get("SUBTYPE") != "PROXY" for r in plain)
    every = cl["HOSTA1"].c.mqsc("DISPLAY SUB(*) SUBTYPE(ALL)")
    assert any(r.attrs.get("SUBTYPE") == "PROXY" for r in every)
    sub.close()
    cl.wait_proxy("HOSTA1", "SUB1", "Prices/Fruit/Apples", present=False)
    cl.wait_proxy("HOSTA2", "SUB1", "Prices/Fruit/Apples", present=False)


def _proxy_count(cl: Cluster, host: str, origin: str, topic: str) -> int:
    records = cl[host].c.mqsc("DISPLAY SUB(*) SUBTYPE(PROXY)")
    return sum(1 for r in records if r.attrs["DESTQMGR"] == origin and r.attrs["TOPICSTR"] == topic)


def test_one_proxy_per_topic_string_however_many_subscriptions(cl: Cluster) -> None:
    first = cl["SUB1"].c.subscribe("Prices/Fruit/Pears")
    second = cl["SUB1"].c.subscribe("Prices/Fruit/Pears")
    cl.wait_proxy("HOSTA1", "SUB1", "Prices/Fruit/Pears")
    assert _proxy_count(cl, "HOSTA1", "SUB1", "Prices/Fruit/Pears") == 1
    first.close()
    # the proxy stays while a local subscription needs it: prove it after a later change
    marker = cl["SUB1"].c.subscribe("Prices/Fruit/Marker")
    cl.wait_proxy("HOSTA1", "SUB1", "Prices/Fruit/Marker")
    assert _proxy_count(cl, "HOSTA1", "SUB1", "Prices/Fruit/Pears") == 1
    second.close()
    marker.close()
    cl.wait_proxy("HOSTA1", "SUB1", "Prices/Fruit/Pears", present=False)


def test_publication_goes_through_one_host_to_each_subscribing_node_exactly_once(
    cl: Cluster,
) -> None:
    topic = "Prices/Veg/Carrots"
    a = cl["SUB1"].c.subscribe(topic)
    b = cl["SUB1"].c.subscribe("Prices/Veg/+")  # a second subscription on the same node
    c = cl["SUB2"].c.subscribe(topic)
    for host in ("HOSTA1", "HOSTA2"):
        cl.wait_proxy(host, "SUB1", topic)
        cl.wait_proxy(host, "SUB1", "Prices/Veg/+")
        cl.wait_proxy(host, "SUB2", topic)
    n = 40
    cl["PUB1"].c.publish_many([(topic, OutgoingMessage(f"m{i}")) for i in range(n)])
    for sub in (a, b, c):
        got = receive(sub, n)
        assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in range(n))
        assert sub.receive_batch(timeout=0.3) == []  # nothing twice
    routes = Counter(str(m.properties[ROUTE]) for m in got)
    # equal CLWLWGHT: round robin, half through each host; never back to the publisher
    assert routes == {"PUB1,HOSTA1,SUB2": n // 2, "PUB1,HOSTA2,SUB2": n // 2}
    for sub in (a, b, c):
        sub.close()


def test_publication_with_no_subscribers_still_goes_to_one_host(cl: Cluster) -> None:
    def sent_to(host: str) -> int:
        return int(cl["PUB1"].chstatus().get(host, {}).get("MSGS", "0"))

    before = sent_to("HOSTB1")
    cl["PUB1"].c.publish("Orders/Nobody/Listens", b"x")
    wait_for(
        lambda: sent_to("HOSTB1") == before + 1,
        20.0,
        what="one copy acknowledged by HOSTB1",
        retry=Exception,
    )


def test_wildcard_above_every_clustered_point_sends_no_proxy_and_sees_local_only(
    cl: Cluster,
) -> None:
    everything = cl["SUB2"].c.subscribe("#")
    marker = cl["SUB2"].c.subscribe("Orders/Marker")
    cl.wait_proxy("HOSTB1", "SUB2", "Orders/Marker")
    for host in ("HOSTA1", "HOSTA2", "HOSTB1"):
        assert not {p for p in cl[host].proxies() if p == ("SUB2", "#")}
    cl["PUB1"].c.publish("Orders/Remote", b"remote")
    sentinel(cl, "PUB1", "Orders/Marker", marker)
    cl["SUB2"].c.publish("Local/Topic", b"local")
    got = receive(everything, 1, timeout=5)
    bodies = [m.body for m in got] + [m.body for m in everything.receive_batch(timeout=0.5)]
    assert b"local" in bodies and b"remote" not in bodies
    everything.close()
    marker.close()


def test_subscope_qmgr_sends_no_proxy(cl: Cluster) -> None:
    local = cl["SUB2"].c.subscribe("Orders/Scoped", scope_qmgr=True)
    marker = cl["SUB2"].c.subscribe("Orders/Scoped/Marker")
    cl.wait_proxy("HOSTB1", "SUB2", "Orders/Scoped/Marker")
    assert ("SUB2", "Orders/Scoped") not in cl["HOSTB1"].proxies()
    local.close()
    marker.close()


def test_publisher_on_the_host_delivers_locally_and_to_subscribing_nodes(cl: Cluster) -> None:
    topic = "Orders/FromHost"
    here = cl["HOSTB1"].c.subscribe(topic)
    there = cl["SUB1"].c.subscribe(topic)
    cl.wait_proxy("HOSTB1", "SUB1", topic)
    assert cl["HOSTB1"].c.publish(topic, b"h") == 1  # one local copy
    assert [m.body for m in receive(here, 1)] == [b"h"]
    got = receive(there, 1)
    assert [(m.body, m.properties[ROUTE]) for m in got] == [(b"h", "HOSTB1,SUB1")]
    here.close()
    there.close()


def test_one_host_keeps_the_order_of_one_publisher(cl: Cluster) -> None:
    topic = "Orders/Sequence"
    sub = cl["SUB1"].c.subscribe(topic)
    cl.wait_proxy("HOSTB1", "SUB1", topic)
    n = 600
    pub = cl["PUB1"].c.stream_publisher(batch_size=50)
    for i in range(n):
        pub.publish(topic, OutgoingMessage(str(i), persistent=bool(i % 2)))
    pub.close()
    got = receive(sub, n)
    assert [int(m.body) for m in got] == list(range(n))
    sub.close()


def test_direct_routing_sends_proxies_to_every_member_and_publications_straight(
    cl: Cluster,
) -> None:
    topic = "Direct/News"
    sub = cl["SUB2"].c.subscribe(topic)
    for node in ("FR1", "HOSTA1", "HOSTA2", "HOSTB1", "PUB1", "SUB1"):
        cl.wait_proxy(node, "SUB2", topic)
    cl["PUB1"].c.publish(topic, b"d")
    got = receive(sub, 1)
    assert [(m.body, m.properties[ROUTE]) for m in got] == [(b"d", "PUB1,SUB2")]
    sub.close()


def test_conflicting_clroute_is_rejected_and_changes_nothing(cl: Cluster) -> None:
    node = cl["HOSTB1"]
    with pytest.raises(MQClientError) as info:
        node.c.mqsc("DEFINE TOPIC(PRICES) TOPICSTR('Prices') CLUSTER(DEMO) CLROUTE(DIRECT)")
    assert "MQRCCF_CLUSTER_TOPIC_CONFLICT" in str(info.value)
    ok, _ = node.c.mqsc_ok("DISPLAY TOPIC(PRICES)")
    assert not ok
    assert ("PRICES", "HOSTB1") not in cl["FR1"].tcluster()


def _routes(cl: Cluster, topic: str, n: int) -> Counter[str]:
    sub = cl["SUB1"].c.subscribe(topic)
    for host in ("HOSTA1", "HOSTA2"):
        cl.wait_proxy(host, "SUB1", topic)
    cl["PUB1"].c.publish_many([(topic, OutgoingMessage(str(i))) for i in range(n)])
    got = receive(sub, n)
    sub.close()
    assert len(got) == n
    return Counter(str(m.properties[ROUTE]).split(",")[1] for m in got)


def test_pub_disabled_host_is_never_chosen(cl: Cluster) -> None:
    cl["HOSTA1"].c.mqsc("ALTER TOPIC(PRICES) PUB(DISABLED)")
    wait_for(
        lambda: any(
            r.attrs["CLUSQMGR"] == "HOSTA1" and r.attrs["PUB"] == "DISABLED"
            for r in cl["PUB1"].c.mqsc("DISPLAY TCLUSTER(PRICES)")
        ),
        20.0,
        what="PUB(DISABLED) seen on PUB1",
        retry=Exception,
    )
    try:
        assert _routes(cl, "Prices/Disabled", 10) == {"HOSTA2": 10}
    finally:
        cl["HOSTA1"].c.mqsc("ALTER TOPIC(PRICES) PUB(ENABLED)")


def _pub_seen(cl: Cluster, host: str, value: str) -> None:
    wait_for(
        lambda: any(
            r.attrs["CLUSQMGR"] == host and r.attrs["PUB"] == value
            for r in cl["PUB1"].c.mqsc("DISPLAY TCLUSTER(PRICES)")
        ),
        20.0,
        what=f"PUB({value}) of {host} seen on PUB1",
        retry=Exception,
    )


def test_publication_is_refused_when_every_host_is_pub_disabled(cl: Cluster) -> None:
    """MQ accepts a publication if at least one definition is PUB(ENABLED) and refuses it with
    MQRC_PUT_INHIBITED (2051) only if all are DISABLED."""
    local = cl["PUB1"].c.subscribe("Prices/AllDisabled")
    remote = cl["SUB1"].c.subscribe("Prices/AllDisabled")
    for host in ("HOSTA1", "HOSTA2"):
        cl.wait_proxy(host, "SUB1", "Prices/AllDisabled")
    try:
        cl["HOSTA1"].c.mqsc("ALTER TOPIC(PRICES) PUB(DISABLED)")
        _pub_seen(cl, "HOSTA1", "DISABLED")
        cl["PUB1"].c.publish("Prices/AllDisabled", b"one-enabled")  # HOSTA2 still enabled
        cl["HOSTA2"].c.mqsc("ALTER TOPIC(PRICES) PUB(DISABLED)")
        _pub_seen(cl, "HOSTA2", "DISABLED")
        with pytest.raises(MQClientError) as err:
            cl["PUB1"].c.publish("Prices/AllDisabled", b"refused")
        assert err.value.reason_name == "MQRC_PUT_INHIBITED"
        with pytest.raises(MQClientError) as err:
            cl["PUB1"].c.publish_many(
                [("Prices/AllDisabled", OutgoingMessage("batch")), ("Other", OutgoingMessage("x"))]
            )
        assert err.value.reason_name == "MQRC_PUT_INHIBITED"
        # a host refuses its own applications too
        with pytest.raises(MQClientError) as err:
            cl["HOSTA1"].c.publish("Prices/AllDisabled", b"on host")
        assert err.value.reason_name == "MQRC_PUT_INHIBITED"
        cl["HOSTA2"].c.mqsc("ALTER TOPIC(PRICES) PUB(ENABLED)")
        _pub_seen(cl, "HOSTA2", "ENABLED")
        cl["PUB1"].c.publish("Prices/AllDisabled", b"again")
        # nothing refused reached anyone; each accepted publication arrived once
        assert sorted(m.body for m in receive(remote, 2)) == [b"again", b"one-enabled"]
        assert [m.body for m in receive(local, 2)] == [b"one-enabled", b"again"]
    finally:
        local.close()
        remote.close()
        for host in ("HOSTA1", "HOSTA2"):
            cl[host].c.mqsc("ALTER TOPIC(PRICES) PUB(ENABLED)")
        for host in ("HOSTA1", "HOSTA2"):
            _pub_seen(cl, host, "ENABLED")


def test_suspended_host_is_used_only_when_all_are_suspended(cl: Cluster) -> None:
    cl["HOSTA2"].c.mqsc("SUSPEND QMGR CLUSTER(DEMO)")
    wait_for(
        lambda: cl["PUB1"].mqsc("DISPLAY CLUSQMGR(HOSTA2) SUSPEND")[0]["SUSPEND"] == "YES",
        20.0,
        what="HOSTA2 suspended as seen by PUB1",
        retry=Exception,
    )
    try:
        assert _routes(cl, "Prices/Suspended", 10) == {"HOSTA1": 10}
    finally:
        cl["HOSTA2"].c.mqsc("RESUME QMGR CLUSTER(DEMO)")
    wait_for(
        lambda: cl["PUB1"].mqsc("DISPLAY CLUSQMGR(HOSTA2) SUSPEND")[0]["SUSPEND"] == "NO",
        20.0,
        what="HOSTA2 resumed",
        retry=Exception,
    )


def test_workload_attributes_are_set_on_the_cluster_receiver_and_steer_the_choice(
    cl: Cluster,
) -> None:
    host = cl["HOSTA2"]
    host.c.mqsc("ALTER CHANNEL(DEMO.HOSTA2) CHLTYPE(CLUSRCVR) CLWLWGHT(25)")
    wait_for(
        lambda: cl["PUB1"].mqsc("DISPLAY CLUSQMGR(HOSTA2) CLWLWGHT")[0]["CLWLWGHT"] == "25",
        20.0,
        what="CLWLWGHT(25) of HOSTA2 seen by PUB1",
        retry=Exception,
    )
    try:
        # weights 50:25 -> two publications through HOSTA1 for each through HOSTA2
        assert _routes(cl, "Prices/Weighted", 30) == {"HOSTA1": 20, "HOSTA2": 10}
        host.c.mqsc("ALTER CHANNEL(DEMO.HOSTA2) CHLTYPE(CLUSRCVR) CLWLRANK(3)")
        wait_for(
            lambda: cl["PUB1"].mqsc("DISPLAY CLUSQMGR(HOSTA2) CLWLRANK")[0]["CLWLRANK"] == "3",
            20.0,
            what="CLWLRANK(3) of HOSTA2 seen by PUB1",
            retry=Exception,
        )
        assert _routes(cl, "Prices/Ranked", 10) == {"HOSTA2": 10}
    finally:
        host.c.mqsc("ALTER CHANNEL(DEMO.HOSTA2) CHLTYPE(CLUSRCVR) CLWLWGHT(50) CLWLRANK(0)")
    with pytest.raises(MQClientError):
        host.c.mqsc("ALTER CHANNEL(DEMO.HOSTA2) CHLTYPE(CLUSRCVR) CLWLWGHT(0)")


def test_display_clusqmgr_and_chstatus_columns(cl: Cluster) -> None:
    rec = cl["PUB1"].mqsc("DISPLAY CLUSQMGR(FR1) ALL")[0]
    assert rec["QMTYPE"] == "REPOS" and rec["CLUSTER"] == "DEMO"
    assert rec["CONNAME"] == cl["FR1"].address
    for key in ("CHANNEL", "QMID", "STATUS", "SUSPEND", "CLWLRANK", "CLWLPRTY", "CLWLWGHT"):
        assert key in rec
    mine = cl["PUB1"].mqsc("DISPLAY CLUSQMGR(PUB1) ALL")[0]
    assert mine["QMTYPE"] == "NORMAL" and mine["DEFTYPE"] == "CLUSRCVR"
    status = cl["PUB1"].chstatus()
    assert status["HOSTB1"]["STATUS"] == "RUNNING"
    assert status["HOSTB1"]["XMITQ"] == "SYSTEM.CLUSTER.TRANSMIT.HOSTB1"


def test_refresh_proxysub_resends_and_reset_cluster_needs_a_known_member(cl: Cluster) -> None:
    topic = "Orders/Refreshed"
    sub = cl["SUB1"].c.subscribe(topic)
    cl.wait_proxy("HOSTB1", "SUB1", topic)
    records = cl["SUB1"].c.mqsc("REFRESH QMGR TYPE(PROXYSUB)")
    assert records[0].code == "AMQ8726I"
    assert _proxy_count(cl, "HOSTB1", "SUB1", topic) == 1  # re-sent, still one proxy
    with pytest.raises(MQClientError, match="MQRCCF_UNKNOWN_Q_MGR"):
        cl["FR1"].c.mqsc("RESET CLUSTER(DEMO) ACTION(FORCEREMOVE) QMNAME(NOSUCHQM)")
    with pytest.raises(MQClientError, match="full repository"):
        cl["PUB1"].c.mqsc("RESET CLUSTER(DEMO) ACTION(FORCEREMOVE) QMNAME(SUB2)")
    assert len(cl["FR1"].mqsc("DISPLAY CLUSQMGR(*)")) == 7
    sub.close()
