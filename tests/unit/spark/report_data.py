"""A report as the load job makes it, without a cluster: the shipped demo scenarios, receipts
shaped like theirs (one topic host keeps order, two lose about half of it, the bridge's Service
Bus sessions carry that, the sequenced-delivery helper restores it, a kill loses nothing) put
through the real metrics of stage 3 (:mod:`qmgr.spark.metrics`) and the meta of the job."""

from __future__ import annotations

import dataclasses
import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from qmgr.spark import metrics as m
from qmgr.spark.job import kill_threshold, publisher_id
from qmgr.spark.report import ScenarioResult, rates
from qmgr.spark.scenario import Scenario, load_scenario

DEMO = Path(__file__).resolve().parents[3] / "scenarios" / "demo"
T0_NS = 1_700_000_000_000_000_000
GAP_NS = 1_000_000  # one message per ms per publisher: 1,000/s each
PUBLISHERS = 4
MESSAGES = 1000


def _scenario(file: str, messages: int = MESSAGES) -> Scenario:
    scenario = load_scenario(DEMO / file)
    load = dataclasses.replace(scenario.load, publishers=PUBLISHERS, messages=messages)
    return dataclasses.replace(scenario, load=load)


def _ts(ns: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ns / 1e9, tz=dt.UTC).replace(tzinfo=None)


def _arrivals(seqs: list[int], route: str) -> list[tuple[int, str]]:
    """(seq, topic host) in arrival order. "one": HOSTB1 keeps order; "two": HOSTA1 takes the
    odd messages, HOSTA2 the even ones and hands each run of ten over after HOSTA1's;
    "sequenced": the same two hosts, handed over in order (by the sequenced-delivery helper)."""
    if route == "one":
        return [(s, "HOSTB1") for s in seqs]
    if route == "sequenced":
        return [(s, "HOSTA1" if s % 2 else "HOSTA2") for s in seqs]
    out = []
    for start in range(0, len(seqs), 10):
        block = seqs[start : start + 10]
        out += [(s, "HOSTA1") for s in block if s % 2]
        out += [(s, "HOSTA2") for s in block if not s % 2]
    return out


def _receipts(
    scenario: Scenario, run: str, plan: dict[str, tuple[str, str, int]]
) -> list[tuple[Any, ...]]:
    """``plan``: subscriber -> (destination node, route as :func:`_arrivals` takes it, latency
    in ms)."""
    rows: list[tuple[Any, ...]] = []
    load = scenario.load
    for subscriber, (node, how, latency_ms) in plan.items():
        for p in range(load.publishers):
            publisher = publisher_id(p, run)
            received = _ts(0)  # read in arrival order, each once it is there
            for seq, host in _arrivals(list(range(1, load.messages + 1)), how):
                sent = T0_NS + seq * GAP_NS
                enqueued = _ts(sent + latency_ms * 1_000_000 + (seq % 7) * 100_000)
                received = max(received, enqueued)
                rows.append(
                    (subscriber, len(rows), publisher, seq, load.topic_of(p), enqueued, received)
                    + (f"PUB1,{host},{node}", sent, 1, None)
                )
    return rows


def scenario_result(spark: Any, scenario: Scenario, out: Path, **plan: Any) -> ScenarioResult:
    run = f"{scenario.name}-0123abcd"
    load = scenario.load
    sent_rows = [
        (publisher_id(p, run), seq, load.topic_of(p))
        for p in range(load.publishers)
        for seq in range(1, load.messages + 1)
    ]
    sent = spark.createDataFrame(sent_rows, "publisher string, seq long, topic string")
    acked = spark.createDataFrame(
        [(p, s, t, T0_NS + s * GAP_NS + 2_000_000, T0_NS + s * GAP_NS) for p, s, t in sent_rows],
        "publisher string, seq long, topic string, ack_ns long, sent_ns long",
    )
    receipts = m.annotate(
        spark.createDataFrame(_receipts(scenario, run, plan), m.RECEIPT_SCHEMA)
    ).cache()
    subs = m.subscriptions_frame(spark, [(s.name, s.topic) for s in scenario.subscriptions])
    tables = {
        "metrics": m.delivery_metrics(sent, acked, receipts, subs),
        "hosts": m.share(receipts, "host"),
        "routes": m.share(receipts, "route"),
        "latency": m.latency_distribution(receipts),
    }
    collected = {k: [r.asDict() for r in v.collect()] for k, v in tables.items()}
    (pace,) = [r.asDict() for r in m.pace(acked, receipts).collect()]
    kill = scenario.kill
    meta: dict[str, Any] = {
        "scenario": scenario.name,
        "description": scenario.description,
        "run": run,
        "publishers": load.publishers,
        "messages_per_publisher": load.messages,
        "subscriptions": [
            {"name": s.name, "servicebus": s.servicebus, "sessions": s.sessions}
            for s in scenario.subscriptions
        ],
        "killed": kill.node if kill else None,
        "killed_after_acknowledged": kill_threshold(scenario) + 12 if kill else None,
        "kill_after": kill.after if kill else None,
        "kill_threshold": kill_threshold(scenario) if kill else None,
        "kill_restart": kill.restart if kill else None,
        "held_after_drain": {},
        "inject_seconds": 2.5,
        "drain_seconds": 9.0,
        "metrics_seconds": 4.0,
        **rates(pace),
    }
    return ScenarioResult(scenario, run, out / scenario.name, meta=meta, **collected)


def demo_results(spark: Any, out: Path) -> list[ScenarioResult]:
    """The three demo scenarios: ORDERS through one host in order; PRICES and SB-SESSIONS
    through two hosts, out of order; SB-SEQUENCED through the helper, in order; the kill.
    The three are computed at once, each on a thread of its own: a small Spark job mostly
    waits on scheduling, and three jobs' waits overlap."""
    sb = {"SB-SESSIONS": ("SB1", "two", 110), "SB-SEQUENCED": ("SB1", "sequenced", 115)}
    plans: list[tuple[str, dict[str, tuple[str, str, int]]]] = [
        ("1-orders-one-host.toml", {"ORDERS": ("SUB1", "one", 30)}),
        ("2-prices-two-hosts.toml", {"PRICES": ("SUB1", "two", 70), **sb}),
        ("3-kill-host.toml", {"PRICES": ("SUB2", "two", 120)}),
    ]

    def one(file: str, plan: dict[str, tuple[str, str, int]]) -> ScenarioResult:
        return scenario_result(spark, _scenario(file), out, **plan)

    with ThreadPoolExecutor(len(plans)) as pool:
        return list(pool.map(one, *zip(*plans, strict=True)))
