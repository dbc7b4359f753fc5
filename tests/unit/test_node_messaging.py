"""The node's messaging without a transport: a consumer's flow control, connections and their
units of work, deliveries trimmed to the response limit, publish answers in order.

The flow and connection tests use the pure bookkeeping (and a real QueueManager); the others
run a real NodeRuntime without a data directory in an event loop, with deliveries written to
a list."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator

import pytest

from qmgr.core.errors import MQError
from qmgr.core.message import Message
from qmgr.core.qmgr import QueueManager
from qmgr.core.queue import QueueDef
from qmgr.node.config import NodeConfig
from qmgr.node.messaging import (
    DEFAULT_PENDING_BYTES,
    DEFAULT_PENDING_MESSAGES,
    DEFAULT_RESPONSE_LIMIT,
    ENVELOPE,
    Ack,
    BadAcknowledgement,
    Connections,
    DeliveryFlow,
    DeliveryLimits,
    GetOptions,
    Messaging,
)
from qmgr.node.runtime import NodeRuntime, Publication


class FixedClock:
    def now(self) -> float:
        return 1000.0


def bodies(msgs: list[Message]) -> list[bytes]:
    return [m.body for m in msgs]


# -- flow control -----------------------------------------------------------------------------


def test_a_flow_starts_with_the_default_limits() -> None:
    flow = DeliveryFlow(DeliveryLimits())
    assert (flow.messages, flow.bytes) == (DEFAULT_PENDING_MESSAGES, DEFAULT_PENDING_BYTES)
    assert flow.budget == DEFAULT_RESPONSE_LIMIT - ENVELOPE
    assert flow.uow.startswith("STREAM.") and flow.has_credit
    assert DeliveryFlow(DeliveryLimits()).uow != flow.uow


def test_acknowledgements_are_cumulative_and_within_what_was_sent() -> None:
    flow = DeliveryFlow(DeliveryLimits(max_pending_messages=10, max_pending_bytes=1000))
    flow.delivered(4, 400)
    assert flow.accept(Ack(3, credit_messages=3, credit_bytes=300)) == 3
    assert not flow.acknowledged_and_credited(Ack(3, credit_messages=3, credit_bytes=300), 3)
    assert (flow.acknowledged, flow.messages, flow.bytes) == (3, 9, 900)
    for bad in (Ack(2), Ack(5)):  # fewer than before, more than sent
        with pytest.raises(BadAcknowledgement, match="acknowledged"):
            flow.accept(bad)
    assert flow.accept(Ack(4)) == 1


def test_credit_never_exceeds_what_deliveries_used() -> None:
    flow = DeliveryFlow(DeliveryLimits(max_pending_messages=2, max_pending_bytes=100))
    flow.delivered(2, 60)
    assert not flow.has_credit
    with pytest.raises(BadAcknowledgement, match="credit"):
        flow.accept(Ack(1, credit_messages=3))
    with pytest.raises(BadAcknowledgement, match="credit"):
        flow.accept(Ack(1, credit_messages=1, credit_bytes=61))
    ack = Ack(2, credit_messages=2, credit_bytes=60)
    assert flow.acknowledged_and_credited(ack, flow.accept(ack))  # the sender was waiting
    assert flow.has_credit and (flow.messages, flow.bytes) == (2, 100)


def test_handed_reports_lie_between_acknowledged_and_sent() -> None:
    flow = DeliveryFlow(DeliveryLimits(reports_handed=True))
    flow.delivered(5, 500)
    flow.accept(Ack(1, handed=3))
    for bad in (Ack(1, handed=2), Ack(4, handed=3), Ack(1, handed=6)):
        with pytest.raises(BadAcknowledgement, match="handed"):
            flow.accept(bad)


def test_the_backout_count_at_the_end_follows_what_was_handed_out() -> None:
    assert DeliveryFlow(DeliveryLimits()).counted() is None  # no reports: all count
    flow = DeliveryFlow(DeliveryLimits(reports_handed=True))
    flow.delivered(5, 500)
    flow.acknowledged_and_credited(Ack(2), flow.accept(Ack(2, handed=2)))
    assert flow.counted() == 1  # client gone: the first not acknowledged counts
    flow.accept(Ack(2, handed=4))
    assert flow.counted() == 2
    flow.accept(Ack(2, handed=4, closing=True))
    assert flow.counted() == 2
    closing = DeliveryFlow(DeliveryLimits(reports_handed=True))
    closing.delivered(3, 300)
    closing.accept(Ack(0, handed=0, closing=True))
    assert closing.counted() == 0  # its last report is exact: none was seen


# -- connections and units of work --------------------------------------------------------------


def test_a_closed_connection_backs_out_its_units_of_work() -> None:
    qm = QueueManager("QM", FixedClock())
    qm.define_queue(QueueDef("Q"))
    qm.put("Q", [Message("", str(i).encode()) for i in range(3)])
    conns = Connections(qm)
    assert conns.owner("") == ""
    with pytest.raises(MQError) as err:
        conns.owner("CONN.nope")
    assert err.value.reason_name == "MQRC_HCONN_ERROR"
    conn = conns.open()
    assert conns.owner(conn) == conn
    qm.get("Q", unit_of_work="U", owner=conn, limit=2)
    assert conns.close(conn) == 2
    with pytest.raises(MQError):
        conns.owner(conn)
    got = qm.get("Q", limit=10)
    assert bodies(got) == [b"0", b"1", b"2"] and [m.backout_count for m in got] == [1, 1, 0]


# -- a runtime without a data directory ---------------------------------------------------------


@pytest.fixture
def runtime() -> Iterator[NodeRuntime]:
    umask = os.umask(0o022)
    os.umask(umask)
    try:
        rt = NodeRuntime(NodeConfig("QM", "127.0.0.1", 0, None))
        rt.qm.define_queue(QueueDef("Q"))
        yield rt
    finally:
        os.umask(umask)  # the runtime makes the process's files private


class ListWriter:
    """Deliveries as lists of messages, each counted as its body plus 150 bytes."""

    def __init__(self) -> None:
        self.sent: list[tuple[list[bytes], int]] = []
        self.arrived = asyncio.Event()

    def encode(self, queue: str, msgs: list[Message]) -> list[Message]:
        return list(msgs)

    def size(self, delivery: list[Message]) -> int:
        return sum(len(m.body) + 150 for m in delivery)

    def drop_last(self, delivery: list[Message]) -> int:
        return len(delivery.pop().body) + 150

    async def write(self, delivery: list[Message], size: int) -> None:
        self.sent.append((bodies(delivery), size))
        self.arrived.set()


async def _from(queue: asyncio.Queue[Ack | None]) -> AsyncIterator[Ack]:
    while (ack := await queue.get()) is not None:
        yield ack


async def _sent(writer: ListWriter, n: int) -> None:
    while len(writer.sent) < n:
        writer.arrived.clear()
        await asyncio.wait_for(writer.arrived.wait(), 5)


def test_a_consumer_gets_what_its_credit_allows_and_keeps_what_it_acknowledged(
    runtime: NodeRuntime,
) -> None:
    qm = runtime.qm
    qm.put("Q", [Message("", str(i).encode()) for i in range(5)])
    node = Messaging(runtime)
    writer = ListWriter()

    async def scenario() -> None:
        acks: asyncio.Queue[Ack | None] = asyncio.Queue()
        limits = DeliveryLimits(max_pending_messages=2)
        task = asyncio.create_task(node.deliver("Q", limits, 10, _from(acks), writer))
        await _sent(writer, 1)
        await asyncio.sleep(0.05)
        assert writer.sent == [([b"0", b"1"], 302)]  # no credit left
        acks.put_nowait(Ack(2, credit_messages=2, credit_bytes=302))
        await _sent(writer, 2)
        assert writer.sent[1] == ([b"2", b"3"], 302)
        acks.put_nowait(Ack(3))
        acks.put_nowait(None)  # the client ends its stream
        await asyncio.wait_for(task, 5)

    asyncio.run(scenario())
    got = qm.get("Q", limit=10)  # 3 acknowledged; the one sent and not acknowledged counted
    assert bodies(got) == [b"3", b"4"] and [m.backout_count for m in got] == [1, 0]


def test_a_delivery_is_trimmed_to_the_response_limit(runtime: NodeRuntime) -> None:
    qm = runtime.qm
    qm.put("Q", [Message("", bytes(400)) for _ in range(3)] + [Message("", bytes(950))])
    node = Messaging(runtime)
    writer = ListWriter()
    limits = DeliveryLimits(max_response_bytes=ENVELOPE + 1000)

    async def scenario() -> None:
        acks: asyncio.Queue[Ack | None] = asyncio.Queue()
        await node.deliver("Q", limits, 10, _from(acks), writer)

    with pytest.raises(MQError) as err:
        asyncio.run(scenario())
    assert err.value.reason_name == "MQRC_MSG_TOO_BIG_FOR_CHANNEL"
    # two 400-byte bodies fit the budget by body size, not with their encoding: one each
    assert writer.sent == [([bytes(400)], 550)] * 3
    left = qm.get("Q", limit=10)  # the one too big went back untouched; the rest backed out
    assert [len(m.body) for m in left] == [400, 400, 400, 950]
    assert [m.backout_count for m in left] == [1, 1, 1, 0]


def test_a_get_under_syncpoint_needs_an_open_connection(runtime: NodeRuntime) -> None:
    qm = runtime.qm
    qm.put("Q", [Message("", b"a"), Message("", b"b")])
    node = Messaging(runtime)

    async def scenario() -> int:
        with pytest.raises(MQError, match="needs a connection"):
            await node.get(GetOptions("Q", unit_of_work="U"))
        with pytest.raises(MQError) as err:
            await node.get(GetOptions("Q", unit_of_work="U", connection_id="CONN.x"))
        assert err.value.reason_name == "MQRC_HCONN_ERROR"
        conn = node.connections.open()
        got = await node.get(GetOptions("Q", max_messages=2, unit_of_work="U", connection_id=conn))
        assert bodies(got) == [b"a", b"b"]
        assert await node.get(GetOptions("Q", wait_ms=50)) == []
        return await node.backout("U", conn)

    assert asyncio.run(scenario()) == 2
    assert [m.backout_count for m in qm.get("Q", limit=10)] == [1, 1]


def test_a_waiting_get_takes_a_message_put_meanwhile(runtime: NodeRuntime) -> None:
    node = Messaging(runtime)

    async def scenario() -> list[Message]:
        getter = asyncio.create_task(node.get(GetOptions("Q", wait_ms=5000)))
        await asyncio.sleep(0.05)
        await node.put("Q", [Message("", b"late")])
        return await asyncio.wait_for(getter, 5)

    assert bodies(asyncio.run(scenario())) == [b"late"]


def test_publish_answers_come_in_order_and_a_read_failure_after_them(
    runtime: NodeRuntime,
) -> None:
    node = Messaging(runtime)
    runtime.qm.subscribe("T/#", name="S")

    async def batches() -> AsyncIterator[list[Publication]]:
        for i in range(3):
            yield [Publication("T/x", Message("", str(i).encode()))]
        raise RuntimeError("the client went away")

    async def scenario() -> list[int]:
        answers = []
        with pytest.raises(RuntimeError, match="went away"):
            async for result in node.in_order_once_durable(batches(), node.publish):
                answers.append(result.deliveries)
        return answers

    assert asyncio.run(scenario()) == [1, 1, 1]
    sub = runtime.qm.pubsub.subs["S"]
    assert bodies(runtime.qm.get(sub.dest, limit=10)) == [b"0", b"1", b"2"]
