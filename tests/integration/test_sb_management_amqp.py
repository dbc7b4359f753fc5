"""``$management`` operations over a real node's Service Bus port, driven only through the real
azure-servicebus 7.15.0 client: peek, deferred messages, lock renewal, scheduling, sessions."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable

import pytest

pytest.importorskip("azure.servicebus")
pytest.importorskip("qmgr.node.amqp_server", reason="the node's AMQP driver is not in this tree")

from azure.servicebus import ServiceBusClient, ServiceBusMessage  # noqa: E402
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient  # noqa: E402
from azure.servicebus.exceptions import MessageNotFoundError  # noqa: E402

from tests.integration.conftest import NodeProcess  # noqa: E402
from tests.integration.test_sb_admin_http import (  # noqa: E402, F401 (fixtures)
    _admin,
    _conn,
    _quiet_insecure_warning,
)


@pytest.fixture
def conn(node_factory: Callable[..., NodeProcess]) -> str:
    node = node_factory("QM1", args=("--servicebus",))
    admin = _admin(node)
    admin.create_queue("work")
    admin.create_queue("flows", requires_session=True)
    return _conn(node)


def test_peek_defer_receive_deferred_renew_and_settle(conn: str) -> None:
    with ServiceBusClient.from_connection_string(conn) as client:
        with client.get_queue_sender("work") as sender:
            sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(3)])
        with client.get_queue_receiver("work", max_wait_time=5) as receiver:
            peeked = receiver.peek_messages(max_message_count=10)
            assert [str(m) for m in peeked] == ["m0", "m1", "m2"]
            got = []
            while len(got) < 3:
                batch = receiver.receive_messages(max_message_count=3, max_wait_time=5)
                assert batch, f"only {len(got)} of 3 arrived"
                got += batch
            for m in got:
                receiver.defer_message(m)
            seqs = [m.sequence_number for m in got]
            deferred = receiver.receive_deferred_messages(seqs)
            assert [str(m) for m in deferred] == ["m0", "m1", "m2"]
            before = deferred[0].locked_until_utc
            assert receiver.renew_message_lock(deferred[0]) >= before
            receiver.complete_message(deferred[0])
            receiver.dead_letter_message(deferred[1], reason="bad", error_description="very")
            receiver.abandon_message(deferred[2])
            with pytest.raises(MessageNotFoundError):
                receiver.receive_deferred_messages([seqs[0]])
            left = receiver.peek_messages(max_message_count=10, sequence_number=1)
            assert [str(m) for m in left] == ["m2"]
        with client.get_queue_receiver("work", sub_queue="deadletter", max_wait_time=5) as dlq:
            [dead] = dlq.receive_messages(max_message_count=1, max_wait_time=5)
            assert dead.dead_letter_reason == "bad"
            dlq.complete_message(dead)


def test_schedule_and_cancel(conn: str) -> None:
    at = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    with ServiceBusClient.from_connection_string(conn) as client:
        with client.get_queue_sender("work") as sender:
            seqs = sender.schedule_messages([ServiceBusMessage("a"), ServiceBusMessage("b")], at)
            assert len(seqs) == 2
            sender.cancel_scheduled_messages(seqs[0])
        with client.get_queue_receiver("work") as receiver:
            peeked = receiver.peek_messages(max_message_count=10)
            assert [m.sequence_number for m in peeked] == seqs[1:]
            assert peeked[0].scheduled_enqueue_time_utc is not None


def test_session_state_lock_and_listing(conn: str) -> None:
    with ServiceBusClient.from_connection_string(conn) as client:
        with client.get_queue_sender("flows") as sender:
            sender.send_messages([ServiceBusMessage("x", session_id="a")])
        assert list(client.list_queue_sessions("flows")) == ["a"]
        with client.get_queue_receiver("flows", session_id="a", max_wait_time=5) as receiver:
            session = receiver.session
            session.set_state("step-1")
            assert session.get_state() == b"step-1"
            assert session.renew_lock() > dt.datetime.now(dt.UTC)
            [m] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            receiver.complete_message(m)


def test_the_async_client(conn: str) -> None:
    async def run() -> None:
        async with AsyncServiceBusClient.from_connection_string(conn) as client:
            async with client.get_queue_sender("flows") as sender:
                await sender.send_messages(ServiceBusMessage("y", session_id="b"))
            receiver = client.get_queue_receiver("flows", session_id="b", max_wait_time=5)
            async with receiver:
                await receiver.session.set_state(b"s1")
                assert await receiver.session.get_state() == b"s1"
                [peeked] = await receiver.peek_messages(max_message_count=5)
                assert str(peeked) == "y"

    asyncio.run(run())
