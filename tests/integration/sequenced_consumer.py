"""A consumer process for the sequenced-delivery kill test: drains the sessions of a
subscription through qmgr.client.sequenced and appends ``SESSION NUMBER`` per processed message
to a file (flushed and synced before the message is settled).

    python -m tests.integration.sequenced_consumer CONNECTION_STRING TOPIC SUBSCRIPTION OUT
"""

from __future__ import annotations

import os
import sys
import time

from azure.servicebus import ServiceBusClient

from qmgr.client.sequenced import drain_sessions


def main() -> None:
    conn, topic, subscription, out = sys.argv[1:5]
    with (
        open(out, "a", encoding="utf-8") as log,
        ServiceBusClient.from_connection_string(conn) as client,
    ):

        def handle(message: object) -> None:
            props = message.application_properties  # type: ignore[attr-defined]
            number = int(props[b"SequenceNumber"])
            log.write(f"{message.session_id} {number}\n")  # type: ignore[attr-defined]
            log.flush()
            os.fsync(log.fileno())
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
