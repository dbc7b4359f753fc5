"""Durable Service Bus traffic through a real node: sends acknowledged only once committed
(the node's SQLite group commit), receive and complete, over the Admin service's calls.

Run: .venv/bin/python bench/bench_servicebus_node.py [--messages N] [--clients C]

Prints messages per second for: sends of one message per call from one client and from C
clients at once (group commit shares each fsync among the calls waiting), sends of 100 messages
per call, peek-lock receives of 100 with a complete call per message, and receive-and-delete
of 100 per call. The engine alone is measured by bench/bench_servicebus.py; this is what the
store and the gRPC calls add.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from qmgr.client import QueueManagerClient  # noqa: E402
from qmgr.launcher.launch import start_node  # noqa: E402
from qmgr.servicebus.message import SbMessage  # noqa: E402

PAYLOAD = b"x" * 100


def rate(count: int, seconds: float) -> str:
    return f"{count / seconds:10.0f} msg/s"


def sends(address: str, queue: str, total: int, per_call: int, clients: int) -> float:
    """Seconds to send ``total`` messages, ``per_call`` a call, from ``clients`` threads."""
    share = total // clients

    def work() -> None:
        with QueueManagerClient(address) as qm:
            sb = qm.servicebus
            for _ in range(share // per_call):
                sb.send(queue, [SbMessage(body=PAYLOAD) for _ in range(per_call)])

    threads = [threading.Thread(target=work) for _ in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    n, clients = args.messages, args.clients
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        node = start_node(
            "BENCH", data_dir=base / "BENCH", log=base / "node.log", extra_args=["--servicebus"]
        )
        try:
            with QueueManagerClient(node.address) as qm:
                sb = qm.servicebus
                for name in ("one", "many", "batch"):
                    sb.create_queue(name, {"MaxSizeInMegabytes": 5120})
                print(f"durable Service Bus traffic through a node ({n} messages each)")
                print(
                    f"send, 1 a call, 1 client      {rate(n, sends(node.address, 'one', n, 1, 1))}"
                )
                took = sends(node.address, "many", n, 1, clients)
                print(f"send, 1 a call, {clients} clients     {rate(n, took)}")
                took = sends(node.address, "batch", n * 10, 100, 1)
                print(f"send, 100 a call              {rate(n * 10, took)}")

                start = time.perf_counter()
                done = 0
                while done < n:
                    got = sb.receive("many", 100)
                    for m in got:
                        assert m.lock_token is not None
                        sb.complete("many", m.lock_token)
                    done += len(got)
                print(f"peek-lock 100 + complete each {rate(done, time.perf_counter() - start)}")

                start = time.perf_counter()
                done = 0
                while True:
                    got = sb.receive("batch", 100, mode="receive_and_delete")
                    if not got:
                        break
                    done += len(got)
                print(f"receive-and-delete, 100 a call {rate(done, time.perf_counter() - start)}")
        finally:
            node.proc.terminate()
            node.proc.wait(20)


if __name__ == "__main__":
    main()
