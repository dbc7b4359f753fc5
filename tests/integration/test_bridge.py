"""Bridges between the MQ topic tree and a node's Service Bus namespace (DEFINE BRIDGE), driven
through real node processes, the qmgr client on the MQ side and the real azure-servicebus SDK
on the Service Bus side."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("azure.servicebus")

from azure.servicebus import (  # noqa: E402
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)
from azure.servicebus.management import SqlRuleFilter  # noqa: E402

from qmgr.client import QueueManagerClient  # noqa: E402
from qmgr.launcher.poll import wait_for
from tests.integration import test_sb_admin_http as admin_http  # noqa: E402
from tests.integration.cluster_nodes import Cluster, ClusterNode, free_ports  # noqa: E402
from tests.integration.conftest import NodeProcess  # noqa: E402
from tests.integration.sb_drain import receive_all
from tests.integration.test_sb_admin_http import _admin, _conn  # noqa: E402

sb_node = admin_http.sb_node
_quiet_insecure_warning = admin_http._quiet_insecure_warning

NodeFactory = Callable[..., NodeProcess]


def _client(node: NodeProcess) -> ServiceBusClient:
    return ServiceBusClient.from_connection_string(_conn(node))


def _mqsc(node: NodeProcess, command: str) -> tuple[bool, list[dict[str, str]], list[str]]:
    """(ok, attributes of each record, message id of each record)."""
    with QueueManagerClient(node.address, timeout=20) as c:
        ok, records = c.mqsc_ok(command)
    return ok, [dict(r.attrs) for r in records], [r.code for r in records]


def _drain(
    node: NodeProcess,
    topic: str | None,
    entity: str,
    *,
    session: str | None = None,
    dead_letters: bool = False,
    expect: int | None = None,
) -> list[object]:
    """Everything in a queue or subscription (receive-and-delete): with ``expect``, until that
    many came (the bridge may take a while on a loaded machine) and one short receive more that
    would bring a duplicate; without, until 3 s bring nothing."""
    with _client(node) as client:
        kwargs = {
            "receive_mode": ServiceBusReceiveMode.RECEIVE_AND_DELETE,
            "max_wait_time": 3,
        }
        if session is not None:
            kwargs["session_id"] = session
        if dead_letters:
            kwargs["sub_queue"] = ServiceBusSubQueue.DEAD_LETTER
        receiver = (
            client.get_subscription_receiver(topic, entity, **kwargs)  # type: ignore[arg-type]
            if topic is not None
            else client.get_queue_receiver(entity, **kwargs)  # type: ignore[arg-type]
        )
        with receiver:
            return receive_all(receiver, expect, wait=3 if expect is None else 20, batch=200)


def _props(msg: object) -> dict[str, object]:
    raw = getattr(msg, "application_properties", None) or {}
    return {
        (k.decode() if isinstance(k, bytes) else str(k)): (
            v.decode() if isinstance(v, bytes) else v
        )
        for k, v in raw.items()
    }


# -- MQ -> Service Bus ---------------------------------------------------------------------------


def test_mq_publications_reach_a_filtered_servicebus_subscription(sb_node: NodeProcess) -> None:
    admin = _admin(sb_node)
    admin.create_topic("prices")
    admin.create_subscription("prices", "eu")
    admin.delete_rule("prices", "eu", "$Default")
    admin.create_rule(
        "prices",
        "eu",
        "eu-prices",
        filter=SqlRuleFilter("Region = 'EU' AND MQTopicString LIKE 'Prices/%'"),
    )
    admin.create_subscription("prices", "bypub", requires_session=True)
    ok, _, codes = _mqsc(
        sb_node,
        "DEFINE BRIDGE(PRICES.SB) DIRECTION(TOSB) TOPICSTR('Prices/#') SBENTITY('prices') "
        "SESSPROP('LoadPublisher') DESCR('prices to Service Bus')",
    )
    assert ok and codes == ["AMQ8990I"]
    with QueueManagerClient(sb_node.address, timeout=20) as c:
        c.publish(
            "Prices/Fruit/Apples",
            b"apples-eu",
            properties={"Region": "EU", "LoadPublisher": "p1", "N": 1},
        )
        c.publish(
            "Prices/Fruit/Pears",
            b"pears-us",
            properties={"Region": "US", "LoadPublisher": "p2", "N": 2},
        )
        c.publish(
            "Prices/Veg",
            b"veg-eu",
            properties={"Region": "EU", "LoadPublisher": "p1", "N": 3},
            persistent=True,
        )
        c.publish("Other/Topic", b"not-bridged", properties={"Region": "EU"})
    eu = _drain(sb_node, "prices", "eu", expect=2)
    assert [str(m) for m in eu] == ["apples-eu", "veg-eu"]
    first = eu[0]
    assert first.subject == "Prices/Fruit/Apples"  # type: ignore[attr-defined]
    props = _props(first)
    assert props["MQTopicString"] == "Prices/Fruit/Apples"
    assert props["Region"] == "EU" and props["N"] == 1 and props["LoadPublisher"] == "p1"
    assert first.session_id == "p1"  # type: ignore[attr-defined]
    assert len(first.message_id) == 48  # type: ignore[attr-defined]  # MQ's MsgId
    p1 = _drain(sb_node, "prices", "bypub", session="p1", expect=2)
    p2 = _drain(sb_node, "prices", "bypub", session="p2", expect=1)
    assert [str(m) for m in p1] == ["apples-eu", "veg-eu"]
    assert [str(m) for m in p2] == ["pears-us"]
    ok, records, _ = _mqsc(sb_node, "DISPLAY BRIDGE(PRICES.SB) ALL")
    assert ok and records[0]["STATUS"] == "RUNNING" and records[0]["MSGS"] == "3"
    assert records[0]["SUB"] == "SYSTEM.BRIDGE.PRICES.SB" and records[0]["CURDEPTH"] == "0"
    # the MQ side is an ordinary durable subscription
    ok, subs, _ = _mqsc(sb_node, "DISPLAY SUB('SYSTEM.BRIDGE.PRICES.SB') ALL")
    assert ok and subs[0]["TOPICSTR"] == "Prices/#" and subs[0]["DURABLE"] == "YES"


def test_a_message_servicebus_refuses_goes_to_the_dead_letter_queue(sb_node: NodeProcess) -> None:
    _admin(sb_node).create_queue("small", max_message_size_in_kilobytes=1024)
    assert _mqsc(sb_node, "DEFINE BRIDGE(B) DIRECTION(TOSB) TOPICSTR('T/#') SBENTITY('small')")[0]
    with QueueManagerClient(sb_node.address, timeout=20) as c:
        c.publish("T/a", b"before", persistent=True)
        c.publish("T/b", b"x" * (2 * 1024 * 1024), persistent=True)
        c.publish("T/c", b"after", persistent=True)
        dead = wait_for(
            lambda: c.get("SYSTEM.DEAD.LETTER.QUEUE", wait_ms=500),
            20.0,
            what="dead letter",
            retry=Exception,
        )
    assert len(dead.body) == 2 * 1024 * 1024
    assert dead.properties.get("MQDLH.Reason") or dead.properties
    assert [str(m) for m in _drain(sb_node, None, "small", expect=2)] == ["before", "after"]
    ok, records, _ = _mqsc(sb_node, "DISPLAY BRIDGE(B) ALL")
    assert records[0]["DROPPED"] == "1" and "MessageSizeExceeded" in records[0]["LASTERR"]


# -- Service Bus -> MQ ---------------------------------------------------------------------------


def test_servicebus_queue_and_subscription_to_mq_subscriptions(sb_node: NodeProcess) -> None:
    admin = _admin(sb_node)
    admin.create_queue("orders")
    admin.create_topic("events")
    admin.create_subscription("events", "tomq")
    for command in (
        "DEFINE BRIDGE(ORDERS.IN) DIRECTION(FROMSB) SBENTITY('orders') TOPICSTR('FromSB/Orders')",
        "DEFINE BRIDGE(EVENTS.IN) DIRECTION(FROMSB) SBENTITY('events/Subscriptions/tomq') "
        "TOPICSTR('FromSB/Events')",
    ):
        assert _mqsc(sb_node, command)[0]
    with QueueManagerClient(sb_node.address, timeout=20) as c:
        sub = c.subscribe("FromSB/#")
        with _client(sb_node) as client:
            with client.get_queue_sender("orders") as sender:
                sender.send_messages(
                    [
                        ServiceBusMessage(
                            f"order-{i}",
                            application_properties={"Customer": "c1", "Amount": i, "bad-name": 1},
                            subject="NewOrder",
                            message_id=f"o{i}",
                            correlation_id="corr",
                        )
                        for i in range(3)
                    ]
                )
            with client.get_topic_sender("events") as sender:
                sender.send_messages(ServiceBusMessage("event-1"))
        got: list = []  # type: ignore[type-arg]
        wait_for(
            lambda: got.extend(sub.receive_batch(timeout=1)) or len(got) >= 4,
            20.0,
            what="4 publications",
            retry=Exception,
        )
        sub.close()
        by_body = {m.body: m for m in got}
        assert sorted(by_body) == [b"event-1", b"order-0", b"order-1", b"order-2"]
        order = by_body[b"order-1"]
        assert order.properties["MQTopicString"] == "FromSB/Orders"
        assert order.properties["Customer"] == "c1" and order.properties["Amount"] == 1
        assert order.properties["SbMessageId"] == "o1"
        assert order.properties["SbSubject"] == "NewOrder"
        assert order.properties["SbCorrelationId"] == "corr"
        assert "bad-name" not in order.properties
        assert by_body[b"event-1"].properties["MQTopicString"] == "FromSB/Events"
    assert admin.get_queue_runtime_properties("orders").active_message_count == 0
    ok, records, _ = _mqsc(sb_node, "DISPLAY BRIDGE(ORDERS.IN) ALL")
    assert records[0]["MSGS"] == "3" and records[0]["DROPPED"] == "3"


def test_a_session_enabled_source_keeps_the_order_within_each_session(
    sb_node: NodeProcess,
) -> None:
    _admin(sb_node).create_queue("sessions", requires_session=True)
    with _client(sb_node) as client, client.get_queue_sender("sessions") as sender:
        sender.send_messages(
            [
                ServiceBusMessage(f"{s}-{n}", session_id=s)
                for n in range(1, 151)
                for s in ("s1", "s2", "s3")
            ]
        )
    with QueueManagerClient(sb_node.address, timeout=20) as c:
        c.mqsc("DEFINE QLOCAL(SESS) MAXDEPTH(10000)")
        c.mqsc("DEFINE SUB(SESS) TOPICSTR('Sess/#') DEST(SESS)")
        c.mqsc("DEFINE BRIDGE(SESS) DIRECTION(FROMSB) SBENTITY('sessions') TOPICSTR('Sess/In')")
        wait_for(lambda: _depth(c, "SESS") >= 450, 60, what="450 messages", retry=Exception)
        got = c.get_many("SESS", 1000)
    by_session: dict[str, list[int]] = {}
    for m in got:
        session, n = m.body.decode().split("-")
        assert m.properties["SbSessionId"] == session
        by_session.setdefault(session, []).append(int(n))
    assert by_session == {s: list(range(1, 151)) for s in ("s1", "s2", "s3")}


# -- MQSC ----------------------------------------------------------------------------------------


def test_define_alter_display_delete_and_bad_input_changes_nothing(sb_node: NodeProcess) -> None:
    admin = _admin(sb_node)
    admin.create_topic("t1")
    admin.create_topic("t2")
    admin.create_queue("sess", requires_session=True)
    ok, _, codes = _mqsc(
        sb_node, "DEFINE BRIDGE(B1) DIRECTION(TOSB) TOPICSTR('A/#') SBENTITY('t1')"
    )
    assert ok and codes == ["AMQ8990I"]

    def shown() -> list[dict[str, str]]:
        return _mqsc(sb_node, "DISPLAY BRIDGE(*) ALL")[1]

    before = shown()
    bad = {
        "DEFINE BRIDGE(B1) DIRECTION(TOSB) TOPICSTR('A/#') SBENTITY('t1')": "AMQ8150E",
        "DEFINE BRIDGE(B2) DIRECTION(TOSB) TOPICSTR('A/#') SBENTITY('nosuch')": "AMQ8147E",
        "DEFINE BRIDGE(B2) DIRECTION(SIDEWAYS) TOPICSTR('A/#') SBENTITY('t1')": "AMQ8425E",
        "DEFINE BRIDGE(B2) DIRECTION(TOSB) SBENTITY('t1')": "AMQ8427E",
        "DEFINE BRIDGE(B2) DIRECTION(TOSB) TOPICSTR('A/#') SBENTITY('t1') COLOUR(RED)": "AMQ8405E",
        "DEFINE BRIDGE(B2) DIRECTION(FROMSB) TOPICSTR('A/#') SBENTITY('t1/Subscriptions/x')": (
            "AMQ8101E"
        ),
        "DEFINE BRIDGE(B2) DIRECTION(FROMSB) TOPICSTR('A/B') SBENTITY('t1')": "AMQ8101E",
        "DEFINE BRIDGE(B2) DIRECTION(FROMSB) TOPICSTR('A/B') SBENTITY('sess') SESSPROP(X)": (
            "AMQ8427E"
        ),
        "ALTER BRIDGE(B1) DIRECTION(FROMSB)": "AMQ8427E",
        "ALTER BRIDGE(B1) TOPICSTR('B/#')": "AMQ8101E",
        "ALTER BRIDGE(B1) SBENTITY('nosuch')": "AMQ8147E",
        "ALTER BRIDGE(NOPE) DESCR('x')": "AMQ8147E",
        "DELETE BRIDGE(NOPE)": "AMQ8147E",
        "DISPLAY BRIDGE(NOPE)": "AMQ8147E",
    }
    for command, code in bad.items():
        ok, _, codes = _mqsc(sb_node, command)
        assert not ok and codes[0] == code, (command, codes)
    assert shown() == before
    assert not _mqsc(sb_node, "DISPLAY SUB('SYSTEM.BRIDGE.B2')")[0]

    ok, _, codes = _mqsc(sb_node, "ALTER BRIDGE(B1) SBENTITY('t2') DESCR('moved')")
    assert ok and codes == ["AMQ8991I"]
    (b1,) = shown()
    assert (b1["SBENTITY"], b1["DESCR"], b1["TOPICSTR"]) == ("t2", "moved", "A/#")
    ok, _, codes = _mqsc(
        sb_node, "DEFINE BRIDGE(B1) DIRECTION(TOSB) TOPICSTR('A/#') SBENTITY('t1') REPLACE"
    )
    assert ok and shown()[0]["SBENTITY"] == "t1"

    # runmqsc --output json, and the summary of a generic DISPLAY
    result = sb_node.cli("runmqsc", sb_node.name, "--output", "json", input="DIS BRIDGE(*)\n")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    text = json.dumps(data)
    assert "B1" in text and "TOSB" in text and "SBENTITY" in text

    ok, _, codes = _mqsc(sb_node, "DELETE BRIDGE(B1)")
    assert ok and codes == ["AMQ8992I"]
    assert shown() == []
    assert not _mqsc(sb_node, "DISPLAY SUB('SYSTEM.BRIDGE.B1')")[0]


def test_a_node_without_a_namespace_refuses_a_bridge(node_factory: NodeFactory) -> None:
    plain = node_factory("QM2")
    ok, records, codes = _mqsc(
        plain, "DEFINE BRIDGE(B1) DIRECTION(TOSB) TOPICSTR('A/#') SBENTITY('t1')"
    )
    assert not ok and codes == ["AMQ8101E"] and records[0]["REASON"] == "MQRC_ENVIRONMENT_ERROR"
    assert _mqsc(plain, "DISPLAY BRIDGE(*)") == (True, [], [])


def test_a_missing_entity_keeps_the_messages_until_it_is_back(sb_node: NodeProcess) -> None:
    admin = _admin(sb_node)
    admin.create_queue("gone")
    assert _mqsc(sb_node, "DEFINE BRIDGE(G) DIRECTION(TOSB) TOPICSTR('G/#') SBENTITY('gone')")[0]
    admin.delete_queue("gone")
    with QueueManagerClient(sb_node.address, timeout=20) as c:
        for i in range(3):
            c.publish(f"G/{i}", f"g{i}".encode(), persistent=True)

    def retrying() -> dict[str, str] | None:
        (shown,) = _mqsc(sb_node, "DISPLAY BRIDGE(G) ALL")[1]
        return shown if shown["STATUS"] == "RETRYING" and shown["CURDEPTH"] == "3" else None

    shown = wait_for(retrying, 20.0, what="RETRYING with 3 waiting", retry=Exception)
    assert "MessagingEntityNotFound" in shown["LASTERR"]
    admin.create_queue("gone")
    assert [str(m) for m in _drain(sb_node, None, "gone", expect=3)] == ["g0", "g1", "g2"]
    (shown,) = _mqsc(sb_node, "DISPLAY BRIDGE(G) ALL")[1]
    assert shown["STATUS"] == "RUNNING" and shown["CURDEPTH"] == "0"


def test_a_publication_mq_refuses_is_retried_then_dead_lettered_by_servicebus(
    sb_node: NodeProcess,
) -> None:
    admin = _admin(sb_node)
    admin.create_queue("in", max_delivery_count=3)
    with QueueManagerClient(sb_node.address, timeout=20) as c:
        c.mqsc("DEFINE TOPIC(CLOSED) TOPICSTR('Closed') PUB(DISABLED)")
        c.mqsc("DEFINE BRIDGE(IN) DIRECTION(FROMSB) SBENTITY('in') TOPICSTR('Closed/In')")
        sub = c.subscribe("Closed/#")
        with _client(sb_node) as client, client.get_queue_sender("in") as sender:
            sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
        (shown,) = wait_for(
            lambda: [
                r for r in _mqsc(sb_node, "DISPLAY BRIDGE(IN) ALL")[1] if r["STATUS"] == "RETRYING"
            ],
            20.0,
            what="RETRYING",
            retry=Exception,
        )
        assert "MQRC_PUT_INHIBITED" in shown["LASTERR"]
        # each retry counts one failed delivery of the first message only: past
        # MaxDeliveryCount Service Bus dead-letters it, and the second waits its turn
        dead = wait_for(
            lambda: admin.get_queue_runtime_properties("in").dead_letter_message_count == 1,
            20.0,
            what="the first message dead-lettered",
            retry=Exception,
        )
        assert dead
        c.mqsc("ALTER TOPIC(CLOSED) PUB(ENABLED)")
        msg = sub.receive(timeout=20)
        assert msg is not None and msg.body == b"b"
        assert sub.receive(timeout=1) is None
        sub.close()
    (m,) = _drain(sb_node, None, "in", dead_letters=True, expect=1)
    assert str(m) == "a" and m.dead_letter_reason == "MaxDeliveryCountExceeded"  # type: ignore[attr-defined]


def test_restart_keeps_the_bridge_and_what_it_had_not_moved(sb_node: NodeProcess) -> None:
    admin = _admin(sb_node)
    admin.create_queue("q")
    assert _mqsc(sb_node, "DEFINE BRIDGE(KEEP) DIRECTION(TOSB) TOPICSTR('K/#') SBENTITY('q')")[0]
    admin.delete_queue("q")  # the bridge cannot move: the publications wait on the MQ side
    with QueueManagerClient(sb_node.address, timeout=20) as c:
        c.publish("K/1", b"before-restart", persistent=True)
        c.publish("K/2", b"lost-non-persistent", persistent=False)
    wait_for(
        lambda: _mqsc(sb_node, "DISPLAY BRIDGE(KEEP) CURDEPTH")[1][0]["CURDEPTH"] == "2",
        20.0,
        what="2 waiting",
        retry=Exception,
    )
    sb_node.stop()
    sb_node.start()
    ok, records, _ = _mqsc(sb_node, "DISPLAY BRIDGE(KEEP) ALL")
    assert ok and records[0]["TOPICSTR"] == "K/#" and records[0]["SBENTITY"] == "q"
    assert records[0]["CURDEPTH"] == "1"  # the persistent one (a non-persistent one is not kept)
    _admin(sb_node).create_queue("q")  # its Service Bus port is a new one
    with QueueManagerClient(sb_node.address, timeout=20) as c:
        c.publish("K/3", b"after-restart", persistent=True)
    assert [str(m) for m in _drain(sb_node, None, "q", expect=2)] == [
        "before-restart",
        "after-restart",
    ]


# -- kill -9 -------------------------------------------------------------------------------------


def _publish_stream(
    node: NodeProcess, total: int, acked: list[int], stop: threading.Event, root: str = "Load"
) -> None:
    """Publish LoadSeq 1..total persistently in batches; ``acked`` gets each batch's seqs once
    the node acknowledged them. Ends at the first error (the node was killed)."""
    try:
        with QueueManagerClient(node.address, timeout=10) as c:
            publisher = c.stream_publisher(batch_size=50, window=1)
            seq = 0
            while seq < total and not stop.is_set():
                batch = list(range(seq + 1, min(seq + 50, total) + 1))
                for n in batch:
                    publisher.publish(
                        f"{root}/{n % 3}",
                        f"m{n}".encode(),
                        properties={"LoadSeq": str(n), "LoadPublisher": "p"},
                        persistent=True,
                    )
                publisher.flush()
                acked.extend(batch)
                seq = batch[-1]
    except Exception:
        pass


def test_kill_9_mid_stream_loses_and_duplicates_nothing_mq_to_servicebus(
    sb_node: NodeProcess,
) -> None:
    _admin(sb_node).create_queue("load")
    assert _mqsc(
        sb_node, "DEFINE BRIDGE(LOAD) DIRECTION(TOSB) TOPICSTR('Load/#') SBENTITY('load')"
    )[0]
    acked: list[int] = []
    stop = threading.Event()
    publisher = threading.Thread(target=_publish_stream, args=(sb_node, 4000, acked, stop))
    publisher.start()
    wait_for(lambda: len(acked) >= 1500, 60, what="half the stream acknowledged", retry=Exception)
    sb_node.kill()
    stop.set()
    publisher.join(30)
    assert len(acked) < 4000, "the kill came after the stream ended"
    sb_node.start()
    got = Counter(int(_props(m)["LoadSeq"]) for m in _drain(sb_node, None, "load"))  # type: ignore[arg-type]
    assert not [n for n in acked if got[n] != 1], "an acknowledged message is lost or doubled"
    assert max(got.values()) == 1
    assert set(got) <= set(range(1, 4001))


def test_kill_9_mid_stream_loses_and_duplicates_nothing_servicebus_to_mq(
    sb_node: NodeProcess,
) -> None:
    _admin(sb_node).create_queue("inbound")
    total = 20_000  # enough that the move takes a while, so the kill lands in its middle
    with _client(sb_node) as client, client.get_queue_sender("inbound") as sender:
        for start in range(0, total, 200):
            sender.send_messages(
                [
                    ServiceBusMessage(f"s{n}", application_properties={"LoadSeq": str(n)})
                    for n in range(start + 1, start + 201)
                ]
            )
    with QueueManagerClient(sb_node.address, timeout=20) as c:
        c.mqsc("DEFINE QLOCAL(COLLECT) MAXDEPTH(100000)")
        c.mqsc("DEFINE SUB(COLLECT) TOPICSTR('In/#') DEST(COLLECT)")
        c.mqsc("DEFINE BRIDGE(IN) DIRECTION(FROMSB) SBENTITY('inbound') TOPICSTR('In/Load')")
        # no pause between looks: kill as soon as it moves
        wait_for(
            lambda: _depth(c, "COLLECT") >= 1,
            60,
            0,
            what="the bridge moving something",
            retry=Exception,
        )
    sb_node.kill()
    left, moved = _stored(sb_node, "inbound", "COLLECT")
    assert left > 0 and moved > 0, "the kill came before or after the move"
    assert left + moved == total  # what is on disk holds each message once
    sb_node.start()
    with QueueManagerClient(sb_node.address, timeout=20) as c:
        wait_for(lambda: _depth(c, "COLLECT") >= total, 60, what="the rest moved", retry=Exception)
        seqs: Counter[int] = Counter()
        while True:
            got = c.get_many("COLLECT", 500)
            if not got:
                break
            seqs.update(int(str(m.properties["LoadSeq"])) for m in got)
    assert sorted(seqs) == list(range(1, total + 1))
    assert max(seqs.values()) == 1
    assert _admin(sb_node).get_queue_runtime_properties("inbound").active_message_count == 0


def _stored(node: NodeProcess, entity: str, queue: str) -> tuple[int, int]:
    """(messages of Service Bus ``entity``, messages of MQ ``queue``) in the store of a node
    that is not running."""
    assert node.data_dir is not None
    db = sqlite3.connect(node.data_dir / "qmgr.sqlite")
    try:
        sb = db.execute("SELECT COUNT(*) FROM sb_messages WHERE entity = ?", (entity,)).fetchone()
        mq = db.execute("SELECT COUNT(*) FROM messages WHERE queue = ?", (queue,)).fetchone()
    finally:
        db.close()
    return int(sb[0]), int(mq[0])


def _depth(c: QueueManagerClient, queue: str) -> int:
    ok, records = c.mqsc_ok(f"DISPLAY QLOCAL({queue}) CURDEPTH")
    return int(records[0].attrs["CURDEPTH"]) if ok else 0


# -- across a cluster ----------------------------------------------------------------------------


@pytest.fixture
def bridged_cluster(tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path).start(["FR1"], ["HOST", "PUB"])
    try:
        cluster.define_topic("HOST", "PRICES", "Prices")
        cluster.wait_definition("PRICES", ["HOST"])
        fr = cluster["FR1"].address
        node = cluster._node(
            "SBR", free_ports(1)[0], ["--cluster", cluster.name, "--join", fr, "--servicebus"]
        )
        cluster.nodes["SBR"] = node
        node.start()
        cluster.wait_definition("PRICES", ["HOST"], on=["SBR"])
        yield cluster
    finally:
        cluster.stop()


def _bridge_prices(cl: Cluster, entity: str) -> ClusterNode:
    """Bridge Prices/# on SBR to ``entity`` (which must exist); returns SBR once the topic host
    holds its proxy subscription."""
    sbr = cl["SBR"]
    sbr.mqsc(f"DEFINE BRIDGE(PRICES) DIRECTION(TOSB) TOPICSTR('Prices/#') SBENTITY('{entity}')")
    cl.wait_proxy("HOST", "SBR", "Prices/#")
    return sbr


def test_a_bridge_in_a_cluster_gets_publications_through_the_topic_host(
    bridged_cluster: Cluster,
) -> None:
    cl = bridged_cluster
    _admin(cl["SBR"]).create_topic("prices")
    _admin(cl["SBR"]).create_subscription("prices", "all")
    sbr = _bridge_prices(cl, "prices")
    for i in range(5):
        cl["PUB"].c.publish(f"Prices/{i}", f"p{i}".encode(), persistent=True)
    got = _drain(sbr, "prices", "all", expect=5)
    assert sorted(str(m) for m in got) == [f"p{i}" for i in range(5)]
    route = _props(got[0])["qmgr.route"]
    assert route == "PUB,HOST,SBR"
    # the reverse: a Service Bus queue published into the cluster, seen on another node
    _admin(sbr).create_queue("back")
    sbr.mqsc("DEFINE BRIDGE(BACK) DIRECTION(FROMSB) SBENTITY('back') TOPICSTR('Prices/Back')")
    sub = cl["PUB"].c.subscribe("Prices/Back")
    cl.wait_proxy("HOST", "PUB", "Prices/Back")
    with _client(sbr) as client, client.get_queue_sender("back") as sender:
        sender.send_messages(ServiceBusMessage("from-sb"))
    msg = sub.receive(timeout=20)
    assert msg is not None and msg.body == b"from-sb"
    sub.close()


# -- topology files: `qmgr cluster up` with a node hosting a namespace --------------------------

CLUSTER_TOPOLOGY = """
cluster = "BRTEST"

[[node]]
name = "BRFR1"
role = "full"

[[node]]
name = "BRSB1"
servicebus = "sb/Config.json"
mqsc = '''
DEFINE BRIDGE(ORDERS.IN) DIRECTION(FROMSB) SBENTITY('orders') TOPICSTR('Orders/In')
'''
"""

SB_CONFIG = {
    "UserConfig": {
        "Namespaces": [{"Name": "sbemulatorns", "Queues": [{"Name": "orders"}], "Topics": []}],
        "Logging": {"Type": "Console"},
    }
}


def test_cluster_up_starts_a_namespace_and_records_its_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qmgr.launcher.cluster_state import read_state, state_dir
    from qmgr.launcher.launch import qmgr_command

    home = tmp_path / "home"
    monkeypatch.setenv("QMGR_HOME", str(home))
    env = dict(os.environ)
    (tmp_path / "sb").mkdir()
    (tmp_path / "sb" / "Config.json").write_text(json.dumps(SB_CONFIG))
    topology = tmp_path / "bridge.toml"
    topology.write_text(CLUSTER_TOPOLOGY)

    def qmgr(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*qmgr_command(), *args], capture_output=True, text=True, env=env, timeout=120
        )

    up = qmgr("cluster", "up", str(topology), "--timeout", "40")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        state = read_state(state_dir("BRTEST"))
        assert state is not None
        address = state.servicebus_address("BRSB1")
        assert address and address.startswith("127.0.0.1:")
        assert state.servicebus_address("BRFR1") is None
        node = state.node("BRSB1")
        with QueueManagerClient(node.address, timeout=20) as c:
            sub = c.subscribe("Orders/#")
            conn = (
                f"Endpoint=sb://{address};SharedAccessKeyName=RootManageSharedAccessKey;"
                "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"
            )
            with (
                ServiceBusClient.from_connection_string(conn) as client,
                client.get_queue_sender("orders") as sender,
            ):
                sender.send_messages(ServiceBusMessage("through-the-topology"))
            msg = sub.receive(timeout=20)
            sub.close()
        assert msg is not None and msg.body == b"through-the-topology"
        status = qmgr("cluster", "status", "--output", "json")
        assert status.returncode == 0, status.stderr
        nodes = {n["name"]: n for n in json.loads(status.stdout)["nodes"]}
        assert nodes["BRSB1"]["servicebus"] == address
        (bridge,) = nodes["BRSB1"]["bridges"]
        assert (bridge["BRIDGE"], bridge["DIRECTION"], bridge["MSGS"]) == (
            "ORDERS.IN",
            "FROMSB",
            "1",
        )
        assert nodes["BRFR1"]["bridges"] == []
        text = qmgr("cluster", "status")
        assert "ORDERS.IN" in text.stdout and address in text.stdout
        # the node is registered with its Service Bus port: qmgr sb finds it by name
        printed = qmgr("sb", "connection-string", "BRSB1")
        assert printed.returncode == 0, printed.stderr
        assert printed.stdout.strip().startswith(f"Endpoint=sb://{address};")
    finally:
        down = qmgr("cluster", "down", "--purge")
        assert down.returncode == 0, down.stdout + down.stderr


def test_kill_9_of_the_bridge_node_in_a_cluster_loses_and_duplicates_nothing(
    bridged_cluster: Cluster,
) -> None:
    cl = bridged_cluster
    _admin(cl["SBR"]).create_queue("load")
    sbr = _bridge_prices(cl, "load")
    total = 3000
    acked: list[int] = []
    stop = threading.Event()
    publisher = threading.Thread(
        target=_publish_stream, args=(cl["PUB"], total, acked, stop, "Prices")
    )
    publisher.start()
    try:
        wait_for(lambda: len(acked) >= total // 3, 60, what="a third acknowledged", retry=Exception)
        sbr.kill()
        assert len(acked) < total, "the kill came after the stream ended"
        sbr.start()
        publisher.join(120)
    finally:
        stop.set()
    assert len(acked) == total  # the publisher's node never went down
    got: Counter[int] = Counter()
    wait_for(
        lambda: (
            got.update(
                int(str(_props(m)["LoadSeq"]))
                for m in _drain(sbr, None, "load", expect=max(0, total - got.total()))
            )
            or len(got) >= total
        ),
        120,
        what="every message on the Service Bus side",
        retry=Exception,
    )
    assert sorted(got) == list(range(1, total + 1))
    assert max(got.values()) == 1
