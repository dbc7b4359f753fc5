"""What `qmgr demo` reports, computed from what was published and what each subscription
received (pure: no I/O, no clock).

Per subscription and topic string: expected and received copies, lost, duplicates, out of
order, latency percentiles and the route split. Definitions:

- a publication is identified by (publisher, seq); each topic string numbers its own
  publications 0, 1, 2, ... per publisher;
- **lost**: published on a topic string the subscription matches, never received;
- **duplicates**: copies received beyond the first of the same publication;
- **out of order**: a first copy whose seq is lower than one already received on the same
  topic string from the same publisher (a duplicate is counted as a duplicate only);
- **latency**: ``received_at`` (client, seconds) minus ``put_time_ms`` (when the publisher sent
  it), in ms, over first copies;
- **route split**: first copies per "via", the nodes a copy passed between its origin and the
  receiving node (from the ``qmgr.route`` property "PUB1,HOSTA2,SUB1" -> "HOSTA2").
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cluster.topics import topic_matches
from qmgr.launcher.verdicts import order_verdict

NO_ROUTE = "direct"  # a copy that passed no node between its origin and the receiver


@dataclass(frozen=True)
class Receipt:
    """One received copy, as much of it as the report needs."""

    topic: str
    publisher: str
    seq: int
    put_time_ms: int
    received_at: float  # seconds since the epoch
    route: str = ""  # the qmgr.route property: nodes passed, origin first

    @property
    def latency_ms(self) -> float:
        return self.received_at * 1000.0 - self.put_time_ms

    @property
    def via(self) -> str:
        return route_via(self.route)


@dataclass(frozen=True)
class SubscriptionResult:
    node: str
    pattern: str
    receipts: Sequence[Receipt]  # in arrival order
    foreign: int = 0  # copies without the demo's properties, or from another publisher


@dataclass(frozen=True)
class Latency:
    p50: float
    p99: float
    max: float


@dataclass(frozen=True)
class Row:
    node: str
    pattern: str
    topic: str
    expected: int
    received: int
    lost: int
    duplicates: int
    out_of_order: int
    latency: Latency
    routes: dict[str, int]


@dataclass(frozen=True)
class Branch:
    """First-level topic (e.g. 'Prices'): the vias its copies took and its disorder."""

    name: str
    routes: dict[str, int]
    out_of_order: int
    received: int


@dataclass(frozen=True)
class Report:
    rows: tuple[Row, ...]
    branches: tuple[Branch, ...]
    foreign: int
    note: str
    totals: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.totals.get("lost", 0) == 0 and self.totals.get("duplicates", 0) == 0


def route_via(route: str) -> str:
    """The nodes between origin and receiver in a route ("PUB1,HOSTA2,SUB1" -> "HOSTA2");
    NO_ROUTE when there are none."""
    nodes = [n for n in route.split(",") if n]
    return ",".join(nodes[1:-1]) or NO_ROUTE


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (0 for no values): the smallest value with at least p% of the
    values at or below it."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def latency(values: Sequence[float]) -> Latency:
    return Latency(percentile(values, 50), percentile(values, 99), max(values, default=0.0))


def analyse_topic(
    node: str,
    pattern: str,
    topic: str,
    sent: Mapping[str, int],
    receipts: Iterable[Receipt],
) -> Row:
    """One row: ``sent`` maps publisher -> publications on ``topic`` (seq 0..n-1);
    ``receipts`` are the copies of ``topic`` this subscription received, in arrival order."""
    seen: set[tuple[str, int]] = set()
    highest: dict[str, int] = {}
    received = duplicates = out_of_order = 0
    latencies: list[float] = []
    routes: Counter[str] = Counter()
    for r in receipts:
        received += 1
        key = (r.publisher, r.seq)
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
        if r.seq < highest.get(r.publisher, r.seq):
            out_of_order += 1
        highest[r.publisher] = max(highest.get(r.publisher, r.seq), r.seq)
        latencies.append(r.latency_ms)
        routes[r.via] += 1
    expected = sum(sent.values())
    delivered = sum(1 for publisher, seq in seen if 0 <= seq < sent.get(publisher, 0))
    return Row(
        node=node,
        pattern=pattern,
        topic=topic,
        expected=expected,
        received=received,
        lost=expected - delivered,
        duplicates=duplicates,
        out_of_order=out_of_order,
        latency=latency(latencies),
        routes=dict(sorted(routes.items())),
    )


def build_report(
    results: Sequence[SubscriptionResult], sent: Mapping[str, Mapping[str, int]]
) -> Report:
    """The whole report. ``sent`` maps topic string -> publisher -> publications made."""
    rows: list[Row] = []
    for result in results:
        by_topic: dict[str, list[Receipt]] = {}
        for r in result.receipts:
            by_topic.setdefault(r.topic, []).append(r)
        topics = [t for t in sent if topic_matches(result.pattern, t)]
        topics += sorted(t for t in by_topic if t not in sent)  # received, never published
        for topic in topics:
            rows.append(
                analyse_topic(
                    result.node, result.pattern, topic, sent.get(topic, {}), by_topic.get(topic, [])
                )
            )
    branches = _branches(rows)
    totals = {
        key: sum(getattr(row, key) for row in rows)
        for key in ("expected", "received", "lost", "duplicates", "out_of_order")
    }
    return Report(
        rows=tuple(rows),
        branches=branches,
        foreign=sum(r.foreign for r in results),
        note=ordering_note(branches),
        totals=totals,
    )


def _branches(rows: Iterable[Row]) -> tuple[Branch, ...]:
    routes: dict[str, Counter[str]] = {}
    disorder: Counter[str] = Counter()
    received: Counter[str] = Counter()
    for row in rows:
        name = row.topic.split("/", 1)[0]
        routes.setdefault(name, Counter()).update(row.routes)
        disorder[name] += row.out_of_order
        received[name] += row.received
    return tuple(
        Branch(name, dict(sorted(routes[name].items())), disorder[name], received[name])
        for name in routes
    )


def ordering_note(branches: Iterable[Branch]) -> str:
    """One line: for each branch, through how many hosts it went and whether order held."""
    parts = []
    for b in branches:
        vias = [v for v, n in b.routes.items() if n]
        names = ", ".join(vias) or "-"
        through = f"{len(vias)} hosts" if len(vias) > 1 else "one route"
        parts.append(
            f"{b.name} via {through} ({names}): {order_verdict(len(vias), b.out_of_order)}"
        )
    return "; ".join(parts)


def latencies_by_route(results: Iterable[SubscriptionResult]) -> dict[str, list[float]]:
    """Latency (ms) of every first copy, grouped by via (for the chart)."""
    out: dict[str, list[float]] = {}
    for result in results:
        seen: set[tuple[str, str, int]] = set()
        for r in result.receipts:
            key = (r.topic, r.publisher, r.seq)
            if key not in seen:
                seen.add(key)
                out.setdefault(r.via, []).append(r.latency_ms)
    return dict(sorted(out.items()))


def report_json(report: Report, **extra: Any) -> dict[str, Any]:
    """The report as JSON-ready data; ``extra`` keys are added at the top level."""
    return {
        **extra,
        "ok": report.ok,
        "totals": report.totals,
        "foreign": report.foreign,
        "rows": [
            {
                "subscriber": row.node,
                "subscription": row.pattern,
                "topic": row.topic,
                "expected": row.expected,
                "received": row.received,
                "lost": row.lost,
                "duplicates": row.duplicates,
                "out_of_order": row.out_of_order,
                "latency_ms": {
                    "p50": round(row.latency.p50, 3),
                    "p99": round(row.latency.p99, 3),
                    "max": round(row.latency.max, 3),
                },
                "routes": row.routes,
            }
            for row in report.rows
        ],
        "branches": [
            {
                "branch": b.name,
                "routes": b.routes,
                "out_of_order": b.out_of_order,
                "received": b.received,
            }
            for b in report.branches
        ],
        "note": report.note,
    }
