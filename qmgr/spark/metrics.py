"""Stage 3 of the load job: delivery metrics as DataFrame transforms (no row reaches Python).

Inputs, all DataFrames:

- ``sent``: one row per injected message: ``publisher`` string, ``seq`` long (1-based per
  publisher), ``topic`` string;
- ``acked``: the acknowledgement log of the ``qmgr`` writer (``publisher``, ``seq``, ``topic``,
  ``ack_ns``, ``sent_ns``); a message may appear more than once (a retried task);
- ``receipts``: what the measured subscriptions received, as :func:`receipts_from` shapes the
  rows of ``spark.read.format("qmgr")``: ``subscriber``, ``arrival`` (increasing in arrival
  order within each partition the subscription was read in), ``publisher``, ``seq``,
  ``topic``, ``enqueue_time``, ``receive_time`` (when the reader received or, for sequenced
  delivery, handled the message), ``route``, ``sent_ns``...;
- ``subscriptions``: ``subscriber`` and ``pattern``, the MQ topic pattern (``#``, ``+``) that
  says which publications the subscriber should receive (:func:`subscriptions_frame`).

A *stream* is one publisher × one subscriber. Per stream, per subscriber (publisher ``*``) and
in total (both ``*``), :func:`delivery_metrics` gives:

- ``sent``, ``acknowledged``: messages of the publisher on topics the subscriber matches;
- ``received``: copies received; ``unique``: distinct messages among them;
- ``lost``: acknowledged but never received; ``duplicated``: copies beyond the first;
  ``unexpected``: received but never sent (by this run's publishers);
- ``out_of_order``: first copies whose sequence number is lower than one received before them
  in the stream (in ``ARRIVAL_ORDER``: by receive time, then by arrival within a partition, so
  a session read first by one Spark task and then by another is in the order it was read);
  ``out_of_order_ratio`` = out_of_order / unique;
- ``max_displacement``: the largest distance between a message's place in arrival order and its
  place in sequence order (first copies only);
- ``latency_p50_ms`` ... ``latency_max_ms``: destination enqueue time minus send time
  (``LoadSentNs``, else the writer's ``sent_ns``), over first copies, by ``percentile_approx``;
- ``delivery_seconds``: from the first copy's destination enqueue to the last one's;
  ``delivered_per_s`` = unique / delivery_seconds (null under two copies or when they all
  arrived at once): the pace the cluster delivered at, to compare with the injector's
  (:func:`pace`).

:func:`pace` gives the injector's pace (messages acknowledged, first send to last
acknowledgement) and the drain's (copies read, over the time a subscription was being read).

:func:`share` gives the copies per topic host (the nodes a copy passed between its origin and
its destination, from ``qmgr.route``) or per full route, with each one's share.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from qmgr.spark.scenario import PUBLISHER, RUN, SENT_NS, SEQ

ALL = "*"  # the publisher / subscriber of an aggregate row
DIRECT = "direct"  # a copy that passed no node between its origin and its destination
PERCENTILES = (0.5, 0.95, 0.99)
ACCURACY = 10_000  # percentile_approx accuracy: relative error 1/ACCURACY


STREAM = ("subscriber", "publisher")
# the order a subscriber received its messages in: by receive time (comparable between the
# partitions a subscription is read in at once), then by arrival within a partition (the
# messages of one batch share a receive time)
ARRIVAL_ORDER = ("receive_time", "arrival")

METRIC_COLUMNS = (
    "subscriber",
    "publisher",
    "sent",
    "acknowledged",
    "received",
    "unique",
    "lost",
    "duplicated",
    "unexpected",
    "out_of_order",
    "out_of_order_ratio",
    "max_displacement",
    "latency_p50_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "latency_max_ms",
    "delivery_seconds",
    "delivered_per_s",
)

RECEIPT_SCHEMA = T.StructType(
    [
        T.StructField("subscriber", T.StringType()),
        T.StructField("arrival", T.LongType()),
        T.StructField("publisher", T.StringType()),
        T.StructField("seq", T.LongType()),
        T.StructField("topic", T.StringType()),
        T.StructField("enqueue_time", T.TimestampType()),
        T.StructField("receive_time", T.TimestampType()),
        T.StructField("route", T.StringType()),
        T.StructField("sent_ns", T.LongType()),
        T.StructField("delivery_count", T.IntegerType()),
        T.StructField("session_id", T.StringType()),
    ]
)


# -- topic patterns -------------------------------------------------------------------------------


def topic_regex(pattern: str) -> str:
    """A regular expression (Java and Python syntax) matching the topic strings that the MQ
    topic pattern ``pattern`` matches: ``#`` as a whole level is zero or more levels, ``+`` as a
    whole level exactly one; anything else, wildcards mixed into a level included, is literal.
    It is matched against ``'/' + topic``."""
    parts = []
    for level in pattern.split("/"):
        if level == "#":
            parts.append("(?:/[^/]*)*")
        elif level == "+":
            parts.append("/[^/]*")
        else:
            parts.append("/" + "".join(_literal(c) for c in level))
    return "^" + "".join(parts) + "$"


def _literal(char: str) -> str:
    """``char`` matching itself in Java and Python regular expressions: ASCII punctuation and
    spaces are escaped with a backslash (both read that as the character itself)."""
    return "\\" + char if char.isascii() and not char.isalnum() else char


def subscriptions_frame(spark: SparkSession, patterns: Iterable[tuple[str, str]]) -> DataFrame:
    """The ``subscriptions`` input from (subscriber, MQ topic pattern) pairs."""
    rows = [(name, pattern, topic_regex(pattern)) for name, pattern in patterns]
    schema = "subscriber string, pattern string, topic_regex string"
    return spark.createDataFrame(rows, schema)


def expected(messages: DataFrame, subscriptions: DataFrame) -> DataFrame:
    """``messages`` (sent or acknowledged, one row per message) paired with every subscriber
    whose pattern matches the message's topic. The patterns are matched once per distinct
    topic string; the messages meet the (small) result in a broadcast equi-join."""
    subs = F.broadcast(subscriptions.select("subscriber", "topic_regex"))
    topics = messages.select("topic").distinct()
    slashed = F.concat(F.lit("/"), topics["topic"])
    pairs = topics.join(subs, F.regexp_like(slashed, subs["topic_regex"])).select(
        "topic", "subscriber"
    )
    return messages.join(F.broadcast(pairs), "topic")


# -- receipts -------------------------------------------------------------------------------------


def receipts_from(rows: DataFrame, subscriber: str, run: str | None = None) -> DataFrame:
    """The rows one measured subscription gave ``spark.read.format("qmgr")`` (each partition
    in arrival order), as receipts of ``subscriber``: the load properties taken out, the arrival
    order numbered within each partition (``ARRIVAL_ORDER`` orders the partitions' rows
    together). Rows of another run (``LoadRun`` differs) or without the load properties are
    left out when ``run`` is given. Call it on the source's DataFrame itself, before anything
    reorders the rows."""
    props = F.col("properties")
    out = rows.withColumn("arrival", F.monotonically_increasing_id())
    if run is not None:
        out = out.where(props.getItem(RUN) == F.lit(run))
    return out.select(
        F.lit(subscriber).alias("subscriber"),
        "arrival",
        props.getItem(PUBLISHER).alias("publisher"),
        props.getItem(SEQ).cast("long").alias("seq"),
        F.col("topic"),
        F.col("enqueue_time"),
        F.col("receive_time"),
        F.col("route"),
        props.getItem(SENT_NS).cast("long").alias("sent_ns"),
        F.col("delivery_count").cast("int").alias("delivery_count"),
        F.col("session_id"),
    ).where(F.col("publisher").isNotNull() & F.col("seq").isNotNull())


def host_of(route: Column) -> Column:
    """The nodes between origin and destination in a ``qmgr.route`` value ("PUB1,HOSTA2,SUB1"
    -> "HOSTA2", comma-separated when several); :data:`DIRECT` when there are none."""
    nodes = F.filter(F.split(F.coalesce(route, F.lit("")), ","), lambda n: n != F.lit(""))
    middle = F.when(F.size(nodes) > 2, F.slice(nodes, 2, F.size(nodes) - 2)).otherwise(
        F.array().cast("array<string>")
    )
    joined = F.array_join(middle, ",")
    return F.when(joined == "", F.lit(DIRECT)).otherwise(joined)


def annotated(receipts: DataFrame) -> DataFrame:
    """``receipts`` as :func:`annotate` gives them (unchanged when they already are)."""
    return receipts if "first" in receipts.columns else annotate(receipts)


def annotate(receipts: DataFrame) -> DataFrame:
    """Each receipt with, per stream: ``first`` (the first copy of its message),
    ``out_of_order`` and ``displacement`` (on first copies; null on the others),
    ``latency_ms`` and ``host``. Two windows over the same partitioning (one shuffle): in
    sequence order (first copies, rank in sequence order) and in arrival order (the highest
    sequence number before, rank in arrival order)."""
    by_seq = Window.partitionBy(*STREAM).orderBy("seq", *ARRIVAL_ORDER)
    by_arrival = Window.partitionBy(*STREAM).orderBy(*ARRIVAL_ORDER)
    before = by_arrival.rowsBetween(Window.unboundedPreceding, -1)
    so_far = by_arrival.rowsBetween(Window.unboundedPreceding, 0)
    first = F.coalesce(F.lag("seq").over(by_seq) != F.col("seq"), F.lit(True))
    seq_so_far = by_seq.rowsBetween(Window.unboundedPreceding, 0)
    marked = receipts.withColumn("first", first).withColumn(
        "_seq_rank", F.sum(F.col("first").cast("int")).over(seq_so_far)
    )
    # a later copy never raises the highest number seen: its first copy came before it
    late = F.col("seq") < F.max("seq").over(before)
    arrival_rank = F.sum(F.col("first").cast("int")).over(so_far)
    ordered = marked.withColumn(
        "out_of_order", F.when(F.col("first"), F.coalesce(late, F.lit(False)))
    ).withColumn(
        "displacement",
        F.when(F.col("first"), F.abs(arrival_rank - F.col("_seq_rank")).cast("int")),
    )
    enqueue_us = F.unix_micros(F.col("enqueue_time"))
    return (
        ordered.drop("_seq_rank")
        .withColumn("latency_ms", (enqueue_us - F.col("sent_ns") / 1000.0) / 1000.0)
        .withColumn("host", host_of(F.col("route")))
    )


# -- aggregation ----------------------------------------------------------------------------------


def _keys(df: DataFrame) -> DataFrame:
    """Rolled-up keys (null) as :data:`ALL`."""
    return df.select(
        *[F.coalesce(F.col(k), F.lit(ALL)).alias(k) for k in STREAM],
        *[c for c in df.columns if c not in STREAM],
    )


def delivery_metrics(
    sent: DataFrame, acked: DataFrame, receipts: DataFrame, subscriptions: DataFrame
) -> DataFrame:
    """The metrics of every stream, every subscriber and the total, one row each (columns
    :data:`METRIC_COLUMNS`), ordered subscriber then publisher with the aggregates last.

    Counts are taken per stream (one shuffle per input) and rolled up on the small per-stream
    table; only the latency percentiles are rolled up on the receipts themselves."""
    keys = ("publisher", "seq", "topic")
    marked = annotated(receipts)
    # one row per (stream, seq) saying whether it was sent, acknowledged, received
    flags = (
        expected(sent.select(*keys), subscriptions)
        .select(*STREAM, "seq", F.lit(1).alias("s"), F.lit(0).alias("a"), F.lit(0).alias("r"))
        .unionByName(
            expected(acked.select(*keys), subscriptions).select(
                *STREAM, "seq", F.lit(0).alias("s"), F.lit(1).alias("a"), F.lit(0).alias("r")
            )
        )
        .unionByName(
            marked.where("first").select(
                *STREAM, "seq", F.lit(0).alias("s"), F.lit(0).alias("a"), F.lit(1).alias("r")
            )
        )
        .groupBy(*STREAM, "seq")
        .agg(F.max("s").alias("s"), F.max("a").alias("a"), F.max("r").alias("r"))
    )
    per_message = flags.groupBy(*STREAM).agg(
        F.sum("s").alias("sent"),
        F.sum("a").alias("acknowledged"),
        F.sum(F.when((F.col("a") == 1) & (F.col("r") == 0), 1).otherwise(0)).alias("lost"),
        F.sum(F.when((F.col("r") == 1) & (F.col("s") == 0), 1).otherwise(0)).alias("unexpected"),
    )
    first = F.col("first")
    per_copy = marked.groupBy(*STREAM).agg(
        F.count(F.lit(1)).alias("received"),
        F.count(F.when(first, 1)).alias("unique"),
        F.count(F.when(F.col("out_of_order"), 1)).alias("out_of_order"),
        F.max("displacement").alias("max_displacement"),
        F.max(F.when(first, F.col("latency_ms"))).alias("latency_max_ms"),
        F.min(F.when(first, F.unix_micros("enqueue_time"))).alias("_first_us"),
        F.max(F.when(first, F.unix_micros("enqueue_time"))).alias("_last_us"),
    )
    counts = ("sent", "acknowledged", "lost", "unexpected", "received", "unique", "out_of_order")
    streams = (
        per_message.join(per_copy, list(STREAM), "full_outer")
        .fillna(0, subset=[*counts, "max_displacement"])
        .cache()
    )
    table = _keys(
        streams.rollup(*STREAM).agg(
            *[F.sum(c).alias(c) for c in counts],
            F.max("max_displacement").alias("max_displacement"),
            F.max("latency_max_ms").alias("latency_max_ms"),
            F.min("_first_us").alias("_first_us"),
            F.max("_last_us").alias("_last_us"),
        )
    )
    pct = _keys(
        marked.where(first)
        .rollup(*STREAM)
        .agg(F.percentile_approx("latency_ms", list(PERCENTILES), ACCURACY).alias("_pct"))
    )
    table = table.join(pct, list(STREAM), "left")
    pcts = F.col("_pct")
    ratio = F.when(F.col("unique") > 0, F.col("out_of_order") / F.col("unique"))
    table = (
        table.withColumn("duplicated", F.col("received") - F.col("unique"))
        .withColumn("out_of_order_ratio", F.coalesce(ratio, F.lit(0.0)))
        .withColumn("latency_p50_ms", pcts.getItem(0))
        .withColumn("latency_p95_ms", pcts.getItem(1))
        .withColumn("latency_p99_ms", pcts.getItem(2))
        .withColumn("delivery_seconds", (F.col("_last_us") - F.col("_first_us")) / 1e6)
        .withColumn(
            "delivered_per_s",
            F.when(
                (F.col("unique") > 1) & (F.col("delivery_seconds") > 0),
                F.col("unique") / F.col("delivery_seconds"),
            ),
        )
    )
    for c in (*counts, "duplicated", "max_displacement"):
        table = table.withColumn(c, F.col(c).cast("long"))
    aggregate_last = [(F.col(k) == ALL).asc() for k in STREAM]
    return table.select(*METRIC_COLUMNS).orderBy(
        aggregate_last[0], "subscriber", aggregate_last[1], "publisher"
    )


def share(receipts: DataFrame, by: str = "host") -> DataFrame:
    """First copies per ``by`` ("host": the topic host or other nodes passed; "route": the full
    route) per stream, per subscriber and in total: ``copies`` and ``share`` (of the copies of
    the same stream, subscriber or total)."""
    if by not in ("host", "route"):
        raise ValueError(f"share by 'host' or 'route', not {by!r}")
    marked = annotated(receipts).where("first")
    if by == "route":
        marked = marked.withColumn("route", F.coalesce(F.col("route"), F.lit("")))
    per_stream = marked.groupBy(*STREAM, by).agg(F.count(F.lit(1)).alias("copies"))
    grouped = per_stream.cube(*STREAM, by).agg(
        F.sum("copies").alias("copies"), F.grouping_id().alias("_gid")
    )
    # keep (stream, by), (subscriber, by) and (by): the cube's other groupings are not shares
    bits = {"subscriber": 4, "publisher": 2, by: 1}
    wanted = (0, bits["publisher"], bits["subscriber"] + bits["publisher"])
    kept = grouped.where(F.col("_gid").isin(*wanted))
    whole = Window.partitionBy("_gid", *STREAM)
    return (
        _keys(kept.withColumn("share", F.col("copies") / F.sum("copies").over(whole)))
        .select(*STREAM, F.col(by), F.col("copies").cast("long").alias("copies"), "share")
        .orderBy(
            (F.col("subscriber") == ALL).asc(),
            "subscriber",
            (F.col("publisher") == ALL).asc(),
            "publisher",
            by,
        )
    )


def pace(acked: DataFrame, receipts: DataFrame) -> DataFrame:
    """One row: the injector's pace, ``injected`` (distinct messages acknowledged) and
    ``publish_seconds`` (the first send to the last acknowledgement, from the writers' logs),
    and the drain's, ``receipts`` (copies read) and ``read_seconds``: the time some
    subscription was being read, its first copy to its last (spans that overlap counted once;
    Spark's start, the wait for an idle subscription and the gaps between subscriptions drained
    one after another are not in it)."""
    sent = acked.agg(
        F.count_distinct("publisher", "seq").alias("injected"),
        ((F.max("ack_ns") - F.min("sent_ns")) / 1e9).alias("publish_seconds"),
    )
    read_us = F.unix_micros(F.col("receive_time"))
    spans = receipts.groupBy("subscriber").agg(
        F.count(F.lit(1)).alias("copies"),
        F.min(read_us).alias("start"),
        F.max(read_us).alias("end"),
    )
    # spans in order of start; one that starts after every earlier one ended opens a new run
    ordered = Window.orderBy("start", "end")
    ended = F.max("end").over(ordered.rowsBetween(Window.unboundedPreceding, -1))
    opens = F.when(ended.isNull() | (F.col("start") > ended), 1).otherwise(0)
    runs = (
        spans.withColumn("_opens", opens)
        .withColumn("_run", F.sum("_opens").over(ordered.rowsBetween(Window.unboundedPreceding, 0)))
        .groupBy("_run")
        .agg(F.sum("copies").alias("copies"), (F.max("end") - F.min("start")).alias("_us"))
    )
    read = runs.agg(
        F.coalesce(F.sum("copies"), F.lit(0)).cast("long").alias("receipts"),
        (F.sum("_us") / 1e6).alias("read_seconds"),
    )
    return sent.crossJoin(read)


def with_send_times(receipts: DataFrame, acked: DataFrame) -> DataFrame:
    """``receipts`` whose ``sent_ns`` is filled, where the message did not carry LoadSentNs,
    from the writer's acknowledgement log (the join is left out when every receipt has it)."""
    if receipts.where(F.col("sent_ns").isNull()).isEmpty():
        return receipts
    sent = acked.groupBy("publisher", "seq").agg(F.min("sent_ns").alias("_logged_ns"))
    joined = receipts.join(sent, ["publisher", "seq"], "left")
    filled = F.coalesce(F.col("sent_ns"), F.col("_logged_ns"))
    return joined.withColumn("sent_ns", filled).select(*receipts.columns)


QUANTILES = tuple(q / 100 for q in range(0, 101))


def latency_distribution(receipts: DataFrame, by: str = "host") -> DataFrame:
    """The latency (ms) of first copies at each of :data:`QUANTILES` per ``by`` (a receipt
    column or "host"): columns ``by``, ``quantile``, ``latency_ms``, ``copies``."""
    marked = annotated(receipts).where("first").where(F.col("latency_ms").isNotNull())
    grouped = marked.groupBy(by).agg(
        F.percentile_approx("latency_ms", list(QUANTILES), ACCURACY).alias("_at"),
        F.count(F.lit(1)).alias("copies"),
    )
    return (
        grouped.select(
            by,
            F.posexplode("_at").alias("_i", "latency_ms"),
            "copies",
        )
        .select(
            by,
            F.element_at(F.array(*[F.lit(q) for q in QUANTILES]), F.col("_i") + 1).alias(
                "quantile"
            ),
            "latency_ms",
            "copies",
        )
        .orderBy(by, "quantile")
    )
