"""The load job's metrics stage (stage 3) on synthetic receipts with a known answer.

Run: .venv/bin/python bench/bench_spark.py [--receipts 1000000] [--cores 2] [--runs 2]
         [--injection-messages 100000 | --no-injection]

Builds ``--receipts`` receipts (2 subscribers × 10 publishers, local disorder, a few
duplicates and losses, two topic hosts) and the matching sent and acknowledged DataFrames,
writes them to Parquet (not timed), then times the metrics stage exactly as the job runs it
(:func:`qmgr.spark.job.measure`: every metric table computed and collected) on a local Spark
with ``--cores`` threads. Prints the time of each run, checks the totals against the known
answer and reports the project's target (under 60 s for 1,000,000 receipts on 2 cores) as met
or not. Then, in the same run, the injection stage: bench/bench_spark_injection.py (stage 1's
rate through the "qmgr" data source against the plain client on one node, target at least 70%).
It asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from qmgr.spark import metrics
from qmgr.spark.job import measure
from qmgr.spark.session import local_session

SUBSCRIBERS = ("ALL", "EVEN")
PUBLISHERS = 10
TARGET_SECONDS = 60.0
SENT_NS = 1_700_000_000_000_000_000
SWAP = 10  # in every block of SWAP messages, the 4th and 5th arrive swapped
DUPLICATE_EVERY = 10_000
LOSE_EVERY = 25_000


def synthetic(spark: SparkSession, receipts: int) -> tuple[DataFrame, DataFrame, DataFrame]:
    """(sent, acked, receipts): every subscriber expects every message of every publisher."""
    per_stream = receipts // (len(SUBSCRIBERS) * PUBLISHERS)
    k = F.col("id") % per_stream  # position in its stream's arrival order
    stream = (F.col("id") / per_stream).cast("int")
    sent = spark.range(PUBLISHERS * per_stream).select(
        F.concat(F.lit("P"), (F.col("id") / per_stream).cast("int").cast("string")).alias(
            "publisher"
        ),
        (F.col("id") % per_stream + 1).alias("seq"),
        F.lit("Prices/A").alias("topic"),
    )
    acked = sent.select(
        "publisher",
        "seq",
        "topic",
        F.lit(SENT_NS).alias("ack_ns"),
        (F.lit(SENT_NS) + F.col("seq") * 1000).alias("sent_ns"),
    )
    seq = (
        F.when(k % SWAP == 3, k + 2).when(k % SWAP == 4, k).otherwise(k + 1).cast("long")
    )  # 4 <-> 5, 14 <-> 15, ...
    latency_us = F.abs(F.hash(F.col("id"))) % 20_000 + 500
    sent_ns = F.lit(SENT_NS) + seq * 1000
    base = spark.range(len(SUBSCRIBERS) * PUBLISHERS * per_stream).select(
        F.element_at(
            F.array(*[F.lit(s) for s in SUBSCRIBERS]), (stream / PUBLISHERS).cast("int") + 1
        ).alias("subscriber"),
        F.col("id").alias("arrival"),
        F.concat(F.lit("P"), (stream % PUBLISHERS).cast("string")).alias("publisher"),
        seq.alias("seq"),
        F.lit("Prices/A").alias("topic"),
        F.timestamp_micros(((sent_ns / 1000) + latency_us).cast("long")).alias("enqueue_time"),
        # read in arrival order (the swapped pairs too), a message every microsecond
        F.timestamp_micros((F.lit(SENT_NS // 1000 + 20_800) + k).cast("long")).alias(
            "receive_time"
        ),
        F.when(k % 2 == 0, F.lit("PUB1,HOSTA1,SUB1"))
        .otherwise(F.lit("PUB1,HOSTA2,SUB1"))
        .alias("route"),
        sent_ns.alias("sent_ns"),
        F.lit(1).alias("delivery_count"),
        F.lit(None).cast("string").alias("session_id"),
        k.alias("_k"),
    )
    kept = base.where(k % LOSE_EVERY != LOSE_EVERY - 1)
    later = per_stream // 2  # a duplicate arrives this many places after its first copy
    dups = (
        base.where(k % DUPLICATE_EVERY == 7)
        .withColumn("arrival", F.col("arrival") + F.lit(later))
        .withColumn(
            "receive_time", F.timestamp_micros(F.unix_micros("receive_time") + F.lit(later))
        )
    )
    out = kept.unionByName(dups).drop("_k")
    return sent, acked, out


def expected(receipts: int) -> dict[str, int]:
    per_stream = receipts // (len(SUBSCRIBERS) * PUBLISHERS)
    streams = len(SUBSCRIBERS) * PUBLISHERS
    lost = per_stream // LOSE_EVERY
    dups = len([k for k in range(per_stream) if k % DUPLICATE_EVERY == 7])
    return {
        "sent": streams * per_stream,
        "lost": streams * lost,
        "duplicated": streams * dups,
        "received": streams * (per_stream - lost + dups),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--receipts", type=int, default=1_000_000)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--injection-messages", type=int, default=100_000)
    parser.add_argument("--no-injection", action="store_true")
    args = parser.parse_args()
    spark = local_session("bench-spark-metrics", cores=args.cores)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp:
            run(spark, Path(tmp), args.receipts, args.runs, args.cores)
    finally:
        spark.stop()
    if not args.no_injection:  # its own process: a Spark session of its own, a node
        print("\ninjection (bench/bench_spark_injection.py):", flush=True)
        subprocess.run(
            [
                sys.executable,
                str(Path(__file__).with_name("bench_spark_injection.py")),
                "--messages",
                str(args.injection_messages),
                "--partitions",
                str(args.cores),
            ],
            check=False,
        )


def run(spark: SparkSession, tmp: Path, receipts: int, runs: int, cores: int) -> None:
    started = time.monotonic()
    frames = synthetic(spark, receipts)
    paths = []
    for name, frame in zip(("sent", "acked", "receipts"), frames, strict=True):
        path = str(tmp / f"{name}.parquet")
        frame.write.parquet(path)
        paths.append(path)
    count = spark.read.parquet(paths[2]).count()
    print(f"synthetic data: {count:,} receipts written in {time.monotonic() - started:.1f} s")
    subs = metrics.subscriptions_frame(spark, [(s, "Prices/#") for s in SUBSCRIBERS])
    want = expected(receipts)
    times = []
    for i in range(runs):
        sent, acked, got = (spark.read.parquet(p) for p in paths)
        started = time.monotonic()
        tables = measure(sent, acked, got, subs)
        elapsed = time.monotonic() - started
        times.append(elapsed)
        total = _total(tables)
        print(
            f"run {i + 1}: metrics stage {elapsed:.1f} s ({count / elapsed:,.0f} receipts/s): "
            f"sent {total['sent']:,}, received {total['received']:,}, lost {total['lost']}, "
            f"duplicated {total['duplicated']}, out of order {total['out_of_order']:,} "
            f"({100 * total['out_of_order_ratio']:.1f}%), max displacement "
            f"{total['max_displacement']}, p50/p99 {total['latency_p50_ms']:.2f}/"
            f"{total['latency_p99_ms']:.2f} ms"
        )
        wrong = {k: (total[k], v) for k, v in want.items() if total[k] != v}
        if wrong:
            print(f"  WRONG (got, expected): {wrong}")
    best = min(times)
    met = "met" if best < TARGET_SECONDS * receipts / 1_000_000 else "NOT met"
    print(
        f"best {best:.1f} s for {count:,} receipts on {cores} cores; target (< "
        f"{TARGET_SECONDS:.0f} s per 1,000,000 receipts on 2 cores): {met}"
    )


def _total(tables: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return next(
        r
        for r in tables["metrics"]
        if r["subscriber"] == metrics.ALL and r["publisher"] == metrics.ALL
    )


if __name__ == "__main__":
    main()
