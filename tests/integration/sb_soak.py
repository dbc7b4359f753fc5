"""What the two soak modules (test_sb_soak.py, sync; test_sb_soak_async.py, async) share:
their volume, the session lock the SDK's renewer keeps, and filling and counting a queue. They
are two modules so that two test workers run them side by side."""

from __future__ import annotations

from datetime import timedelta

from azure.servicebus import ServiceBusClient, ServiceBusMessage

from tests.integration.conftest import NodeProcess
from tests.integration.test_sb_admin_http import _admin, _conn

N = 100_000
BATCH = 100
# The SDK's renewer renews a lock once it has 10 s or less to run, so with 15 s it renews every
# few seconds and the lock survives a renewer starved for 10 s: on a loaded 2-core machine a
# 5-second lock once ran out client-side (the SDK checks it against its own clock) before the
# renewer's thread had its turn, which says nothing about the node.
SESSION_LOCK = timedelta(seconds=15)


def fill_session(node: NodeProcess, queue: str, session: str, count: int) -> None:
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


def left(node: NodeProcess, queue: str) -> int:
    with _admin(node) as admin:
        return admin.get_queue_runtime_properties(queue).total_message_count or 0
