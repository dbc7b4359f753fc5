"""Benchmark: how soon a new clustered topic reaches the cluster with one full repository down.

Run with ``.venv/bin/python bench/bench_repository_outage.py [--rounds 3]``. It starts two full
repositories (MQ's usual count) and four partial repositories as real processes. Each round
stops one full repository with kill -9 (FR1 and FR2 in turn), waits ``--settle`` seconds, then
defines a clustered topic on a partial repository and prints how long the DEFINE took to answer
and how long until every running member shows it ACTIVE; with both full repositories up again
it prints how long the relayed definition took to commit (RAFTRELAYED back to 0). The same
figures with three full repositories and one down (Raft commits, nothing is relayed) are the
baseline of the same run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.cluster_procs import BenchCluster  # noqa: E402
from qmgr.launcher.poll import wait_for

PARTIAL = ["HOST1", "HOST2", "PUB1", "SUB1"]


def active_on(cl: BenchCluster, node: str, name: str, host: str) -> bool:
    return host in cl[node].hosts_known(name)


def relayed(cl: BenchCluster, fr: str) -> int:
    return int(cl[fr].mqsc("DISPLAY QMGR ALL")[0].get("RAFTRELAYED", "0"))


def rounds(full: list[str], count: int, settle: float) -> list[tuple[float, float, float]]:
    """(answered, every member, committed) seconds for ``count`` rounds."""
    base = Path(tempfile.mkdtemp(prefix="bench-outage-"))
    cl = BenchCluster(base).start(full, PARTIAL)
    out: list[tuple[float, float, float]] = []
    try:
        for i in range(count):
            down = full[i % len(full)]
            cl[down].kill()
            time.sleep(settle)
            name = f"T{i}"
            began = time.perf_counter()
            cl["HOST2"].mqsc(
                f"DEFINE TOPIC({name}) TOPICSTR('Outage/{i}') CLUSTER({cl.cluster}) "
                "CLROUTE(TOPICHOST)"
            )
            answered = time.perf_counter() - began
            for node in cl.nodes:
                if node != down:
                    wait_for(
                        lambda n=node, t=name: active_on(cl, n, t, "HOST2"),
                        30.0,
                        0.02,
                        what=f"{name} on {node}",
                        retry=Exception,
                    )
            everywhere = time.perf_counter() - began
            restarted = time.perf_counter()
            cl[down].start()
            for fr in full:
                wait_for(
                    lambda fr=fr: relayed(cl, fr) == 0,
                    60,
                    0.02,
                    what=f"nothing relayed on {fr}",
                    retry=Exception,
                )
            committed = time.perf_counter() - restarted
            out.append((answered, everywhere, committed))
            print(
                f"  {len(full)} full repositories, {down} down: DEFINE answered in "
                f"{answered:.2f} s, ACTIVE on every running member after {everywhere:.2f} s; "
                f"committed {committed:.2f} s after {down} was started again",
                flush=True,
            )
    finally:
        cl.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--settle", type=float, default=5.0)
    args = parser.parse_args()
    results = {
        2: rounds(["FR1", "FR2"], args.rounds, args.settle),
        3: rounds(["FR1", "FR2", "FR3"], args.rounds, args.settle),
    }
    print()
    print(
        f"{'full repositories':>18} {'answered s':>11} {'every member s':>15} {'committed s':>12}"
    )
    for count, rows in results.items():
        medians = [statistics.median(r[k] for r in rows) for k in range(3)]
        print(f"{count:>18} {medians[0]:>11.2f} {medians[1]:>15.2f} {medians[2]:>12.2f}")
    two = statistics.median(r[1] for r in results[2])
    three = statistics.median(r[1] for r in results[3])
    print(f"every member, 2 full repositories (one down) vs 3 (one down): {two / three:.2f}x")


if __name__ == "__main__":
    main()
