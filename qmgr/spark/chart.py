"""The load job's chart (matplotlib): one group of bars per scenario, one bar per subscriber,
so that what each route did shows apart from the others.

- top: out of order (% of messages) per subscriber, with lost and duplicated above each bar and
  the topic hosts its copies went through under it;
- bottom: the pace, per scenario the injector's (published per second), each subscriber's
  (delivered per second, with the latency p50 and p99 at that pace) and the drain's (copies
  read per second), and which one was the limit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qmgr.spark.report import (
    MQ,
    SEQUENCED,
    SERVICEBUS,
    SESSIONS,
    Route,
    ScenarioResult,
    pace_verdict,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes

COLORS = {MQ: "tab:blue", SESSIONS: "tab:orange", SEQUENCED: "tab:green", SERVICEBUS: "tab:purple"}
PUBLISHED, DRAINED = "dimgray", "silver"
GAP = 0.9  # between two scenarios' groups of bars
Scenario = tuple[ScenarioResult, list[Route]]
Bar = tuple[float, str, Route | None]  # x, label, the subscriber (None: published / drained)


def _layout(scenarios: Sequence[Scenario], pace: bool) -> list[list[Bar]]:
    """The bars of each scenario; ``pace``: with published before and drained after."""
    out: list[list[Bar]] = []
    x = 0.0
    for _, figures in scenarios:
        labels: list[tuple[str, Route | None]] = [(r.name, r) for r in figures]
        if pace:
            labels = [("published", None), *labels, ("drained", None)]
        out.append([(x + i, label, route) for i, (label, route) in enumerate(labels)])
        x += len(labels) + GAP
    return out


def _label_groups(
    ax: Axes,
    scenarios: Sequence[Scenario],
    bars: list[list[Bar]],
    under: Sequence[tuple[str, str]],
    depth: float,
) -> None:
    """Tick labels under the bars; each scenario's name (and ``under``, a line in a colour of
    its own) below its group."""
    flat = [b for group in bars for b in group]
    ax.set_xticks([b[0] for b in flat], [b[1] for b in flat], fontsize="small")
    for (result, _), group, (extra, color) in zip(scenarios, bars, under, strict=True):
        if not group:
            continue
        middle = (group[0][0] + group[-1][0]) / 2
        ax.text(
            middle,
            depth,
            result.scenario.name,
            transform=ax.get_xaxis_transform(),
            ha="center",
            va="top",
            fontweight="bold",
        )
        if extra:
            ax.text(
                middle,
                depth - 0.075,
                extra,
                transform=ax.get_xaxis_transform(),
                ha="center",
                va="top",
                fontsize="small",
                color=color,
            )
    if flat:
        ax.set_xlim(flat[0][0] - 0.7, flat[-1][0] + 0.7)
    ax.spines[["top", "right"]].set_visible(False)


def _order(ax: Axes, scenarios: Sequence[Scenario]) -> None:
    bars = _layout(scenarios, pace=False)
    top = max([100 * r.ratio for _, figures in scenarios for r in figures] + [50.0])
    for group in bars:
        for x, _, route in group:
            assert route is not None
            height = 100 * route.ratio
            ax.bar(x, height, width=0.7, color=COLORS[route.kind])
            said = f"{height:.1f}%" if route.out_of_order else "in order"
            plain = "black" if route.out_of_order else COLORS[route.kind]
            _note(ax, said, (x, height), 16, fontweight="bold", color=plain)
            loss = f"lost {route.lost} · dup {route.duplicated}"
            if route.clean:
                _note(ax, loss, (x, height), 3, fontsize="small", color="green")
            else:
                _note(
                    ax, loss.upper(), (x, height), 3, fontsize="small", color="red", weight="bold"
                )
            hosts = ", ".join(sorted(route.hosts)) or "-"
            _note(ax, f"via {hosts}", (x, 0), -30, fontsize="x-small", color="dimgray")
    ax.set_ylim(0, top * 1.3)
    ax.set_ylabel("out of order (% of messages)")
    ax.set_title(
        "Out of order per subscriber: lost and duplicated above each bar, the topic hosts below"
    )
    faults = [_fault(result, figures) for result, figures in scenarios]
    _label_groups(ax, scenarios, bars, faults, -0.2)
    kinds = [k for k in COLORS if any(r.kind == k for _, figures in scenarios for r in figures)]
    from matplotlib.patches import Patch

    ax.legend(
        handles=[Patch(color=COLORS[k], label=k) for k in kinds], loc="upper left", fontsize="small"
    )


def _fault(result: ScenarioResult, figures: Sequence[Route]) -> tuple[str, str]:
    """The line under a scenario with a fault: the node killed and whether that cost anything."""
    killed = result.meta.get("killed")
    if not killed:
        return "", "black"
    if all(r.clean for r in figures):
        return f"{killed} killed with kill -9: nothing lost or duplicated", "green"
    return f"{killed} killed with kill -9: messages LOST or DUPLICATED", "red"


def _pace(ax: Axes, scenarios: Sequence[Scenario]) -> None:
    bars = _layout(scenarios, pace=True)
    verdicts: list[tuple[str, str]] = []
    heights: list[float] = []
    for (result, figures), group in zip(scenarios, bars, strict=True):
        for x, label, route in group:
            if route is None:
                key = "publish_rate" if label == "published" else "drain_rate"
                value = float(result.meta.get(key) or 0.0)
                color = PUBLISHED if label == "published" else DRAINED
                text = f"{value:,.0f}/s"
            else:
                value = route.delivered_per_s or 0.0
                color = COLORS[route.kind]
                text = f"{value:,.0f}/s\np50 {_ms(route.p50_ms)}\np99 {_ms(route.p99_ms)}"
            ax.bar(x, value, width=0.7, color=color)
            _note(ax, text, (x, value), 3, fontsize="x-small")
            if value > 0:
                heights.append(value)
        verdict = pace_verdict(result, figures)
        if verdict is None:
            verdicts.append(("", "black"))
        else:
            verdicts.append((verdict[0].split(": ")[-1], "green" if verdict[1] else "red"))
    # the drain may read tens of times faster than the cluster delivers: a log scale keeps the
    # injector's and the subscribers' bars, the comparison that matters, readable
    if heights:
        ax.set_yscale("log")
        ax.set_ylim(10 ** math.floor(math.log10(min(heights) / 2)), max(heights) * 12)
    ax.set_ylabel("messages per second (log scale)")
    ax.set_title(
        "Pace: published by the injector, delivered to each subscriber (with the latency at "
        "that pace), read by the drain"
    )
    _label_groups(ax, scenarios, bars, verdicts, -0.1)


def _note(ax: Axes, text: str, at: tuple[float, float], points: float, **style: Any) -> None:
    """``text`` centred ``points`` above the point ``at`` (below it when negative)."""
    ax.annotate(
        text,
        at,
        xytext=(0, points),
        textcoords="offset points",
        ha="center",
        va="bottom" if points >= 0 else "top",
        **style,
    )


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms"


def draw(path: Path, title: str, scenarios: Sequence[Scenario]) -> None:
    """Write the chart of ``scenarios`` (each with its subscribers' figures) to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = max(9.0, 1.25 * sum(len(f) + 2 for _, f in scenarios) + 2)
    fig, (ax_order, ax_pace) = plt.subplots(2, 1, figsize=(width, 11), height_ratios=(1.1, 1))
    fig.suptitle(title, fontsize="large", fontweight="bold")
    _order(ax_order, scenarios)
    _pace(ax_pace, scenarios)
    fig.subplots_adjust(top=0.93, hspace=0.5)
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
