"""Bridges (DEFINE BRIDGE) on a node process: MQ -> Service Bus and Service Bus -> MQ.

Run: .venv/bin/python bench/bench_bridge.py [--messages N]

Starts one node (``qmgr start --servicebus`` with a data directory) and measures, 100-byte
persistent messages:

- MQ publish -> plain durable MQ subscription (the baseline: stream publisher, batches of 100,
  until the subscription's queue holds every message);
- MQ publish -> TOSB bridge -> Service Bus queue (the same publisher, until the queue's
  active message count is N), with its ratio to the baseline;
- Service Bus queue (N sent before) -> FROMSB bridge -> MQ subscription queue;
- latency to a Service Bus receiver (receive-and-delete, prefetch 100) at a paced 200 msg/s,
  p50 / p99 / max from the LoadSentNs property to the SDK handing the message over: sent with
  the SDK straight to a queue (the reference), and published on MQ through a TOSB bridge.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from azure.servicebus import (  # noqa: E402
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
)
from sb_node import servicebus_node  # noqa: E402

from qmgr.client import QueueManagerClient  # noqa: E402
from qmgr.launcher.poll import wait_for  # noqa: E402

BODY = b"x" * 100
Sender = Callable[[], AbstractContextManager[Callable[[str], None]]]


def depth(c: QueueManagerClient, queue: str) -> int:
    ok, records = c.mqsc_ok(f"DISPLAY QLOCAL({queue}) CURDEPTH")
    return int(records[0].attrs["CURDEPTH"]) if ok else 0


def publish(c: QueueManagerClient, topic: str, n: int) -> None:
    publisher = c.stream_publisher(batch_size=100, window=8)
    for i in range(n):
        publisher.publish(topic, BODY, properties={"LoadSeq": str(i + 1)}, persistent=True)
    publisher.close()


def rate(name: str, n: int, run: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    run()
    per_second = n / (time.perf_counter() - t0)
    print(f"{name:<44} {per_second:>9,.0f} msg/s", flush=True)
    return per_second


def latency(name: str, conn: str, queue: str, n: int, per_second: float, send: Sender) -> None:
    """Send ``n`` messages at ``per_second`` with ``send`` while a receive-and-delete receiver
    on ``queue`` notes how long each took from its LoadSentNs property; prints percentiles."""
    seen: list[float] = []
    ready = threading.Event()

    def receive() -> None:
        with (
            ServiceBusClient.from_connection_string(conn) as client,
            client.get_queue_receiver(
                queue,
                receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE,
                prefetch_count=100,
            ) as receiver,
        ):
            ready.set()
            while len(seen) < n:
                for m in receiver.receive_messages(max_message_count=100, max_wait_time=5):
                    now = time.time_ns()
                    props = m.application_properties or {}
                    seen.append((now - int(props[b"LoadSentNs"])) / 1e6)

    thread = threading.Thread(target=receive)
    thread.start()
    ready.wait(30)
    time.sleep(0.5)
    start = time.perf_counter()
    with send() as one:
        for i in range(n):
            delay = start + i / per_second - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            one(str(time.time_ns()))
    thread.join(120)
    seen.sort()
    pick = seen[int(0.5 * (len(seen) - 1))], seen[int(0.99 * (len(seen) - 1))], seen[-1]
    print(
        f"{name + f' ({per_second:.0f}/s)':<44} "
        f"p50 {pick[0]:.1f} ms   p99 {pick[1]:.1f} ms   max {pick[2]:.1f} ms",
        flush=True,
    )


@contextlib.contextmanager
def mq_sender(c: QueueManagerClient) -> Iterator[Callable[[str], None]]:
    publisher = c.stream_publisher(batch_size=1, window=64)
    yield lambda sent: publisher.publish(
        "Lat/x", BODY, properties={"LoadSentNs": sent}, persistent=True
    )
    publisher.close()


@contextlib.contextmanager
def sb_sender(conn: str) -> Iterator[Callable[[str], None]]:
    with (
        ServiceBusClient.from_connection_string(conn) as client,
        client.get_queue_sender("direct") as sender,
    ):
        yield lambda sent: sender.send_messages(
            ServiceBusMessage(BODY, application_properties={"LoadSentNs": sent})
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    args = parser.parse_args()
    n = max(100, args.messages // 100 * 100)
    with servicebus_node("qmgr-bench-bridge-") as sb:
        conn, admin = sb.conn, sb.admin
        for queue in ("out", "in", "lat", "direct"):
            admin.create_queue(queue)
        with QueueManagerClient(sb.node.address, timeout=60) as c:
            c.mqsc("DEFINE QLOCAL(PLAIN) MAXDEPTH(999999999)")
            c.mqsc("DEFINE SUB(PLAIN) TOPICSTR('Plain/#') DEST(PLAIN)")
            base_rate = rate(
                "MQ publish -> MQ subscription (baseline)",
                n,
                lambda: (
                    publish(c, "Plain/x", n),
                    wait_for(lambda: depth(c, "PLAIN") >= n, 300.0, 0.01, "PLAIN filled"),
                ),
            )
            c.mqsc("DEFINE BRIDGE(OUT) DIRECTION(TOSB) TOPICSTR('Out/#') SBENTITY('out')")
            out_rate = rate(
                "MQ publish -> TOSB bridge -> SB queue",
                n,
                lambda: (
                    publish(c, "Out/x", n),
                    wait_for(
                        lambda: admin.get_queue_runtime_properties("out").active_message_count >= n,
                        300.0,
                        0.01,
                        "the Service Bus queue filled",
                    ),
                ),
            )
            print(f"{'  TOSB / baseline':<44} {out_rate / base_rate:>9.0%}", flush=True)
            with (
                ServiceBusClient.from_connection_string(conn) as client,
                client.get_queue_sender("in") as sender,
            ):
                for _ in range(n // 100):
                    sender.send_messages([ServiceBusMessage(BODY) for _ in range(100)])
            c.mqsc("DEFINE QLOCAL(IN) MAXDEPTH(999999999)")
            c.mqsc("DEFINE SUB(IN) TOPICSTR('In/#') DEST(IN)")
            rate(
                "SB queue -> FROMSB bridge -> MQ subscription",
                n,
                lambda: (
                    c.mqsc("DEFINE BRIDGE(IN) DIRECTION(FROMSB) SBENTITY('in') TOPICSTR('In/x')"),
                    wait_for(lambda: depth(c, "IN") >= n, 300.0, 0.01, "IN filled"),
                ),
            )
            c.mqsc("DEFINE BRIDGE(LAT) DIRECTION(TOSB) TOPICSTR('Lat/#') SBENTITY('lat')")
            count = min(n, 2000)
            latency(
                "latency SB send -> SB receiver",
                conn,
                "direct",
                count,
                200.0,
                lambda: sb_sender(conn),
            )
            latency(
                "latency MQ publish -> bridge -> SB receiver",
                conn,
                "lat",
                count,
                200.0,
                lambda: mq_sender(c),
            )


if __name__ == "__main__":
    main()
