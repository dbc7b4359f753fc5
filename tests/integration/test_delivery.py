"""Acknowledged, flow-controlled delivery against real node processes: what a consumer took and
did not acknowledge goes back on its queue (backout count raised) when it closes, is killed, or
its node restarts; units of work belong to a connection; gets answer after the removal is
committed; a slow consumer is bounded on both sides."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from qmgr.client import MQClientError, OutgoingMessage, QueueManagerClient
from qmgr.launcher.poll import wait_for
from tests.integration.conftest import NodeFactory, NodeProcess, kill9

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def node(shared_node: NodeProcess) -> NodeProcess:
    """The module's one node (see ``shared_node``); tests that kill or restart it use their own."""
    return shared_node


def qstatus(qm: QueueManagerClient, queue: str) -> tuple[int, int]:
    """(CURDEPTH, UNCOM) of ``queue``."""
    pattern = queue if len(queue) <= 48 else queue[:47] + "*"  # MQ names have 48 characters
    rec = next(r for r in qm.mqsc(f"DISPLAY QSTATUS({pattern})") if r["QUEUE"] == queue)
    uncom = rec["UNCOM"]
    return int(rec["CURDEPTH"]), 0 if uncom == "NO" else int(uncom)


def sub_queue(qm: QueueManagerClient, name: str) -> str:
    return qm.mqsc(f"DISPLAY SUB({name}) DEST")[0]["DEST"]


def publish_persistent(qm: QueueManagerClient, topic: str, n: int) -> None:
    pub = qm.stream_publisher(batch_size=100, window=8)
    for i in range(n):
        pub.publish(topic, str(i), persistent=True)
    assert pub.close().accepted == n


def read_all(qm: QueueManagerClient, topic: str, name: str, marker: str) -> list:  # type: ignore[type-arg]
    """Resume durable subscription ``name``, publish ``marker`` and read up to it (so a late
    duplicate would show before it)."""
    out = []
    with qm.subscribe(topic, name=name, durable=True, max_batch=100) as sub:
        qm.publish(topic.replace("#", "marker"), marker, persistent=True)
        while True:
            msg = sub.receive(timeout=30)
            assert msg is not None, f"marker never arrived after {len(out)} messages"
            if msg.text == marker:
                break
            out.append(msg)
    return out


def test_durable_subscriber_closing_after_one_leaves_the_rest(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.create_subscription("load/#", name="D1", durable=True)
        publish_persistent(qm, "load/x", 2000)
        queue = sub_queue(qm, "D1")
        with qm.subscribe("load/#", name="D1", durable=True, max_batch=100) as sub:
            first = sub.receive(timeout=20)
            assert first is not None and first.text == "0" and first.backout_count == 0
            wait_for(lambda: qstatus(qm, queue)[1] > 1, 30.0, 0.1, what="deliveries in flight")
            in_flight = qstatus(qm, queue)[1]
        # closed: only the message handed to the application was acknowledged
        wait_for(
            lambda: qstatus(qm, queue) == (1999, 0), 30.0, 0.1, what="the rest back on the queue"
        )
        rest = read_all(qm, "load/#", "D1", "marker")
        assert [m.text for m in rest] == [str(i) for i in range(1, 2000)]
        assert in_flight > 1
        # sent but never handed to the application: back with their backout count unchanged
        assert {m.backout_count for m in rest} == {0}
        wait_for(lambda: qstatus(qm, queue) == (0, 0), 30.0, 0.1, what="everything acknowledged")


def test_explicit_ack_acknowledges_only_what_was_acked(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(EXP.Q) MAXDEPTH(1000)")
        qm.put_many("EXP.Q", [OutgoingMessage(str(i), persistent=True) for i in range(100)])
        sub = qm.consumer("EXP.Q", 10, ack="explicit")
        got = [sub.receive(timeout=10) for _ in range(15)]
        assert [m.text for m in got if m] == [str(i) for i in range(15)]
        sub.ack()  # the 15 handed out
        more = sub.receive_batch(timeout=10)
        assert more and more[0].text == "15"
        sub.close()  # not acknowledged: back on the queue
        wait_for(lambda: qstatus(qm, "EXP.Q") == (85, 0), 30.0, 0.1, what="85 back")
        back = qm.get_many("EXP.Q", 100)
        assert [m.text for m in back] == [str(i) for i in range(15, 100)]
        assert all(m.backout_count == 1 for m in back[: len(more)])


def test_consume_generator_acknowledges_batches_handed_out(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(GEN.Q) MAXDEPTH(1000)")
        qm.put_many("GEN.Q", [OutgoingMessage(str(i), persistent=False) for i in range(50)])
        seen: list[str] = []
        for batch in qm.consume("GEN.Q", max_batch=10):
            seen += [m.text for m in batch]
            if len(seen) >= 10:
                break
        wait_for(lambda: qstatus(qm, "GEN.Q") == (50 - len(seen), 0), 30.0, 0.1, what="rest back")
        assert [m.text for m in qm.get_many("GEN.Q", 100)] == [str(i) for i in range(len(seen), 50)]


SUBSCRIBER = """
import sys, time
from qmgr.client import QueueManagerClient
address, topic, name, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
qm = QueueManagerClient(address)
sub = qm.subscribe(topic, name=name, durable=True, max_batch=50)
got = 0
while got < count:  # one by one: a batch may hold every message sent
    got += sub.receive(timeout=30) is not None
sub.ack()  # the node learns of the last ones now, not when their delivery is used up
print(got, flush=True)
time.sleep(600)
"""


def _kill_subscriber_midway(node: NodeProcess, qm: QueueManagerClient) -> tuple[int, int, str]:
    """A subscriber process reads some of 1000 persistent messages and is killed with kill -9;
    returns (messages it acknowledged, messages in flight when killed, queue)."""
    qm.create_subscription("kill/#", name="K1", durable=True)
    publish_persistent(qm, "kill/x", 1000)
    queue = sub_queue(qm, "K1")
    proc = subprocess.Popen(
        [sys.executable, "-c", SUBSCRIBER, node.address, "kill/#", "K1", "120"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        acked = int(proc.stdout.readline())
        assert acked >= 120
        # everything else was sent (the credit covers it) and is not acknowledged
        wait_for(
            lambda: qstatus(qm, queue) == (0, 1000 - acked), 30.0, 0.1, what="acknowledgements"
        )
        in_flight = 1000 - acked
    finally:
        kill9(proc)
    return acked, in_flight, queue


def test_killed_subscriber_process_gets_unacknowledged_back(node: NodeProcess) -> None:
    with node.client() as qm:
        acked, in_flight, queue = _kill_subscriber_midway(node, qm)
        wait_for(lambda: qstatus(qm, queue) == (1000 - acked, 0), 30.0, 0.1, what="backed out")
        rest = read_all(qm, "kill/#", "K1", "marker")
        assert [m.text for m in rest] == [str(i) for i in range(acked, 1000)]
        # the client is gone, so the first message it did not acknowledge counts as handed out
        # (it may have been); those only in its buffer come back with their count unchanged
        assert in_flight > 1
        assert [m.backout_count for m in rest] == [1] + [0] * (1000 - acked - 1)


def test_killed_subscriber_and_node_restart(node_factory: NodeFactory) -> None:
    node = node_factory()
    with node.client() as qm:
        acked, _, queue = _kill_subscriber_midway(node, qm)
        time.sleep(0.5)  # let the node's group commit take the acknowledged removals
    node.kill()
    node.start()
    with node.client() as qm:
        rest = read_all(qm, "kill/#", "K1", "marker")
        assert [m.text for m in rest] == [str(i) for i in range(acked, 1000)]


def test_non_syncpoint_get_is_committed_before_the_answer(node_factory: NodeFactory) -> None:
    node = node_factory()
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(NS.Q)")
        qm.put_many("NS.Q", [OutgoingMessage(str(i), persistent=True) for i in range(10)])
        got = qm.get_many("NS.Q", 10)
        assert len(got) == 10
    node.kill()
    node.start()
    with node.client() as qm:
        assert qm.get_many("NS.Q", 10) == []


UOW_HOLDER = """
import sys, time
from qmgr.client import QueueManagerClient
qm = QueueManagerClient(sys.argv[1])
got = qm.get_many("UOW.Q", 3, unit_of_work="U1")
print(len(got), flush=True)
time.sleep(600)
"""


def test_abandoned_unit_of_work_is_backed_out_and_belongs_to_its_connection(
    node: NodeProcess,
) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(UOW.Q)")
        qm.put_many("UOW.Q", [OutgoingMessage(str(i), persistent=True) for i in range(5)])
        proc = subprocess.Popen(
            [sys.executable, "-c", UOW_HOLDER, node.address],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "3"
            assert qstatus(qm, "UOW.Q") == (2, 3)
            for attempt in (qm.commit, qm.backout):
                with pytest.raises(MQClientError) as err:
                    attempt("U1")
                assert err.value.reason_name == "MQRC_HCONN_ERROR"
            assert qstatus(qm, "UOW.Q") == (2, 3)
        finally:
            kill9(proc)
        wait_for(
            lambda: qstatus(qm, "UOW.Q") == (5, 0), 30.0, 0.1, what="the unit of work backed out"
        )
        back = qm.get_many("UOW.Q", 10)
        assert [m.text for m in back] == [str(i) for i in range(5)]
        assert [m.backout_count for m in back] == [1, 1, 1, 0, 0]


def test_publisher_whose_node_dies_with_a_full_window_gets_an_error(
    node_factory: NodeFactory,
) -> None:
    node = node_factory()
    qm = node.client()
    pub = qm.stream_publisher(batch_size=1, window=2)
    pub.publish("window/x", "first", persistent=True)
    pub.flush()
    assert node.proc is not None
    node.proc.send_signal(signal.SIGSTOP)  # acknowledgements stop: the window fills
    outcome: list[BaseException | None] = []

    def publish_forever() -> None:
        try:
            for i in range(1000):
                pub.publish("window/x", str(i), persistent=True)
            pub.flush()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            outcome.append(exc)

    thread = threading.Thread(target=publish_forever, daemon=True)
    thread.start()
    time.sleep(1.0)
    assert not outcome  # blocked on the full window
    node.kill()
    thread.join(30)
    assert not thread.is_alive(), "publish() hung after the node died"
    assert isinstance(outcome[0], MQClientError)
    assert outcome[0].reason_name == "MQRC_CONNECTION_BROKEN"
    with pytest.raises(MQClientError):
        pub.flush()
    qm.close()


SLOW = """
import sys, time, json
from qmgr.client import QueueManagerClient
qm = QueueManagerClient(sys.argv[1])
events = []
sub = qm.subscribe("slow/#", destination="SLOW.Q", max_pending_messages=int(sys.argv[2]),
                   on_slow_consumer=lambda s: events.append(time.time()))
print("ready", flush=True)
sys.stdin.readline()
status = open("/proc/self/status").read()
rss = next(int(l.split()[1]) for l in status.splitlines() if l.startswith("VmRSS"))
print(json.dumps({"pending": sub.pending_messages, "pending_bytes": sub.pending_bytes,
                  "slow": sub.slow_consumer, "events": len(events), "rss_kib": rss}), flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("window", [1000, 65_536])  # 65,536: the SDK's default
def test_slow_consumer_is_bounded_on_both_sides(node_factory: NodeFactory, window: int) -> None:
    node = node_factory()
    total = 200_000
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(SLOW.Q) MAXDEPTH(300000)")
        proc = subprocess.Popen(
            [sys.executable, "-c", SLOW, node.address, str(window)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        try:
            assert proc.stdout is not None and proc.stdin is not None
            assert proc.stdout.readline().strip() == "ready"
            pub = qm.stream_publisher(batch_size=500, window=8)
            body = b"x" * 100
            for _ in range(total):
                pub.publish("slow/x", OutgoingMessage(body, persistent=False))
            assert pub.close().accepted == total
            # the node sends what the credit allows, no more
            wait_for(
                lambda: qstatus(qm, "SLOW.Q") == (total - window, window), 30.0, 0.1, what="credit"
            )
            time.sleep(2.0)
            assert qstatus(qm, "SLOW.Q") == (total - window, window)
            proc.stdin.write("report\n")
            proc.stdin.flush()
            report = json.loads(proc.stdout.readline())
        finally:
            kill9(proc)
        assert report["pending"] == window and report["slow"] and report["events"] == 1
        print(f"window {window}: subscriber report {report}")
        assert report["rss_kib"] < 150 * 1024, report
        wait_for(lambda: qstatus(qm, "SLOW.Q") == (total, 0), 30.0, 0.1, what="in-flight ones back")


def test_batch_publish_is_all_or_exactly_accepted(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(PP.Q) MAXDEPTH(3)")
        qm.create_subscription("pp/#", name="PP", durable=True, destination="PP.Q")
        good = OutgoingMessage("good", persistent=True)
        for bad, reason in (
            (("pp/#", good), "MQRC_TOPIC_STRING_ERROR"),
            (("pp/c", OutgoingMessage("bad", priority=12)), None),
        ):
            with pytest.raises(MQClientError) as err:
                qm.publish_many([("pp/a", good), bad, ("pp/b", good)])
            assert reason is None or err.value.reason_name == reason
            assert err.value.accepted == 0
            assert qstatus(qm, "PP.Q") == (0, 0)  # nothing of the batch was published
        batch = [(f"pp/{i}", OutgoingMessage(str(i), persistent=True)) for i in range(5)]
        with pytest.raises(MQClientError) as err:
            qm.publish_many(batch)  # the queue takes 3: delivering the 4th fails
        assert err.value.reason_name == "MQRC_PUBLICATION_FAILURE"
        assert err.value.accepted == 3
        assert [m.text for m in qm.get_many("PP.Q", 10)] == ["0", "1", "2"]
        assert qm.publish_many(batch[3:]).accepted == 2  # retrying the rest: no duplicate
        assert [m.text for m in qm.get_many("PP.Q", 10)] == ["3", "4"]

        pub = qm.stream_publisher(batch_size=5)
        for topic, msg in batch:
            pub.publish(topic, msg)
        with pytest.raises(MQClientError) as err:
            pub.flush()
        assert err.value.accepted == 3
        assert [m.text for m in qm.get_many("PP.Q", 10)] == ["0", "1", "2"]


def test_stream_backout_applies_bothresh_and_boqname(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(POISON.BOQ)")
        qm.mqsc("DEFINE QLOCAL(POISON.Q) BOTHRESH(2) BOQNAME(POISON.BOQ)")
        qm.put("POISON.Q", "poison", persistent=True)
        for expected in (0, 1):
            consumer = qm.consumer("POISON.Q", ack="explicit")
            msg = consumer.receive(timeout=10)
            assert msg is not None and msg.text == "poison" and msg.backout_count == expected
            consumer.close()  # not acknowledged
        assert qstatus(qm, "POISON.Q") == (0, 0)
        moved = qm.get("POISON.BOQ")
        assert moved is not None and moved.text == "poison" and moved.backout_count == 2


def test_async_consumer_acknowledges_what_it_handed_out(node: NodeProcess) -> None:
    import asyncio

    from qmgr.client import AsyncQueueManagerClient

    async def scenario() -> None:
        async with AsyncQueueManagerClient(node.address) as qm:
            await qm.mqsc("DEFINE QLOCAL(AQ) MAXDEPTH(1000)")
            for i in range(20):
                await qm.put("AQ", str(i), persistent=True)
            consumer = await qm.consumer("AQ", 5, max_pending_messages=10)
            got = await consumer.receive_batch(timeout=10)
            assert got and [m.text for m in got] == [str(i) for i in range(len(got))]
            await consumer.aclose()
            assert await consumer.receive(timeout=0.1) is None
            rest = await qm.get_many("AQ", 100)
            assert [m.text for m in rest] == [str(i) for i in range(len(got), 20)]
            assert all(m.backout_count <= 1 for m in rest)

    asyncio.run(scenario())
