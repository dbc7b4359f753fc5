"""The "qmgr" Spark data source on real Spark (local[2]) against real node processes: rows
written from several partitions and read back from an MQ durable subscription with every
column, the ack log, the rate, bad options refused before anything is sent, a node killed in
the middle of a write, and Service Bus queues and topic subscriptions read through the real
azure-servicebus SDK."""

from __future__ import annotations

import json
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("azure.servicebus")

from azure.servicebus import ServiceBusClient, ServiceBusMessage  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from qmgr.client import OutgoingMessage, QueueManagerClient  # noqa: E402
from qmgr.launcher.poll import wait_for
from qmgr.spark import register  # noqa: E402
from qmgr.spark.job import _activate as activate  # noqa: E402
from tests.integration.app_security import Nodes, add_user, make_certs, nodes  # noqa: E402
from tests.integration.cluster_nodes import cluster_with_topics, free_ports  # noqa: E402
from tests.integration.conftest import NodeProcess  # noqa: E402
from tests.integration.test_sb_admin_http import _conn  # noqa: E402

NodeFactory = Callable[..., NodeProcess]
__all__ = ["nodes"]


@pytest.fixture(scope="module")
def qmgr_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where nodes started by name register: Spark's Python workers (where the options are
    checked) get QMGR_HOME from the environment the session started in."""
    return tmp_path_factory.mktemp("qmgr-home")


@pytest.fixture(scope="module")
def spark(spark_session: SparkSession, qmgr_home: Path) -> Iterator[SparkSession]:
    """The test process's shared local session (tests/conftest.py), its Python workers
    running this interpreter (they import qmgr), two shuffle partitions, and the "qmgr" source
    registered again with this module's QMGR_HOME (the source carries the driver's to the
    workers); all put back afterwards."""
    before = os.environ.get("QMGR_HOME")
    width = str(spark_session.conf.get("spark.sql.shuffle.partitions"))
    os.environ["QMGR_HOME"] = str(qmgr_home)
    spark_session.conf.set("spark.sql.shuffle.partitions", "2")
    register(spark_session)
    yield spark_session
    spark_session.conf.set("spark.sql.shuffle.partitions", width)
    if before is None:
        os.environ.pop("QMGR_HOME", None)
    else:
        os.environ["QMGR_HOME"] = before
    register(spark_session)


@pytest.fixture(scope="module")
def named_node(tmp_path_factory: pytest.TempPathFactory, qmgr_home: Path) -> Iterator[NodeProcess]:
    """QM1, registered where the Spark session's workers look up node names; the tests that
    use it share it, each on queues and subscriptions of its own."""
    node = NodeProcess("QM1", tmp_path_factory.mktemp("named"))
    node.env["QMGR_HOME"] = str(qmgr_home)
    node.start()
    yield node
    node.kill()


@pytest.fixture(scope="module")
def sb_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    """A node hosting a namespace (its Service Bus port on a free port), shared by the Service
    Bus tests, each on entities of its own."""
    node = NodeProcess("QM1", tmp_path_factory.mktemp("sb"))
    node.extra_args = ["--servicebus"]
    node.start()
    yield node
    node.kill()


def load_rows(spark: SparkSession, publishers: int, per_publisher: int, topic: str) -> DataFrame:
    """``publishers`` partitions, each one publisher P<n> with LoadSeq 1..per_publisher."""
    n = publishers * per_publisher
    pub = (F.col("id") / per_publisher).cast("int")
    seq = F.col("id") % per_publisher + 1
    return spark.range(0, n, 1, publishers).select(
        F.concat(F.lit(topic + "/P"), pub.cast("string")).alias("topic"),
        F.concat(F.lit("body-"), F.col("id").cast("string")).cast("binary").alias("body"),
        F.create_map(
            F.lit("LoadPublisher"),
            F.concat(F.lit("P"), pub.cast("string")),
            F.lit("LoadSeq"),
            seq.cast("string"),
        ).alias("properties"),
    )


def write(df: DataFrame, **options: Any) -> None:
    writer = df.write.format("qmgr").mode("append")
    for key, value in options.items():
        writer = writer.option(key, str(value))
    writer.save()


def read(spark: SparkSession, **options: Any) -> list[Any]:
    reader = spark.read.format("qmgr")
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load().collect()


def ack_log(directory: Path) -> dict[str, list[dict[str, Any]]]:
    return {
        p.name: [json.loads(line) for line in p.read_text().splitlines()]
        for p in sorted(directory.glob("ack-*.jsonl"))
    }


def by_publisher(rows: list[Any]) -> dict[str, list[int]]:
    seqs: dict[str, list[int]] = defaultdict(list)
    for r in rows:
        seqs[r.properties["LoadPublisher"]].append(int(r.properties["LoadSeq"]))
    return seqs


def by_session(rows: list[Any]) -> dict[str, list[int]]:
    seqs: dict[str, list[int]] = defaultdict(list)
    for r in rows:
        seqs[r.session_id].append(int(r.properties["LoadSeq"]))
    return seqs


# -- MQ ---------------------------------------------------------------------------------------


def test_rows_from_two_partitions_arrive_once_in_order_with_every_column(
    spark: SparkSession, tmp_path: Path
) -> None:
    with cluster_with_topics(tmp_path, ["SUB1"], [("FR1", "LOAD", "Load")]) as cl:
        cl["SUB1"].c.mqsc("DEFINE SUB(MEASURE) TOPICSTR('Load/#') DESTCLAS(MANAGED)")
        cl.wait_proxy("FR1", "SUB1", "Load/#")
        acks = tmp_path / "acks"
        write(
            load_rows(spark, 2, 600, "Load"),
            node=cl["FR1"].address,
            ack_log=acks,
            batch_size=50,
        )
        # the topic host forwards asynchronously: read once everything is on SUB1's queue
        wait_for(
            lambda: _depth(cl["SUB1"], "MEASURE") == 1200,
            20.0,
            what="1,200 messages on SUB1",
            retry=Exception,
        )
        rows = read(spark, node=cl["SUB1"].address, subscription="MEASURE", idle=1)

    assert len(rows) == 1200
    assert by_publisher(rows) == {"P0": list(range(1, 601)), "P1": list(range(1, 601))}
    first = rows[0]
    assert first.source == f"mq:{cl['SUB1'].address}/subscription/MEASURE"
    assert first.topic == f"Load/{first.properties['LoadPublisher']}"
    assert first.body == f"body-{_row_id(first)}".encode()
    for r in rows:
        assert r.route == "FR1,SUB1"
        assert r.delivery_count == 0
        assert r.enqueue_time is not None and r.receive_time is not None
        assert r.message_id and r.correlation_id
        assert r.properties["MQTopicString"] == r.topic
        assert r.session_id is None
        assert r.sequence_number is not None
    assert len({r.message_id for r in rows}) == 1200
    assert [r.sequence_number for r in rows] == sorted(r.sequence_number for r in rows)

    log = ack_log(acks)
    assert sorted(log) == ["ack-0-0.jsonl", "ack-1-0.jsonl"]
    for name, entries in log.items():
        publisher = "P" + name.split("-")[1]
        assert [e["seq"] for e in entries] == list(range(1, 601))
        for e in entries:
            assert set(e) == {"publisher", "seq", "topic", "ack_ns", "sent_ns"}
            assert e["publisher"] == publisher and e["topic"] == f"Load/{publisher}"
            assert isinstance(e["ack_ns"], int) and e["ack_ns"] >= e["sent_ns"] > 0
        # acknowledged a batch at a time: at most batch_size messages share one acknowledgement
        per_ack = defaultdict(int)
        for e in entries:
            per_ack[e["ack_ns"]] += 1
        assert max(per_ack.values()) <= 50


def _row_id(row: Any) -> int:
    return (int(row.properties["LoadPublisher"][1:])) * 600 + int(row.properties["LoadSeq"]) - 1


def _depth(node: Any, sub: str) -> int:
    dest = node.mqsc(f"DISPLAY SUB({sub}) DEST")[0]["DEST"]
    return int(node.mqsc(f"DISPLAY QLOCAL('{dest}') CURDEPTH")[0]["CURDEPTH"])


def _subscribe(node: NodeProcess, name: str, topic: str) -> None:
    with node.client() as qm:
        qm.mqsc(f"DEFINE SUB({name}) TOPICSTR('{topic}') DESTCLAS(MANAGED)")


def _sub_depth(node: NodeProcess, name: str) -> int:
    with node.client() as qm:
        dest = qm.mqsc(f"DISPLAY SUB({name}) DEST")[0]["DEST"]
        return int(qm.mqsc(f"DISPLAY QLOCAL('{dest}') CURDEPTH")[0]["CURDEPTH"])


def test_rate_paces_each_partition_in_small_batches(
    spark: SparkSession, named_node: NodeProcess, tmp_path: Path
) -> None:
    _subscribe(named_node, "PACED", "Paced/#")
    acks = tmp_path / "acks"
    rate = 200  # per partition: a batch holds at most 10 ms of messages, so 2
    write(load_rows(spark, 2, 200, "Paced"), node="QM1", rate=rate, ack_log=acks)
    log = ack_log(acks)
    assert sum(len(entries) for entries in log.values()) == 400
    for entries in log.values():
        per_ack: dict[int, int] = defaultdict(int)
        for e in entries:
            per_ack[e["ack_ns"]] += 1
        assert max(per_ack.values()) <= 2
        # no message left before its time: the i-th is sent i / rate seconds after the first
        first = entries[0]["sent_ns"]
        for i, e in enumerate(entries):
            assert e["sent_ns"] - first >= i * 1_000_000_000 // rate - 1_000_000
    rows = read(spark, node="QM1", subscription="PACED", idle=1)
    assert by_publisher(rows) == {"P0": list(range(1, 201)), "P1": list(range(1, 201))}
    assert {r.source for r in rows} == {"mq:QM1/subscription/PACED"}


def test_queues_listed_in_one_read_are_one_partition_each_drained_in_order(
    spark: SparkSession, named_node: NodeProcess
) -> None:
    with named_node.client() as qm:
        for q in ("APP.A", "APP.B"):
            qm.mqsc(f"DEFINE QLOCAL({q})")
            for i in range(1, 301):
                qm.put(q, f"{q}-{i}".encode(), properties={"LoadSeq": str(i)}, persistent=True)
    df = spark.read.format("qmgr").option("node", "QM1").option("queue", "APP.A, APP.B")
    df = df.option("idle", "1").load()
    assert df.rdd.getNumPartitions() == 2
    rows = df.collect()
    for q in ("APP.A", "APP.B"):
        got = [r for r in rows if r.source == f"mq:QM1/queue/{q}"]
        assert [r.body for r in got] == [f"{q}-{i}".encode() for i in range(1, 301)]
        assert all(r.topic is None and r.route is None for r in got)
    # a second read finds the queues drained; max_messages takes only the first ones
    with named_node.client() as qm:
        for i in range(1, 6):
            qm.put("APP.A", f"again-{i}".encode())
    again = read(spark, node="QM1", queue="APP.A", idle=1, max_messages=3)
    assert [r.body for r in again] == [b"again-1", b"again-2", b"again-3"]
    rest = read(spark, node="QM1", queue="APP.A,APP.B", idle=1)
    assert [r.body for r in rest] == [b"again-4", b"again-5"]


def test_read_stream_takes_a_subscription_continuously(
    spark: SparkSession, shared_node: NodeProcess
) -> None:
    node = shared_node  # the module's node: these tests leave it running
    _subscribe(node, "LIVE", "Live/#")
    stream = (
        spark.readStream.format("qmgr")
        .option("node", node.address)
        .option("subscription", "LIVE")
        .option("idle", "0.5")
        .load()
    )
    query = stream.writeStream.format("memory").queryName("live").start()
    try:
        with node.client() as qm:
            for i in range(1, 501):
                qm.publish("Live/a", f"m{i}".encode(), properties={"LoadSeq": str(i)})
            query.processAllAvailable()
            assert spark.sql("SELECT count(*) AS n FROM live").collect()[0].n == 500
            for i in range(501, 701):
                qm.publish("Live/b", f"m{i}".encode(), properties={"LoadSeq": str(i)})
            query.processAllAvailable()
        rows = spark.sql("SELECT * FROM live").collect()
    finally:
        query.stop()
    assert sorted(int(r.properties["LoadSeq"]) for r in rows) == list(range(1, 701))
    assert {r.topic for r in rows} == {"Live/a", "Live/b"}
    assert {r.source for r in rows} == {f"mq:{node.address}/subscription/LIVE"}
    # one Service Bus entity or several queues cannot be streamed
    _refused(
        lambda: (
            spark.readStream.format("qmgr")
            .option("servicebus", "127.0.0.1:1")
            .option("queue", "q")
            .load()
            .writeStream.format("memory")
            .queryName("never")
            .start()
            .processAllAvailable()
        ),
        "readStream takes one MQ subscription or queue",
    )


def test_tls_and_connection_authentication(
    spark: SparkSession, tmp_path: Path, nodes: Nodes
) -> None:
    certs = make_certs(tmp_path / "certs")
    users = tmp_path / "users.json"
    add_user(users, "admin", "admin-Pa55", "mqm")
    add_user(users, "app", "app-Pa55")
    node = nodes.start("QM1", *certs.node_args(), "--auth", str(users))
    tls = {"tls_ca": certs.ca}
    with QueueManagerClient(
        node.address, timeout=20, tls_ca=certs.ca, user="admin", password="admin-Pa55"
    ) as qm:
        qm.mqsc("DEFINE SUB(SECURE) TOPICSTR('Secure/#') DESTCLAS(MANAGED)")
    rows = load_rows(spark, 2, 50, "Secure")
    _refused(
        lambda: write(rows, node=node.address, user="app", password="wrong", **tls),
        f"node {node.address} ({node.address}) refused: MQRC_NOT_AUTHORIZED",
    )
    write(rows, node=node.address, user="app", password="app-Pa55", **tls)
    got = read(
        spark,
        node=node.address,
        subscription="SECURE",
        idle=1,
        user="admin",
        password="admin-Pa55",
        **tls,
    )
    assert by_publisher(got) == {"P0": list(range(1, 51)), "P1": list(range(1, 51))}


def _refused(call: Callable[[], object], text: str) -> None:
    with pytest.raises(Exception) as info:
        call()
    assert text in str(info.value), str(info.value)[:2000]


def _all_refused(spark: SparkSession, calls: list[tuple[Callable[[], object], str]]) -> None:
    """Each call refused with its text, four at a time: each check waits on a Python worker
    Spark starts for it (an unanswered connection on its time-out), not on the other checks."""

    def one(call: Callable[[], object], text: str) -> None:
        activate(spark)  # this thread's JVM side finds the session and its "qmgr" source
        _refused(call, text)

    with ThreadPoolExecutor(4) as pool:
        for done in [pool.submit(one, call, text) for call, text in calls]:
            done.result()


def test_bad_options_are_refused_before_anything_is_sent(
    spark: SparkSession, shared_node: NodeProcess
) -> None:
    node = shared_node  # the module's node: these tests leave it running
    _subscribe(node, "NOTHING", "Bad/#")
    rows = load_rows(spark, 2, 10, "Bad")
    addr = node.address
    closed = f"127.0.0.1:{free_ports(1)[0]}"
    cases: list[tuple[DataFrame, dict[str, Any], str]] = [
        (rows, {"node": closed}, f"node {closed} ({closed}) does not answer"),  # the longest
        (rows, {"node": "NOPE"}, "unknown node 'NOPE'"),
        (rows, {}, "option node is required"),
        (rows.drop("topic"), {"node": addr}, "no topic column and there is no topic option"),
        (rows, {"node": addr, "rate": "fast"}, "option rate must be a number >= 0, got 'fast'"),
        (rows, {"node": addr, "rate": -5}, "option rate must be a number >= 0, got '-5'"),
        (rows, {"node": addr, "batch_size": 0}, "option batch_size must be an integer >= 1"),
        (rows, {"node": addr, "persistent": "maybe"}, "option persistent must be true or false"),
        (rows, {"node": addr, "rtae": 10}, "unknown option(s) rtae"),
        (rows.drop("body"), {"node": addr}, "the DataFrame needs a body column"),
        (
            rows.withColumn("properties", F.create_map(F.lit("n"), F.lit(1))),
            {"node": addr},
            "column properties is map<string,int>, it must be map<string,string>",
        ),
        (
            rows.withColumn("body", F.lit(1)),
            {"node": addr},
            "column body is int, it must be binary or string",
        ),
        (  # checked row by row: the first row already fails
            rows.withColumn("topic", F.lit(None).cast("string")),
            {"node": addr},
            "has no topic and there is no topic option",
        ),
        (
            rows.withColumn("body", F.lit(None).cast("binary")),
            {"node": addr, "topic": "Bad/x"},
            "has no body",
        ),
    ]
    calls: list[tuple[Callable[[], object], str]] = [
        (lambda df=df, options=options: write(df, **options), text) for df, options, text in cases
    ]
    calls.append(
        (
            lambda: rows.write.format("qmgr").mode("overwrite").option("node", addr).save(),
            "messages can only be appended",
        )
    )
    reads: list[tuple[dict[str, Any], str]] = [
        ({"subscription": "NOTHING"}, "exactly one of option node (MQ) or servicebus"),
        ({"node": addr, "subscription": "NOPE"}, f"no subscription NOPE on node {addr}"),
        ({"node": addr, "queue": "NO.SUCH.Q"}, f"no queue NO.SUCH.Q on node {addr}"),
        ({"node": addr}, "either option subscription or option queue"),
        ({"node": addr, "subscription": "NOTHING", "idle": 0}, "option idle must be a number > 0"),
        ({"node": addr, "subscription": "NOTHING", "sessions": "all"}, "Service Bus reads only"),
        ({"servicebus": "127.0.0.1:1", "queue": "q", "sessions": "some"}, "option sessions"),
        (
            {"servicebus": "127.0.0.1:1", "topic": "t"},
            "needs option queue, or topic + subscription",
        ),
        ({"servicebus": "nowhere", "queue": "q"}, "connection string or HOST:PORT"),
    ]
    calls += [(lambda options=options: read(spark, **options), text) for options, text in reads]
    _all_refused(spark, calls)
    assert _sub_depth(node, "NOTHING") == 0


def test_a_node_killed_mid_write_fails_the_job_and_every_acknowledged_message_was_delivered(
    spark: SparkSession, node: NodeProcess, tmp_path: Path
) -> None:
    _subscribe(node, "KILLED", "Kill/#")
    acks = tmp_path / "acks"

    def acknowledged_on_both() -> bool:
        log = ack_log(acks)
        return len(log) == 2 and all(len(entries) >= 100 for entries in log.values())

    def kill_when_both_have_acknowledgements() -> None:
        wait_for(
            acknowledged_on_both,
            120,
            what="messages acknowledged on both partitions",
            retry=Exception,
        )
        node.kill()

    killer = threading.Thread(target=kill_when_both_have_acknowledgements, daemon=True)
    killer.start()
    with pytest.raises(Exception) as info:  # the write, on this thread (the Spark session's)
        write(load_rows(spark, 2, 4000, "Kill"), node=node.address, rate=500, ack_log=acks)
    killer.join(10)
    message = str(info.value)
    assert "publishing to node" in message and "acknowledged" in message, message[:3000]
    assert "MQRC_CONNECTION_BROKEN" in message or "MQRC_Q_MGR_NOT_AVAILABLE" in message

    acked = {(e["publisher"], e["seq"]) for entries in ack_log(acks).values() for e in entries}
    assert 200 <= len(acked) < 8000
    node.start()  # the same data directory: persistent messages survived kill -9
    rows = read(spark, node=node.address, subscription="KILLED", idle=1)
    received = [(r.properties["LoadPublisher"], int(r.properties["LoadSeq"])) for r in rows]
    assert len(received) == len(set(received))  # nothing twice
    assert acked <= set(received)  # nothing acknowledged was lost
    for seqs in by_publisher(rows).values():  # and what arrived is a prefix, in order
        assert seqs == list(range(1, len(seqs) + 1))


def test_a_node_killed_mid_read_fails_the_read_and_leaves_what_was_not_acknowledged(
    spark: SparkSession, node: NodeProcess
) -> None:
    n = 20_000
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(DRAIN.Q) MAXDEPTH(50000)")
        for first in range(1, n + 1, 500):
            batch = [
                OutgoingMessage(b"x" * 200, {"LoadSeq": str(i)}, persistent=True)
                for i in range(first, first + 500)
            ]
            qm.put_many("DRAIN.Q", batch)

    def depth() -> int:
        with node.client() as qm:
            return int(qm.mqsc("DISPLAY QSTATUS(DRAIN.Q) CURDEPTH")[0]["CURDEPTH"])

    def kill_once_the_read_has_begun() -> None:
        wait_for(lambda: depth() < n, 120, what="the read to take messages", retry=Exception)
        time.sleep(0.3)  # let it hand some batches to Spark (where the kill lands is not checked)
        node.kill()

    killer = threading.Thread(target=kill_once_the_read_has_begun, daemon=True)
    killer.start()
    # idle 5 s: the reader is still draining (or waiting for more) when the node goes
    with pytest.raises(Exception) as info:
        read(spark, node=node.address, queue="DRAIN.Q", idle=5, batch_size=50)
    killer.join(10)
    message = str(info.value)
    source = f"mq:{node.address}/queue/DRAIN.Q"
    assert f"qmgr data source: reading {source} failed" in message, message[:3000]
    assert "MQRC_CONNECTION_BROKEN" in message
    node.start()
    rest = read(spark, node=node.address, queue="DRAIN.Q", idle=1)
    seqs = [int(r.properties["LoadSeq"]) for r in rest]
    # what the failed read had not acknowledged is back, in order, up to the last message
    assert seqs == list(range(n - len(seqs) + 1, n + 1))


# -- Service Bus ------------------------------------------------------------------------------


def _send(node: NodeProcess, entity: str, messages: list[ServiceBusMessage]) -> None:
    with (
        ServiceBusClient.from_connection_string(_conn(node)) as client,
        client.get_queue_sender(entity) as sender,  # a topic's sender is the same link
    ):
        sender.send_messages(messages)


def _topic_with(
    node: NodeProcess,
    topic: str,
    subscription: str,
    properties: dict[str, Any],
    msgs: list[ServiceBusMessage],
) -> Any:
    """Topic ``topic`` with one subscription, ``msgs`` sent to it; the namespace's admin."""
    sb = node.client().servicebus
    sb.create_topic(topic)
    sb.create_subscription(topic, subscription, properties)
    _send(node, topic, msgs)
    return sb


def _message(i: int, session: str | None = None) -> ServiceBusMessage:
    return ServiceBusMessage(
        f"m{i}",
        application_properties={"LoadSeq": str(i), "MQTopicString": f"Prices/{i % 3}", "n": i},
        subject="ignored-when-MQTopicString-is-there",
        session_id=session,
        correlation_id=f"c{i}",
    )


def test_service_bus_queue_drained_peek_lock_with_every_column(
    spark: SparkSession, sb_node: NodeProcess
) -> None:
    sb = sb_node.client().servicebus
    sb.create_queue("orders")
    _send(sb_node, "orders", [_message(i) for i in range(1, 51)])
    rows = read(spark, servicebus=sb_node.sb_address, queue="orders", idle=1)
    assert [int(r.properties["LoadSeq"]) for r in rows] == list(range(1, 51))
    first = rows[0]
    assert first.source == "sb:orders"
    assert first.body == b"m1"
    assert first.topic == "Prices/1"
    assert first.properties["n"] == "1"
    assert first.correlation_id == "c1"
    assert first.message_id
    assert first.enqueue_time is not None and first.receive_time is not None
    assert first.delivery_count == 0 and first.session_id is None and first.route is None
    assert [r.sequence_number for r in rows] == list(range(1, 51))
    assert sb.get_queue("orders").counts.active == 0  # completed
    # read again: nothing left
    assert read(spark, servicebus=_conn(sb_node), queue="orders", idle=0.5) == []
    _refused(
        lambda: read(spark, servicebus=sb_node.sb_address, queue="nope", idle=0.5),
        "qmgr data source: reading sb:nope failed: MessagingEntityNotFoundError",
    )


def test_service_bus_subscription_receive_and_delete_up_to_max_messages(
    spark: SparkSession, sb_node: NodeProcess
) -> None:
    msgs = [ServiceBusMessage(f"p{i}", subject=f"Prices/{i}") for i in range(30)]
    sb = _topic_with(sb_node, "prices", "all", {}, msgs)
    rows = read(
        spark,
        servicebus=sb_node.sb_address,
        topic="prices",
        subscription="all",
        receive_mode="receive_and_delete",
        max_messages=10,
        idle=1,
        source="prices-all",
    )
    assert [r.body for r in rows] == [f"p{i}".encode() for i in range(10)]
    assert [r.topic for r in rows] == [f"Prices/{i}" for i in range(10)]  # the subject
    assert {r.source for r in rows} == {"prices-all"}
    assert sb.get_subscription("prices", "all").counts.active == 20


def test_service_bus_sessions_all_drains_every_session_in_order(
    spark: SparkSession, sb_node: NodeProcess
) -> None:
    sb = sb_node.client().servicebus
    sb.create_queue("sessions", {"RequiresSession": True})
    msgs = [_message(i, f"s{i % 3}") for i in range(1, 31)]
    _send(sb_node, "sessions", msgs)
    rows = read(spark, servicebus=sb_node.sb_address, queue="sessions", sessions="all", idle=1)
    assert len(rows) == 30
    per_session = by_session(rows)
    # each session in its own order (sessions are read several at once, so their rows may
    # interleave; within one, never out of order)
    assert per_session == {f"s{k}": [i for i in range(1, 31) if i % 3 == k] for k in range(3)}
    assert sb.get_queue("sessions").counts.active == 0


def test_service_bus_sessions_sequenced_restores_the_order_of_load_seq(
    spark: SparkSession, sb_node: NodeProcess
) -> None:
    sent_order = [3, 1, 2, 6, 4, 5, 9, 10, 7, 8]  # each session's LoadSeq as sent: disordered
    msgs = [_message(i, f"pub{k}") for i in sent_order for k in (1, 2)]
    sb = _topic_with(sb_node, "prices-sequenced", "ordered", {"RequiresSession": True}, msgs)
    rows = read(
        spark,
        servicebus=sb_node.sb_address,
        topic="prices-sequenced",
        subscription="ordered",
        sessions="sequenced",
        idle=1,
    )
    per_session = by_session(rows)
    assert per_session == {"pub1": list(range(1, 11)), "pub2": list(range(1, 11))}
    assert sb.get_subscription("prices-sequenced", "ordered").counts.active == 0
    # the same options with max_messages are refused: a sequenced drain takes every session
    _refused(
        lambda: read(
            spark,
            servicebus=sb_node.sb_address,
            topic="prices-sequenced",
            subscription="ordered",
            sessions="sequenced",
            max_messages=5,
        ),
        "option max_messages does not apply to sessions=sequenced",
    )
