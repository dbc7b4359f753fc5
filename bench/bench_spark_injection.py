"""Injection through the Spark data source against the plain client, same node, same run.

Run: .venv/bin/python bench/bench_spark_injection.py [--messages N] [--partitions P]
     [--rounds R] [--persistent] [--subscribe]

Starts one node (with a data directory) and a local[P] Spark session. Each round publishes the
same N messages (100-byte bodies, topic Bench/P<n>, properties LoadPublisher and LoadSeq) twice:

- plain: P processes, each a ``QueueManagerClient.stream_publisher`` (batches of 100, window 8)
  building and publishing its share, started together;
- spark: ``df.write.format("qmgr")`` of a P-partition DataFrame built from ``spark.range``
  (cached before the timed write unless ``--uncached``), batches of 100, with an ack log.

The rate of each is N / (last acknowledgement - first send) over all publishers (from the ack
log for Spark, from ``on_ack`` for the plain client); the Spark line also shows the rate over
the whole ``save()`` call (job scheduling and worker start included). Target: the data source
reaches at least 70% of the plain client's rate.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from qmgr.client import QueueManagerClient  # noqa: E402
from qmgr.launcher.launch import start_node  # noqa: E402

BODY = b"x" * 100
BATCH = 100
TARGET = 0.70


def plain_publisher(address: str, index: int, count: int, persistent: bool, out: Any) -> None:
    """One plain publisher: ``count`` messages as publisher P<index>, timed by acknowledgement."""
    last_ack = [0]

    def acked(batch_id: int, accepted: int) -> None:
        last_ack[0] = time.time_ns()

    try:
        with QueueManagerClient(address) as qm:
            qm.wait_ready()
            pub = qm.stream_publisher(BATCH, 8, on_ack=acked)
            first = time.time_ns()
            topic = f"Bench/P{index}"
            for seq in range(1, count + 1):
                props = {"LoadPublisher": f"P{index}", "LoadSeq": str(seq)}
                pub.publish(topic, BODY, properties=props, persistent=persistent)
            pub.close()
    except Exception as exc:
        out.put(("error", f"plain publisher {index}: {exc}"))
        return
    out.put(("done", first, last_ack[0]))


def run_plain(address: str, partitions: int, messages: int, persistent: bool) -> float:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    share = messages // partitions
    procs = [
        ctx.Process(target=plain_publisher, args=(address, i, share, persistent, out))
        for i in range(partitions)
    ]
    for p in procs:
        p.start()
    spans = [out.get(timeout=300) for _ in range(partitions)]
    for p in procs:
        p.join(60)
    for r in spans:
        if r[0] == "error":
            raise RuntimeError(r[1])
    first = min(s[1] for s in spans)
    last = max(s[2] for s in spans)
    return share * partitions / ((last - first) / 1e9)


def frame(spark: Any, partitions: int, messages: int, cached: bool) -> Any:
    """The rows to publish: P partitions, each publisher P<n>'s messages in LoadSeq order;
    cached (and materialised) so that the timed write reads them rather than computes them."""
    from pyspark.sql import functions as F

    share = messages // partitions
    pub = (F.col("id") / share).cast("int").cast("string")
    df = spark.range(0, share * partitions, 1, partitions).select(
        F.concat(F.lit("Bench/P"), pub).alias("topic"),
        F.lit(BODY).alias("body"),
        F.create_map(
            F.lit("LoadPublisher"),
            F.concat(F.lit("P"), pub),
            F.lit("LoadSeq"),
            (F.col("id") % share + 1).cast("string"),
        ).alias("properties"),
    )
    if cached:
        df = df.cache()
        df.count()
    return df


def run_spark(
    df: Any, address: str, messages: int, persistent: bool, acks: Path
) -> tuple[float, float]:
    for old in acks.glob("*.jsonl"):
        old.unlink()
    t0 = time.perf_counter()
    (
        df.write.format("qmgr")
        .mode("append")
        .option("node", address)
        .option("batch_size", str(BATCH))
        .option("persistent", str(persistent).lower())
        .option("ack_log", str(acks))
        .save()
    )
    wall = time.perf_counter() - t0
    first, last, count = None, 0, 0
    for path in acks.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            first = entry["sent_ns"] if first is None else min(first, entry["sent_ns"])
            last = max(last, entry["ack_ns"])
            count += 1
    assert count == messages, f"{count} acknowledged of {messages}"
    assert first is not None
    return count / ((last - first) / 1e9), count / wall


def clear(address: str, subscribe: bool) -> None:
    """Empty the subscription's queue (with --subscribe) so that each run starts alike."""
    if subscribe:
        with QueueManagerClient(address) as qm:
            dest = qm.mqsc("DISPLAY SUB(BENCH) DEST")[0]["DEST"]
            qm.mqsc(f"CLEAR QLOCAL('{dest}')")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--persistent", action="store_true")
    parser.add_argument("--subscribe", action="store_true", help="one durable subscription")
    parser.add_argument(
        "--uncached", action="store_true", help="compute the DataFrame during the write"
    )
    args = parser.parse_args()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from qmgr.spark import register

    base = Path(tempfile.mkdtemp(prefix="bench-spark-"))
    node = start_node("BENCH", data_dir=base / "BENCH", log=base / "node.log", timeout=60)
    spark = None
    try:
        if args.subscribe:
            with QueueManagerClient(node.address) as qm:
                qm.mqsc("DEFINE SUB(BENCH) TOPICSTR('Bench/#') DESTCLAS(MANAGED)")
        spark = (
            SparkSession.builder.master(f"local[{args.partitions}]")
            .appName("bench_spark_injection")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        acks = base / "acks"
        messages = args.messages // args.partitions * args.partitions
        warm = frame(spark, args.partitions, 2_000, cached=False)
        run_spark(warm, node.address, 2_000, args.persistent, acks)  # starts the Python workers
        df = frame(spark, args.partitions, messages, cached=not args.uncached)
        kind = "persistent" if args.persistent else "non-persistent"
        print(
            f"{messages:,} {kind} messages, {args.partitions} publishers, batches of {BATCH}, "
            f"{'one durable subscription' if args.subscribe else 'no subscriber'}, DataFrame "
            f"{'computed during the write' if args.uncached else 'cached'}"
        )
        ratios = []
        for r in range(1, args.rounds + 1):
            clear(node.address, args.subscribe)
            plain = run_plain(node.address, args.partitions, messages, args.persistent)
            clear(node.address, args.subscribe)
            through, wall = run_spark(df, node.address, messages, args.persistent, acks)
            ratios.append(through / plain)
            print(
                f"round {r}: plain client {plain:,.0f} msg/s; data source {through:,.0f} msg/s "
                f"({wall:,.0f} msg/s over the whole save()); ratio {through / plain:.0%}"
            )
        median = statistics.median(ratios)
        verdict = "meets" if median >= TARGET else "misses"
        print(
            f"data source / plain client: median {median:.0%} over {len(ratios)} rounds "
            f"({verdict} the {TARGET:.0%} target)"
        )
    finally:
        if spark is not None:
            spark.stop()
        node.proc.kill()
        node.proc.wait(10)


if __name__ == "__main__":
    main()
