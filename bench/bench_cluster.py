"""A cluster of real nodes on this machine: what each extra hop costs, how fast a new
subscription reaches the topic host, and how fast publishing re-routes when a host is killed.

Run: .venv/bin/python bench/bench_cluster.py [--quick] [--rounds N] [--hops-only]
        [--json-out PATH] [--insecure]

Cluster members run with a generated cluster secret (as `qmgr cluster up` does); --insecure
runs them without it, so two runs show what authentication costs.

Nodes: FR1 (full repository), HOST1 and HOST2 (topic hosts), PUB1, SUB1 (partial repositories)
and SOLO (a standalone node for the single-node baseline). The publisher and the subscriber are
client processes of their own. Prints, in one run:

1. throughput (publications/s, at full speed) and latency p50/p99 (paced at half the peak rate)
   for a single node, topic-host routing (PUB1 -> HOST1 -> SUB1) and direct routing
   (PUB1 -> SUB1), non-persistent and persistent, with the ratios and the cost per extra hop,
   and the CPU time the route's nodes used per publication (all their threads, from /proc).
   The machine is shared and small, so single runs are noisy: every route runs ``--rounds``
   times (3 by default), the routes' order alternated between rounds, and the medians are
   compared (the ratios come from one run of the benchmark); the common-rate latency is the
   run of median p99 of as many alternated rounds;
2. proxy-subscription propagation: a new subscription on SUB1 until its proxy is visible on the
   host (DISPLAY SUB SUBTYPE(PROXY)) and until the first publication of a publisher publishing
   in a tight loop on PUB1 arrives;
3. re-routing after kill -9 of one of two topic hosts under a steady paced stream: time to the
   uninterrupted stream through the survivor, publications re-driven, delayed until the host
   restarted, lost, duplicated;

and the targets next to the figures (``--hops-only``: part 1 only). Latency is from the publisher's send time (in the
message body) to the subscriber client's receive time: both clocks are this machine's.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster_procs import (  # noqa: E402
    MEASURED,
    ROUTE,
    BenchCluster,
    ClientWorker,
    parse,
    percentile,
    raise_on_sigterm,
)
from qmgr.launcher.poll import wait_for  # noqa: E402

HOP_COST_TARGET = 0.30  # each extra hop costs at most 30% of throughput
HOP_P99_TARGET_MS = 10.0  # p99 added per hop at half the (topic-host route's) peak rate
PROPAGATION_TARGET_S = 1.0
REROUTE_TARGET_S = 1.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Settings:
    messages: int  # non-persistent throughput run; persistent runs use half
    latency_seconds: float
    trials: int
    failover_rate: int
    before_kill: float
    after_kill: float

    @staticmethod
    def of(quick: bool) -> Settings:
        if quick:
            return Settings(12_000, 0.8, 5, 2000, 0.7, 1.0)
        return Settings(60_000, 3.0, 10, 2000, 2.0, 3.0)


@dataclass(frozen=True)
class Route:
    key: str
    label: str
    pub: str
    sub: str
    prefix: str  # topic strings used on this route start with it
    proxy_on: str | None  # the node a subscription's proxy must reach before publishing
    hops: int  # extra node-to-node hops compared with one node


ROUTES = [
    Route("single", "single node (SOLO)", "SOLO", "SOLO", "Bench", None, 0),
    Route("topichost", "topic host: PUB1 → HOST1 → SUB1", "PUB1", "SUB1", "Prices", "HOST1", 2),
    Route("direct", "direct: PUB1 → SUB1", "PUB1", "SUB1", "Direct", "PUB1", 1),
]


def _cpu_seconds(proc: Any) -> float:
    """CPU time (user and system, every thread) a node process has used so far."""
    if proc is None:
        return 0.0
    fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def kind(persistent: bool) -> str:
    return "persistent" if persistent else "non-persistent"


class Bench:
    """The measurements; ``pub`` and ``sub`` are the client processes."""

    def __init__(
        self,
        cl: BenchCluster,
        settings: Settings,
        progress: Progress,
        task: Any,
        pub: ClientWorker,
        sub: ClientWorker,
    ) -> None:
        self.cl = cl
        self.s = settings
        self.progress = progress
        self.task = task
        self.say = progress.console.print
        self.pub = pub
        self.sub = sub

    # ----------------------------------------------------------------- 1. throughput, latency

    def run(
        self, route: Route, topic: str, count: int, persistent: bool, rate: float
    ) -> dict[str, Any]:
        """One publisher run to one subscriber; figures from both client processes."""
        sub_node, pub_node = self.cl[route.sub], self.cl[route.pub]
        self.sub.submit(
            "subscribe", address=sub_node.address, topic=topic, expected=count, idle_timeout=15.0
        )
        self.sub.wait("ready", 60)
        if route.proxy_on:
            self.cl.wait_proxy(route.proxy_on, route.sub, topic)
        self.pub.submit(
            "publish",
            address=pub_node.address,
            topic=topic,
            count=count,
            persistent=persistent,
            rate=rate,
        )
        nodes = sorted({route.pub, route.sub, route.proxy_on or route.pub})
        cpu_before = {n: _cpu_seconds(self.cl[n].proc) for n in nodes}
        p = self.pub.wait("done", 600)
        r = self.sub.wait("done", 600)
        cpu = {n: _cpu_seconds(self.cl[n].proc) - cpu_before[n] for n in nodes}
        elapsed = max(r["last"] - p["start"], 1e-9)
        return {
            # CPU of the route's nodes (every thread) per publication received, microseconds
            "cpu_us": {n: c * 1e6 / max(r["got"], 1) for n, c in cpu.items()},
            "cpu_us_total": sum(cpu.values()) * 1e6 / max(r["got"], 1),
            "published": count,
            "received": r["got"],
            "lost": count - r["got"],
            "rate": r["got"] / elapsed,
            "p50_ms": r["p50"] * 1000,
            "p99_ms": r["p99"] * 1000,
            "node_p50_ms": r["node_p50"] * 1000,
            "node_p99_ms": r["node_p99"] * 1000,
            "routes": sorted(r["routes"]),
        }

    def throughput(self, route: Route, persistent: bool, rnd: int) -> dict[str, Any]:
        """One run at full speed (round ``rnd``: a topic of its own)."""
        tag = "p" if persistent else "np"
        count = self.s.messages // (2 if persistent else 1)
        label = f"{route.label}, {kind(persistent)}"
        self.progress.update(self.task, description=f"throughput: {label} (round {rnd + 1})")
        full = self.run(route, f"{route.prefix}/{tag}/full{rnd}", count, persistent, 0.0)
        self.progress.advance(self.task)
        self.say(
            f"  round {rnd + 1} {label:<46} {full['rate']:>8,.0f} pub/s, nodes' CPU "
            + " ".join(f"{n} {us:.0f}" for n, us in full["cpu_us"].items())
            + " µs/pub"
            + (f" [{full['lost']} lost]" if full["lost"] else "")
        )
        return full

    def route_figures(
        self, route: Route, persistent: bool, runs: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """The median of the rounds' throughput, then latency paced at half of it."""
        count = self.s.messages // (2 if persistent else 1)
        rate = statistics.median(r["rate"] for r in runs)
        cpu = statistics.median(r["cpu_us_total"] for r in runs)
        lost = sum(r["lost"] for r in runs)
        paced = self.latency(route, persistent, rate / 2, "half")
        label = f"{route.label}, {kind(persistent)}"
        self.say(
            f"  {label:<46} {rate:>8,.0f} pub/s (median of {len(runs)}); at "
            f"{paced['rate']:>7,.0f}/s p50 {paced['p50_ms']:6.2f} ms, p99 {paced['p99_ms']:6.2f} ms"
            f"; nodes' CPU {cpu:.0f} µs/pub (median)" + (f" [{lost} lost]" if lost else "")
        )
        return {
            "throughput": rate,
            "cpu_us_per_pub": cpu,
            "throughput_rounds": [r["rate"] for r in runs],
            "throughput_messages": count,
            "lost": lost,
            "half_peak": paced,
        }

    def latency(self, route: Route, persistent: bool, rate: float, tag: str) -> dict[str, Any]:
        """Latency percentiles of a stream paced at ``rate`` publications/s."""
        label = f"{route.label}, {kind(persistent)}"
        self.progress.update(self.task, description=f"latency at {rate:,.0f}/s: {label}")
        n = max(200, int(rate * self.s.latency_seconds))
        topic = f"{route.prefix}/{'p' if persistent else 'np'}/{tag}"
        paced = self.run(route, topic, n, persistent, rate)
        self.progress.advance(self.task)
        return {"target_rate": rate, "messages": n, **paced}

    def common_latency(
        self, persistent: bool, rate: float, rounds: int
    ) -> dict[str, dict[str, Any]]:
        """Every route at ``rate``, ``rounds`` times with the routes' order alternated; per
        route the run of median p99 (its p99s listed)."""
        got: dict[str, list[dict[str, Any]]] = {r.key: [] for r in ROUTES}
        for rnd in range(rounds):
            for r in ROUTES if rnd % 2 == 0 else ROUTES[::-1]:
                got[r.key].append(self.latency(r, persistent, rate, f"common{rnd}"))
        out: dict[str, dict[str, Any]] = {}
        for key, runs in got.items():
            ordered = sorted(runs, key=lambda x: x["p99_ms"])
            out[key] = {**ordered[len(ordered) // 2], "p99_rounds": [x["p99_ms"] for x in runs]}
        return out

    # ----------------------------------------------------------------- 2. proxy propagation

    def propagation(self, route: Route) -> dict[str, Any]:
        """New subscription on SUB1 -> proxy visible on ``route.proxy_on`` -> first publication
        from a tight publishing loop on PUB1 delivered."""
        assert route.proxy_on is not None
        sub_node, holder = self.cl[route.sub], self.cl[route.proxy_on]
        to_proxy: list[float] = []
        to_first: list[float] = []
        for i in range(self.s.trials):
            self.progress.update(
                self.task, description=f"proxy propagation ({route.key}) {i + 1}/{self.s.trials}"
            )
            topic = f"{route.prefix}/Prop/{i}"
            self.pub.submit(
                "publish_until_stopped", address=self.cl[route.pub].address, topic=topic
            )
            self.pub.wait("ready", 60)
            time.sleep(0.05)  # publications are flowing (and dropped: nobody subscribes yet)
            t0 = time.time()
            sub = sub_node.c.subscribe(topic, max_batch=1000)
            try:
                deadline = t0 + 20
                while (route.sub, topic) not in holder.proxies():
                    if time.time() > deadline:
                        raise TimeoutError(f"proxy for {topic} never reached {route.proxy_on}")
                    time.sleep(0.005)
                to_proxy.append(time.time() - t0)
                first = sub.receive(timeout=20)
                if first is None:
                    raise TimeoutError(f"no publication on {topic} reached {route.sub}")
                to_first.append(first.received_at - t0)
            finally:
                self.pub.stop_event.set()
                self.pub.wait("done", 60)
                sub.close()
            self.progress.advance(self.task)
        self.say(
            f"  proxy propagation, {route.label:<34} to {route.proxy_on}: median "
            f"{statistics.median(to_proxy) * 1000:5.0f} ms, max {max(to_proxy) * 1000:5.0f} ms;"
            f" to first delivery: median {statistics.median(to_first) * 1000:5.0f} ms, "
            f"max {max(to_first) * 1000:5.0f} ms"
        )
        return {
            "proxy_on": route.proxy_on,
            "to_proxy_ms": [t * 1000 for t in to_proxy],
            "to_first_delivery_ms": [t * 1000 for t in to_first],
            "proxy_median_ms": statistics.median(to_proxy) * 1000,
            "proxy_max_ms": max(to_proxy) * 1000,
            "first_median_ms": statistics.median(to_first) * 1000,
            "first_max_ms": max(to_first) * 1000,
        }

    # ----------------------------------------------------------------- 3. host killed

    def failover(
        self, persistent: bool, dead: str = "HOST2", survivor: str = "HOST1"
    ) -> dict[str, Any]:
        cl = self.cl
        tag = "p" if persistent else "np"
        topic = f"Failover/{tag}"
        rate = self.s.failover_rate
        count = int(rate * (self.s.before_kill + self.s.after_kill))
        self.progress.update(self.task, description=f"host killed: {kind(persistent)} stream")
        wait_for(  # after a restart the channel must be back before the next kill
            lambda: cl["PUB1"].chstatus().get(dead, {}).get("STATUS") != "RETRYING",
            30.0,
            0.02,
            what=f"PUB1's channel to {dead} not retrying",
            retry=Exception,
        )
        arrivals: list[tuple[int, float, str, float]] = []  # seq, sent, via host, received
        sub = cl["SUB1"].c.subscribe(topic, max_batch=1000)
        for host in (survivor, dead):
            cl.wait_proxy(host, "SUB1", topic)
        stop = threading.Event()

        def collect() -> None:
            while not stop.is_set():
                for m in sub.receive_batch(timeout=0.1):
                    k, seq, sent = parse(m.body)
                    if k == MEASURED:
                        via = str(m.properties.get(ROUTE, "")).split(",")
                        arrivals.append((seq, sent, via[1] if len(via) > 2 else "", m.received_at))

        collector = threading.Thread(target=collect, daemon=True)
        collector.start()
        try:
            self.pub.submit(
                "publish",
                address=cl["PUB1"].address,
                topic=topic,
                count=count,
                persistent=persistent,
                rate=float(rate),
                warmup=200,
            )
            self.pub.wait("ready", 60)
            time.sleep(self.s.before_kill)
            killed = time.time()
            cl[dead].kill()
            published = self.pub.wait("done", 120)
            time.sleep(1.0)
            before_restart = len(arrivals)
            ch = cl["PUB1"].chstatus().get(dead, {})
            waiting = int(ch.get("XQMSGSA", "0") or 0)
            status = ch.get("STATUS", "?")
            self.progress.update(self.task, description=f"host killed: restarting {dead}")
            restarted = time.time()
            cl[dead].start()
            restart_s = time.time() - restarted
            back = time.time()
            wait_for(
                lambda: _settled(arrivals, count, back),
                30,
                0.2,
                what="late arrivals to stop",
                retry=Exception,
            )
        finally:
            stop.set()
            collector.join(5)
            sub.close()
        self.progress.advance(self.task)
        out = _classify(published["sent"], arrivals, killed, restarted, dead, survivor)
        out.update(
            rate=rate,
            published=count,
            arrived_before_restart=before_restart,
            waiting_on_channel_before_restart=waiting,
            channel_status_before_restart=status,
            host_restart_s=restart_s,
        )
        self.say(
            f"  {dead} killed, {kind(persistent):<15} re-route {out['reroute_ms']:6.0f} ms; "
            f"re-driven {out['redriven']}, waited for {dead} {out['waited']} "
            f"({waiting} unacked on PUB1's channel, {status}), lost {out['lost']}, "
            f"duplicates {out['duplicates']}"
        )
        return out


def _settled(arrivals: list[tuple[int, float, str, float]], count: int, since: float) -> bool:
    """True once every publication arrived, or nothing arrived for 2.5 s after ``since``."""
    if len({a[0] for a in arrivals}) >= count:
        return True
    last = max(since, arrivals[-1][3]) if arrivals else since
    return time.time() - last > 2.5


def _classify(
    sent: list[float],
    arrivals: list[tuple[int, float, str, float]],
    killed: float,
    restarted: float,
    dead: str,
    survivor: str,
) -> dict[str, Any]:
    """Sort a failover stream's publications into on time, re-driven (through the survivor but
    late), waited for the dead host (arrived through it after its restart), lost."""
    first: dict[int, tuple[float, str, float]] = {}
    dupes = 0
    for seq, t_sent, via, received in arrivals:
        if seq in first:
            dupes += 1
        else:
            first[seq] = (t_sent, via, received)
    before = [r - t for t, _, r in first.values() if t < killed - 0.1]
    late = max(0.05, 5 * percentile(before, 99))  # seconds: well beyond the steady-state p99
    lost = [seq for seq in range(len(sent)) if seq not in first]
    waited = [s for s, (_, via, r) in first.items() if via == dead and r >= restarted]
    redriven = [s for s, (t, via, r) in first.items() if via == survivor and r - t > late]
    disrupted = [sent[s] for s in (*lost, *waited, *redriven)]
    last_bad = max([killed, *disrupted])
    clean = [r for t, via, r in first.values() if via == survivor and t > last_bad]
    reroute = (min(clean) - killed) if clean else float("nan")
    after = [r for _, via, r in first.values() if via == survivor and r > killed]
    return {
        "reroute_ms": reroute * 1000,
        "first_via_survivor_after_kill_ms": (min(after) - killed) * 1000 if after else None,
        "dead_host_chosen_ms": (last_bad - killed) * 1000,
        "late_threshold_ms": late * 1000,
        "steady_p99_ms": percentile(before, 99) * 1000,
        "on_time": len(first) - len(waited) - len(redriven),
        "redriven": len(redriven),
        "waited": len(waited),
        "lost": len(lost),
        "duplicates": dupes,
        "via": dict(Counter(via for _, via, _ in first.values())),
    }


# --------------------------------------------------------------------------------- set-up


def start_cluster(cl: BenchCluster) -> None:
    cl.start(["FR1"], ["HOST1", "HOST2", "PUB1", "SUB1"], standalone=["SOLO"])
    cl.define_topic("HOST1", "PRICES", "Prices", "TOPICHOST")
    cl.define_topic("HOST1", "DIRECT", "Direct", "DIRECT")
    cl.define_topic("HOST1", "FAILOVER", "Failover", "TOPICHOST")
    cl.define_topic("HOST2", "FAILOVER", "Failover", "TOPICHOST")
    for name, hosts in (("PRICES", ["HOST1"]), ("DIRECT", ["HOST1"])):
        cl.wait_definition(name, hosts, on=["PUB1", "SUB1"])
    cl.wait_definition("FAILOVER", ["HOST1", "HOST2"], on=["PUB1", "SUB1", "HOST1", "HOST2"])


# --------------------------------------------------------------------------------- figures


def p99(figures: dict[str, Any]) -> float:
    """p99 latency (ms) of a route at the rate common to all routes."""
    return float(figures["common"]["p99_ms"])


def comparisons(fig: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per persistence: ratios of throughput, cost per extra hop, p99 added per extra hop."""
    out: dict[str, dict[str, Any]] = {}
    for k in ("non-persistent", "persistent"):
        single, th, direct = (fig[r][k] for r in ("single", "topichost", "direct"))
        th_single = th["throughput"] / single["throughput"]
        out[k] = {
            "direct_vs_single": direct["throughput"] / single["throughput"],
            "topichost_vs_single": th_single,
            "topichost_vs_direct": th["throughput"] / direct["throughput"],
            "cost_direct_hop": 1 - direct["throughput"] / single["throughput"],
            "cost_host_hop": 1 - th["throughput"] / direct["throughput"],
            "cost_per_hop_topichost": 1 - th_single**0.5,
            "common_rate": th["common"]["target_rate"],
            "p99_added_direct_hop_ms": p99(direct) - p99(single),
            "p99_added_host_hop_ms": p99(th) - p99(direct),
            "p99_added_per_hop_topichost_ms": (p99(th) - p99(single)) / 2,
        }
    return out


def targets(
    cmp: dict[str, dict[str, Any]], prop: dict[str, Any], fail: dict[str, Any]
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def row(target: str, measured: dict[str, float], unit: str, ok: bool) -> None:
        text = " · ".join(f"{k} {v:{unit}}" for k, v in measured.items())
        rows.append({"target": target, "measured": measured, "text": text, "met": ok})

    np_, p = cmp["non-persistent"], cmp["persistent"]
    for key, what in (
        ("cost_direct_hop", "direct vs single node"),
        ("cost_host_hop", "topic host vs direct (the host's hop)"),
        ("cost_per_hop_topichost", "topic host vs single node, per hop (2 hops)"),
    ):
        m = {"np": np_[key], "p": p[key]}
        ok = max(m.values()) <= HOP_COST_TARGET
        row(f"throughput cost per extra hop ≤ {HOP_COST_TARGET:.0%}: {what}", m, ".0%", ok)
    for key, what in (
        ("p99_added_direct_hop_ms", "direct vs single node"),
        ("p99_added_host_hop_ms", "topic host vs direct"),
        ("p99_added_per_hop_topichost_ms", "topic host vs single node, per hop"),
    ):
        m = {"np": np_[key], "p": p[key]}
        ok = max(m.values()) < HOP_P99_TARGET_MS
        row(f"p99 added per hop < {HOP_P99_TARGET_MS:.0f} ms (common rate): {what}", m, ".2f", ok)
    for key, res in prop.items():
        m = {
            "max to proxy s": res["proxy_max_ms"] / 1000,
            "max to delivery s": res["first_max_ms"] / 1000,
        }
        row(f"proxy propagation < 1 s ({key})", m, ".3f", max(m.values()) < PROPAGATION_TARGET_S)
    if not fail:
        return rows
    m = {"p" if k == "persistent" else "np": v["reroute_ms"] / 1000 for k, v in fail.items()}
    ok = all(v == v and v < REROUTE_TARGET_S for v in m.values())  # NaN: never re-routed
    row("re-route after a host is killed < 1 s", m, ".3f", ok)
    lost = fail["persistent"]
    m = {"lost": lost["lost"], "duplicates": lost["duplicates"]}
    row("persistent: none lost, none duplicated (§7)", m, "d", not any(m.values()))
    return rows


RouteCells = Callable[[str, dict[str, Any], dict[str, Any]], list[str]]


def _table(title: str, caption: str, *column_groups: tuple[str, ...]) -> Table:
    """A figures table: the first column names the row (left), the others hold figures (right)."""
    t = Table(title=title, caption=caption)
    for i, col in enumerate(c for group in column_groups for c in group):
        t.add_column(col, justify="right" if i else "left")
    return t


def _route_rows(t: Table, results: dict[str, Any], cells: RouteCells) -> Table:
    """A row for each route and persistence (a section for each persistence): its label, then
    ``cells(route key, the route's figures, the persistence's comparisons)``."""
    fig, cmp = results["routes"], results["comparisons"]
    for k in ("non-persistent", "persistent"):
        for r in ROUTES:
            t.add_row(f"{r.label}, {k}", *cells(r.key, fig[r.key][k], cmp[k]))
        t.add_section()
    return t


def throughput_table(results: dict[str, Any]) -> Table:
    def cells(route: str, f: dict[str, Any], c: dict[str, Any]) -> list[str]:
        vs_single = {"single": "1.00", "topichost": f"{c['topichost_vs_single']:.2f}"}
        vs_single["direct"] = f"{c['direct_vs_single']:.2f}"
        cost = {"single": "—", "direct": f"{c['cost_direct_hop']:.0%} (1 hop)"}
        cost["topichost"] = (
            f"{c['cost_per_hop_topichost']:.0%} (2 hops; host hop {c['cost_host_hop']:.0%})"
        )
        lost = f" ({f['lost']} lost)" if f["lost"] else ""
        return [
            f"{f['throughput_messages']:,}",
            " ".join(f"{x:,.0f}" for x in f["throughput_rounds"]),
            f"{f['throughput']:,.0f}{lost}",
            f"{f['cpu_us_per_pub']:.0f}",
            vs_single[route],
            f"{c['topichost_vs_direct']:.2f}" if route == "topichost" else "",
            cost[route],
        ]

    t = _table(
        "1a. Throughput: publications/s, publisher client to subscriber client",
        "cost per extra hop = 1 - ratio; the topic-host route has 2 extra hops "
        "(per hop: 1 - √ratio); host hop = 1 - topic host ÷ direct",
        ("route", "messages", "rounds: pub/s", "median", "CPU µs/pub", "÷ single", "÷ direct"),
        ("cost per extra hop",),
    )
    return _route_rows(t, results, cells)


def latency_table(results: dict[str, Any]) -> Table:
    def cells(route: str, f: dict[str, Any], c: dict[str, Any]) -> list[str]:
        added = {"single": "—", "direct": f"{c['p99_added_direct_hop_ms']:.2f} (1 hop)"}
        added["topichost"] = (
            f"{c['p99_added_per_hop_topichost_ms']:.2f} (2 hops; host hop "
            f"{c['p99_added_host_hop_ms']:.2f})"
        )
        out = []
        for x in (f[key] for key, _ in rates):
            lost = f" ({x['lost']} lost)" if x["lost"] else ""
            out += [f"{x['rate']:,.0f}{lost}", f"{x['p50_ms']:.2f}", f"{x['p99_ms']:.2f}"]
        return [*out, added[route]]

    rates = (("half_peak", "half own peak"), ("common", "common rate"))
    t = _table(
        "1b. Latency (ms): subscriber receive time - publisher send time, paced publishing",
        "common rate: half the slowest cluster route's peak, the same for every route; "
        "p99 added per extra hop is computed from the common-rate p99",
        ("route", *(c for _, rate in rates for c in (f"{rate}: /s", "p50", "p99"))),
        ("p99 added per extra hop",),
    )
    return _route_rows(t, results, cells)


def propagation_table(results: dict[str, Any]) -> Table:
    t = _table(
        f"2. Proxy-subscription propagation ({results['settings']['trials']} trials each)",
        "from the subscribe call on SUB1 to the proxy listed by DISPLAY SUB(*) "
        "SUBTYPE(PROXY) (polled every 5 ms), and to the first publication of PUB1's tight "
        "publishing loop received",
        ("routing", "proxy on", "to proxy: median", "max", "to delivery: median", "max"),
    )
    times = ("proxy_median_ms", "proxy_max_ms", "first_median_ms", "first_max_ms")
    for key, res in results["propagation"].items():
        t.add_row(key, res["proxy_on"], *(f"{res[k]:.0f} ms" for k in times))
    return t


def failover_table(results: dict[str, Any]) -> Table:
    t = _table(
        "3. kill -9 of HOST2 (hosts HOST1, HOST2) under a paced stream PUB1 → SUB1",
        "re-route: kill → first arrival through HOST1 of a publication sent after the "
        "last one that went to HOST2 (or was re-driven or lost); dead host chosen: kill → send "
        "time of that last one; re-driven: through HOST1 but later than 5 × the steady p99 "
        "(at least 50 ms); unacked: XQMSGSA of PUB1's channel to HOST2 before the restart "
        "(includes copies HOST2 forwarded without acknowledging); waited: arrived through "
        "HOST2 after its restart",
        ("stream", "re-route", "dead host chosen", "on time", "re-driven"),
        ("unacked on PUB1", "waited", "lost", "dupes", "restart"),
    )
    for key, res in results["failover"].items():
        t.add_row(
            f"{key}, {res['rate']:,}/s × {res['published']:,}",
            f"{res['reroute_ms']:.0f} ms",
            f"{res['dead_host_chosen_ms']:.0f} ms",
            f"{res['on_time']:,}",
            f"{res['redriven']:,} (> {res['late_threshold_ms']:.0f} ms)",
            f"{res['waiting_on_channel_before_restart']:,} ({res['channel_status_before_restart']})",
            f"{res['waited']:,}",
            f"{res['lost']:,}",
            f"{res['duplicates']:,}",
            f"{res['host_restart_s']:.1f} s",
        )
    return t


def targets_table(results: dict[str, Any]) -> Table:
    t = Table(title="Targets in this run")
    t.add_column("target")
    t.add_column("measured", justify="right")
    t.add_column("met", justify="center")
    for r in results["targets"]:
        t.add_row(r["target"], r["text"], "[green]met[/]" if r["met"] else "[red]not met[/]")
    return t


def render(console: Console, results: dict[str, Any]) -> None:
    tables = [throughput_table, latency_table]
    if results["propagation"]:
        tables += [propagation_table, failover_table]
    for table in tables:
        console.print(table(results))
        console.print()
    console.print(targets_table(results))


# --------------------------------------------------------------------------------- main


def run_all(bench: Bench, rounds: int, hops_only: bool) -> dict[str, Any]:
    """Per persistence: every route's throughput ``rounds`` times, the routes' order
    alternated between rounds (medians reported), then latency at half each route's peak and
    at the common rate (``rounds`` alternated runs, the median p99's run)."""
    results: dict[str, Any] = {}
    fig: dict[str, dict[str, Any]] = {r.key: {} for r in ROUTES}
    for persistent in (False, True):
        k = kind(persistent)
        runs: dict[str, list[dict[str, Any]]] = {r.key: [] for r in ROUTES}
        for rnd in range(rounds):
            for r in ROUTES if rnd % 2 == 0 else ROUTES[::-1]:
                runs[r.key].append(bench.throughput(r, persistent, rnd))
        for r in ROUTES:
            fig[r.key][k] = bench.route_figures(r, persistent, runs[r.key])
        # every route again at one rate: half the slowest cluster route's peak
        common = min(fig[r.key][k]["throughput"] for r in ROUTES if r.hops) / 2
        for key, figures in bench.common_latency(persistent, common, rounds).items():
            fig[key][k]["common"] = figures
        bench.say(
            f"  {k}, all routes at {common:,.0f}/s: p99 "
            + ", ".join(f"{r.key} {p99(fig[r.key][k]):.2f} ms" for r in ROUTES)
        )
    results["routes"] = fig
    results["comparisons"] = comparisons(fig)
    if hops_only:
        results["propagation"], results["failover"] = {}, {}
    else:
        results["propagation"] = {r.key: bench.propagation(r) for r in ROUTES if r.proxy_on}
        results["failover"] = {kind(p): bench.failover(p) for p in (False, True)}
    results["targets"] = targets(
        results["comparisons"], results["propagation"], results["failover"]
    )
    return results


def _no_nan(value: Any) -> Any:
    """``value`` with every NaN float replaced by None (strict JSON)."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_no_nan(v) for v in value]
    return value


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="fewer messages and trials (about 35 s)"
    )
    parser.add_argument("--json-out", type=Path, help="also write the results as JSON here")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="throughput and common-rate latency runs per route, the routes' order alternated "
        "between rounds; medians reported (default 3)",
    )
    parser.add_argument(
        "--hops-only",
        action="store_true",
        help="only the hop figures (1.): no proxy propagation, no host killed",
    )
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="run the cluster without its secret (nothing authenticated), to measure its cost",
    )
    args = parser.parse_args()
    settings = Settings.of(args.quick)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    raise_on_sigterm()
    console = Console() if sys.stdout.isatty() else Console(width=150)
    started = time.time()
    results: dict[str, Any] = {
        "settings": settings.__dict__,
        "quick": args.quick,
        "cluster_secret": not args.insecure,
        "rounds": args.rounds,
    }
    workers: list[ClientWorker] = []
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        cl = BenchCluster(Path(tmp), insecure=args.insecure)
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
        try:
            with Progress(*columns, TimeElapsedColumn(), console=console) as progress:
                steps = 1 + 2 * len(ROUTES) * (2 * args.rounds + 1)
                if not args.hops_only:
                    steps += 2 + 2 * settings.trials
                task = progress.add_task(
                    "starting FR1, HOST1, HOST2, PUB1, SUB1, SOLO", total=steps
                )
                workers += [ClientWorker("publisher"), ClientWorker("subscriber")]
                start_cluster(cl)
                progress.advance(task)
                bench = Bench(cl, settings, progress, task, *workers)
                results.update(run_all(bench, args.rounds, args.hops_only))
        except KeyboardInterrupt:
            console.print("[yellow]interrupted[/]: stopping every process this benchmark started")
            results["interrupted"] = True
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not stop clean-up
            for w in workers:
                w.close()
            cl.stop()
    if results.get("interrupted"):
        sys.exit(130)
    results["seconds"] = time.time() - started
    console.print()
    render(console, results)
    mode = "without the cluster secret (--insecure)" if args.insecure else "with the cluster secret"
    console.print(f"run time {results['seconds']:.0f} s, cluster {mode}")
    if args.json_out:
        args.json_out.write_text(json.dumps(_no_nan(results), indent=2, default=str))
        console.print(f"results written to {args.json_out}")


if __name__ == "__main__":
    main()
