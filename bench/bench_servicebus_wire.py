"""The real azure-servicebus SDK against a node process, over AMQP on the Service Bus port.

Run: .venv/bin/python bench/bench_servicebus_wire.py [--messages N]

Starts one node (``qmgr start --servicebus`` with a data directory, so sends and
receive-and-delete wait for the disk), then drives it with the sync SDK client in this process,
100-byte bodies:

- batched send (lists of 100);
- peek-lock receive (32 per call, prefetch 100) + complete, one message at a time;
- receive-and-delete (100 per call, prefetch 100);
- session receive (peek-lock + complete on a session queue, one session).

Each prints msg/s and the CPU per message of the node process and of this client process
(read from /proc and ``os.times``). Target: the node spends less CPU per message than the
client; peek-lock receive + complete at least 5,000 msg/s.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from azure.servicebus import (  # noqa: E402
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
    ServiceBusReceiver,
    ServiceBusSender,
)
from sb_node import servicebus_node  # noqa: E402

BODY = "x" * 100


def process_cpu(pid: int | None) -> float:
    """CPU seconds (user + system) of ``pid``, or of this process when None."""
    if pid is None:
        t = os.times()
        return t.user + t.system
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(name: str, n: int, node_pid: int, run: Callable[[], None]) -> None:
    node0, me0, t0 = process_cpu(node_pid), process_cpu(None), time.perf_counter()
    run()
    elapsed = time.perf_counter() - t0
    node_ms = 1000 * (process_cpu(node_pid) - node0) / n
    client_ms = 1000 * (process_cpu(None) - me0) / n
    print(
        f"{name:<28} {n / elapsed:>9,.0f} msg/s   node {node_ms:.3f} ms/msg   "
        f"client {client_ms:.3f} ms/msg",
        flush=True,
    )


def send_all(sender: ServiceBusSender, n: int, session: str | None = None) -> None:
    for _ in range(n // 100):
        sender.send_messages([ServiceBusMessage(BODY, session_id=session) for _ in range(100)])


def settle_all(receiver: ServiceBusReceiver, n: int) -> None:
    got = 0
    while got < n:
        for m in receiver.receive_messages(max_message_count=32, max_wait_time=5):
            receiver.complete_message(m)
            got += 1


def drain_all(receiver: ServiceBusReceiver, n: int) -> None:
    got = 0
    while got < n:
        got += len(receiver.receive_messages(max_message_count=100, max_wait_time=5))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    args = parser.parse_args()
    n = max(100, args.messages // 100 * 100)
    with servicebus_node("qmgr-bench-sb-") as sb:
        conn, admin = sb.conn, sb.admin
        admin.create_queue("bench")
        admin.create_queue("bench-sessions", requires_session=True)
        pid = sb.node.proc.pid
        with ServiceBusClient.from_connection_string(conn) as client:
            # links are opened before and closed after each measure: only the traffic is timed
            with client.get_queue_sender("bench") as sender:
                measure("batched send (100)", n, pid, lambda: send_all(sender, n))
                with client.get_queue_receiver("bench", prefetch_count=100) as receiver:
                    measure("peek-lock receive + complete", n, pid, lambda: settle_all(receiver, n))
                send_all(sender, n)
                with client.get_queue_receiver(
                    "bench",
                    receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE,
                    prefetch_count=100,
                ) as receiver:
                    measure("receive-and-delete", n, pid, lambda: drain_all(receiver, n))
            with client.get_queue_sender("bench-sessions") as sender:
                send_all(sender, n, session="s")
            with client.get_queue_receiver(
                "bench-sessions", session_id="s", prefetch_count=100
            ) as receiver:
                measure("session receive + complete", n, pid, lambda: settle_all(receiver, n))


if __name__ == "__main__":
    main()
