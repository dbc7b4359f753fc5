"""How `qmgr demo` shows its report: rich tables on the console and an optional PNG chart
(matplotlib, when it can be imported)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qmgr.cli.demo_report import Report
from qmgr.launcher.verdicts import loss_verdict


def _routes_cell(routes: dict[str, int], percent: bool = False) -> str:
    total = sum(routes.values())
    if not total:
        return "-"
    if percent:
        return "  ".join(f"{via} {n} ({100 * n / total:.1f}%)" for via, n in routes.items())
    return " ".join(f"{via} {n}" for via, n in routes.items())


def _count(value: int, bad: bool) -> str:
    return f"[red]{value}[/]" if bad and value else str(value)


def print_report(console: Any, report: Report, title: str) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=title)
    for heading in ("subscriber", "subscription", "topic string"):
        table.add_column(heading, no_wrap=True)
    for heading in ("expected", "received", "lost", "dup", "out of order"):
        table.add_column(heading, justify="right")
    for heading in ("p50 ms", "p99 ms", "max ms"):
        table.add_column(heading, justify="right")
    table.add_column("route split (via)", no_wrap=True)
    previous = ("", "")
    for row in report.rows:
        same = (row.node, row.pattern) == previous
        previous = (row.node, row.pattern)
        table.add_row(
            "" if same else row.node,
            "" if same else row.pattern,
            row.topic,
            str(row.expected),
            str(row.received),
            _count(row.lost, True),
            _count(row.duplicates, True),
            str(row.out_of_order),
            f"{row.latency.p50:.1f}",
            f"{row.latency.p99:.1f}",
            f"{row.latency.max:.1f}",
            _routes_cell(row.routes),
        )
    t = report.totals
    table.add_section()
    table.add_row(
        "total",
        "",
        "",
        str(t["expected"]),
        str(t["received"]),
        _count(t["lost"], True),
        _count(t["duplicates"], True),
        str(t["out_of_order"]),
        "",
        "",
        "",
        "",
    )
    console.print(table)
    for b in report.branches:
        console.print(f"  route split {b.name}: {_routes_cell(b.routes, percent=True)}")
    console.print(f"[bold]ordering:[/] {escape(report.note)}", soft_wrap=True)
    console.print(f"[bold]delivery:[/] {loss_verdict(t['lost'], t['duplicates'])}")
    if report.foreign:
        console.print(f"[yellow]{report.foreign} other message(s) received were not counted[/]")


def write_chart(path: Path, report: Report, latencies: dict[str, list[float]]) -> str | None:
    """Write the PNG; returns None, or why no chart was written (matplotlib missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install matplotlib, or the project's spark extra)"
    fig, (cdf, bars) = plt.subplots(1, 2, figsize=(12, 4.5))
    for via, values in latencies.items():
        if not values:
            continue
        ordered = sorted(values)
        n = len(ordered)
        cdf.plot(ordered, [(i + 1) / n for i in range(n)], label=f"via {via} ({n})")
    every = [v for values in latencies.values() for v in values]
    wide = bool(every) and min(every) > 0 and max(every) > 20 * min(every)
    if wide:  # a long tail reads better on a log scale
        from matplotlib.ticker import NullFormatter, ScalarFormatter

        cdf.set_xscale("log")
        cdf.xaxis.set_major_formatter(ScalarFormatter())
        cdf.xaxis.set_minor_formatter(NullFormatter())
    cdf.set_xlabel("latency, put to receipt (ms" + (", log scale)" if wide else ")"))
    cdf.set_ylabel("fraction of copies")
    cdf.set_title("latency CDF per route")
    cdf.grid(True, which="both", alpha=0.3)
    cdf.legend()
    names = [b.name for b in report.branches]
    vias = sorted({via for b in report.branches for via in b.routes})
    bottom = [0] * len(names)
    for via in vias:
        heights = [b.routes.get(via, 0) for b in report.branches]
        bars.bar(names, heights, bottom=bottom, label=via)
        bottom = [x + h for x, h in zip(bottom, heights, strict=True)]
    bars.set_ylabel("copies received")
    bars.set_title("route split per topic branch")
    bars.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return None
