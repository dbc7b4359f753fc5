"""The cost of application security on one machine: unary puts and streamed publications on
a node without security, with --auth, with TLS, and with both, measured in the same run.

Run: .venv/bin/python bench/bench_auth.py [--messages N] [--puts N] [--rounds R]

Each configuration is its own node (started with those options) and is measured ``--rounds``
times, interleaved with the others; the best round of each is printed with its ratio to the
node without security. Target: --auth costs under 5% on streaming (credentials are checked
once per call or stream, scrypt once per distinct user and password).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from qmgr.cli.launch import Launched, start_node  # noqa: E402
from qmgr.client import OutgoingMessage, QueueManagerClient  # noqa: E402
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


def unary_put_rate(client: QueueManagerClient, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        client.put("BENCH.Q", PAYLOAD, persistent=False)
    elapsed = time.perf_counter() - start
    client.mqsc("CLEAR QLOCAL(BENCH.Q)")
    return n / elapsed


def stream_publish_rate(client: QueueManagerClient, n: int) -> float:
    message = OutgoingMessage(PAYLOAD, persistent=False)
    start = time.perf_counter()
    publisher = client.stream_publisher(batch_size=BATCH, window=16)
    for _ in range(n):
        publisher.publish("bench/auth", message)
    publisher.close()
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=200_000, help="streamed publications")
    parser.add_argument("--puts", type=int, default=5_000, help="unary puts")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(
        f"qmgr application security benchmark: {args.puts} unary puts, {args.messages} streamed "
        f"publications of {len(PAYLOAD)} bytes (batches of {BATCH}), best of {args.rounds}"
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
            puts: dict[str, float] = dict.fromkeys(nodes, 0.0)
            streams: dict[str, float] = dict.fromkeys(nodes, 0.0)
            for _ in range(args.rounds):
                for label, client in clients.items():
                    puts[label] = max(puts[label], unary_put_rate(client, args.puts))
                    streams[label] = max(streams[label], stream_publish_rate(client, args.messages))
            for label in nodes:
                print(
                    f"  {label:<9} unary put {puts[label]:>9,.0f} msg/s "
                    f"({puts[label] / puts['plain']:>6.1%})   streamed publish "
                    f"{streams[label]:>9,.0f} msg/s ({streams[label] / streams['plain']:>6.1%})"
                )
            print(
                f"  --auth cost on streaming: {1 - streams['auth'] / streams['plain']:+.1%} "
                f"(plain), {1 - streams['tls+auth'] / streams['tls']:+.1%} (over TLS); "
                f"on unary puts: {1 - puts['auth'] / puts['plain']:+.1%} (plain)"
            )
        finally:
            for client in clients.values():
                client.close()
            for launched in nodes.values():
                launched.proc.terminate()
                launched.proc.wait(30)


if __name__ == "__main__":
    main()
