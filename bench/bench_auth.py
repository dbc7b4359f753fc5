"""The cost of application security on one machine: unary puts and streamed publications on
a node without security, with --auth, with TLS, and with both, measured in the same run.

Run: .venv/bin/python bench/bench_auth.py [--messages N] [--puts N] [--rounds R]

Each configuration is its own node (started with those options) and is measured ``--rounds``
times, interleaved with the others (in a rotating order); the median round of each is printed
with its ratio to the node without security, as messages per second and as the node's CPU time
per message (which other load on the machine disturbs less than the rate). Target: --auth costs
under 5% on streaming (credentials are checked once per call or stream, scrypt once per
distinct user and password).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from qmgr.client import OutgoingMessage, QueueManagerClient  # noqa: E402
from qmgr.launcher.launch import Launched, start_node  # noqa: E402
from qmgr.security import pki  # noqa: E402
from qmgr.security.files import write_private  # noqa: E402
from qmgr.security.users import User, Users, hash_password  # noqa: E402

BATCH = 100
PAYLOAD = b"x" * 100
USER, PASSWORD = "bench", "bench-Pa55"


def setup(base: Path) -> tuple[dict[str, list[str]], dict[str, dict[str, Any]]]:
    """Node options and client options of each configuration."""
    now = datetime.now(UTC)
    ca = pki.make_ca("BENCH", now)
    node = pki.issue(ca, "BENCH", now)
    (base / "ca.pem").write_bytes(ca.cert_pem)
    (base / "node.pem").write_bytes(node.cert_pem)
    write_private(base / "node.key", node.key_pem)
    users = Users([User(USER, hash_password(PASSWORD), frozenset({"mqm"}))])
    write_private(base / "users.json", users.render())
    tls = ["--tls-cert", str(base / "node.pem"), "--tls-key", str(base / "node.key")]
    auth = ["--auth", str(base / "users.json")]
    creds = {"user": USER, "password": PASSWORD}
    ca_opt = {"tls_ca": base / "ca.pem"}
    return (
        {"plain": [], "auth": auth, "tls": tls, "tls+auth": tls + auth},
        {"plain": {}, "auth": creds, "tls": ca_opt, "tls+auth": {**ca_opt, **creds}},
    )


Result = tuple[float, float]  # messages per second, node CPU microseconds per message


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def unary_puts(client: QueueManagerClient, n: int) -> None:
    for _ in range(n):
        client.put("BENCH.Q", PAYLOAD, persistent=False)
    client.mqsc("CLEAR QLOCAL(BENCH.Q)")


def stream_publish(client: QueueManagerClient, n: int) -> None:
    message = OutgoingMessage(PAYLOAD, persistent=False)
    publisher = client.stream_publisher(batch_size=BATCH, window=16)
    for _ in range(n):
        publisher.publish("bench/auth", message)
    publisher.close()


def measure(run: Any, client: QueueManagerClient, pid: int, n: int) -> Result:
    cpu = cpu_seconds(pid)
    start = time.perf_counter()
    run(client, n)
    elapsed = time.perf_counter() - start
    return n / elapsed, (cpu_seconds(pid) - cpu) / n * 1e6


def median(rounds: list[Result]) -> Result:
    return statistics.median(r for r, _ in rounds), statistics.median(c for _, c in rounds)


def print_table(title: str, results: dict[str, list[Result]]) -> None:
    base_rate, base_cpu = median(results["plain"])
    print(f"  {title} (median of {len(results['plain'])}; ratio to plain):")
    for label, rounds in results.items():
        rate, cpu = median(rounds)
        print(
            f"    {label:<9} {rate:>9,.0f} msg/s ({rate / base_rate:>5.0%})"
            f"  node {cpu:>6.1f} us CPU/msg ({cpu / base_cpu:>5.0%})"
        )
    cost = [
        median(results[secured])[1] / median(results[base])[1] - 1
        for secured, base in (("auth", "plain"), ("tls+auth", "tls"))
    ]
    print(f"    node CPU cost of --auth: {cost[0]:+.1%} (plain TCP), {cost[1]:+.1%} (over TLS)")


def check_cost(n: int = 100_000) -> float:
    """Microseconds the node spends per call checking credentials it has verified before
    (the interceptor alone, in this process)."""
    import asyncio

    import grpc

    from qmgr.client.connect import call_metadata
    from qmgr.rpc.auth import ConnectionAuthentication

    users = Users([User(USER, hash_password(PASSWORD), frozenset({"mqm"}))])
    interceptor = ConnectionAuthentication(users)
    handler = grpc.unary_unary_rpc_method_handler(lambda request, context: None)

    class Details:
        method = "/qmgr.wire.Messaging/Put"
        invocation_metadata = (*call_metadata(USER, PASSWORD), ("user-agent", "grpc-python"))

    async def continuation(details: Any) -> Any:
        return handler

    async def run() -> float:
        details = Details()
        await interceptor.intercept_service(continuation, details)  # scrypt, once
        start = time.perf_counter()
        for _ in range(n):
            await interceptor.intercept_service(continuation, details)
        checked = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(n):
            await continuation(details)
        return (checked - (time.perf_counter() - start)) / n * 1e6

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=200_000, help="streamed publications")
    parser.add_argument("--puts", type=int, default=4_000, help="unary puts")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(
        f"qmgr application security benchmark: {args.puts} unary puts, {args.messages} streamed "
        f"publications of {len(PAYLOAD)} bytes (batches of {BATCH})"
    )
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        node_args, client_args = setup(base)
        nodes: dict[str, Launched] = {}
        clients: dict[str, QueueManagerClient] = {}
        try:
            for label, extra in node_args.items():
                nodes[label] = start_node(
                    f"B{len(nodes)}",
                    data_dir=None,
                    log=base / f"{label}.log",
                    extra_args=extra,
                    env={**os.environ, "QMGR_HOME": str(base / "home")},
                )
                clients[label] = QueueManagerClient(nodes[label].address, **client_args[label])
                clients[label].mqsc("DEFINE QLOCAL(BENCH.Q) MAXDEPTH(999999999)")
            puts: dict[str, list[Result]] = {label: [] for label in nodes}
            streams: dict[str, list[Result]] = {label: [] for label in nodes}
            labels = list(nodes)
            for r in range(args.rounds):
                for label in labels[r % len(labels) :] + labels[: r % len(labels)]:
                    pid = nodes[label].proc.pid
                    puts[label].append(measure(unary_puts, clients[label], pid, args.puts))
                    streams[label].append(
                        measure(stream_publish, clients[label], pid, args.messages)
                    )
            print_table("unary put", puts)
            print_table("streamed publish", streams)
            print(f"  the --auth check of a call with known credentials: {check_cost():.1f} us")
        finally:
            for client in clients.values():
                client.close()
            for launched in nodes.values():
                launched.proc.terminate()
                launched.proc.wait(30)


if __name__ == "__main__":
    main()
