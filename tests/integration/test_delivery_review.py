"""Acknowledged delivery tried as a hostile or unlucky client would, against real node
processes: bogus acknowledgements and credit, acknowledging after close, two consumers on one
queue with one killed, a unit of work whose connection dropped before its commit, a poison
message whose consumer is killed again and again, a node restart under a consumer, bad Get
arguments and a publisher that never reads its acknowledgements."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import grpc
import pytest

from qmgr.client import MQClientError, OutgoingMessage, QueueManagerClient
from qmgr.launcher.poll import wait_for
from qmgr.wire import messaging_pb2 as pb
from qmgr.wire import messaging_pb2_grpc
from tests.integration.conftest import NodeFactory, NodeProcess, kill9
from tests.integration.test_delivery import ROOT, qstatus


def put_numbered(qm: QueueManagerClient, queue: str, n: int, *, persistent: bool = True) -> None:
    qm.put_many(queue, [OutgoingMessage(str(i), persistent=persistent) for i in range(n)])


def drain_to_marker(qm: QueueManagerClient, queue: str) -> list[tuple[str, int]]:
    """Put a marker and read ``queue`` up to it: (text, backout count) of what came before."""
    qm.put(queue, "marker", persistent=True)
    out = []
    while True:
        got = qm.get_many(queue, 100, wait_ms=10_000)
        assert got, f"marker never arrived after {len(out)} messages"
        for m in got:
            if m.text == "marker":
                return out
            out.append((m.text, m.backout_count))


def spawn(script: str, *args: str) -> subprocess.Popen[str]:
    """A client process running ``script`` with ``args``; its stdout is a pipe."""
    return subprocess.Popen(
        [sys.executable, "-c", script, *args], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )


@pytest.fixture
def node(shared_node: NodeProcess) -> NodeProcess:
    """The module's shared node: the tests here that neither kill, stop nor restart it name
    queues of their own; those that do take a node of their own from ``node_factory``."""
    return shared_node


# -- bogus acknowledgements on a Consume stream ------------------------------------------------

OPEN = pb.ConsumeControl(
    open=pb.ConsumeRequest(
        queue="BOGUS.Q", max_batch=5, limits=pb.DeliveryLimits(max_pending_messages=10)
    )
)

OPEN_HANDED = pb.ConsumeControl(
    open=pb.ConsumeRequest(
        queue="BOGUS.Q",
        max_batch=5,
        limits=pb.DeliveryLimits(max_pending_messages=10, reports_handed=True),
    )
)

BOGUS = {
    "acknowledges more than it was sent": [pb.Ack(acknowledged=11)],
    "grants more message credit than it used": [pb.Ack(credit_messages=1000)],
    "grants more byte credit than it used": [pb.Ack(credit_bytes=2**63)],
    "opens a second time": [OPEN],
    "acknowledges fewer than before": [pb.Ack(acknowledged=3), pb.Ack(acknowledged=2)],
    "reports handing out more than it was sent": [OPEN_HANDED, pb.Ack(handed=11)],
    "reports handing out fewer than it acknowledged": [
        OPEN_HANDED,
        pb.Ack(acknowledged=3, handed=3),
        pb.Ack(acknowledged=4, handed=2),
    ],
}


def on_queue(control: pb.ConsumeControl, queue: str) -> pb.ConsumeControl:
    """``control`` with its opening (if it is one) on ``queue``: each case has a queue of its own."""
    named = pb.ConsumeControl()
    named.CopyFrom(control)
    if named.HasField("open"):
        named.open.queue = queue
    return named


@pytest.mark.parametrize("case", list(BOGUS))
def test_bogus_acknowledgement_is_invalid_argument_and_changes_nothing(
    node: NodeProcess, case: str
) -> None:
    queue = f"BOGUS.Q{list(BOGUS).index(case)}"
    with node.client() as qm:
        qm.mqsc(f"DEFINE QLOCAL({queue})")
        put_numbered(qm, queue, 20)
    steps = BOGUS[case]
    opening = OPEN
    if steps[0] is OPEN_HANDED:  # a client that reports what it handed out
        opening, steps = OPEN_HANDED, steps[1:]
    opening = on_queue(opening, queue)
    controls = [
        on_queue(c, queue) if isinstance(c, pb.ConsumeControl) else pb.ConsumeControl(ack=c)
        for c in steps
    ]
    valid_acks = sum(1 for c in controls[:-1] if c.HasField("ack"))  # the last one is bogus
    acked = 3 if valid_acks else 0
    sent = threading.Event()
    first: list[pb.Delivery] = []

    def requests() -> Iterator[pb.ConsumeControl]:
        yield opening
        sent.wait(30)
        yield from controls
        time.sleep(30)  # the node must end the stream, not this client

    with grpc.insecure_channel(node.address) as channel:
        stub = messaging_pb2_grpc.MessagingStub(channel)
        call = stub.Consume(requests(), timeout=60)
        with pytest.raises(grpc.RpcError) as err:
            for delivery in call:
                first.append(delivery)
                sent.set()
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value
    assert first and [m.body for m in first[0].messages] == [str(i).encode() for i in range(5)]
    with node.client() as qm:
        wait_for(lambda: qstatus(qm, queue) == (20 - acked, 0), 30.0, 0.1, what="nothing committed")
        rest = drain_to_marker(qm, queue)
    assert [t for t, _ in rest] == [str(i) for i in range(acked, 20)]


def test_consume_with_a_bad_batch_size_is_refused(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(BATCH.Q)")
        put_numbered(qm, "BATCH.Q", 3)
    with grpc.insecure_channel(node.address) as channel:
        stub = messaging_pb2_grpc.MessagingStub(channel)
        for bad in (-1, 2**31 - 1):
            request = pb.ConsumeControl(open=pb.ConsumeRequest(queue="BATCH.Q", max_batch=bad))
            with pytest.raises(grpc.RpcError) as err:
                list(stub.Consume(iter([request]), timeout=20))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (bad, err.value)
    with node.client() as qm:
        assert qstatus(qm, "BATCH.Q") == (3, 0)


# -- the SDK ------------------------------------------------------------------------------------


def test_explicit_ack_after_close_is_an_error(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(LATE.Q)")
        put_numbered(qm, "LATE.Q", 10)
        consumer = qm.consumer("LATE.Q", 5, ack="explicit")
        got = consumer.receive_batch(timeout=10)
        assert got
        consumer.close()
        with pytest.raises(MQClientError) as err:
            consumer.ack()  # too late: they went back on the queue
        assert err.value.reason_name == "MQRC_HCONN_ERROR"
        rest = drain_to_marker(qm, "LATE.Q")
        assert [t for t, _ in rest] == [str(i) for i in range(10)]
        assert [b for _, b in rest[: len(got)]] == [1] * len(got)


def test_commit_after_the_connection_dropped_reports_the_backout(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(DROP.Q)")
        put_numbered(qm, "DROP.Q", 3)
        with pytest.raises(MQClientError) as err, qm.unit_of_work() as uow:
            got = qm.get_many("DROP.Q", 2, unit_of_work=uow)
            assert [m.text for m in got] == ["0", "1"]
            qm._connection.cancel()  # the connection drops before the commit
            wait_for(lambda: qstatus(qm, "DROP.Q") == (3, 0), 30.0, 0.1, what="backed out")
        assert err.value.reason_name == "MQRC_BACKED_OUT"
        rest = drain_to_marker(qm, "DROP.Q")
        assert rest == [("0", 1), ("1", 1), ("2", 0)]


def test_commit_on_a_closed_connection_is_refused(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(CONN.Q)")
        put_numbered(qm, "CONN.Q", 1)
    with grpc.insecure_channel(node.address) as channel:
        stub = messaging_pb2_grpc.MessagingStub(channel)
        conn_call = stub.Connect(pb.ConnectRequest())
        conn = next(conn_call).connection_id
        got = stub.Get(
            pb.GetRequest(queue="CONN.Q", unit_of_work="U1", connection_id=conn), timeout=20
        )
        assert len(got.messages) == 1
        conn_call.cancel()
        with node.client() as qm:
            wait_for(lambda: qstatus(qm, "CONN.Q") == (1, 0), 30.0, 0.1, what="backed out")
        with pytest.raises(grpc.RpcError) as err:
            stub.Commit(pb.UnitOfWork(unit_of_work="U1", connection_id=conn), timeout=20)
        meta = dict(err.value.trailing_metadata() or ())
        assert meta.get("mq-reason-name") == "MQRC_HCONN_ERROR", err.value
    with node.client() as qm:
        assert drain_to_marker(qm, "CONN.Q") == [("0", 1)]


# -- two consumers, one killed ------------------------------------------------------------------

KILLED_CONSUMER = """
import sys, time
from qmgr.client import QueueManagerClient
address, queue, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
qm = QueueManagerClient(address)
c = qm.consumer(queue, 5, ack="explicit", max_pending_messages=20)
print("open", flush=True)
got = []
while len(got) < count:
    got += [m.text for m in c.receive_batch(timeout=30)]
c.ack()
time.sleep(1.0)  # the acknowledgement reaches the node
print(",".join(got), flush=True)
for m in c:  # take more, never acknowledged
    pass
"""


@pytest.mark.parametrize("persistent", [True, False])
def test_two_consumers_one_killed_mid_stream(node: NodeProcess, persistent: bool) -> None:
    n = 400
    queue = "TWO.P.Q" if persistent else "TWO.N.Q"
    with node.client() as qm:
        qm.mqsc(f"DEFINE QLOCAL({queue}) MAXDEPTH(10000)")
        put_numbered(qm, queue, n, persistent=persistent)
        other: list[tuple[str, int]] = []
        stop = threading.Event()
        with qm.consumer(queue, 5, max_pending_messages=10) as consumer:

            def slow_reader() -> None:
                while not stop.is_set():
                    m = consumer.receive(timeout=0.5)
                    if m is not None:
                        other.append((m.text, m.backout_count))
                        time.sleep(0.005)

            # the other consumer starts once this one's stream is open: it could otherwise
            # read the whole queue while this one's process starts
            proc = spawn(KILLED_CONSUMER, node.address, queue, "50")
            reader = threading.Thread(target=slow_reader)
            try:
                assert proc.stdout is not None
                assert proc.stdout.readline().strip() == "open"
                reader.start()
                killed_acked = proc.stdout.readline().strip().split(",")
                time.sleep(0.3)  # it holds unacknowledged messages
            finally:
                kill9(proc)
            qm.put(queue, "marker", persistent=True)
            wait_for(lambda: any(t == "marker" for t, _ in other), 60, 0.1, what="the marker")
            stop.set()
            reader.join(10)
        texts = [t for t, _ in other if t != "marker"]
        assert len(killed_acked) >= 50
        assert not set(killed_acked) & set(texts), "acknowledged by the killed one, then again"
        assert len(texts) == len(set(texts)), "duplicate within the surviving consumer"
        assert sorted(set(texts) | set(killed_acked), key=int) == [str(i) for i in range(n)]
        assert {b for _, b in other} <= {0, 1}
        wait_for(lambda: qstatus(qm, queue) == (0, 0), 30.0, 0.1, what="all acknowledged")


HOLDING_CONSUMER = """
import sys, time
from qmgr.client import QueueManagerClient
qm = QueueManagerClient(sys.argv[1])
c = qm.consumer(sys.argv[2], ack="explicit")
m = c.receive(timeout=30)
time.sleep(0.5)  # the rest of the queue is in its buffer, never handed out
print(m.text if m else "", m.backout_count if m else -1, c.pending_messages, flush=True)
time.sleep(600)
"""


def test_poison_message_moves_to_boqname_after_repeated_kills_alone(node: NodeProcess) -> None:
    """The consumer is killed holding the poison message (handed out) and, in its buffer,
    the 50 behind it: only the poison message is counted, and moves to BOQNAME."""
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(HP.BOQ)")
        qm.mqsc("DEFINE QLOCAL(HP.Q) BOTHRESH(2) BOQNAME(HP.BOQ)")
        qm.put("HP.Q", "poison", persistent=True)
        put_numbered(qm, "HP.Q", 50)
        for expected in (0, 1):
            proc = spawn(HOLDING_CONSUMER, node.address, "HP.Q")
            assert proc.stdout is not None
            assert proc.stdout.readline().split() == ["poison", str(expected), "50"]
            kill9(proc)
            wait_for(lambda: qstatus(qm, "HP.Q")[1] == 0, 30.0, 0.1, what="backed out")
        # closing gracefully after taking one: only that one is counted
        consumer = qm.consumer("HP.Q", ack="explicit")
        first = consumer.receive(timeout=10)
        assert first is not None and (first.text, first.backout_count) == ("0", 0)
        wait_for(lambda: consumer.pending_messages == 49, 30.0, 0.1, what="the rest buffered")
        consumer.close()
        assert drain_to_marker(qm, "HP.Q") == [("0", 1)] + [(str(i), 0) for i in range(1, 50)]
        moved = qm.get_many("HP.BOQ", 100)
        assert [(m.text, m.backout_count) for m in moved] == [("poison", 2)]


# -- a node restart under a consumer ------------------------------------------------------------


def test_node_restart_under_a_consumer_with_unacknowledged_messages(
    node_factory: NodeFactory,
) -> None:
    node = node_factory()
    qm = node.client()
    qm.mqsc("DEFINE QLOCAL(RS.Q) MAXDEPTH(10000)")
    put_numbered(qm, "RS.Q", 100)
    consumer = qm.consumer("RS.Q", 10, ack="explicit", max_pending_messages=30)
    acked = consumer.receive_batch(timeout=10)
    consumer.ack()
    wait_for(lambda: qstatus(qm, "RS.Q")[1] == 30, 30.0, 0.1, what="credit used")
    held = consumer.receive_batch(timeout=10)  # never acknowledged
    time.sleep(0.5)  # the acknowledged removal is committed by the group commit
    node.kill()
    node.start()
    with pytest.raises(MQClientError):  # the stream ends with an error, not a silent end
        while True:
            assert consumer.receive(timeout=20) is not None, "ended without an error"
    with pytest.raises(MQClientError):
        consumer.ack()
    consumer.close()
    qm.close()
    with node.client() as qm:
        rest = drain_to_marker(qm, "RS.Q")
    texts = [t for t, _ in rest]
    assert texts == [str(i) for i in range(len(acked), 100)]
    assert held and [m.text for m in held] == texts[: len(held)]
    # as in MQ with NOHARDENBO, the backout count is not hardened: after a restart the
    # messages come back with the count they had
    assert {b for _, b in rest} == {0}


# -- Get arguments ------------------------------------------------------------------------------


def test_get_with_a_huge_count_or_negative_wait_is_refused(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(ARG.Q)")
        put_numbered(qm, "ARG.Q", 5)
        for kwargs in ({"max_messages": 2**31 - 1}, {"max_messages": -5}, {"wait_ms": -1}):
            with pytest.raises(MQClientError) as err:
                qm.get_many("ARG.Q", **kwargs)  # type: ignore[arg-type]
            assert err.value.reason_name == "MQRC_OPTIONS_ERROR", kwargs
        assert qstatus(qm, "ARG.Q") == (5, 0)
        assert [m.text for m in qm.get_many("ARG.Q", 10_000)] == [str(i) for i in range(5)]


# -- a publisher that never reads its acknowledgements ------------------------------------------


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_publisher_that_never_reads_acknowledgements(node_factory: NodeFactory) -> None:
    node = node_factory()
    assert node.proc is not None
    body = b"x" * 1000
    yielded = [0]

    def requests() -> Iterator[pb.PublishRequest]:
        for i in range(1, 100_000):
            req = pb.PublishRequest(batch_id=i)
            for _ in range(100):
                req.publications.add(topic="unread/x", message=pb.Message(body=body))
            yielded[0] = i
            yield req

    before = rss_kib(node.proc.pid)
    with grpc.insecure_channel(node.address) as channel:
        stub = messaging_pb2_grpc.MessagingStub(channel)
        call = stub.PublishStream(requests())  # responses never read
        previous = -1
        deadline = time.monotonic() + 60
        while yielded[0] != previous and time.monotonic() < deadline:
            previous = yielded[0]
            time.sleep(2.0)
        assert yielded[0] < 5_000, f"the node kept reading: {yielded[0]} batches"
        with node.client() as qm:  # others are served
            qm.mqsc("DEFINE QLOCAL(OTHER.Q)")
            qm.put("OTHER.Q", "hello")
            assert qm.get("OTHER.Q", wait_ms=10_000) is not None
        grown = rss_kib(node.proc.pid) - before
        assert grown < 200 * 1024, f"node grew by {grown} KiB"
        call.cancel()


# -- what a consumer is reading disappears; a unit of work without a connection ---------------


def test_consumers_of_a_deleted_queue_or_subscription_end_with_an_error(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(GONE.Q)")
        consumer = qm.consumer("GONE.Q")
        assert consumer.receive(timeout=0.5) is None
        qm.mqsc("DELETE QLOCAL(GONE.Q)")
        with pytest.raises(MQClientError) as err:
            consumer.receive(timeout=20)
        assert err.value.reason_name == "MQRC_Q_DELETED"
        consumer.close()

        sub = qm.subscribe("gone/#", name="GONE", durable=True, ack="explicit")
        qm.publish("gone/x", "held", persistent=True)
        held = sub.receive(timeout=10)
        assert held is not None
        with pytest.raises(MQClientError) as err:  # a message of it is being delivered
            qm.unsubscribe("GONE")
        assert err.value.reason_name == "MQRC_OBJECT_IN_USE"
        sub.ack()
        queue = sub.queue
        wait_for(lambda: qstatus(qm, queue) == (0, 0), 30.0, 0.1, what="acknowledged")
        qm.unsubscribe("GONE")
        with pytest.raises(MQClientError) as err:
            sub.receive(timeout=20)
        assert err.value.reason_name == "MQRC_Q_DELETED"
        sub.close()


def test_syncpoint_get_without_a_connection_is_refused(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(NOCONN.Q)")
        qm.put("NOCONN.Q", "kept", persistent=True)
    with grpc.insecure_channel(node.address) as channel:
        stub = messaging_pb2_grpc.MessagingStub(channel)
        with pytest.raises(grpc.RpcError) as err:  # nobody would ever back it out
            stub.Get(pb.GetRequest(queue="NOCONN.Q", unit_of_work="U1"), timeout=20)
        meta = dict(err.value.trailing_metadata() or ())
        assert meta.get("mq-reason-name") == "MQRC_HCONN_ERROR", err.value
    with node.client() as qm:
        assert qstatus(qm, "NOCONN.Q") == (1, 0)
        assert drain_to_marker(qm, "NOCONN.Q") == [("kept", 0)]


def test_async_consumer_counts_only_what_it_handed_out_and_refuses_a_late_ack(
    node: NodeProcess,
) -> None:
    from qmgr.client import AsyncQueueManagerClient

    async def scenario() -> None:
        async with AsyncQueueManagerClient(node.address) as qm:
            await qm.mqsc("DEFINE QLOCAL(ALATE.Q)")
            for i in range(20):
                await qm.put("ALATE.Q", str(i), persistent=True)
            consumer = await qm.consumer("ALATE.Q", 5, ack="explicit", max_pending_messages=10)
            first = await consumer.receive(timeout=10)
            assert first is not None and first.text == "0"
            await consumer.aclose()
            with pytest.raises(MQClientError) as err:
                await consumer.ack()
            assert err.value.reason_name == "MQRC_HCONN_ERROR"

    asyncio.run(scenario())
    with node.client() as qm:
        wait_for(lambda: qstatus(qm, "ALATE.Q") == (20, 0), 30.0, 0.1, what="backed out")
        assert drain_to_marker(qm, "ALATE.Q") == [("0", 1)] + [(str(i), 0) for i in range(1, 20)]


def test_waiting_syncpoint_get_whose_connection_ends_takes_nothing(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(WAITC.Q)")
    with grpc.insecure_channel(node.address) as channel:
        stub = messaging_pb2_grpc.MessagingStub(channel)
        conn_call = stub.Connect(pb.ConnectRequest())
        conn = next(conn_call).connection_id
        request = pb.GetRequest(
            queue="WAITC.Q", unit_of_work="U1", connection_id=conn, wait_ms=20_000
        )
        future = stub.Get.future(request, timeout=60)
        time.sleep(0.5)  # the get is waiting
        conn_call.cancel()  # its connection ends (nothing could back the get out any more)
        time.sleep(0.5)
        with node.client() as qm:
            qm.put("WAITC.Q", "arrives", persistent=True)
        with pytest.raises(grpc.RpcError) as err:
            future.result()
        meta = dict(err.value.trailing_metadata() or ())
        assert meta.get("mq-reason-name") == "MQRC_HCONN_ERROR", err.value
    with node.client() as qm:
        assert qstatus(qm, "WAITC.Q") == (1, 0)
        assert drain_to_marker(qm, "WAITC.Q") == [("arrives", 0)]


BATCH_CONSUMER = """
import sys, time
from qmgr.client import QueueManagerClient
qm = QueueManagerClient(sys.argv[1])
for batch in qm.consume(sys.argv[2], max_batch=10, max_pending_messages=10):
    time.sleep(1.0)  # processing the batch when killed
    print(len(batch), flush=True)
    time.sleep(600)
"""


def test_consume_generator_killed_while_processing_a_batch_loses_nothing(
    node: NodeProcess,
) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(BATCHK.Q)")
        put_numbered(qm, "BATCHK.Q", 30)
        proc = spawn(BATCH_CONSUMER, node.address, "BATCHK.Q")
        assert proc.stdout is not None
        assert int(proc.stdout.readline()) == 10
        kill9(proc)
        wait_for(lambda: qstatus(qm, "BATCHK.Q")[1] == 0, 30.0, 0.1, what="backed out")
        rest = drain_to_marker(qm, "BATCHK.Q")
        assert [t for t, _ in rest] == [str(i) for i in range(30)]


async def subscribe_async(node: NodeProcess, topic: str) -> None:
    """Connect while the node answers, stop it, then subscribe: as with the synchronous
    client, the subscription's own time-out must end the wait."""
    from qmgr.client import AsyncQueueManagerClient

    assert node.proc is not None
    async with AsyncQueueManagerClient(node.address, timeout=3) as qm:
        await qm.mqsc("DISPLAY QMGR")
        node.proc.send_signal(signal.SIGSTOP)
        await qm.subscribe(topic)


def test_subscribe_to_a_hung_node_fails_instead_of_hanging(node_factory: NodeFactory) -> None:
    node = node_factory()
    assert node.proc is not None
    qm = QueueManagerClient(node.address, timeout=3)
    qm.wait_ready()
    try:
        node.proc.send_signal(signal.SIGSTOP)
        with pytest.raises(MQClientError) as err:
            qm.subscribe("hung/#")
        assert err.value.reason_name == "MQRC_CONNECTION_BROKEN"
        node.proc.send_signal(signal.SIGCONT)
        with pytest.raises(MQClientError) as err:
            asyncio.run(subscribe_async(node, "hung/#"))
        assert err.value.reason_name == "MQRC_CONNECTION_BROKEN"
    finally:
        node.proc.send_signal(signal.SIGCONT)
    with qm.subscribe("hung/#") as sub:  # the node is back
        qm.publish("hung/x", "back")
        msg = sub.receive(timeout=20)
        assert msg is not None and msg.text == "back"
    qm.close()


async def subscribe_new_client(node: NodeProcess, topic: str) -> None:
    """A client whose first call is the subscription, made while the node is stopped."""
    from qmgr.client import AsyncQueueManagerClient

    async with AsyncQueueManagerClient(node.address, timeout=2) as qm:
        await qm.subscribe(topic)


def test_a_new_async_client_subscribing_to_a_hung_node_fails_within_its_own_time_out(
    node_factory: NodeFactory,
) -> None:
    """The time-out covers connecting too: the node accepts the connection and never answers,
    and what ends the wait is the client's time-out (its error says so), not gRPC's own
    connect time-out."""
    node = node_factory()
    assert node.proc is not None
    node.proc.send_signal(signal.SIGSTOP)
    try:
        with pytest.raises(MQClientError) as err:
            asyncio.run(subscribe_new_client(node, "hung/#"))
        assert err.value.reason_name == "MQRC_CONNECTION_BROKEN"
        assert "no answer in 2 s" in str(err.value)
    finally:
        node.proc.send_signal(signal.SIGCONT)


def test_stream_publisher_to_a_hung_node_fails_instead_of_hanging(
    node_factory: NodeFactory,
) -> None:
    node = node_factory()
    assert node.proc is not None
    qm = QueueManagerClient(node.address, timeout=3)
    qm.wait_ready()
    node.proc.send_signal(signal.SIGSTOP)
    try:
        for window, batches in ((8, 1), (2, 5)):  # waiting in flush, waiting for a window slot
            pub = qm.stream_publisher(batch_size=10, window=window)
            with pytest.raises(MQClientError) as err:
                for i in range(10 * batches):
                    pub.publish("hung/x", str(i))
                pub.flush()
            assert err.value.reason_name == "MQRC_CONNECTION_BROKEN"
    finally:
        node.proc.send_signal(signal.SIGCONT)
    pub = qm.stream_publisher(batch_size=10)
    pub.publish("hung/x", "back")
    assert pub.close().accepted == 1
    qm.close()
