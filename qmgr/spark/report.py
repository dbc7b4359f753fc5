"""The load job's outputs: per scenario in ``OUT/<scenario>/`` ``metrics.json``,
``metrics.csv``, ``hosts.csv``, ``routes.csv``, the ``receipts.parquet`` written by stage 2 and
``chart.png``; for the whole run ``OUT/summary.json``, ``OUT/summary.csv`` and ``OUT/chart.png``
(latency distribution per route, out-of-order ratio per scenario, host share); and a rich table
on the console."""

from __future__ import annotations

import csv
import json
import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qmgr.spark.metrics import ALL, METRIC_COLUMNS

if TYPE_CHECKING:
    from qmgr.spark.scenario import Scenario

STREAM_ROWS_SHOWN = 4  # with more publishers, the table shows per-subscriber totals only


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


def console() -> Any:
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=200)


def progress(out: Any) -> Any:
    from qmgr.cli.demo_run import progress_display

    return progress_display(out)


def clean(result: ScenarioResult) -> bool:
    """Nothing acknowledged was lost or duplicated."""
    total = result.total()
    return total["lost"] == 0 and total["duplicated"] == 0


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
    subscribers = [r for r in result.metrics if r["publisher"] == ALL and r["subscriber"] != ALL]
    write_chart(
        out / "chart.png",
        f"scenario {result.scenario.name}",
        latency={"": _curves(result.latency)},
        disorder={r["subscriber"]: r["out_of_order_ratio"] for r in subscribers},
        shares={s: _shares(result.hosts, s) for s in (r["subscriber"] for r in subscribers)},
    )


def write_summary(out: Path, results: Sequence[ScenarioResult]) -> None:
    """``summary.json`` (every scenario's meta and metrics), ``summary.csv`` (the total row of
    each scenario and subscriber) and ``chart.png`` comparing the scenarios."""
    data = {r.scenario.name: scenario_json(r) for r in results}
    (out / "summary.json").write_text(json.dumps(data, indent=2) + "\n")
    rows = [
        {"scenario": r.scenario.name, **row}
        for r in results
        for row in r.metrics
        if row["publisher"] == ALL
    ]
    _write_csv(out / "summary.csv", rows, ("scenario", *METRIC_COLUMNS))
    if results:
        write_chart(
            out / "chart.png",
            "qmgr load: " + ", ".join(r.scenario.name for r in results),
            latency={r.scenario.name: _curves(r.latency) for r in results},
            disorder={r.scenario.name: r.total()["out_of_order_ratio"] for r in results},
            shares={r.scenario.name: _shares(r.hosts, ALL) for r in results},
        )


def _curves(latency: Iterable[dict[str, Any]]) -> dict[str, list[tuple[float, float]]]:
    curves: dict[str, list[tuple[float, float]]] = {}
    for row in latency:
        curves.setdefault(str(row["host"]), []).append((row["latency_ms"], row["quantile"]))
    return {host: sorted(points) for host, points in curves.items()}


def _shares(hosts: Iterable[dict[str, Any]], subscriber: str) -> dict[str, float]:
    return {
        str(r["host"]): float(r["share"])
        for r in hosts
        if r["subscriber"] == subscriber and r["publisher"] == ALL
    }


def write_chart(
    path: Path,
    title: str,
    latency: dict[str, dict[str, list[tuple[float, float]]]],
    disorder: dict[str, float],
    shares: dict[str, dict[str, float]],
) -> None:
    """Three panels: the latency distribution (CDF) per route, the out-of-order ratio per
    label, the host share per label (stacked)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_lat, ax_ooo, ax_share) = plt.subplots(1, 3, figsize=(16, 5))
    fig.suptitle(title)
    for label, curves in latency.items():
        for host, points in curves.items():
            if points:
                xs, ys = zip(*points, strict=True)
                name = f"{label} via {host}" if label else f"via {host}"
                ax_lat.plot(xs, ys, label=name)
    ax_lat.set_xlabel("latency to the destination enqueue (ms)")
    ax_lat.set_ylabel("fraction of messages")
    ax_lat.set_title("latency distribution per route")
    if ax_lat.lines:
        ax_lat.legend(fontsize="small")
    labels = list(disorder)
    ax_ooo.bar(labels, [100 * (disorder[x] or 0.0) for x in labels], color="tab:red")
    ax_ooo.set_ylabel("out of order (% of messages)")
    ax_ooo.set_title("out-of-order ratio")
    ax_ooo.tick_params(axis="x", labelrotation=20)
    hosts = sorted({h for s in shares.values() for h in s})
    bottom = [0.0] * len(shares)
    for host in hosts:
        values = [100 * shares[x].get(host, 0.0) for x in shares]
        ax_share.bar(list(shares), values, bottom=bottom, label=host)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax_share.set_ylabel("% of messages")
    ax_share.set_title("share per topic host (route)")
    ax_share.tick_params(axis="x", labelrotation=20)
    if hosts:
        ax_share.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# -- console --------------------------------------------------------------------------------------


def _ms(value: Any) -> str:
    return "-" if value is None else f"{value:.1f}"


def _bad(value: int) -> str:
    return f"[red]{value}[/]" if value else "0"


def _hosts_cell(hosts: Iterable[dict[str, Any]], subscriber: str, publisher: str) -> str:
    parts = [
        f"{r['host']} {100 * r['share']:.0f}%"
        for r in hosts
        if r["subscriber"] == subscriber and r["publisher"] == publisher
    ]
    return " ".join(parts) or "-"


def shown_rows(result: ScenarioResult) -> list[dict[str, Any]]:
    """The metric rows the console table shows for a scenario."""
    few = result.scenario.load.publishers <= STREAM_ROWS_SHOWN
    return [r for r in result.metrics if few or r["publisher"] == ALL]


def print_results(out: Any, results: Sequence[ScenarioResult]) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="qmgr load: delivery per publisher × subscriber")
    for heading in ("scenario", "subscriber", "publisher"):
        table.add_column(heading, no_wrap=True)
    for heading in ("sent", "acked", "received", "lost", "dup", "out of order", "max disp"):
        table.add_column(heading, justify="right")
    for heading in ("p50 ms", "p95 ms", "p99 ms", "max ms"):
        table.add_column(heading, justify="right")
    table.add_column("host share", no_wrap=True)
    for i, result in enumerate(results):
        if i:
            table.add_section()
        for row in shown_rows(result):
            ratio = row["out_of_order_ratio"] or 0.0
            table.add_row(
                escape(result.scenario.name),
                escape(row["subscriber"]),
                escape(row["publisher"]),
                str(row["sent"]),
                str(row["acknowledged"]),
                str(row["received"]),
                _bad(row["lost"]),
                _bad(row["duplicated"]),
                f"{row['out_of_order']} ({100 * ratio:.1f}%)",
                str(row["max_displacement"]),
                _ms(row["latency_p50_ms"]),
                _ms(row["latency_p95_ms"]),
                _ms(row["latency_p99_ms"]),
                _ms(row["latency_max_ms"]),
                escape(_hosts_cell(result.hosts, row["subscriber"], row["publisher"])),
            )
    out.print(table)
    for result in results:
        meta = result.meta
        out.print(
            f"{result.scenario.name}: injected {meta.get('acknowledged_lines')} in "
            f"{meta.get('inject_seconds')} s ({meta.get('inject_rate')}/s), drained in "
            f"{meta.get('drain_seconds')} s, metrics in {meta.get('metrics_seconds')} s"
            + (f", killed {meta['killed']}" if meta.get("killed") else "")
            + (
                f", still on transmission queues after the drain (stuck, not lost): "
                f"{meta['held_after_drain']}"
                if meta.get("held_after_drain")
                else ""
            )
            + f"; outputs in {result.out}"
        )
