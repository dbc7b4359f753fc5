"""The load job's outputs: per scenario in ``OUT/<scenario>/`` ``metrics.json``,
``metrics.csv``, ``hosts.csv``, ``routes.csv``, the ``receipts.parquet`` written by stage 2 and
``chart.png``; for the whole run ``OUT/summary.json``, ``OUT/summary.csv`` and ``OUT/chart.png``
(out of order per subscriber with lost and duplicated beside it, the injector's, the
subscribers' and the drain's pace, the latency at that pace); and on the console a table per
scenario that fits the terminal, ending with a verdict per subscriber, or (``wide``) the table
per publisher with every column.

The verdicts come from the figures alone: lost, duplicated and out of order per subscriber, the
topic hosts its copies went through, whether it was drained through the sequenced-delivery
helper, and the scenario's fault."""

from __future__ import annotations

import csv
import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qmgr.launcher.verdicts import loss_verdict, order_verdict
from qmgr.spark.metrics import ALL, METRIC_COLUMNS

if TYPE_CHECKING:
    from qmgr.spark.scenario import Scenario

STREAM_ROWS_SHOWN = 4  # with more publishers, the wide table shows per-subscriber totals only
KEPT_PACE = 0.8  # a subscriber delivered at this share of its publishing pace or more kept it
SUBSCRIBER_TITLE = "qmgr load: delivery per subscriber"
WIDE_TITLE = "qmgr load: delivery per publisher × subscriber"
RATE_COLUMNS = ("publish_rate", "drain_rate")  # summary.csv: the scenario's, on each row


@dataclass
class ScenarioResult:
    """What one scenario measured (small tables, collected for the report)."""

    scenario: Scenario
    run_id: str
    out: Path
    metrics: list[dict[str, Any]]
    hosts: list[dict[str, Any]]
    routes: list[dict[str, Any]]
    latency: list[dict[str, Any]]
    meta: dict[str, Any] = field(default_factory=dict)

    def total(self) -> dict[str, Any]:
        return next(r for r in self.metrics if r["subscriber"] == ALL and r["publisher"] == ALL)

    def subscribers(self) -> list[dict[str, Any]]:
        """The total row of each subscriber (publisher ``*``), in the scenario's order."""
        names = [s["name"] for s in subscriptions(self)]
        rows = [r for r in self.metrics if r["publisher"] == ALL and r["subscriber"] != ALL]
        return sorted(
            rows,
            key=lambda r: names.index(r["subscriber"]) if r["subscriber"] in names else len(names),
        )


def console() -> Any:
    """The console of the job: the terminal's width; in a pipe, COLUMNS or 200."""
    from rich.console import Console

    piped = not sys.stdout.isatty() and not os.environ.get("COLUMNS")
    return Console(width=200) if piped else Console()


def progress(out: Any) -> Any:
    from qmgr.launcher.cluster_start import progress_display

    return progress_display(out)


def clean(result: ScenarioResult) -> bool:
    """Nothing acknowledged was lost or duplicated."""
    total = result.total()
    return total["lost"] == 0 and total["duplicated"] == 0


def rates(pace: dict[str, Any]) -> dict[str, Any]:
    """The meta of a scenario's pace (:func:`qmgr.spark.metrics.pace`): ``published``
    (messages acknowledged), ``publish_seconds`` and ``publish_rate`` (per second, first send
    to last acknowledgement), ``receipts``, ``drain_read_seconds`` and ``drain_rate`` (copies read per
    second, first read to last)."""

    def per_second(count: Any, seconds: Any) -> float | None:
        return round(count / seconds, 1) if count and seconds else None

    def rounded(seconds: Any) -> float | None:
        return None if seconds is None else round(float(seconds), 3)

    return {
        "published": pace.get("injected") or 0,
        "publish_seconds": rounded(pace.get("publish_seconds")),
        "publish_rate": per_second(pace.get("injected"), pace.get("publish_seconds")),
        "receipts": pace.get("receipts") or 0,
        "drain_read_seconds": rounded(pace.get("read_seconds")),
        "drain_rate": per_second(pace.get("receipts"), pace.get("read_seconds")),
    }


# -- files ----------------------------------------------------------------------------------------


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _clean_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: _json_value(v) for k, v in row.items()} for row in rows]


def _write_csv(path: Path, rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def scenario_json(result: ScenarioResult) -> dict[str, Any]:
    return {
        "meta": result.meta,
        "metrics": _clean_rows(result.metrics),
        "hosts": _clean_rows(result.hosts),
        "routes": _clean_rows(result.routes),
        "latency": _clean_rows(result.latency),
    }


def write_scenario(result: ScenarioResult) -> None:
    out = result.out
    (out / "metrics.json").write_text(json.dumps(scenario_json(result), indent=2) + "\n")
    _write_csv(out / "metrics.csv", result.metrics, METRIC_COLUMNS)
    share_columns = ("subscriber", "publisher", "copies", "share")
    _write_csv(out / "hosts.csv", result.hosts, (*share_columns[:2], "host", *share_columns[2:]))
    _write_csv(out / "routes.csv", result.routes, (*share_columns[:2], "route", *share_columns[2:]))
    write_chart(out / "chart.png", f"qmgr load: scenario {result.scenario.name}", [result])


def write_chart(path: Path, title: str, results: Sequence[ScenarioResult]) -> None:
    from qmgr.spark.chart import draw

    draw(path, title, [(r, routes(r)) for r in results])


def write_summary(out: Path, results: Sequence[ScenarioResult]) -> None:
    """``summary.json`` (every scenario's meta and metrics), ``summary.csv`` (the total row of
    each scenario and subscriber, with the scenario's publishing, delivering and draining pace)
    and ``chart.png`` comparing the scenarios."""
    data = {r.scenario.name: scenario_json(r) for r in results}
    (out / "summary.json").write_text(json.dumps(data, indent=2) + "\n")
    rows = [
        {
            "scenario": r.scenario.name,
            **row,
            **{k: r.meta.get(k) for k in RATE_COLUMNS},
        }
        for r in results
        for row in r.metrics
        if row["publisher"] == ALL
    ]
    _write_csv(out / "summary.csv", rows, ("scenario", *METRIC_COLUMNS, *RATE_COLUMNS))
    if results:
        write_chart(
            out / "chart.png", "qmgr load: " + ", ".join(r.scenario.name for r in results), results
        )


# -- the figures the table, the verdicts and the chart show --------------------------------------


@dataclass(frozen=True)
class Route:
    """One subscriber of a scenario: the route its copies took and what arrived."""

    name: str
    kind: str  # "MQ", "Service Bus", "Service Bus sessions", "sequenced-delivery helper"
    received: int
    lost: int
    duplicated: int
    out_of_order: int
    ratio: float  # out of order / unique
    hosts: dict[str, float]  # topic host (the nodes between origin and destination) -> share
    delivered_per_s: float | None
    published_per_s: float | None  # the pace its messages were published at
    p50_ms: float | None
    p99_ms: float | None

    @property
    def sequenced(self) -> bool:
        return self.kind == SEQUENCED

    @property
    def clean(self) -> bool:
        return not self.lost and not self.duplicated

    @property
    def behind(self) -> bool:
        """Delivered clearly slower than its messages were published."""
        if not self.delivered_per_s or not self.published_per_s:
            return False
        return self.delivered_per_s < KEPT_PACE * self.published_per_s


MQ, SERVICEBUS, SESSIONS, SEQUENCED = (
    "MQ",
    "Service Bus",
    "Service Bus sessions",
    "sequenced-delivery helper",
)


def subscriptions(result: ScenarioResult) -> list[dict[str, Any]]:
    """The measured subscriptions (name, servicebus, sessions) from the report's meta, else
    (a report of an older job) from the scenario."""
    listed: list[dict[str, Any]] | None = result.meta.get("subscriptions")
    if listed is None:
        listed = [
            {"name": s.name, "servicebus": s.servicebus, "sessions": s.sessions}
            for s in result.scenario.subscriptions
        ]
    return listed


def _kinds(result: ScenarioResult) -> dict[str, str]:
    """Subscriber -> kind (:data:`MQ`, :data:`SESSIONS`...)."""
    kinds = {}
    for sub in subscriptions(result):
        sessions = str(sub.get("sessions"))
        if not sub.get("servicebus"):
            kinds[sub["name"]] = MQ
        else:
            kinds[sub["name"]] = {"sequenced": SEQUENCED, "all": SESSIONS}.get(sessions, SERVICEBUS)
    return kinds


def routes(result: ScenarioResult) -> list[Route]:
    """The figures of every subscriber of ``result``."""
    kinds = _kinds(result)
    published = result.meta.get("published") or 0
    publish_rate = result.meta.get("publish_rate")
    out = []
    for row in result.subscribers():
        name = row["subscriber"]
        share = (
            publish_rate * row["acknowledged"] / published if publish_rate and published else None
        )
        out.append(
            Route(
                name=name,
                kind=kinds.get(name, MQ),
                received=row["received"],
                lost=row["lost"],
                duplicated=row["duplicated"],
                out_of_order=row["out_of_order"],
                ratio=row["out_of_order_ratio"] or 0.0,
                hosts={h: v for h, v in _shares(result.hosts, name).items() if v > 0},
                delivered_per_s=_number(row.get("delivered_per_s")),
                published_per_s=share,
                p50_ms=_number(row.get("latency_p50_ms")),
                p99_ms=_number(row.get("latency_p99_ms")),
            )
        )
    return out


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _shares(hosts: Iterable[dict[str, Any]], subscriber: str) -> dict[str, float]:
    return {
        str(r["host"]): float(r["share"])
        for r in hosts
        if r["subscriber"] == subscriber and r["publisher"] == ALL
    }


def _percent(route: Route) -> str:
    """The out-of-order share as the verdict says it ("49.9%"; a count when under 0.1%)."""
    if route.out_of_order and 100 * route.ratio < 0.05:
        return f"{route.out_of_order} of {route.received - route.duplicated}"
    return f"{100 * route.ratio:.1f}%"


def _killed(result: ScenarioResult) -> str | None:
    return result.meta.get("killed") or None


def route_verdict(result: ScenarioResult, route: Route) -> str:
    """What happened to one subscriber's copies, in plain words: order (from its out of order
    share, the topic hosts they went through and the sequenced-delivery helper) and loss (from
    lost and duplicated, through the scenario's fault)."""
    killed = _killed(result)
    order = order_verdict(
        len(route.hosts), route.out_of_order, _percent(route), sequenced=route.sequenced
    )
    loss = loss_verdict(
        route.lost, route.duplicated, f"through the kill of {killed}" if killed else ""
    )
    return f"{order}; {loss}"


def fault_line(result: ScenarioResult) -> str | None:
    """The fault as it happened: when the node was killed, counted in acknowledgements of all
    the scenario's messages (what the fault's ``after`` is a share of)."""
    meta = result.meta
    killed = _killed(result)
    if not killed:
        return None
    total = (meta.get("publishers") or 0) * (meta.get("messages_per_publisher") or 0)
    line = (
        f"{killed} killed with kill -9 once {meta.get('killed_after_acknowledged') or 0:,} of "
        f"the {total:,} messages were acknowledged"
    )
    if meta.get("kill_after") is not None and meta.get("kill_threshold") is not None:
        line += f" (after = {meta['kill_after']:g}: at {meta['kill_threshold']:,} or more)"
    if meta.get("kill_restart") is not None:
        line += f", started again {meta['kill_restart']:g} s later"
    return line


def pace_verdict(result: ScenarioResult, figures: Sequence[Route]) -> tuple[str, bool] | None:
    """Which side set the pace, and whether the cluster kept it: a subscriber that delivered
    at under :data:`KEPT_PACE` of the pace its messages were published at fell behind."""
    behind = [r for r in figures if r.behind]
    if behind:
        killed = _killed(result)
        cluster = f"the cluster (with {killed} killed)" if killed else "the cluster"
        names = ", ".join(
            f"{r.name} {100 * (r.delivered_per_s or 0) / (r.published_per_s or 1):.0f}%"
            for r in behind
        )
        return f"behind the injector ({names} of its pace): {cluster} was the limit", False
    if any(r.delivered_per_s and r.published_per_s for r in figures):
        return "the cluster kept pace: the injector was the limit", True
    return None


def pace_line(result: ScenarioResult, figures: Sequence[Route]) -> str | None:
    """The injector's, the subscribers' and the drain's pace, and which one set it."""
    meta = result.meta
    publish = meta.get("publish_rate")
    if not publish:
        return None
    parts = [f"published {publish:,.0f}/s ({meta.get('published', 0):,} messages)"]
    delivered = [f"{r.name} {r.delivered_per_s:,.0f}/s" for r in figures if r.delivered_per_s]
    if delivered:
        parts.append("delivered " + ", ".join(delivered))
    if meta.get("drain_rate"):
        parts.append(f"drained {meta['drain_rate']:,.0f}/s ({meta.get('receipts', 0):,} copies)")
    verdict = pace_verdict(result, figures)
    return "; ".join(parts) + (f": {verdict[0]}" if verdict else "")


# -- console --------------------------------------------------------------------------------------


def _ms(value: Any) -> str:
    return "-" if value is None else f"{value:.1f}"


def _rate(value: Any) -> str:
    return "-" if not value else f"{value:.0f}"


def _bad(value: int) -> str:
    return f"[red]{value}[/]" if value else "0"


def _out_of_order(row: dict[str, Any]) -> str:
    return f"{row['out_of_order']} ({100 * (row['out_of_order_ratio'] or 0.0):.1f}%)"


def _hosts_cell(
    hosts: Iterable[dict[str, Any]], subscriber: str, publisher: str, sep: str = " "
) -> str:
    parts = [
        f"{r['host']} {100 * r['share']:.0f}%"
        for r in hosts
        if r["subscriber"] == subscriber and r["publisher"] == publisher
    ]
    return sep.join(parts) or "-"


def shown_rows(result: ScenarioResult) -> list[dict[str, Any]]:
    """The metric rows the wide table shows for a scenario."""
    few = result.scenario.load.publishers <= STREAM_ROWS_SHOWN
    return [r for r in result.metrics if few or r["publisher"] == ALL]


# The columns of a scenario's table: heading, cell of a subscriber's total row, whether it may
# be left out to fit the terminal (the optional ones go in this order: msg/s first)
Column = tuple[str, Callable[[ScenarioResult, dict[str, Any]], str]]
ESSENTIAL: tuple[Column, ...] = (
    ("received", lambda _, row: str(row["received"])),
    ("lost", lambda _, row: _bad(row["lost"])),
    ("dup", lambda _, row: _bad(row["duplicated"])),
    ("out of\norder", lambda _, row: _out_of_order(row)),
)
OPTIONAL: tuple[Column, ...] = (
    ("msg/s", lambda _, row: _rate(row.get("delivered_per_s"))),
    ("p50\nms", lambda _, row: _ms(row["latency_p50_ms"])),
    ("p99\nms", lambda _, row: _ms(row["latency_p99_ms"])),
    ("topic\nhosts", lambda res, row: _hosts_cell(res.hosts, row["subscriber"], ALL, "\n")),
)


def scenario_table(result: ScenarioResult, width: int | None = None) -> Any:
    """The table of one scenario: a row per subscriber with the columns that tell what
    happened (the rest is in metrics.csv and ``--wide``), numbers never cut: when the table is
    wider than ``width``, optional columns are left out (msg/s first, the topic hosts last)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.measure import Measurement
    from rich.table import Table

    meta = result.meta
    load = result.scenario.load
    title = (
        f"[bold]{escape(result.scenario.name)}[/]: {load.publishers} publishers × "
        f"{meta.get('messages_per_publisher', load.messages)} messages"
    )
    measure = Console(width=10_000)
    table = None
    for dropped in range(len(OPTIONAL) + 2):
        # the last try leaves every optional column out and lets long names fold
        table = Table(title=title, box=None, pad_edge=False, header_style="bold")
        fold = dropped > len(OPTIONAL)
        table.add_column("subscriber", no_wrap=not fold, overflow="fold")
        columns = [*ESSENTIAL, *OPTIONAL[min(dropped, len(OPTIONAL)) :]]
        for heading, _ in columns:
            last = heading == OPTIONAL[-1][0]
            table.add_column(heading, justify="left" if last else "right", no_wrap=not last)
        for row in result.subscribers():
            table.add_row(escape(row["subscriber"]), *(cell(result, row) for _, cell in columns))
        if width is None or Measurement.get(measure, measure.options, table).maximum <= width:
            break
    return table


def wide_table(results: Sequence[ScenarioResult]) -> Any:
    """Every stream (publisher × subscriber, up to :data:`STREAM_ROWS_SHOWN` publishers), the
    subscribers' and the scenario's totals, with every column."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=WIDE_TITLE)
    for heading in ("scenario", "subscriber", "publisher"):
        table.add_column(heading, no_wrap=True)
    for heading in ("sent", "acked", "received", "lost", "dup", "out of order", "max disp"):
        table.add_column(heading, justify="right")
    for heading in ("p50 ms", "p95 ms", "p99 ms", "max ms", "msg/s"):
        table.add_column(heading, justify="right")
    table.add_column("host share", no_wrap=True)
    for i, result in enumerate(results):
        if i:
            table.add_section()
        for row in shown_rows(result):
            table.add_row(
                escape(result.scenario.name),
                escape(row["subscriber"]),
                escape(row["publisher"]),
                str(row["sent"]),
                str(row["acknowledged"]),
                str(row["received"]),
                _bad(row["lost"]),
                _bad(row["duplicated"]),
                _out_of_order(row),
                str(row["max_displacement"]),
                _ms(row["latency_p50_ms"]),
                _ms(row["latency_p95_ms"]),
                _ms(row["latency_p99_ms"]),
                _ms(row["latency_max_ms"]),
                _rate(row.get("delivered_per_s")),
                escape(_hosts_cell(result.hosts, row["subscriber"], row["publisher"])),
            )
    return table


def _print_whole(out: Any, renderable: Any) -> None:
    """Print ``renderable`` as wide as it needs, wider than the terminal if so (no cell cut)."""
    from rich.console import Console
    from rich.measure import Measurement

    needed = Measurement.get(out, out.options.update_width(10_000), renderable).maximum
    if needed <= out.width:
        out.print(renderable)
        return
    Console(
        file=out.file,
        width=needed,
        color_system=out.color_system,
        force_terminal=out.is_terminal,
    ).print(renderable)


def verdicts(result: ScenarioResult) -> list[tuple[str, bool]]:
    """The lines that end a scenario's report, each with whether it is all right: a verdict
    per subscriber, the fault, what was still stuck after the drain, the pace."""
    from rich.markup import escape

    figures = routes(result)
    lines = [(f"{escape(r.name)}: {route_verdict(result, r)}", r.clean) for r in figures]
    fault = fault_line(result)
    if fault:
        lines.append((f"fault: {fault}", True))
    held = result.meta.get("held_after_drain")
    if held:
        where = ", ".join(f"{k} {v}" for k, v in held.items())
        lines.append(
            (f"still on transmission queues after the drain (stuck, not lost): {where}", False)
        )
    pace = pace_line(result, figures)
    if pace:
        lines.append((f"pace: {escape(pace)}", True))
    return lines


def print_results(out: Any, results: Sequence[ScenarioResult], wide: bool = False) -> None:
    """The console report: a table per scenario (``wide``: one table per publisher with every
    column, as wide as it takes), each scenario's verdicts, where the outputs are."""
    from rich.padding import Padding

    if wide:
        _print_whole(out, wide_table(results))
    else:
        out.print(f"[bold]{SUBSCRIBER_TITLE}[/]")
    for result in results:
        if not wide:
            out.print()
            out.print(scenario_table(result, out.width))
        else:
            out.print(f"[bold]{result.scenario.name}[/]")
        for line, ok in verdicts(result):
            out.print(Padding(line if ok else f"[red]{line}[/]", (0, 0, 0, 2), expand=False))
        if wide:
            meta = result.meta
            out.print(
                f"  timing: stage 1 (inject) {meta.get('inject_seconds')} s, stage 2 (drain) "
                f"{meta.get('drain_seconds')} s, stage 3 (metrics) {meta.get('metrics_seconds')} s"
            )
    if results:
        where = results[0].out.parent
        more = "" if wide else "; per publisher and every column: --wide, or metrics.csv"
        out.print(f"report in {where} (summary.json, summary.csv, chart.png{more})")
