"""The metrics of the load job on hand-made DataFrames whose answers are known."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.topics import topic_matches
from qmgr.spark import metrics as m

T0_NS = 1_700_000_000_000_000_000  # a send time, ns since the epoch


def _receipts(spark: Any, rows: list[tuple[Any, ...]]) -> Any:
    """Receipts in arrival order from (subscriber, publisher, seq[, latency_ms[, route[,
    topic]]])."""
    out = []
    for arrival, row in enumerate(rows):
        sub, pub, seq = row[:3]
        latency = row[3] if len(row) > 3 else 1
        route = row[4] if len(row) > 4 else "PUB1,HOST1,SUB1"
        topic = row[5] if len(row) > 5 else "T/a"
        sent_ns = T0_NS + seq * 1_000_000
        enqueued = dt.datetime.fromtimestamp(
            (sent_ns + latency * 1_000_000) / 1e9, tz=dt.UTC
        ).replace(tzinfo=None)
        received = dt.datetime(2026, 1, 1) + dt.timedelta(milliseconds=arrival)
        out.append((sub, arrival, pub, seq, topic, enqueued, received, route, sent_ns, 1, None))
    return spark.createDataFrame(out, m.RECEIPT_SCHEMA)


def _sent(spark: Any, publisher: str, count: int, topic: str = "T/a") -> Any:
    rows = [(publisher, seq, topic) for seq in range(1, count + 1)]
    return spark.createDataFrame(rows, "publisher string, seq long, topic string")


def _acked(sent: Any) -> Any:
    from pyspark.sql import functions as F

    return sent.withColumn("ack_ns", F.lit(T0_NS)).withColumn("sent_ns", F.lit(T0_NS))


def _subs(spark: Any, *pairs: tuple[str, str]) -> Any:
    return m.subscriptions_frame(spark, pairs or [("S1", "T/#")])


def _metrics(
    spark: Any, sent: Any, receipts: Any, subs: Any | None = None
) -> dict[tuple[str, str], Any]:
    table = m.delivery_metrics(sent, _acked(sent), receipts, subs or _subs(spark))
    return {(r["subscriber"], r["publisher"]): r for r in table.collect()}


# -- topic patterns -------------------------------------------------------------------------------

LEVEL = st.sampled_from(["a", "b", "", "#", "+", "a+", "x#", "c.d", "(e)", "f*", "g h", "é"])


@settings(max_examples=300, deadline=None)
@given(
    pattern=st.lists(LEVEL, min_size=1, max_size=4), topic=st.lists(LEVEL, min_size=1, max_size=5)
)
def test_topic_regex_matches_as_the_topic_tree_does(pattern: list[str], topic: list[str]) -> None:
    topic_s = "/".join(topic).replace("#", "h").replace("+", "p")
    pattern_s = "/".join(pattern)
    regex = re.compile(m.topic_regex(pattern_s))
    assert bool(regex.match("/" + topic_s)) == topic_matches(pattern_s, topic_s)


def test_expected_pairs_each_message_with_the_subscribers_that_match_it(spark: Any) -> None:
    sent = _sent(spark, "P1", 2, "Prices/Fruit").unionByName(_sent(spark, "P2", 3, "Orders/X"))
    subs = _subs(spark, ("PRICES", "Prices/#"), ("ALL", "#"), ("FRUIT", "Prices/+"))
    got = m.expected(sent, subs).groupBy("subscriber", "publisher").count().collect()
    assert {(r[0], r[1], r[2]) for r in got} == {
        ("PRICES", "P1", 2),
        ("ALL", "P1", 2),
        ("ALL", "P2", 3),
        ("FRUIT", "P1", 2),
    }


# -- order ----------------------------------------------------------------------------------------


def test_a_known_disorder_gives_its_out_of_order_count_and_displacement(spark: Any) -> None:
    arrivals = [1, 2, 4, 3, 5, 6, 10, 7, 8, 9]
    receipts = _receipts(spark, [("S1", "P1", s) for s in arrivals])
    row = _metrics(spark, _sent(spark, "P1", 10), receipts)[("S1", "P1")]
    assert row["out_of_order"] == 4  # 3 after 4; 7, 8, 9 after 10
    assert row["max_displacement"] == 3  # 10 arrived 7th, its place is 10th
    assert row["out_of_order_ratio"] == pytest.approx(0.4)
    assert (row["lost"], row["duplicated"], row["unexpected"]) == (0, 0, 0)


def test_one_late_message_is_one_out_of_order_however_far_it_moved(spark: Any) -> None:
    receipts = _receipts(spark, [("S1", "P1", s) for s in [2, 3, 4, 5, 1]])
    row = _metrics(spark, _sent(spark, "P1", 5), receipts)[("S1", "P1")]
    assert row["out_of_order"] == 1
    assert row["max_displacement"] == 4


def test_an_ordered_stream_has_no_disorder_and_streams_do_not_mix(spark: Any) -> None:
    # P1 and P2 interleaved: each in order on its own, so nothing is out of order
    rows = [("S1", p, s) for s in range(1, 6) for p in ("P2", "P1")]
    sent = _sent(spark, "P1", 5).unionByName(_sent(spark, "P2", 5))
    table = _metrics(spark, sent, _receipts(spark, rows))
    for key in [("S1", "P1"), ("S1", "P2"), ("S1", m.ALL), (m.ALL, m.ALL)]:
        assert table[key]["out_of_order"] == 0, key
        assert table[key]["max_displacement"] == 0, key
    assert table[("S1", m.ALL)]["received"] == 10


def test_a_session_read_by_one_task_then_another_is_in_the_order_it_was_read(spark: Any) -> None:
    """Two Spark tasks read a subscription's sessions at once; a session read first by the
    second task (its rows numbered from 2**33) and then by the first is in order: the tasks'
    rows are ordered by when they were received, a batch's rows (one receive time) by arrival."""
    at = dt.datetime(2026, 1, 1)
    second, first = 2**33, 0

    def row(arrival: int, seq: int, ms: int) -> tuple[Any, ...]:
        received = at + dt.timedelta(milliseconds=ms)
        sent_ns = T0_NS + seq * 1_000_000
        return ("S1", arrival, "P1", seq, "T/a", received, received, "A,H,B", sent_ns, 1, "P1")

    rows = [row(second + i, seq, 0) for i, seq in enumerate([1, 2, 3])]  # one batch
    rows += [row(second + 3, 4, 5)]
    rows += [row(first + i, seq, 10 + i) for i, seq in enumerate([5, 6, 7])]
    got = _metrics(spark, _sent(spark, "P1", 7), spark.createDataFrame(rows, m.RECEIPT_SCHEMA))
    assert (got[("S1", "P1")]["out_of_order"], got[("S1", "P1")]["max_displacement"]) == (0, 0)
    # the same rows with the tasks' times swapped: 5, 6, 7 were read first
    swapped = [
        row(a, seq, 20 + n if a >= second else n) for n, (_, a, _, seq, *_) in enumerate(rows)
    ]
    got = _metrics(spark, _sent(spark, "P1", 7), spark.createDataFrame(swapped, m.RECEIPT_SCHEMA))
    assert got[("S1", "P1")]["out_of_order"] == 4


# -- loss, duplicates, unexpected -----------------------------------------------------------------


def test_a_known_duplicate_and_a_known_loss_are_found(spark: Any) -> None:
    receipts = _receipts(spark, [("S1", "P1", s) for s in [1, 2, 2, 4, 5]])
    row = _metrics(spark, _sent(spark, "P1", 5), receipts)[("S1", "P1")]
    assert (row["sent"], row["acknowledged"]) == (5, 5)
    assert (row["received"], row["unique"]) == (5, 4)
    assert row["duplicated"] == 1
    assert row["lost"] == 1  # seq 3
    assert row["out_of_order"] == 0  # a redelivered copy is a duplicate, not disorder


def test_a_late_duplicate_is_not_counted_out_of_order(spark: Any) -> None:
    receipts = _receipts(spark, [("S1", "P1", s) for s in [1, 2, 3, 1]])
    row = _metrics(spark, _sent(spark, "P1", 3), receipts)[("S1", "P1")]
    assert (row["duplicated"], row["out_of_order"], row["max_displacement"]) == (1, 0, 0)


def test_only_acknowledged_messages_count_as_lost(spark: Any) -> None:
    sent = _sent(spark, "P1", 4)
    acked = _acked(sent.where("seq <= 2"))  # 3 and 4 were never acknowledged
    receipts = _receipts(spark, [("S1", "P1", 1)])
    table = m.delivery_metrics(sent, acked, receipts, _subs(spark)).collect()
    row = next(r for r in table if r["publisher"] == "P1")
    assert (row["sent"], row["acknowledged"], row["received"], row["lost"]) == (4, 2, 1, 1)


def test_a_message_never_sent_is_unexpected(spark: Any) -> None:
    receipts = _receipts(spark, [("S1", "P1", s) for s in [1, 2, 99]])
    row = _metrics(spark, _sent(spark, "P1", 2), receipts)[("S1", "P1")]
    assert (row["unexpected"], row["lost"], row["unique"]) == (1, 0, 3)


def test_a_subscriber_expects_only_the_topics_it_matches(spark: Any) -> None:
    sent = _sent(spark, "P1", 3, "Prices/A").unionByName(
        _sent(spark, "P1", 6, "Orders/B").where("seq > 3")
    )
    subs = _subs(spark, ("PRICES", "Prices/#"), ("ORDERS", "Orders/+"))
    receipts = _receipts(
        spark,
        [("PRICES", "P1", s, 1, "x", "Prices/A") for s in (1, 2, 3)]
        + [("ORDERS", "P1", s, 1, "x", "Orders/B") for s in (4, 6)],
    )
    table = _metrics(spark, sent, receipts, subs)
    assert (table[("PRICES", "P1")]["sent"], table[("PRICES", "P1")]["lost"]) == (3, 0)
    assert (table[("ORDERS", "P1")]["sent"], table[("ORDERS", "P1")]["lost"]) == (3, 1)
    assert table[(m.ALL, m.ALL)]["sent"] == 6
    assert table[(m.ALL, m.ALL)]["lost"] == 1


def test_a_subscriber_that_received_nothing_loses_everything(spark: Any) -> None:
    subs = _subs(spark, ("S1", "T/#"), ("S2", "T/#"))
    receipts = _receipts(spark, [("S1", "P1", s) for s in [1, 2]])
    table = _metrics(spark, _sent(spark, "P1", 2), receipts, subs)
    row = table[("S2", "P1")]
    assert (row["sent"], row["received"], row["lost"], row["out_of_order_ratio"]) == (2, 0, 2, 0)
    assert row["latency_p50_ms"] is None


# -- latency and totals ---------------------------------------------------------------------------


def test_latency_percentiles_are_those_of_the_first_copies(spark: Any) -> None:
    rows = [("S1", "P1", s, s) for s in range(1, 101)]  # message s took s ms
    rows.append(("S1", "P1", 1, 5000))  # a late duplicate does not count
    row = _metrics(spark, _sent(spark, "P1", 100), _receipts(spark, rows))[("S1", "P1")]
    assert row["latency_p50_ms"] == pytest.approx(50, abs=0.01)
    assert row["latency_p95_ms"] == pytest.approx(95, abs=0.01)
    assert row["latency_p99_ms"] == pytest.approx(99, abs=0.01)
    assert row["latency_max_ms"] == pytest.approx(100, abs=0.01)


def test_totals_per_subscriber_and_overall(spark: Any) -> None:
    rows = [("S1", "P1", s, 10) for s in (1, 2, 3)]
    rows += [("S1", "P2", s, 30) for s in (2, 1)]
    rows += [("S2", "P1", s, 20) for s in (1, 2, 3, 3)]
    sent = _sent(spark, "P1", 3).unionByName(_sent(spark, "P2", 2))
    subs = _subs(spark, ("S1", "T/#"), ("S2", "T/#"))
    table = _metrics(spark, sent, _receipts(spark, rows), subs)
    assert list(table)[-1] == (m.ALL, m.ALL)
    s1 = table[("S1", m.ALL)]
    assert (s1["sent"], s1["received"], s1["out_of_order"], s1["max_displacement"]) == (5, 5, 1, 1)
    assert s1["latency_max_ms"] == pytest.approx(30, abs=0.01)
    total = table[(m.ALL, m.ALL)]
    assert (total["sent"], total["received"], total["duplicated"], total["lost"]) == (10, 9, 1, 2)
    assert total["out_of_order_ratio"] == pytest.approx(1 / 8)


# -- share ----------------------------------------------------------------------------------------


def test_host_share_per_stream_per_subscriber_and_in_total(spark: Any) -> None:
    rows = [("S1", "P1", s, 1, "PUB1,HOSTA1,SUB1") for s in (1, 2, 3)]
    rows += [("S1", "P1", 4, 1, "PUB1,HOSTA2,SUB1"), ("S1", "P1", 4, 1, "PUB1,HOSTA1,SUB1")]
    rows += [("S2", "P1", s, 1, "PUB1,SUB2") for s in (1, 2)]
    shares = {
        (r["subscriber"], r["publisher"], r["host"]): (r["copies"], r["share"])
        for r in m.share(_receipts(spark, rows)).collect()
    }
    assert shares[("S1", "P1", "HOSTA1")] == (3, pytest.approx(0.75))  # the duplicate not counted
    assert shares[("S1", "P1", "HOSTA2")] == (1, pytest.approx(0.25))
    assert shares[("S1", m.ALL, "HOSTA2")] == (1, pytest.approx(0.25))
    assert shares[("S2", "P1", m.DIRECT)] == (2, pytest.approx(1.0))
    assert shares[(m.ALL, m.ALL, "HOSTA1")] == (3, pytest.approx(0.5))
    assert shares[(m.ALL, m.ALL, m.DIRECT)] == (2, pytest.approx(1 / 3))
    assert len(shares) == 9


def test_route_share_and_the_host_of_a_route(spark: Any) -> None:
    from pyspark.sql import functions as F

    rows = [("S1", "P1", 1, 1, "PUB1,FWD,HOSTA1,SUB1"), ("S1", "P1", 2, 1, None)]
    routes = {
        r["route"]: r["share"]
        for r in m.share(_receipts(spark, rows), "route").collect()
        if r["publisher"] == "P1"
    }
    assert routes == {"PUB1,FWD,HOSTA1,SUB1": 0.5, "": 0.5}
    hosts = spark.createDataFrame([("A,B,C,D",), ("A,B",), ("",), (None,)], "route string")
    got = [r[0] for r in hosts.select(m.host_of(F.col("route"))).collect()]
    assert got == ["B,C", m.DIRECT, m.DIRECT, m.DIRECT]
    with pytest.raises(ValueError, match="share by"):
        m.share(_receipts(spark, rows), "topic")


# -- receipts from the source's rows --------------------------------------------------------------


def test_receipts_from_source_rows_keep_this_runs_messages_in_arrival_order(spark: Any) -> None:
    schema = (
        "source string, body binary, topic string, properties map<string,string>, "
        "message_id string, correlation_id string, enqueue_time timestamp, "
        "receive_time timestamp, route string, delivery_count int, session_id string, "
        "sequence_number long"
    )
    now = dt.datetime(2026, 1, 1)

    def row(run: str | None, pub: str, seq: int) -> tuple[Any, ...]:
        props = {"LoadPublisher": pub, "LoadSeq": str(seq), "LoadSentNs": "5"}
        if run:
            props["LoadRun"] = run
        return ("mq:SUB1", b"x", "T/a", props, "id", None, now, now, "A,B", 1, None, None)

    raw = spark.createDataFrame(
        [row("R1", "P1", 3), row("R0", "P1", 1), row("R1", "P1", 1), row(None, "P1", 2)], schema
    ).coalesce(1)
    got = m.receipts_from(raw, "S1", run="R1").orderBy("arrival").collect()
    assert [(r["subscriber"], r["publisher"], r["seq"], r["sent_ns"]) for r in got] == [
        ("S1", "P1", 3, 5),
        ("S1", "P1", 1, 5),
    ]
    assert m.receipts_from(raw, "S1").count() == 4


def test_send_times_come_from_the_ack_log_when_a_message_carries_none(spark: Any) -> None:
    from pyspark.sql import functions as F

    receipts = _receipts(spark, [("S1", "P1", 1, 7), ("S1", "P1", 2, 7)])
    acked = _acked(_sent(spark, "P1", 2)).withColumn(
        "sent_ns", F.lit(T0_NS) + F.col("seq") * 1_000_000
    )
    assert m.with_send_times(receipts, acked) is receipts  # every receipt has its send time
    blank = receipts.withColumn("sent_ns", F.when(F.col("seq") == 2, F.col("sent_ns")))
    filled = m.with_send_times(blank, acked).orderBy("seq").collect()
    assert [r["sent_ns"] for r in filled] == [T0_NS + 1_000_000, T0_NS + 2_000_000]
    assert list(filled[0].asDict()) == list(receipts.columns)
