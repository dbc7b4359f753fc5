"""Messages that become available without the receiving connection doing anything reach its
receivers: a peek-lock lock that expires (LockDuration), an abandon or a close on another
connection, a send on another connection or through the node's Admin service, a scheduled
message whose time comes, a session that appears while a next-available session receiver
waits. Driven through the real azure-servicebus SDK against a node process."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

pytest.importorskip("azure.servicebus")

from azure.servicebus import (  # noqa: E402
    NEXT_AVAILABLE_SESSION,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
)
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient  # noqa: E402

from qmgr.client import QueueManagerClient  # noqa: E402
from tests.integration import test_sb_admin_http as admin_http  # noqa: E402
from tests.integration.conftest import NodeProcess  # noqa: E402
from tests.integration.test_sb_admin_http import _admin, _conn  # noqa: E402

sb_node = admin_http.sb_node
_quiet_insecure_warning = admin_http._quiet_insecure_warning

LOCK = timedelta(seconds=5)  # the shortest LockDuration Service Bus allows
WAIT = 30  # seconds a receiver may wait for what the test expects (never reached when right)


def _client(node: NodeProcess) -> ServiceBusClient:
    return ServiceBusClient.from_connection_string(_conn(node))


def _aclient(node: NodeProcess) -> AsyncServiceBusClient:
    return AsyncServiceBusClient.from_connection_string(_conn(node))


async def _from_next_session(
    client: AsyncServiceBusClient, queue: str
) -> tuple[str | None, list[str]]:
    """Wait for the next available session of ``queue``, take one message from it (completed);
    the session granted and the bodies."""
    async with client.get_queue_receiver(
        queue, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=WAIT
    ) as receiver:
        got = await receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)
        for m in got:
            await receiver.complete_message(m)
        return receiver.session.session_id, [str(m) for m in got]


def test_an_unsettled_lock_expires_and_the_message_is_delivered_again(
    sb_node: NodeProcess,
) -> None:
    _admin(sb_node).create_queue("expiring", lock_duration=LOCK)
    with _client(sb_node) as client:
        with client.get_queue_sender("expiring") as sender:
            sender.send_messages(ServiceBusMessage("m"))
        with client.get_queue_receiver("expiring") as receiver:
            (first,) = receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)
            assert first.locked_until_utc is not None
            # not settled: once LockDuration has passed the message is available again
            again = receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)
            assert [str(m) for m in again] == ["m"]
            assert again[0].sequence_number == first.sequence_number
            assert again[0].delivery_count == (first.delivery_count or 0) + 1
            assert again[0].lock_token != first.lock_token
            assert datetime.now(UTC) >= first.locked_until_utc
            receiver.complete_message(again[0])
            assert receiver.receive_messages(max_message_count=1, max_wait_time=1) == []
    props = _admin(sb_node).get_queue_runtime_properties("expiring")
    assert props.total_message_count == 0


def test_an_expired_lock_reaches_a_receiver_waiting_on_another_connection(
    sb_node: NodeProcess,
) -> None:
    _admin(sb_node).create_queue("handover", lock_duration=LOCK)

    async def run() -> tuple[ServiceBusReceivedMessage, list[ServiceBusReceivedMessage]]:
        async with _aclient(sb_node) as holder_client, _aclient(sb_node) as waiter_client:
            async with holder_client.get_queue_sender("handover") as sender:
                await sender.send_messages(ServiceBusMessage("h"))
            async with (
                holder_client.get_queue_receiver("handover") as holder,
                waiter_client.get_queue_receiver("handover") as waiter,
            ):
                (held,) = await holder.receive_messages(max_message_count=1, max_wait_time=WAIT)
                got = await waiter.receive_messages(max_message_count=1, max_wait_time=WAIT)
                for m in got:
                    await waiter.complete_message(m)
                return held, got

    held, got = asyncio.run(run())
    assert [str(m) for m in got] == ["h"]
    assert got[0].sequence_number == held.sequence_number
    assert got[0].delivery_count == (held.delivery_count or 0) + 1


def test_an_abandon_and_a_closed_receiver_hand_messages_to_a_waiting_receiver(
    sb_node: NodeProcess,
) -> None:
    _admin(sb_node).create_queue("returns")

    async def run() -> tuple[list[ServiceBusReceivedMessage], list[ServiceBusReceivedMessage]]:
        async with _aclient(sb_node) as first_client, _aclient(sb_node) as waiter_client:
            async with first_client.get_queue_sender("returns") as sender:
                await sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
            async with waiter_client.get_queue_receiver("returns") as waiter:
                async with first_client.get_queue_receiver("returns") as first:
                    taken: list[ServiceBusReceivedMessage] = []
                    while len(taken) < 2:
                        taken += await first.receive_messages(
                            max_message_count=2 - len(taken), max_wait_time=WAIT
                        )
                    waiting = asyncio.create_task(
                        waiter.receive_messages(max_message_count=1, max_wait_time=WAIT)
                    )
                    await asyncio.sleep(0.5)
                    await first.abandon_message(taken[0])  # "a": delivery count + 1
                    got = await waiting
                    waiting = asyncio.create_task(
                        waiter.receive_messages(max_message_count=1, max_wait_time=WAIT)
                    )
                    await asyncio.sleep(0.5)
                # the first receiver closed holding "b": it is released, its count unchanged
                got += await waiting
                for m in got:
                    await waiter.complete_message(m)
                return taken, got

    taken, got = asyncio.run(run())
    assert [str(m) for m in taken] == ["a", "b"]
    assert [str(m) for m in got] == ["a", "b"]
    assert got[0].delivery_count == (taken[0].delivery_count or 0) + 1
    assert got[1].delivery_count == taken[1].delivery_count


def test_a_send_through_the_admin_service_reaches_a_waiting_amqp_receiver(
    sb_node: NodeProcess,
) -> None:
    _admin(sb_node).create_queue("mixed")

    async def run() -> list[str]:
        async with _aclient(sb_node) as client, client.get_queue_receiver("mixed") as receiver:
            waiting = asyncio.create_task(
                receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)
            )
            await asyncio.sleep(0.5)
            with QueueManagerClient(sb_node.address) as qm:
                await asyncio.to_thread(qm.servicebus.send, "mixed", [b"from grpc"])
            got = await waiting
            for m in got:
                await receiver.complete_message(m)
            return [str(m) for m in got]

    assert asyncio.run(run()) == ["from grpc"]


def test_a_scheduled_message_reaches_a_waiting_receiver_when_its_time_comes(
    sb_node: NodeProcess,
) -> None:
    _admin(sb_node).create_queue("later")
    with _client(sb_node) as client:
        with client.get_queue_sender("later") as sender:
            at = datetime.now(UTC) + timedelta(seconds=2)
            (seq,) = sender.schedule_messages(ServiceBusMessage("due"), at)
        with client.get_queue_receiver("later") as receiver:
            got = receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)
            assert [str(m) for m in got] == ["due"]
            assert got[0].sequence_number > seq  # activation enqueues it with a new number
            assert datetime.now(UTC) >= at - timedelta(seconds=1)
            receiver.complete_message(got[0])


def test_a_next_available_session_receiver_gets_a_session_sent_while_it_waits(
    sb_node: NodeProcess,
) -> None:
    _admin(sb_node).create_queue("sessions", requires_session=True)

    async def send_later() -> None:
        await asyncio.sleep(1)
        async with _aclient(sb_node) as sc, sc.get_queue_sender("sessions") as sender:
            await sender.send_messages(ServiceBusMessage("s", session_id="late"))

    async def run() -> tuple[str | None, list[str]]:
        task = asyncio.create_task(send_later())
        async with _aclient(sb_node) as rc:
            granted = await _from_next_session(rc, "sessions")
        await task
        return granted

    assert asyncio.run(run()) == ("late", ["s"])


def test_a_released_session_is_granted_to_a_waiting_session_receiver(
    sb_node: NodeProcess,
) -> None:
    _admin(sb_node).create_queue("handoff", requires_session=True)

    async def run() -> tuple[str | None, list[str]]:
        async with _aclient(sb_node) as first_client, _aclient(sb_node) as second_client:
            async with first_client.get_queue_sender("handoff") as sender:
                await sender.send_messages(ServiceBusMessage("x", session_id="only"))
            first = first_client.get_queue_receiver(
                "handoff", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=WAIT
            )
            await first.__aenter__()
            assert first.session.session_id == "only"

            task = asyncio.create_task(_from_next_session(second_client, "handoff"))
            await asyncio.sleep(1)
            await first.close()  # the session lock goes back: the waiting receiver gets it
            return await task

    assert asyncio.run(run()) == ("only", ["x"])
