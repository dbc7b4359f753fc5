"""A node that stops closes its Service Bus connections itself, with ``amqp:connection:forced``
and the reason, before it closes its store: a client mid-receive reads why instead of a commit
failing on a closed database, and what was acknowledged stays."""

from __future__ import annotations

import signal
import threading
from typing import Any

import pytest

pytest.importorskip("azure.servicebus")

from azure.servicebus import ServiceBusClient, ServiceBusMessage  # noqa: E402
from azure.servicebus.exceptions import ServiceBusError  # noqa: E402

from tests.integration import test_sb_admin_http as admin_http  # noqa: E402
from tests.integration.conftest import NodeProcess  # noqa: E402
from tests.integration.test_sb_admin_http import _admin, _conn  # noqa: E402

sb_node = admin_http.sb_node
_quiet_insecure_warning = admin_http._quiet_insecure_warning


def test_a_stopping_node_closes_its_connections_with_the_reason(sb_node: NodeProcess) -> None:
    with _admin(sb_node) as admin:
        admin.create_queue("work")
    with ServiceBusClient.from_connection_string(_conn(sb_node), retry_total=0) as client:
        with client.get_queue_sender("work") as sender:
            sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(5)])
        receiver = client.get_queue_receiver("work", max_wait_time=30)
        with receiver:
            assert len(receiver.receive_messages(max_message_count=2, max_wait_time=5)) >= 1
            outcome: list[Any] = []

            def receive() -> None:
                try:
                    while True:  # the queue is soon empty: waits for more
                        receiver.receive_messages(max_message_count=10, max_wait_time=30)
                except ServiceBusError as exc:
                    outcome.append(exc)

            waiting = threading.Thread(target=receive, daemon=True)
            waiting.start()
            assert sb_node.proc is not None
            sb_node.proc.send_signal(signal.SIGTERM)
            waiting.join(60)
            assert not waiting.is_alive()  # nothing hangs
    assert sb_node.proc.wait(30) == 0
    assert outcome, "the receive ended without an error"
    text = str(outcome[0])
    assert "connection:forced" in text or "the node is stopping" in text, text
    log = sb_node.log.read_text()
    assert "closed database" not in log
