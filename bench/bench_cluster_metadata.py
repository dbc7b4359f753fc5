"""Benchmark: the cost of clustered topic definitions as the cluster holds more of them.

Run with ``.venv/bin/python bench/bench_cluster_metadata.py [--sizes 10,1000,10000]
[--samples 20]``. It starts three full repositories and three partial repositories (HOST1,
HOST2, SUB1) as real processes, then, for each size in turn, fills the cluster up to that many
clustered topics with one runmqsc-style script on HOST1 (one command after the other, as
``qmgr runmqsc`` sends them) and measures (``--default-cluster``: with the default cluster's
ten members, three full and seven partial repositories; ``--full-repositories 1``: one full
repository, a Raft group of one):

- the script: definitions per second, and the seconds until every member holds the last one;
- single commands at that size: the median milliseconds of ``samples`` DEFINE, ALTER and
  DELETE commands on HOST2, each answered once the Raft log of the full repositories holds it.

The last lines print each command's cost at the largest size against the smallest, the figure
the cluster's metadata must keep near 1 (it is O(1) per change when it scales).

``--rounds R`` (R > 1) compares the sizes over the same stretch of time, for a shared machine
whose load comes and goes: one cluster per size is started and filled, then R rounds measure
the single commands on each cluster in turn (the order rotated each round); each size's figure
is the median of its round medians, and the ratio is also given per round (its median last).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.cluster_procs import BenchCluster  # noqa: E402
from qmgr.launcher.poll import wait_for

FULL = ["FR1", "FR2", "FR3"]
PARTIAL = ["HOST1", "HOST2", "SUB1"]
# the default cluster (`qmgr cluster up` with no topology) has seven partial repositories
DEFAULT_PARTIAL = [*PARTIAL, "HOSTB1", "PUB1", "SUB2", "SB1"]
VERBS = ("DEFINE", "ALTER", "DELETE")
# size, script definitions per second, seconds until every member held the last, costs (ms)
Row = tuple[int, float, float, dict[str, float]]


def define(name: str, topic: str, cluster: str) -> str:
    return f"DEFINE TOPIC({name}) TOPICSTR('{topic}') CLUSTER({cluster}) CLROUTE(TOPICHOST)"


def known(cl: BenchCluster, node: str, name: str) -> bool:
    ok, records = cl[node].c.mqsc_ok(f"DISPLAY TCLUSTER({name})")
    return ok and bool(records)


def fill(cl: BenchCluster, start: int, stop: int) -> tuple[float, float]:
    """Define FILL<start>..FILL<stop-1> on HOST1; (definitions per second, seconds until
    every member holds the last one)."""
    c = cl["HOST1"].c
    began = time.perf_counter()
    for i in range(start, stop):
        c.mqsc(define(f"FILL{i}", f"Fill/{i}", cl.cluster))
        if (i - start) % 1000 == 999:
            print(f"    {i + 1 - start:,} of {stop - start:,} defined", flush=True)
    script = time.perf_counter() - began
    last = f"FILL{stop - 1}"
    for node in cl.nodes:
        wait_for(
            functools.partial(known, cl, node, last),
            600,
            0.02,
            what=f"{last} on {node}",
            retry=Exception,
        )
    return (stop - start) / script, time.perf_counter() - began


def single(cl: BenchCluster, size: int, samples: int) -> dict[str, float]:
    """Median milliseconds of DEFINE, ALTER and DELETE on HOST2 at this size."""
    c = cl["HOST2"].c
    costs: dict[str, list[float]] = {verb: [] for verb in VERBS}
    for i in range(samples):
        name = f"ONE{size}X{i}"
        for verb, command in (
            ("DEFINE", define(name, f"One/{size}/{i}", cl.cluster)),
            ("ALTER", f"ALTER TOPIC({name}) DESCR('altered')"),
            ("DELETE", f"DELETE TOPIC({name})"),
        ):
            began = time.perf_counter()
            c.mqsc(command)
            costs[verb].append((time.perf_counter() - began) * 1000)
    return {verb: statistics.median(values) for verb, values in costs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,1000,10000")
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument(
        "--default-cluster",
        action="store_true",
        help="ten members as the default cluster has (3 full, 7 partial repositories)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="R > 1: one cluster per size, the sizes measured in turn R times (medians)",
    )
    parser.add_argument(
        "--full-repositories",
        type=int,
        choices=range(1, len(FULL) + 1),
        default=len(FULL),
        help="how many full repositories (default 3; 1: a Raft group of one)",
    )
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    full = FULL[: args.full_repositories]
    partial = DEFAULT_PARTIAL if args.default_cluster else PARTIAL
    if args.rounds > 1:
        rows = alternated(sizes, full, partial, args.samples, args.rounds)
    else:
        rows = progressive(sizes, full, partial, args.samples)
    report(rows)


def show(size: int, rate: float, settled: float, costs: dict[str, float]) -> None:
    print(
        f"  {size:>6,} topics: script {rate:7.1f} defs/s, every member after "
        f"{settled:6.1f} s; DEFINE {costs['DEFINE']:.1f} ms, ALTER "
        f"{costs['ALTER']:.1f} ms, DELETE {costs['DELETE']:.1f} ms",
        flush=True,
    )


def progressive(sizes: list[int], full: list[str], partial: list[str], samples: int) -> list[Row]:
    """One cluster, filled size after size; the single commands measured at each."""
    cl = BenchCluster(Path(tempfile.mkdtemp(prefix="bench-metadata-"))).start(full, partial)
    rows: list[Row] = []
    try:
        held = 0
        for size in sizes:
            print(f"filling the cluster to {size:,} clustered topics", flush=True)
            rate, settled = fill(cl, held, size)
            held = size
            costs = single(cl, size, samples)
            rows.append((size, rate, settled, costs))
            show(size, rate, settled, costs)
    finally:
        cl.stop()
    return rows


def alternated(
    sizes: list[int], full: list[str], partial: list[str], samples: int, rounds: int
) -> list[Row]:
    """One cluster per size, filled; then ``rounds`` rounds of the single commands on each
    cluster in turn. Each size's costs: the median of its round medians; the per-round ratios
    of the largest size to the smallest are printed as they come."""
    clusters: dict[int, BenchCluster] = {}
    filled: dict[int, tuple[float, float]] = {}
    per_round: dict[int, list[dict[str, float]]] = {size: [] for size in sizes}
    try:
        for size in sizes:
            base = Path(tempfile.mkdtemp(prefix=f"bench-metadata-{size}-"))
            clusters[size] = BenchCluster(base).start(full, partial)
            print(f"filling a cluster to {size:,} clustered topics", flush=True)
            filled[size] = fill(clusters[size], 0, size)
        for r in range(rounds):
            order = sizes[r % len(sizes) :] + sizes[: r % len(sizes)]
            for size in order:
                per_round[size].append(single(clusters[size], size, samples))
            small, large = per_round[sizes[0]][-1], per_round[sizes[-1]][-1]
            text = ", ".join(f"{v} {large[v] / small[v]:.2f}x" for v in VERBS)
            print(f"  round {r + 1} of {rounds} (order {order}): {text}", flush=True)
    finally:
        for cl in clusters.values():
            cl.stop()
    rows: list[Row] = []
    for size in sizes:
        costs = {v: statistics.median(c[v] for c in per_round[size]) for v in VERBS}
        rows.append((size, *filled[size], costs))
        show(size, *filled[size], costs)
    if len(sizes) > 1:
        print()
        for verb in VERBS:
            ratios = [
                big[verb] / small[verb]
                for small, big in zip(per_round[sizes[0]], per_round[sizes[-1]], strict=True)
            ]
            print(
                f"{verb} per round at {sizes[-1]:,} vs {sizes[0]:,}: "
                + " ".join(f"{x:.2f}" for x in ratios)
                + f" (median {statistics.median(ratios):.2f}x)"
            )
    return rows


def report(rows: list[Row]) -> None:
    print()
    print(
        f"{'topics':>8} {'script/s':>9} {'settled s':>10} {'DEFINE':>8} {'ALTER':>8} {'DELETE':>8}"
    )
    for size, rate, settled, costs in rows:
        print(
            f"{size:>8,} {rate:>9.1f} {settled:>10.1f} {costs['DEFINE']:>8.1f} "
            f"{costs['ALTER']:>8.1f} {costs['DELETE']:>8.1f}"
        )
    if len(rows) > 1:
        small, large = rows[0], rows[-1]
        for verb in VERBS:
            ratio = large[3][verb] / small[3][verb]
            print(f"{verb} at {large[0]:,} topics vs {small[0]:,}: {ratio:.2f}x (target <= 2x)")


if __name__ == "__main__":
    main()
