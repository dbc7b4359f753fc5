"""Soak of one AMQP connection with the real async azure-servicebus SDK against a real node:
three connections at once, each carrying 100,000 sends, receives or ``$management`` calls (the
sync soak is test_sb_soak.py, a module of its own so that another worker runs it meanwhile)."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("azure.servicebus")

from azure.servicebus import (  # noqa: E402
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
)
from azure.servicebus.aio import AutoLockRenewer as AsyncAutoLockRenewer  # noqa: E402
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient  # noqa: E402

from tests.integration import test_sb_admin_http as admin_http  # noqa: E402
from tests.integration.conftest import NodeProcess  # noqa: E402
from tests.integration.sb_soak import BATCH, SESSION_LOCK, N, fill_session, left  # noqa: E402
from tests.integration.test_sb_admin_http import _admin, _conn  # noqa: E402

sb_node = admin_http.sb_node
_quiet_insecure_warning = admin_http._quiet_insecure_warning

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_async_sender_receiver_and_management_100k_each(sb_node: NodeProcess) -> None:
    """Async, three connections soaked at once: 100,000 single-message sends on one sender
    (the node's sender credit topped up 400 times, the SDK's outgoing window crossed), 100,000 messages received and completed on
    one receiver, and 100,000 ``set_state``/``get_state`` calls on one session receiver whose
    lock ``AutoLockRenewer`` keeps; every message once, every call answered."""
    with _admin(sb_node) as admin:
        admin.create_queue("soak-q")
        admin.create_queue("soak-s", requires_session=True, lock_duration=SESSION_LOCK)
    fill_session(sb_node, "soak-s", "s1", 1)

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
    assert left(sb_node, "soak-q") == 0
    with (
        ServiceBusClient.from_connection_string(_conn(sb_node)) as client,
        client.get_queue_receiver(
            "soak-q", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
        ) as receiver,
    ):
        assert receiver.receive_messages(max_message_count=10, max_wait_time=2) == []
