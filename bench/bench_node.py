"""One node on this machine: publish-to-delivery rates, the raw gRPC baseline, and memory.

Run: .venv/bin/python bench/bench_node.py [--messages N] [--skip-memory]

Prints, in one run:
- the raw gRPC streaming rate of an empty echo service (batches of 100, same message shape);
- non-persistent and persistent publish -> delivery with 1 and 10 subscribers (each
  subscriber in its own process), as publications/s and deliveries/s, with the ratio to the
  raw rate;
- the node's peak memory (VmHWM) while holding 1 million queued 100-byte non-persistent messages.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from qmgr.client import OutgoingMessage, QueueManagerClient  # noqa: E402
from qmgr.launcher.launch import start_node  # noqa: E402

BATCH = 100
PAYLOAD = b"x" * 100


def _subscriber(
    address: str,
    topic: str,
    name: str,
    durable: bool,
    expected: int,
    ready: mp.Event,
    done: mp.Queue,
) -> None:  # type: ignore[type-arg]
    client = QueueManagerClient(address)
    sub = client.subscribe(topic, name=name, durable=durable, max_batch=1000)
    ready.set()
    got = 0
    first = last = 0.0
    while got < expected:
        batch = sub.receive_batch(timeout=60)
        if not batch:
            break
        if got == 0:
            first = time.perf_counter()
        got += len(batch)
    last = time.perf_counter()
    done.put((got, first, last))
    sub.close()
    if durable:
        client.unsubscribe(name)


def raw_baseline(n: int) -> float:
    import grpc

    from qmgr.wire import messaging_pb2, messaging_pb2_grpc

    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "echo_server.py")], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    address = line.split("addr=")[1].strip()
    try:
        channel = grpc.insecure_channel(address)
        stub = messaging_pb2_grpc.MessagingStub(channel)

        def requests():  # type: ignore[no-untyped-def]
            for b in range(n // BATCH):
                req = messaging_pb2.PublishRequest(batch_id=b)
                for _ in range(BATCH):
                    p = req.publications.add(topic="bench/topic")
                    p.message.body = PAYLOAD
                yield req

        start = time.perf_counter()
        count = sum(r.accepted for r in stub.PublishStream(requests()))
        elapsed = time.perf_counter() - start
        channel.close()
        return count / elapsed
    finally:
        proc.kill()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pubsub_rate(address: str, n: int, subscribers: int, persistent: bool) -> tuple[float, float]:
    ctx = mp.get_context("spawn")
    done: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
    procs = []
    for i in range(subscribers):
        ready = ctx.Event()
        p = ctx.Process(
            target=_subscriber,
            args=(address, "bench/#", f"B{i}{int(persistent)}", persistent, n, ready, done),
        )
        p.start()
        ready.wait(60)
        procs.append(p)
    client = QueueManagerClient(address)
    pub = client.stream_publisher(batch_size=BATCH, window=16)
    start = time.perf_counter()
    for _ in range(n):
        pub.publish("bench/topic", OutgoingMessage(PAYLOAD, persistent=persistent))
    pub.close()
    results = [done.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(30)
    end = max(r[2] for r in results)
    received = sum(r[0] for r in results)
    elapsed = end - start
    client.close()
    return n / elapsed, received / elapsed if received else 0.0


def peak_memory(address: str, pid: int, count: int) -> tuple[float, float]:
    client = QueueManagerClient(address, timeout=120)
    client.mqsc("DEFINE QLOCAL(BENCH.MEM) MAXDEPTH(999999999)")
    batch = [OutgoingMessage(PAYLOAD, persistent=False) for _ in range(2000)]
    for _ in range(count // len(batch)):
        client.put_many("BENCH.MEM", batch)
    depth = client.mqsc("DISPLAY QLOCAL(BENCH.MEM) CURDEPTH")[0]["CURDEPTH"]
    status = Path(f"/proc/{pid}/status").read_text()
    hwm = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM"))
    client.mqsc("CLEAR QLOCAL(BENCH.MEM)")
    client.close()
    return int(depth), hwm / 1024


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--skip-memory", action="store_true")
    args = parser.parse_args()
    n = args.messages
    print(f"qmgr single-node benchmark: {n} messages of {len(PAYLOAD)} bytes, batches of {BATCH}")
    raw = raw_baseline(max(n, 200_000))
    print(f"  raw gRPC stream (empty echo service)        {raw:>10,.0f} msg/s")
    with tempfile.TemporaryDirectory() as tmp:
        node = start_node("BENCH", data_dir=Path(tmp) / "data", log=Path(tmp) / "node.log")
        try:
            rows = []
            for persistent in (False, True):
                for subs in (1, 10):
                    count = n if not persistent else max(n // 2, 1000)
                    if subs == 10:
                        count = max(count // 5, 1000)
                    cpu0 = cpu_seconds(node.proc.pid)
                    pubs, deliveries = pubsub_rate(node.address, count, subs, persistent)
                    cpu_us = (cpu_seconds(node.proc.pid) - cpu0) / count * 1e6
                    label = f"{'persistent' if persistent else 'non-persistent'}, {subs} sub{'s' if subs > 1 else ''}"
                    rows.append((label, pubs, deliveries))
                    print(
                        f"  {label:<28} {pubs:>10,.0f} pub/s  {deliveries:>10,.0f} deliveries/s"
                        f"  ({deliveries / raw:.0%} of raw; node CPU {cpu_us:.0f} us/publication)"
                    )
            if not args.skip_memory:
                depth, mib = peak_memory(node.address, node.proc.pid, 1_000_000)
                print(
                    f"  node peak memory with {depth:,} queued 100-byte messages: {mib:,.0f} MiB (target < 1024)"
                )
        finally:
            node.proc.terminate()
            node.proc.wait(30)


if __name__ == "__main__":
    main()
