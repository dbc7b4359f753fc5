"""What member authentication costs a cluster, measured in one run: the same small cluster
with the cluster secret (the default) and without it (``--insecure``), side by side.

Run: .venv/bin/python bench/bench_security.py [--messages N] [--rounds R]

Two clusters of real nodes (FR1, HOST1, PUB1, SUB1 each; the topic PRICES hosted on HOST1) run
at once; a publisher and a subscriber client process publish from PUB1 through HOST1 to SUB1,
non-persistent and persistent, at full speed, alternating between the clusters round by round
(so drifting load on the machine touches both alike). Printed: the median rate of each, and
the ratio secret/insecure, against the target (authentication costs under 5%).

Members authenticate once per connection (a challenge-response when a channel or repository
stream opens), never per message; the run also times that handshake's CPU cost in-process
(the pure ``qmgr.security.member`` exchange) and counts the channel connections each cluster
made, to show it is paid per connection.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_auth import cpu_seconds  # noqa: E402
from bench.bench_cluster import Route  # noqa: E402
from bench.cluster_procs import BenchCluster, ClientWorker, raise_on_sigterm  # noqa: E402
from qmgr.security.keys import member_secret  # noqa: E402
from qmgr.security.member import CHANNEL, Challenger, Prover, member_key  # noqa: E402

TARGET = 0.05  # authentication costs at most 5% of channel throughput
ROUTE = Route("topichost", "PUB1 → HOST1 → SUB1", "PUB1", "SUB1", "Prices", "HOST1", 2)


def start(base: Path, insecure: bool) -> BenchCluster:
    cl = BenchCluster(base, "SEC" if not insecure else "OPEN", insecure=insecure)
    cl.start(["FR1"], ["HOST1", "PUB1", "SUB1"])
    cl.define_topic("HOST1", "PRICES", "Prices", "TOPICHOST")
    cl.wait_definition("PRICES", ["HOST1"], on=["PUB1", "SUB1"])
    return cl


def one_run(
    cl: BenchCluster,
    pub: ClientWorker,
    sub: ClientWorker,
    topic: str,
    count: int,
    persistent: bool,
) -> tuple[float, float]:
    """Publications/s from PUB1 to SUB1 through HOST1 (all ``count`` must arrive), and the CPU
    time the three nodes spent per publication (µs)."""
    sub.submit(
        "subscribe", address=cl["SUB1"].address, topic=topic, expected=count, idle_timeout=15.0
    )
    sub.wait("ready", 60)
    cl.wait_proxy("HOST1", "SUB1", topic)
    before = nodes_cpu(cl)
    pub.submit(
        "publish",
        address=cl["PUB1"].address,
        topic=topic,
        count=count,
        persistent=persistent,
        rate=0.0,
    )
    p = pub.wait("done", 600)
    r = sub.wait("done", 600)
    if r["got"] != count:
        raise RuntimeError(f"{cl.cluster}: {r['got']} of {count} publications arrived")
    cpu = (nodes_cpu(cl) - before) / count * 1e6
    return float(r["got"] / max(r["last"] - p["start"], 1e-9)), cpu


def nodes_cpu(cl: BenchCluster) -> float:
    """CPU seconds used so far by the nodes on the route."""
    total = 0.0
    for name in ("PUB1", "HOST1", "SUB1"):
        proc = cl[name].proc
        assert proc is not None
        total += cpu_seconds(proc.pid)
    return total


def handshake_cost(n: int = 2000) -> float:
    """CPU seconds of one member handshake (both sides: challenge, accept, prove, verify)."""
    key = member_key(member_secret("a cluster secret"), "SEC")
    server = Challenger(key, "SEC", "HOST1", capacity=n + 1)
    began = time.process_time()
    for _ in range(n):
        prover = Prover(key, "SEC", "PUB1")
        challenge = server.challenge(prover.client_nonce, 0.0)
        prover.accept(challenge, "HOST1")
        server.verify(prover.prove(challenge, CHANNEL), CHANNEL, 0.0)
    return (time.process_time() - began) / n


def channel_connections(cl: BenchCluster) -> int:
    """Channels opened to HOST1 and SUB1 so far (DISPLAY CHSTATUS rows, one per connection)."""
    return sum(len(cl[n].mqsc("DISPLAY CHSTATUS(*)")) for n in ("HOST1", "SUB1"))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=20_000, help="per non-persistent run")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    raise_on_sigterm()
    console = Console() if sys.stdout.isatty() else Console(width=120)
    rates: dict[tuple[str, str], list[float]] = {}
    cpus: dict[tuple[str, str], list[float]] = {}
    workers: list[ClientWorker] = []
    clusters: dict[str, BenchCluster] = {}
    began = time.time()
    with tempfile.TemporaryDirectory(prefix="bench-security-") as tmp:
        try:
            console.print(
                "starting two clusters (FR1, HOST1, PUB1, SUB1): with the secret, without"
            )
            clusters["secret"] = start(Path(tmp) / "secret", insecure=False)
            clusters["insecure"] = start(Path(tmp) / "insecure", insecure=True)
            pub, sub = ClientWorker("publisher"), ClientWorker("subscriber")
            workers += [pub, sub]
            for rnd in range(args.rounds):
                order = ["secret", "insecure"] if rnd % 2 == 0 else ["insecure", "secret"]
                for persistent in (False, True):
                    kind = "persistent" if persistent else "non-persistent"
                    count = args.messages // (2 if persistent else 1)
                    for mode in order:
                        topic = f"Prices/{kind}/{rnd}"
                        rate, cpu = one_run(clusters[mode], pub, sub, topic, count, persistent)
                        rates.setdefault((mode, kind), []).append(rate)
                        cpus.setdefault((mode, kind), []).append(cpu)
                        console.print(
                            f"  round {rnd + 1}/{args.rounds} {kind:<15} {mode:<9} "
                            f"{rate:>9,.0f} pub/s, nodes {cpu:6.1f} µs CPU/pub"
                        )
            connections = {m: channel_connections(c) for m, c in clusters.items()}
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            for w in workers:
                w.close()
            for c in clusters.values():
                c.stop()
    cost = handshake_cost()
    table = Table(title=f"Member authentication, {ROUTE.label} (median of {args.rounds})")
    columns = ("", "with the secret", "--insecure", "ratio", f"target ≥ {1 - TARGET:.2f}")
    for column in (*columns, "node CPU/pub: secret", "--insecure", "ratio"):
        table.add_column(column, justify="right")
    for kind in ("non-persistent", "persistent"):
        secure = statistics.median(rates[("secret", kind)])
        open_ = statistics.median(rates[("insecure", kind)])
        ratio = secure / open_
        cpu_secure = statistics.median(cpus[("secret", kind)])
        cpu_open = statistics.median(cpus[("insecure", kind)])
        table.add_row(
            kind,
            f"{secure:,.0f}/s",
            f"{open_:,.0f}/s",
            f"{ratio:.2f}",
            "met" if ratio >= 1 - TARGET else "not met",
            f"{cpu_secure:.1f} µs",
            f"{cpu_open:.1f} µs",
            f"{cpu_secure / cpu_open:.2f}",
        )
    console.print(table)
    console.print(
        f"handshake (both sides, in-process): {cost * 1e6:.0f} µs CPU per connection; "
        f"channel connections during the run: with the secret {connections['secret']}, "
        f"--insecure {connections['insecure']} (paid once each, not per message)"
    )
    console.print(f"run time {time.time() - began:.0f} s")


if __name__ == "__main__":
    main()
