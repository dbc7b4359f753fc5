"""Soak of one AMQP connection with the real azure-servicebus SDK against a real node: 100,000
``$management`` calls and 100,000 transfers over one connection, sync and async, with the SDK's
``AutoLockRenewer`` renewing beside them. Every credit, window, delivery-id and handle a long-lived
client uses is crossed many times over (the SDK grants its ``$management`` reply link 10,000
credits once and never tops them up; the session windows are 5,000 and 65,536), and everything
must be answered, in order, once.

The management calls and the received messages go on separate connections because of the SDK's
own limit: azure-servicebus 7.15 never restores its session's outgoing window, so once a
connection has sent 65,536 transfers (management requests included) its next flow frame fails to
encode; a receiver sends one with every ``receive_messages`` call (see docs/servicebus.md)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

pytest.importorskip("azure.servicebus")

from azure.servicebus import (  # noqa: E402
    AutoLockRenewer,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
)
from azure.servicebus.aio import AutoLockRenewer as AsyncAutoLockRenewer  # noqa: E402
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient  # noqa: E402

from tests.integration import test_sb_admin_http as admin_http  # noqa: E402
from tests.integration.conftest import NodeProcess  # noqa: E402
from tests.integration.test_sb_admin_http import _admin, _conn  # noqa: E402

sb_node = admin_http.sb_node
_quiet_insecure_warning = admin_http._quiet_insecure_warning

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

N = 100_000
BATCH = 100
# The SDK's renewer renews a lock once it has 10 s or less to run, so with 15 s it renews every
# few seconds and the lock survives a renewer starved for 10 s: on a loaded 2-core machine a
# 5-second lock once ran out client-side (the SDK checks it against its own clock) before the
# renewer's thread had its turn, which says nothing about the node.
SESSION_LOCK = timedelta(seconds=15)


def _fill_session(node: NodeProcess, queue: str, session: str, count: int) -> None:
    with (
        ServiceBusClient.from_connection_string(_conn(node)) as client,
        client.get_queue_sender(queue) as sender,
    ):
        for start in range(0, count, BATCH):
            sender.send_messages(
                [
                    ServiceBusMessage(str(i), session_id=session)
                    for i in range(start, min(count, start + BATCH))
                ]
            )


def _left(node: NodeProcess, queue: str) -> int:
    with _admin(node) as admin:
        return admin.get_queue_runtime_properties(queue).total_message_count


def test_sync_100k_management_calls_and_100k_transfers_each_on_one_connection(
    sb_node: NodeProcess,
) -> None:
    """Sync: one session receiver (one connection) makes 100,000 ``$management`` calls
    (``set_state``/``get_state``) while ``AutoLockRenewer`` renews its 15-second session lock on
    the same connection; another receiver (one connection) takes 100,000 messages, peek-lock,
    and completes each. Every call answered, every message once, in order."""
    with _admin(sb_node) as admin:
        admin.create_queue("soak", requires_session=True, lock_duration=SESSION_LOCK)
        admin.create_queue("soak-q")
    _fill_session(sb_node, "soak", "s1", 1)
    with (
        ServiceBusClient.from_connection_string(_conn(sb_node)) as client,
        client.get_queue_sender("soak-q") as sender,
    ):
        for start in range(0, N, BATCH):
            sender.send_messages([ServiceBusMessage(str(i)) for i in range(start, start + BATCH)])

    renewer = AutoLockRenewer(max_lock_renewal_duration=3600)
    with (
        ServiceBusClient.from_connection_string(_conn(sb_node)) as client,
        client.get_queue_receiver("soak", session_id="s1") as receiver,
    ):
        session = receiver.session
        renewer.register(receiver, session)
        for i in range(N // 2):
            session.set_state(str(i).encode())
            assert session.get_state() == str(i).encode()
        renewer.close()
        assert not session.auto_renew_error

    got: list[int] = []
    with (
        ServiceBusClient.from_connection_string(_conn(sb_node)) as client,
        client.get_queue_receiver("soak-q") as receiver,
    ):
        while len(got) < N:
            batch = receiver.receive_messages(max_message_count=BATCH, max_wait_time=10)
            assert batch, f"nothing more after {len(got)} messages"
            for msg in batch:
                got.append(int(str(msg)))
                receiver.complete_message(msg)
        # nothing more arrives: a late duplicate would show here
        assert receiver.receive_messages(max_message_count=10, max_wait_time=3) == []
    # each once; a queue without sessions promises no order (once, under heavy load, one
    # message came after its successor), so the order is not asserted
    assert len(got) == N and sorted(got) == list(range(N))
    assert _left(sb_node, "soak-q") == 0


def test_async_sender_receiver_and_management_100k_each(sb_node: NodeProcess) -> None:
    """Async, three connections soaked at once: 100,000 single-message sends on one sender
    (the node's sender credit topped up 400 times, the SDK's outgoing window crossed), 100,000 messages received and completed on
    one receiver, and 100,000 ``set_state``/``get_state`` calls on one session receiver whose
    lock ``AutoLockRenewer`` keeps; every message once, every call answered."""
    with _admin(sb_node) as admin:
        admin.create_queue("soak-q")
        admin.create_queue("soak-s", requires_session=True, lock_duration=SESSION_LOCK)
    _fill_session(sb_node, "soak-s", "s1", 1)

    async def run() -> tuple[list[int], int]:
        async with AsyncServiceBusClient.from_connection_string(_conn(sb_node)) as client:

            async def send() -> None:
                async with client.get_queue_sender("soak-q") as sender:
                    for i in range(N):
                        await sender.send_messages(ServiceBusMessage(str(i)))

            async def receive() -> list[int]:
                seen: list[int] = []
                async with client.get_queue_receiver("soak-q", prefetch_count=200) as receiver:
                    while len(seen) < N:
                        batch = await receiver.receive_messages(
                            max_message_count=BATCH, max_wait_time=20
                        )
                        assert batch, f"nothing more after {len(seen)} messages"
                        for msg in batch:
                            seen.append(int(str(msg)))
                            await receiver.complete_message(msg)
                    late = await receiver.receive_messages(max_message_count=10, max_wait_time=3)
                    assert late == [], "a message arrived after all were received"
                return seen

            async def manage() -> int:
                renewer = AsyncAutoLockRenewer(max_lock_renewal_duration=3600)
                calls = 0
                async with client.get_queue_receiver("soak-s", session_id="s1") as receiver:
                    session = receiver.session
                    renewer.register(receiver, session)
                    for i in range(N // 2):
                        await session.set_state(str(i).encode())
                        assert await session.get_state() == str(i).encode()
                        calls += 2
                    await renewer.close()
                    assert not session.auto_renew_error
                return calls

            _, seen, calls = await asyncio.gather(send(), receive(), manage())
            return seen, calls

    seen, calls = asyncio.run(run())
    assert calls == N
    assert len(seen) == N and len(set(seen)) == N
    assert _left(sb_node, "soak-q") == 0
    with (
        ServiceBusClient.from_connection_string(_conn(sb_node)) as client,
        client.get_queue_receiver(
            "soak-q", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
        ) as receiver,
    ):
        assert receiver.receive_messages(max_message_count=10, max_wait_time=2) == []
