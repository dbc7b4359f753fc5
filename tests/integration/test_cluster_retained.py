"""Retained publications across the cluster, on real node processes (IBM MQ: with topic host
routing, retained publications are held on the topic hosts; when a proxy subscription is made
there, the host sends the retained publications matching it to the subscriber's queue manager,
which keeps a copy for its later subscribers).

Cluster: FR1 (full repository), HOSTA1 (the only host of PRICES 'Prices', so every publication
is routed through it), PUB1 (publisher) and SUB1, SUB2 (subscribers). Each test uses its own
topic strings.

Ordering argument used by ``settle``: items on one channel are applied in order. A proxy for a
fresh topic string made on the subscriber's node after the subscription under test reaches the
host after that subscription's proxy; a publication made after that arrives at the host after
it too, and the host queues its copy to the subscriber behind any retained copy it sent. So when
that marker publication has arrived, any retained copy (or duplicate) has arrived before it.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import count

import pytest

from qmgr.client import MqscCommandError
from qmgr.client.sync import Subscription
from qmgr.launcher.poll import wait_for
from tests.integration.cluster_nodes import Cluster, cluster_with_topics

ROUTE = "qmgr.route"
_markers = count()


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster_with_topics(
        tmp_path_factory.mktemp("retained"),
        ["HOSTA1", "PUB1", "SUB1", "SUB2"],
        [("HOSTA1", "PRICES", "Prices")],
    ) as cluster:
        yield cluster


def retained_on(cl: Cluster, node: str, topic: str) -> bool:
    recs = cl[node].mqsc(f"DISPLAY TPSTATUS('{topic}') TYPE(TOPIC)")
    return bool(recs) and recs[0].get("RETAINED") == "YES"


def unacknowledged(cl: Cluster, node: str, peer: str) -> int:
    """Messages on ``node``'s transmission queue to ``peer`` (sent or not) not yet acknowledged."""
    for rec in cl[node].mqsc("DISPLAY CHSTATUS(*)"):
        if rec.get("CHLTYPE") == "CLUSSDR" and rec.get("RQMNAME") == peer:
            return int(rec["XQMSGSA"]) + (rec.get("INDOUBT") == "YES")
    return 0


def publish_retained(cl: Cluster, topic: str, text: str, *, persistent: bool = False) -> None:
    """Publish from PUB1 and wait until HOSTA1 has routed (and so retained) this publication."""
    with cl["HOSTA1"].c.subscribe(topic, new_publications_only=True) as watch:
        cl["PUB1"].c.publish(topic, text, retain=True, persistent=persistent)
        m = watch.receive(timeout=20)
        assert m is not None and m.text == text
    assert retained_on(cl, "HOSTA1", topic)


def settle(cl: Cluster, node: str, topic: str, subs: list[Subscription]) -> list[list[str]]:
    """Everything the host sent to ``node`` for ``subs`` so far, up to a marker publication on
    ``topic`` (see the module docstring); returns the texts each subscription got before it."""
    fresh = f"Prices/Marker/{next(_markers)}"
    with cl[node].c.subscribe(fresh):
        cl.wait_proxy("HOSTA1", node, fresh)
        cl["PUB1"].c.publish(topic, "marker")
        got: list[list[str]] = []
        for sub in subs:
            texts: list[str] = []
            while "marker" not in texts:
                batch = sub.receive_batch(timeout=20)
                assert batch, f"the marker never arrived (got {texts})"
                for m in batch:
                    texts.append(m.text)
                    if m.text != "marker":
                        assert m.properties.get("MQIsRetained") is True, m.properties
            got.append(texts[: texts.index("marker")])
            assert texts[texts.index("marker") + 1 :] == []
        return got


def test_first_subscriber_on_another_qmgr_gets_the_retained_publication_once(cl: Cluster) -> None:
    topic = "Prices/Gold"
    publish_retained(cl, topic, "gold 1")
    publish_retained(cl, topic, "gold 2")  # the host keeps the latest only
    assert not retained_on(cl, "SUB1", topic)
    with cl["SUB1"].c.subscribe(topic) as first:
        cl.wait_proxy("HOSTA1", "SUB1", topic)
        m = first.receive(timeout=20)
        assert m is not None and m.text == "gold 2"
        assert m.properties["MQIsRetained"] is True
        assert m.properties[ROUTE] == "HOSTA1,SUB1"  # sent by the topic host
        assert retained_on(cl, "SUB1", topic)  # SUB1 keeps a copy
        # a second subscriber on SUB1 (same proxy) is served from SUB1's copy
        with cl["SUB1"].c.subscribe("Prices/+") as second:
            m2 = second.receive(timeout=20)
            assert m2 is not None and m2.text == "gold 2" and m2.properties["MQIsRetained"]
            # a refresh of every proxy does not send it to them again
            cl["SUB1"].mqsc("REFRESH QMGR TYPE(PROXYSUB)")
            assert settle(cl, "SUB1", topic, [first, second]) == [[], []]


def test_new_publications_only_suppresses_the_retained_publication(cl: Cluster) -> None:
    topic = "Prices/Silver"
    publish_retained(cl, topic, "silver")
    with cl["SUB2"].c.subscribe(topic, new_publications_only=True) as sub:
        cl.wait_proxy("HOSTA1", "SUB2", topic)
        assert settle(cl, "SUB2", topic, [sub]) == [[]]
        assert retained_on(cl, "SUB2", topic)  # sent and kept there, just not given to it
        # a live publication still reaches it, without MQIsRetained
        cl["PUB1"].c.publish(topic, "silver live")
        m = sub.receive(timeout=20)
        assert m is not None and m.text == "silver live"
        assert "MQIsRetained" not in m.properties


def test_clear_on_the_host_leaves_later_subscribers_nothing(cl: Cluster) -> None:
    topic = "Prices/Copper"
    publish_retained(cl, topic, "copper")
    cl["HOSTA1"].mqsc(f"CLEAR TOPICSTR('{topic}') CLRTYPE(RETAINED)")
    assert not retained_on(cl, "HOSTA1", topic)
    # clearing again: MQ's reason, nothing changed
    with pytest.raises(MqscCommandError) as err:
        cl["HOSTA1"].mqsc(f"CLEAR TOPICSTR('{topic}') CLRTYPE(RETAINED)")
    assert "MQRC_UNKNOWN_OBJECT_NAME" in str(err.value.records[0]), err.value.records
    with cl["SUB2"].c.subscribe(topic) as sub:
        cl.wait_proxy("HOSTA1", "SUB2", topic)
        assert settle(cl, "SUB2", topic, [sub]) == [[]]
    assert not retained_on(cl, "SUB2", topic)


def test_persistent_retained_publication_survives_a_host_restart(cl: Cluster) -> None:
    topic = "Prices/Platinum"
    publish_retained(cl, topic, "platinum", persistent=True)
    host = cl["HOSTA1"]
    host.kill()
    host.start()
    assert retained_on(cl, "HOSTA1", topic)
    with cl["SUB2"].c.subscribe(topic) as sub:
        cl.wait_proxy("HOSTA1", "SUB2", topic)
        m = sub.receive(timeout=30)
        assert m is not None and m.text == "platinum" and m.properties["MQIsRetained"] is True
        assert m.persistent
        assert settle(cl, "SUB2", topic, [sub]) == [[]]


def test_a_stale_copy_is_given_first_then_the_hosts_newer_one(cl: Cluster) -> None:
    """IBM: a queue manager with no subscription gets no updates, so its copy goes stale and a
    first new subscriber may get it; here the host's newer copy follows and replaces it."""
    topic = "Prices/Tin"
    publish_retained(cl, topic, "tin 1")
    with cl["SUB1"].c.subscribe(topic) as sub:
        m = sub.receive(timeout=20)
        assert m is not None and m.text == "tin 1"
    cl.wait_proxy("HOSTA1", "SUB1", topic, present=False)
    publish_retained(cl, topic, "tin 2")
    with cl["SUB1"].c.subscribe(topic) as sub:
        cl.wait_proxy("HOSTA1", "SUB1", topic)
        assert settle(cl, "SUB1", topic, [sub]) == [["tin 1", "tin 2"]]
    with cl["SUB1"].c.subscribe(topic) as sub:  # SUB1's copy is now the host's
        m = sub.receive(timeout=20)
        assert m is not None and m.text == "tin 2"


def test_the_subscriber_qmgrs_persistent_copy_survives_its_restart(cl: Cluster) -> None:
    topic = "Prices/Nickel"
    publish_retained(cl, topic, "nickel", persistent=True)
    with cl["SUB2"].c.subscribe(topic) as sub:
        m = sub.receive(timeout=20)
        assert m is not None and m.text == "nickel"
    # SUB2 acknowledges the channel batch once its copy is committed: only then is it its own
    wait_for(
        lambda: unacknowledged(cl, "HOSTA1", "SUB2") == 0,
        20.0,
        what="HOSTA1's channel to SUB2 acknowledged",
        retry=Exception,
    )
    node = cl["SUB2"]
    node.kill()
    node.start()
    assert retained_on(cl, "SUB2", topic)
    with node.c.subscribe(topic) as sub:
        cl.wait_proxy("HOSTA1", "SUB2", topic)
        # served from SUB2's copy; the host's copy of the same publication is not given again
        assert settle(cl, "SUB2", topic, [sub]) == [["nickel"]]
