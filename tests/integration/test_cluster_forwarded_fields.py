"""A publication that crosses the cluster reaches its subscriber as its publisher's node
delivers it locally: id, body, typed properties, persistence, priority, CorrelId, reply-to queue
and expiry (the CorrelId is each subscription's), through a topic host (PUB1 -> HOST1 -> SUB1) and routed directly (PUB1 -> SUB1),
non-persistent and persistent; a subscription's selector on SUB1 chooses by those properties."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from qmgr.client import Int32, OutgoingMessage, ReceivedMessage
from qmgr.client.sync import Subscription
from qmgr.launcher.poll import wait_for
from tests.integration.cluster_nodes import Cluster

ROUTE = "qmgr.route"
SELECTOR = "region = 'eu' AND amount > 100"


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base: Path = tmp_path_factory.mktemp("cluster")
    cluster = Cluster(base).start(["FR1"], ["HOST1", "PUB1", "SUB1"])
    try:
        cluster.define_topic("HOST1", "FIELDS", "Fields")
        cluster.define_topic("FR1", "DFIELDS", "DFields", "DIRECT")
        cluster.wait_definition("FIELDS", ["HOST1"])
        cluster.wait_definition("DFIELDS", ["FR1"])
        yield cluster
    finally:
        cluster.stop()


def _publications(tag: str, persistent: bool) -> list[OutgoingMessage]:
    props: list[dict[str, object]] = [
        {"region": "eu", "amount": 150, "small": Int32(-7), "ratio": 0.25, "raw": b"\x00\xff"},
        {"region": "us", "amount": 500, "flag": True, "none": None},
        {"region": "eu", "amount": Int32(101), "text": "é,ü;\n", "big": 2**62},
        {"region": "eu", "amount": 100},
        {},
    ]
    return [
        OutgoingMessage(
            f"{tag}-{i}".encode() + bytes(range(256)),
            properties=p,  # type: ignore[arg-type]
            persistent=persistent,
            priority=i % 10,
            ttl_ms=600_000 if i % 2 else 0,
            correl_id=f"correl-{tag}-{i}".encode().ljust(24, b"\x00"),
            message_id=f"{i + 1:02d}{tag.encode().hex():>46}".replace(" ", "0")[:48].upper(),
            reply_to_queue="REPLY.Q" if i % 3 == 0 else "",
        )
        for i, p in enumerate(props)
    ]


def _receive(sub: Subscription, n: int) -> list[ReceivedMessage]:
    got: list[ReceivedMessage] = []
    while len(got) < n:
        batch = sub.receive_batch(timeout=20)
        assert batch, f"{len(got)} of {n} arrived"
        got.extend(batch)
    return got


def _as_published(m: ReceivedMessage) -> tuple[object, ...]:
    """What a copy carries of its publication (not the copy's own put time, sequence, route,
    nor its CorrelId, which is its subscription's)."""
    props = {k: v for k, v in m.properties.items() if k != ROUTE}
    return (
        m.message_id,
        m.body,
        props,
        sorted((k, type(v).__name__) for k, v in props.items()),  # Int32 stays Int32
        m.persistent,
        m.priority,
        m.reply_to_queue,
        m.topic,
        m.expiry_ms > 0,
    )


@pytest.mark.parametrize("persistent", [False, True], ids=["non-persistent", "persistent"])
@pytest.mark.parametrize(
    ("prefix", "route"), [("Fields", "PUB1,HOST1,SUB1"), ("DFields", "PUB1,SUB1")]
)
def test_a_forwarded_publication_arrives_as_delivered_on_its_publishers_node(
    cl: Cluster, prefix: str, route: str, persistent: bool
) -> None:
    tag = f"{prefix}{'P' if persistent else 'N'}"
    topic = f"{prefix}/{tag}"
    queue = f"SEL.{tag}".upper()
    sub1 = cl["SUB1"].c
    sub1.mqsc(f"DEFINE QLOCAL({queue})")
    sub1.mqsc(
        f"DEFINE SUB({queue}) TOPICSTR('{topic}') DEST({queue}) "
        f"SELECTOR('{SELECTOR.replace(chr(39), chr(39) * 2)}')"
    )
    remote = sub1.subscribe(topic)
    local = cl["PUB1"].c.subscribe(topic)
    holder = "HOST1" if prefix == "Fields" else "PUB1"
    cl.wait_proxy(holder, "SUB1", topic)
    try:
        pubs = _publications(tag, persistent)
        result = cl["PUB1"].c.publish_many([(topic, m) for m in pubs])
        assert result.accepted == len(pubs)
        # by id: the queues hand out higher priorities first, so the order depends on what
        # had arrived when the subscriber asked
        here = sorted(_receive(local, len(pubs)), key=lambda m: m.message_id)
        there = sorted(_receive(remote, len(pubs)), key=lambda m: m.message_id)
        assert [_as_published(m) for m in there] == [_as_published(m) for m in here]
        assert all(ROUTE not in m.properties for m in here)
        assert {m.properties[ROUTE] for m in there} == {route}
        assert [m.message_id for m in there] == [m.message_id for m in pubs]
        assert [m.persistent for m in there] == [persistent] * len(pubs)
        selected = wait_for(
            lambda: (
                sub1.mqsc_ok(f"DISPLAY QLOCAL({queue}) CURDEPTH")[1][0].attrs["CURDEPTH"] == "2"
                or None
            ),
            20.0,
            what="the selected publications on SUB1",
            retry=Exception,
        )
        assert selected
        chosen = [sub1.get(queue, wait_ms=1000) for _ in range(2)]
        assert sorted(m.body if m else b"" for m in chosen) == [pubs[0].body, pubs[2].body]
        assert sub1.get(queue, wait_ms=200) is None
    finally:
        remote.close()
        local.close()
        sub1.mqsc(f"DELETE SUB({queue})")
        sub1.mqsc(f"DELETE QLOCAL({queue}) PURGE")
