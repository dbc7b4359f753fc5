"""A consumer process for the sequenced-delivery kill tests: drains the sessions of a
subscription through qmgr.client.sequenced and appends ``SESSION NUMBER`` per processed message
to a file (flushed and synced before the message is settled). With DIE_AT, it kills itself
with SIGKILL once it has written that many lines (the message in hand handled, not settled).

    python -m tests.integration.sequenced_consumer CONNECTION_STRING TOPIC SUBSCRIPTION OUT
        [DIE_AT]
"""

from __future__ import annotations

import os
import signal
import sys
import time

from azure.servicebus import ServiceBusClient

from qmgr.client.sequenced import drain_sessions


def main() -> None:
    conn, topic, subscription, out = sys.argv[1:5]
    die_at = int(sys.argv[5]) if len(sys.argv) > 5 else None
    written = 0
    with (
        open(out, "a", encoding="utf-8") as log,
        ServiceBusClient.from_connection_string(conn) as client,
    ):

        def handle(message: object) -> None:
            nonlocal written
            props = message.application_properties  # type: ignore[attr-defined]
            number = int(props[b"SequenceNumber"])
            log.write(f"{message.session_id} {number}\n")  # type: ignore[attr-defined]
            log.flush()
            os.fsync(log.fileno())
            written += 1
            if written == die_at:
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(0.01)

        drain_sessions(
            client,
            handle,
            topic_name=topic,
            subscription_name=subscription,
            idle_timeout=3.0,
        )
    print("DRAINED", flush=True)


if __name__ == "__main__":
    main()
