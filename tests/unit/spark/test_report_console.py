"""The load job's console report, files and chart on a report made by the real metrics of stage
3 (:mod:`tests.unit.spark.report_data`): the table fits 80 and 100 columns with every number
whole, the verdicts follow the figures (not the scenario's name), ``wide`` shows every stream
and column, the pace (injector, subscribers, drain) is measured and written."""

from __future__ import annotations

import copy
import csv
import dataclasses
import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from qmgr.spark import metrics as m
from qmgr.spark import report
from qmgr.spark.report import ScenarioResult
from tests.unit.spark.report_data import T0_NS, demo_results


@pytest.fixture(scope="module")
def results(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> list[ScenarioResult]:
    return demo_results(spark, tmp_path_factory.mktemp("report"))


def render(results: list[ScenarioResult], width: int, wide: bool = False) -> str:
    out = Console(width=width, file=io.StringIO(), color_system=None)
    report.print_results(out, results, wide=wide)
    text = out.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(text, str)
    return text


def said(text: str) -> str:
    """The console text with its line wrapping undone (runs of spaces as one)."""
    return " ".join(text.split())


def fresh(results: list[ScenarioResult]) -> list[ScenarioResult]:
    return [copy.deepcopy(r) for r in results]


def row_of(result: ScenarioResult, subscriber: str) -> dict[str, Any]:
    return next(r for r in result.subscribers() if r["subscriber"] == subscriber)


# -- the table fits the terminal ------------------------------------------------------------------


def sections(text: str, results: list[ScenarioResult]) -> dict[str, list[str]]:
    """The console lines of each scenario, from its table's title to the next one's."""
    lines = text.splitlines()
    starts = [
        next(i for i, x in enumerate(lines) if f"{r.scenario.name}: " in x and "publishers" in x)
        for r in results
    ]
    ends = [*starts[1:], len(lines)]
    return {r.scenario.name: lines[a:b] for r, a, b in zip(results, starts, ends, strict=True)}


@pytest.mark.parametrize("width", [80, 100])
def test_every_number_of_every_subscriber_shows_whole_in_a_narrow_terminal(
    results: list[ScenarioResult], width: int
) -> None:
    text = render(results, width)
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= width
    for result in results:
        lines = sections(text, results)[result.scenario.name]
        tokens = set(" ".join(lines).split())
        for row in result.subscribers():
            name = row["subscriber"]
            (line,) = [x for x in lines if x.split()[:2] == [name, str(row["received"])]]
            ratio = f"({100 * row['out_of_order_ratio']:.1f}%)"
            assert line.split()[:9] == [
                name,
                str(row["received"]),
                str(row["lost"]),
                str(row["duplicated"]),
                str(row["out_of_order"]),
                ratio,
                f"{row['delivered_per_s']:.0f}",
                f"{row['latency_p50_ms']:.1f}",
                f"{row['latency_p99_ms']:.1f}",
            ], line
            for host in result.hosts:
                if host["subscriber"] == name and host["publisher"] == m.ALL:
                    assert host["host"] in tokens
                    assert f"{100 * host['share']:.0f}%" in tokens


def test_the_default_table_has_a_row_per_subscriber_and_wide_one_per_publisher(
    results: list[ScenarioResult],
) -> None:
    narrow = render(results, 100)
    publishers = {r["publisher"] for res in results for r in res.metrics} - {m.ALL}
    assert publishers and not [p for p in publishers if p in narrow]
    assert "--wide" in narrow
    wide = render(results, 100, wide=True)
    assert report.WIDE_TITLE in wide
    assert "…" not in wide  # printed as wide as it needs, not cut to the terminal
    assert all(p in wide for p in publishers)
    assert max(len(line) for line in wide.splitlines()) > 100
    for heading in ("sent", "acked", "max disp", "p95 ms", "max ms"):
        assert heading in wide
    # the verdicts end the wide report too
    assert "nothing lost or duplicated through the kill of HOSTA1" in said(wide)


# -- verdicts -------------------------------------------------------------------------------------


def test_each_scenario_ends_with_a_verdict_per_subscriber(results: list[ScenarioResult]) -> None:
    for width in (80, 100):
        text = said(render(results, width))
        assert "ORDERS: in order (one host keeps order); nothing lost or duplicated" in text
        assert "PRICES: 40.0% out of order, as two hosts do" in text
        assert "SB-SESSIONS: 40.0% out of order, as two hosts do" in text
        assert (
            "SB-SEQUENCED: in order (the sequenced-delivery helper restores each publisher's "
            "order, which two hosts lose); nothing lost or duplicated" in text
        )
        assert "nothing lost or duplicated through the kill of HOSTA1" in text
        threshold = results[2].meta["kill_threshold"]
        assert f"(after = 0.4: at {threshold:,} or more)" in text
        assert text.count("the cluster kept pace: the injector was the limit") == 3


def test_the_verdicts_follow_the_figures_not_the_scenarios_name(
    results: list[ScenarioResult],
) -> None:
    one, two, kill = fresh(results)
    # the same figures under other names say the same
    renamed = dataclasses.replace(two.scenario, name="anything")
    assert report.verdicts(dataclasses.replace(two, scenario=renamed)) == report.verdicts(two)
    # something lost and duplicated is said in capitals, in red, and the run is not clean
    row = row_of(two, "SB-SEQUENCED")
    row.update(lost=3, duplicated=2)
    total = two.total()
    total.update(lost=3, duplicated=2)
    lines = dict((line.split(":")[0], (line, ok)) for line, ok in report.verdicts(two))
    line, ok = lines["SB-SEQUENCED"]
    assert line.endswith("; 3 LOST, 2 DUPLICATED") and not ok
    assert not report.clean(two)
    colored = Console(width=100, file=io.StringIO(), force_terminal=True, color_system="standard")
    report.print_results(colored, [two])
    assert "\x1b[31mSB-SEQUENCED: " in colored.file.getvalue()  # type: ignore[attr-defined]
    # copies of ORDERS through two hosts, in order: no longer "one host keeps order"
    (orders,) = [h for h in one.hosts if h["subscriber"] == "ORDERS" and h["publisher"] == m.ALL]
    orders["share"] = 0.5
    one.hosts.append({**orders, "host": "HOSTB2"})
    (line, _), *_ = report.verdicts(one)
    assert line.startswith("ORDERS: in order this time (several hosts do not guarantee it)")
    # disorder through one host is said as it is
    row_of(one, "ORDERS").update(out_of_order=4, out_of_order_ratio=0.001)
    one.hosts[:] = [h for h in one.hosts if h["host"] != "HOSTB2"]
    for host in one.hosts:
        host["share"] = 1.0
    (line, _), *_ = report.verdicts(one)
    assert line.startswith("ORDERS: 0.1% out of order; nothing lost")
    # no fault: nothing said of a kill
    kill.meta["killed"] = None
    assert "kill" not in said(" ".join(line for line, _ in report.verdicts(kill)))


def test_a_subscriber_that_falls_behind_the_injector_says_the_cluster_was_the_limit(
    results: list[ScenarioResult],
) -> None:
    _, two, kill = fresh(results)
    row = row_of(two, "SB-SESSIONS")
    row["delivered_per_s"] = (
        0.5 * two.meta["publish_rate"] * row["acknowledged"] / two.meta["published"]
    )
    figures = report.routes(two)
    assert report.pace_verdict(two, figures) == (
        "behind the injector (SB-SESSIONS 50% of its pace): the cluster was the limit",
        False,
    )
    row = row_of(kill, "PRICES")
    row["delivered_per_s"] = 1.0
    verdict = report.pace_verdict(kill, report.routes(kill))
    assert verdict is not None
    assert verdict[0].endswith("the cluster (with HOSTA1 killed) was the limit")


# -- pace -----------------------------------------------------------------------------------------


def test_the_pace_of_the_injector_the_subscribers_and_the_drain_is_measured(
    results: list[ScenarioResult],
) -> None:
    one = results[0]
    meta = one.meta
    # 4 publishers, 1,000 messages each, one every ms: sent over 999 ms, acknowledged 2 ms later
    assert meta["published"] == 4000
    assert meta["publish_seconds"] == pytest.approx(1.001)
    assert meta["publish_rate"] == pytest.approx(4000 / 1.001, abs=0.1)
    assert meta["receipts"] == 4000
    # read as they arrived: the span of the destination enqueues (below)
    assert meta["drain_read_seconds"] == pytest.approx(0.9995, abs=0.001)
    assert meta["drain_rate"] == pytest.approx(4000 / 0.9995, abs=0.1)
    orders = row_of(one, "ORDERS")
    # destination enqueues: 30 ms after each send, plus 0-0.6 ms: seq 1 at +0.1, seq 1000 at +0.6
    assert orders["delivery_seconds"] == pytest.approx(0.9995)
    assert orders["delivered_per_s"] == pytest.approx(4000 / 0.9995, rel=1e-4)


def test_pace_counts_distinct_messages_and_the_time_spent_reading(spark: Any) -> None:
    import datetime as dt

    acked = spark.createDataFrame(
        [("P1", 1, "T", T0_NS + 2_000_000, T0_NS), ("P1", 1, "T", T0_NS + 2_000_000, T0_NS)]
        + [("P1", 2, "T", T0_NS + 500_000_000, T0_NS + 1_000_000)],
        "publisher string, seq long, topic string, ack_ns long, sent_ns long",
    )
    at = dt.datetime(2024, 1, 1)

    def read(subscriber: str, seconds: list[float]) -> list[tuple[Any, ...]]:
        when = [at + dt.timedelta(seconds=x) for x in seconds]
        return [
            (subscriber, i, "P1", 1, "T", at, w, "", T0_NS, 1, None) for i, w in enumerate(when)
        ]

    # S1 and S2 read side by side over 0-1 s (counted once), S3 after an idle wait, for 0.5 s
    rows = read("S1", [0, 0.25, 0.5]) + read("S2", [0.5, 0.75, 1.0]) + read("S3", [5, 5.5])
    receipts = spark.createDataFrame(rows, m.RECEIPT_SCHEMA)
    (row,) = m.pace(acked, receipts).collect()
    assert row["injected"] == 2  # a retried task's second line is the same message
    assert row["publish_seconds"] == pytest.approx(0.5)
    assert (row["receipts"], row["read_seconds"]) == (8, pytest.approx(1.5))
    assert report.rates(row.asDict()) == {
        "published": 2,
        "publish_seconds": 0.5,
        "publish_rate": 4.0,
        "receipts": 8,
        "drain_read_seconds": 1.5,
        "drain_rate": 5.3,
    }


# -- files ----------------------------------------------------------------------------------------


def test_the_summary_files_carry_the_pace_and_the_chart_is_written(
    results: list[ScenarioResult], tmp_path: Path
) -> None:
    report.write_summary(tmp_path, results)
    summary = json.loads((tmp_path / "summary.json").read_text())
    for result in results:
        meta = summary[result.scenario.name]["meta"]
        assert meta["publish_rate"] == result.meta["publish_rate"] > 0
        assert meta["drain_rate"] == result.meta["drain_rate"] > 0
        assert {s["name"] for s in meta["subscriptions"]} == {
            s.name for s in result.scenario.subscriptions
        }
        for row in summary[result.scenario.name]["metrics"]:
            assert row["delivered_per_s"] > 0 and row["delivery_seconds"] > 0
    with open(tmp_path / "summary.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[:6] == [
        "scenario",
        "subscriber",
        "publisher",
        "sent",
        "acknowledged",
        "received",
    ]
    assert list(rows[0])[-4:] == ["delivery_seconds", "delivered_per_s", *report.RATE_COLUMNS]
    assert {float(r["publish_rate"]) for r in rows if r["scenario"] == "orders-one-host"} == {
        results[0].meta["publish_rate"]
    }
    png = (tmp_path / "chart.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert width > height > 500  # a group of bars per scenario, two panels


def test_the_chart_shows_each_subscriber_with_lost_and_duplicated(
    results: list[ScenarioResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The texts the chart draws: a bar label per subscriber, lost and duplicated beside each,
    the kill with its outcome, which side set the pace."""
    import matplotlib.figure
    import matplotlib.text

    texts: list[str] = []
    ticks: list[str] = []
    saved = matplotlib.figure.Figure.savefig

    def savefig(fig: Any, *args: Any, **kwargs: Any) -> None:
        texts.extend(t.get_text() for t in fig.findobj(matplotlib.text.Text))
        ticks.extend(t.get_text() for ax in fig.axes for t in ax.get_xticklabels())
        saved(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    report.write_chart(tmp_path / "chart.png", "qmgr load", results)
    subscribers = [r["subscriber"] for res in results for r in res.subscribers()]
    assert len(subscribers) == 5
    assert texts.count("lost 0 · dup 0") == 5
    assert texts.count("40.0%") == 3 and texts.count("in order") == 2
    assert "HOSTA1 killed with kill -9: nothing lost or duplicated" in texts
    assert texts.count("the injector was the limit") == 3
    # each subscriber under its bar in both panels; the injector and the drain beside them
    paced = [
        x
        for res in results
        for x in ("published", *(r["subscriber"] for r in res.subscribers()), "drained")
    ]
    assert ticks == subscribers + paced


@pytest.mark.parametrize("length", [30, 70])
def test_a_long_subscriber_name_leaves_optional_columns_out_not_numbers(
    results: list[ScenarioResult], length: int
) -> None:
    """A name too long for every column: the optional ones go (msg/s first); one too long even
    for the essential ones folds onto more lines. The numbers stay whole."""
    two = fresh(results)[1]
    long = ("SEQUENCED-" * 10)[:length]
    for table in (two.metrics, two.hosts):
        for row in table:
            if row["subscriber"] == "SB-SEQUENCED":
                row["subscriber"] = long
    two.meta["subscriptions"][2]["name"] = long
    text = render([two], 80)
    assert "…" not in text
    assert "msg/s" not in text  # the first optional column to go
    row = row_of(two, long)
    lines = text.splitlines()
    (at,) = [i for i, x in enumerate(lines) if long[:20] in x and "(0.0%)" in x]
    assert lines[at].split()[1:6] == [str(row["received"]), "0", "0", "0", "(0.0%)"]
    name = ""
    for x in lines[at:]:
        if not x[:1].strip() or not long.startswith(name + x.split()[0]):
            break
        name += x.split()[0]
    assert name == long  # whole, on one line or folded onto more
