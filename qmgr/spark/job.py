"""The load-and-ordering job: ``qmgr load SCENARIO... [--master URL] [--out DIR]``, or the
same with ``spark-submit qmgr/spark/job.py SCENARIO... [--out DIR]``.

For each scenario (:mod:`qmgr.spark.scenario`), on the cluster of its topology (started here
with the launcher of ``qmgr cluster up`` and stopped at the end, or a running one with
``--cluster``):

0. the measured MQ subscriptions are defined (durable, managed queues) and the job waits until
   every node knows the clustered topics and every topic host holds their proxies;
1. **inject**: N publishers × M messages written with ``df.write.format("qmgr")``, one Spark
   partition per publisher (its own stream publisher), each message with the properties
   LoadRun, LoadPublisher, LoadSeq and LoadSentNs; the writers' acknowledgement logs show the
   progress and trigger the scenario's fault (``kill -9`` of a node, then its restart);
2. **drain**: every measured subscription (MQ, or Service Bus with sessions none / all /
   sequenced) read with ``spark.read.format("qmgr")``, written once as Parquet receipts;
3. **metrics** (:mod:`qmgr.spark.metrics`) on the receipts, the acknowledgement log and the
   injected DataFrame, written by :mod:`qmgr.spark.report`.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cluster.channel import MAXDEPTH as DEFAULT_XMITQ_MAXDEPTH
from qmgr.client import MQClientError
from qmgr.core.qmgr import DURABLE_MODEL
from qmgr.node.cluster.items import XMITQ_PREFIX
from qmgr.spark import metrics, report
from qmgr.spark.nodes import ClusterError, Nodes, attach_nodes, compose_nodes, start_nodes
from qmgr.spark.report import ScenarioResult
from qmgr.spark.scenario import Scenario, ScenarioError, Subscription, load_scenario

PROGRESS_POLL = 0.2  # seconds between two looks at the acknowledgement logs
ACK_SCHEMA = T.StructType(
    [
        T.StructField("publisher", T.StringType()),
        T.StructField("seq", T.LongType()),
        T.StructField("topic", T.StringType()),
        T.StructField("ack_ns", T.LongType()),
        T.StructField("sent_ns", T.LongType()),
    ]
)


class JobError(RuntimeError):
    """The job cannot go on: a scenario, the cluster or a stage failed."""


@dataclass(frozen=True)
class JobOptions:
    scenarios: tuple[Path, ...]
    out: Path
    master: str | None = None  # None: local[*], or what spark-submit set
    cluster: str | None = None  # use this running cluster instead of starting one
    compose: bool = False  # use the topology's compose cluster through its published ports
    timeout: float = 60.0  # seconds each start-up step may take
    keep: Path | None = None  # leave the cluster running, its state, data and logs here
    wide: bool = False  # the console table per publisher with every column


# -- stage 0: subscriptions -----------------------------------------------------------------------


def define_subscriptions(nodes: Nodes, scenario: Scenario) -> None:
    """Define the scenario's MQ subscriptions afresh (an old one of the same name goes)."""
    for sub in scenario.subscriptions:
        if sub.kind != "mq":
            continue
        client = nodes.client(sub.node)
        client.mqsc_ok(f"DELETE SUB('{sub.mq_name}')")
        client.mqsc(
            f"DEFINE SUB('{sub.mq_name}') TOPICSTR('{_quote(sub.topic)}') DESTCLAS(MANAGED)"
        )


def size_queues(nodes: Nodes, scenario: Scenario) -> list[str]:
    """Raise the MAXDEPTH of the queues a run fills to the run's publications, as one sizes
    a cluster for a load test: the drain reads after the injection, so a subscription's queue
    and the transmission queues hold a run's whole backlog, and MQ discards the non-persistent
    copies a full queue cannot take (NPMSGDLV) or refuses persistent ones. Sized: the durable
    model queue of the nodes of MQ subscriptions (before the job defines them), the queue of
    the bridge subscription feeding each Service Bus subscription measured (and, once the
    routes are in place, every transmission queue: ``size_transmission_queues``). A MAXDEPTH
    already as large is left; nothing is lowered. Returns what was changed, as
    ``NODE: QUEUE``."""
    need = scenario.load.total
    changed: list[str] = []

    def raise_depth(node: str, kind: str, queue: str) -> None:
        client = nodes.client(node)
        ok, records = client.mqsc_ok(f"DISPLAY {kind}('{queue}') MAXDEPTH")
        if ok and records and int(records[0].attrs.get("MAXDEPTH") or 0) >= need:
            return
        client.mqsc(f"ALTER {kind}('{queue}') MAXDEPTH({need})")
        changed.append(f"{node}: {queue}")

    for node in sorted({s.node for s in scenario.subscriptions if s.kind == "mq"}):
        raise_depth(node, "QMODEL", DURABLE_MODEL)
    for node in sorted({s.node for s in scenario.subscriptions if s.kind != "mq"}):
        client = nodes.client(node)
        ok, records = client.mqsc_ok("DISPLAY BRIDGE(*) ALL")
        bridges = [r.attrs for r in records if ok and r.attrs.get("DIRECTION") == "TOSB"]
        entities = {
            (s.servicebus or "").split("/", 1)[0].lower()
            for s in scenario.subscriptions
            if s.node == node and s.kind != "mq"
        }
        # the bridges into the measured entities; all of them when the measured entity is
        # fed otherwise (a queue a subscription forwards to)
        feeding = [b for b in bridges if b.get("SBENTITY", "").lower() in entities] or bridges
        for bridge in feeding:
            ok, found = client.mqsc_ok(f"DISPLAY SUB('{_quote(bridge.get('SUB', ''))}') DEST")
            if ok and found and found[0].attrs.get("DEST"):
                raise_depth(node, "QLOCAL", found[0].attrs["DEST"])
    return changed


def size_transmission_queues(nodes: Nodes, scenario: Scenario) -> list[str]:
    """Raise the MAXDEPTH of every transmission queue of every node to the run's publications
    (see ``size_queues``), once the routes are in place (a node has a transmission queue for
    each member it knows). A transmission queue's MAXDEPTH is not displayed, so they are set
    only when the run passes the default."""
    need = scenario.load.total
    changed: list[str] = []
    if need <= DEFAULT_XMITQ_MAXDEPTH:
        return changed
    for node in sorted(nodes.addresses):
        client = nodes.client(node)
        for peer in sorted(nodes.addresses):
            if peer == node:
                continue
            ok, _ = client.mqsc_ok(f"ALTER QLOCAL({XMITQ_PREFIX}{peer}) MAXDEPTH({need})")
            if ok:  # else the node does not know that member (no queue to it)
                changed.append(f"{node}: {XMITQ_PREFIX}{peer}")
    return changed


def delete_subscriptions(nodes: Nodes, scenario: Scenario) -> None:
    for sub in scenario.subscriptions:
        if sub.kind == "mq":
            with contextlib.suppress(Exception):
                nodes.client(sub.node).mqsc_ok(f"DELETE SUB('{sub.mq_name}')")


def _quote(text: str) -> str:
    return text.replace("'", "''")


def wait_for_routes(nodes: Nodes, scenario: Scenario, progress: Any, timeout: float) -> None:
    """Until every node knows the clustered topics and every topic host (or, for direct
    routing, every publishing node) holds the proxies of the MQ subscriptions."""
    from qmgr.launcher import cluster_start

    topics = cluster_start.clustered_topics(nodes.topology)
    wanted = [(t.name, t.node) for t in topics]
    checks = {
        name: cluster_start.knows_topics(nodes.client(name), wanted)
        for name in sorted(nodes.addresses)
    }
    cluster_start.wait_until("clustered topics known on every node", checks, progress, timeout)
    holders: dict[str, set[tuple[str, str]]] = {}
    for sub in scenario.subscriptions:
        if sub.kind != "mq":
            continue
        for publisher in scenario.load.nodes:
            for holder in cluster_start.proxy_holders(topics, sub.topic, publisher):
                if holder != sub.node:
                    holders.setdefault(holder, set()).add((sub.node, sub.topic))
    proxies = {
        name: cluster_start.holds_proxies(nodes.client(name), want)
        for name, want in sorted(holders.items())
    }
    if proxies:
        cluster_start.wait_until("proxy subscriptions in place", proxies, progress, timeout)


# -- stage 1: inject ------------------------------------------------------------------------------


def publisher_id(index: int, run_id: str) -> str:
    """Publisher ``index`` of run ``run_id``: unique to the run, so that what identifies a
    publisher elsewhere (a Service Bus session, through a bridge's SESSPROP) starts afresh."""
    return f"P{index:03d}-{run_id.rpartition('-')[2]}"


def load_frame(spark: SparkSession, scenario: Scenario, run_id: str, node: str) -> DataFrame:
    """The messages of the publishers that publish on ``node``: one partition per publisher,
    its messages in sequence order (columns topic, body, properties, and publisher / seq)."""
    load = scenario.load
    mine = [p for p in range(load.publishers) if load.node_of(p) == node]
    ids = spark.range(0, len(mine) * load.messages, 1, numPartitions=len(mine))
    local = (F.col("id") / F.lit(load.messages)).cast("int") + 1

    def per_publisher(values: Sequence[str]) -> Any:
        """The value of each row's publisher (publisher p takes values[p % len(values)])."""
        return F.element_at(F.array(*[F.lit(values[p % len(values)]) for p in mine]), local)

    frame = ids.select(
        per_publisher([publisher_id(p, run_id) for p in range(load.publishers)]).alias("publisher"),
        (F.col("id") % F.lit(load.messages) + 1).cast("long").alias("seq"),
        per_publisher(load.topics).alias("topic"),
        "id",
    )
    label = F.concat_ws(":", F.col("publisher"), F.col("seq").cast("string"))
    body = F.encode(F.rpad(label, load.payload, "."), "utf-8") if load.payload else F.lit(b"")
    pairs = [F.lit(metrics.RUN), F.lit(run_id), F.lit(metrics.PUBLISHER), F.col("publisher")]
    pairs += [F.lit(metrics.SEQ), F.col("seq").cast("string")]
    for name, values in load.properties:
        pairs += [F.lit(name), per_publisher(values)]
    return frame.select(
        "publisher", "seq", "topic", body.alias("body"), F.create_map(*pairs).alias("properties")
    )  # (the rows' order within each partition is the order they are published in)


def sent_frame(spark: SparkSession, scenario: Scenario, run_id: str) -> DataFrame:
    """Every message the scenario publishes: publisher, seq, topic."""
    frames = [
        load_frame(spark, scenario, run_id, node).select("publisher", "seq", "topic")
        for node in scenario.load.nodes
    ]
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


class AckCounter:
    """Counts the lines of the writers' acknowledgement logs under a directory as they grow."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._seen: dict[Path, tuple[int, int]] = {}  # file -> (bytes read, lines)

    def count(self) -> int:
        for path in self.directory.glob("*/ack-*.jsonl"):
            offset, lines = self._seen.get(path, (0, 0))
            try:
                with open(path, "rb") as f:
                    f.seek(offset)
                    chunk = f.read()
            except OSError:
                continue
            self._seen[path] = (offset + len(chunk), lines + chunk.count(b"\n"))
        return sum(lines for _, lines in self._seen.values())


def inject(
    spark: SparkSession,
    scenario: Scenario,
    nodes: Nodes,
    run_id: str,
    acks: Path,
    progress: Any,
    timeout: float,
) -> dict[str, Any]:
    """Stage 1: publish the load (one concurrent write per publishing node), show progress
    from the acknowledgement logs and inject the scenario's fault. Returns what happened."""
    load = scenario.load
    failures: list[BaseException] = []

    def write(node: str, directory: Path) -> Callable[[], None]:
        def run() -> None:
            try:
                _activate(spark)
                (
                    load_frame(spark, scenario, run_id, node)
                    .select("topic", "body", "properties")
                    .write.format("qmgr")
                    .mode("append")
                    .option("node", nodes.addresses[node])
                    .option("batch_size", str(load.batch_size))
                    .option("rate", str(load.rate))
                    .option("persistent", str(load.persistent).lower())
                    .option("ack_log", str(directory))
                    .option("sent_property", metrics.SENT_NS)
                    .save()
                )
            except BaseException as exc:  # reported by the driver thread
                failures.append(exc)

        return run

    threads = [
        threading.Thread(target=write(node, acks / f"node-{i}"), name=f"inject-{node}", daemon=True)
        for i, node in enumerate(load.nodes)
    ]
    counter = AckCounter(acks)
    kill = scenario.kill
    what = f"injecting {load.publishers}×{load.messages}"
    threshold = kill_threshold(scenario)
    planned = f", kill {kill.node} at {threshold:,} acknowledged" if kill is not None else ""
    task = progress.add_task(what + planned, total=load.total)
    killed_at: float | None = None
    killed_after = 0
    restarted: threading.Thread | None = None
    restart_error: list[BaseException] = []
    started = time.monotonic()
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        acked = counter.count()
        progress.update(task, completed=acked)
        if kill is not None and killed_at is None and acked >= threshold:
            nodes.kill(kill.node)
            killed_at = time.monotonic()
            killed_after = acked
            progress.update(task, description=f"{what}, {kill.node} killed at {acked:,}")
            if kill.restart is not None:
                restarted = threading.Thread(
                    target=_restart_later,
                    args=(nodes, kill.node, kill.restart, progress, timeout, restart_error),
                    daemon=True,
                )
                restarted.start()
        time.sleep(PROGRESS_POLL)
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    acked = counter.count()
    progress.update(task, completed=acked)
    if restarted is not None:
        restarted.join()
    if failures:
        raise JobError(f"stage 1 (inject) failed: {_reason(failures[0])}") from failures[0]
    if restart_error:
        raise JobError(f"stage 1: {restart_error[0]}") from restart_error[0]
    return {
        "inject_seconds": round(elapsed, 3),
        "inject_rate": round(acked / elapsed, 1) if elapsed else 0.0,
        "acknowledged_lines": acked,
        "killed": kill.node if kill is not None and killed_at is not None else None,
        "killed_after_acknowledged": killed_after if killed_at is not None else None,
        "kill_after": kill.after if kill is not None else None,
        "kill_threshold": threshold if kill is not None else None,
        "kill_restart": kill.restart if kill is not None else None,
    }


def kill_threshold(scenario: Scenario) -> int:
    """How many acknowledgements the fault waits for: ``after`` is a share of every message
    the scenario publishes (all publishers together). The kill comes at the first look at the
    acknowledgement logs (every :data:`PROGRESS_POLL` seconds) that counts at least this many,
    so a few more may have been acknowledged by then (``killed_after_acknowledged``)."""
    kill = scenario.kill
    return math.ceil(kill.after * scenario.load.total) if kill is not None else 0


def _activate(spark: SparkSession) -> None:
    """Make ``spark`` the active session of this thread's JVM side: a Python thread talks to
    the JVM on a thread of its own, where the session (and with it the Python data sources
    registered in it, such as "qmgr") is not otherwise found."""
    spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)  # type: ignore[union-attr]


def _restart_later(
    nodes: Nodes,
    name: str,
    delay: float,
    progress: Any,
    timeout: float,
    errors: list[BaseException],
) -> None:
    time.sleep(delay)
    try:
        nodes.restart(name, progress, timeout)
    except BaseException as exc:
        errors.append(exc)


# -- stage 2: drain -------------------------------------------------------------------------------


def read_subscription(
    spark: SparkSession, nodes: Nodes, sub: Subscription, idle: float
) -> DataFrame:
    """The rows of one measured subscription, as ``spark.read.format("qmgr")`` drains it."""
    reader = spark.read.format("qmgr").option("idle", str(idle)).option("source", sub.name)
    if sub.servicebus is None:
        return (
            reader.option("node", nodes.addresses[sub.node])
            .option("subscription", sub.mq_name)
            .load()
        )
    reader = reader.option("servicebus", nodes.servicebus_address(sub.node))
    reader = reader.option("sessions", sub.sessions).option("partitions", str(sub.partitions))
    topic, marker, name = sub.servicebus.partition("/subscriptions/")
    if marker:
        return reader.option("topic", topic).option("subscription", name).load()
    return reader.option("queue", sub.servicebus).load()


def drain(
    spark: SparkSession, scenario: Scenario, nodes: Nodes, run_id: str, path: Path
) -> DataFrame:
    """Stage 2: drain every measured subscription once into Parquet receipts at ``path``;
    returns the receipts read back from there."""
    frames = [
        metrics.receipts_from(
            read_subscription(spark, nodes, sub, scenario.drain.idle), sub.name, run_id
        )
        for sub in scenario.subscriptions
    ]
    receipts = frames[0]
    for frame in frames[1:]:
        receipts = receipts.unionByName(frame)
    receipts.write.mode("overwrite").parquet(str(path))
    return spark.read.parquet(str(path))


def held_on_transmission_queues(nodes: Nodes) -> dict[str, int]:
    """What each node still holds on its transmission queues (``NODE->PEER``: XQMSGSA, the
    non-empty ones), read after the drain: an acknowledged publication missing from the
    receipts is *stuck* while one of them holds it (it should still be re-driven or resent),
    *lost* when none does. A node that does not answer is left out."""
    held: dict[str, int] = {}
    for name in sorted(nodes.addresses):
        try:
            ok, records = nodes.client(name).mqsc_ok("DISPLAY CHSTATUS(*)")
        except MQClientError:
            continue
        for record in records if ok else []:
            depth = int(record.attrs.get("XQMSGSA") or 0)
            if record.attrs.get("CHLTYPE") == "CLUSSDR" and depth:
                held[f"{name}->{record.attrs.get('RQMNAME', '?')}"] = depth
    return held


# -- stage 3: metrics -----------------------------------------------------------------------------


def measure(
    sent: DataFrame, acked: DataFrame, receipts: DataFrame, subscriptions: DataFrame
) -> dict[str, list[dict[str, Any]]]:
    """Stage 3: the metric tables (:mod:`qmgr.spark.metrics`), collected: they are small, one
    row per stream, host, route or percentile."""
    timed = metrics.annotate(metrics.with_send_times(receipts, acked)).cache()
    try:
        return {
            "metrics": _rows(metrics.delivery_metrics(sent, acked, timed, subscriptions)),
            "hosts": _rows(metrics.share(timed, "host")),
            "routes": _rows(metrics.share(timed, "route")),
            "latency": _rows(metrics.latency_distribution(timed)),
        }
    finally:
        timed.unpersist()


def _rows(frame: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict() for row in frame.collect()]


# -- the job --------------------------------------------------------------------------------------


def run_scenario(
    spark: SparkSession,
    scenario: Scenario,
    nodes: Nodes,
    out: Path,
    progress: Any,
    timeout: float,
) -> ScenarioResult:
    """Stages 0-3 of one scenario on ``nodes``; outputs under ``out``."""
    run_id = f"{scenario.name}-{uuid.uuid4().hex[:8]}"
    out.mkdir(parents=True, exist_ok=True)
    acks = out / "acks"
    try:
        sized = size_queues(nodes, scenario)
        define_subscriptions(nodes, scenario)
        wait_for_routes(nodes, scenario, progress, timeout)
        sized += size_transmission_queues(nodes, scenario)
        if sized:
            progress.console.print(
                f"  MAXDEPTH raised to {scenario.load.total:,} for the run: "
                f"{len(sized)} queues (queues_sized in summary.json)"
            )
        injected = inject(spark, scenario, nodes, run_id, acks, progress, timeout)
        if scenario.drain.settle:
            time.sleep(scenario.drain.settle)
        task = progress.add_task(
            f"draining {len(scenario.subscriptions)} subscriptions", total=None
        )
        started = time.monotonic()
        with _stage("stage 2 (drain)"):
            receipts = drain(spark, scenario, nodes, run_id, out / "receipts.parquet")
        drain_s = time.monotonic() - started
        held = held_on_transmission_queues(nodes)
        progress.update(task, total=1, completed=1, description="drained")
        task = progress.add_task("metrics", total=None)
        started = time.monotonic()
        with _stage("stage 3 (metrics)"):
            acked = spark.read.schema(ACK_SCHEMA).json(str(acks / "*" / "ack-*.jsonl"))
            subs = [(s.name, s.topic) for s in scenario.subscriptions]
            tables = measure(
                sent_frame(spark, scenario, run_id),
                acked,
                receipts,
                metrics.subscriptions_frame(spark, subs),
            )
            paced = _rows(metrics.pace(acked, receipts))[0]
        progress.update(task, total=1, completed=1, description="metrics computed")
        metrics_s = time.monotonic() - started
    except MQClientError as exc:
        raise JobError(f"scenario {scenario.name}: {exc}") from None
    finally:
        delete_subscriptions(nodes, scenario)
    meta = {
        "scenario": scenario.name,
        "description": scenario.description,
        "run": run_id,
        "topology": str(scenario.topology),
        "publishers": scenario.load.publishers,
        "messages_per_publisher": scenario.load.messages,
        "persistent": scenario.load.persistent,
        "rate": scenario.load.rate,
        "subscriptions": [
            {
                "name": s.name,
                "node": s.node,
                "topic": s.topic,
                "servicebus": s.servicebus,
                "sessions": s.sessions if s.servicebus else None,
            }
            for s in scenario.subscriptions
        ],
        **injected,
        "queues_sized": sized,
        "drain_seconds": round(drain_s, 3),
        "held_after_drain": held,
        "metrics_seconds": round(metrics_s, 3),
        **report.rates(paced),
    }
    return ScenarioResult(scenario, run_id, out, meta=meta, **tables)


@contextlib.contextmanager
def _stage(what: str) -> Iterator[None]:
    """A Spark failure in a stage as a JobError naming the stage and its reason."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    try:
        yield
    except (PySparkException, Py4JError) as exc:
        raise JobError(f"{what} failed: {_reason(exc)}") from exc


def _reason(exc: BaseException) -> str:
    """The gist of a (Spark) exception: the last line of a Python worker's traceback, else
    the first line of the message."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    errors = [line for line in lines if re.match(r"^[\w.]+(Error|Exception): ", line)]
    return errors[-1] if errors else lines[0]


def _groups(scenarios: Sequence[Scenario]) -> list[list[Scenario]]:
    """Consecutive scenarios on the same topology file share one cluster."""
    groups: list[list[Scenario]] = []
    for scenario in scenarios:
        if groups and groups[-1][0].topology.resolve() == scenario.topology.resolve():
            groups[-1].append(scenario)
        else:
            groups.append([scenario])
    return groups


@contextlib.contextmanager
def _cluster(
    group: list[Scenario], options: JobOptions, state: Path, progress: Any
) -> Iterator[Nodes]:
    from qmgr.launcher.cluster_start import refuse_running
    from qmgr.launcher.topology import TopologyError, load_topology

    try:
        topology = load_topology(group[0].topology)
    except TopologyError as exc:
        raise JobError(str(exc)) from None
    try:
        faults = any(s.kill for s in group)
        if options.cluster is not None and faults:
            raise JobError("a scenario with a fault needs a cluster the job starts (no --cluster)")
        if options.compose:  # a fault: through the Docker engine (the compose load service)
            nodes = compose_nodes(topology, faults=faults)
        elif options.cluster is not None:
            nodes = attach_nodes(options.cluster, topology)
        else:
            base = options.keep if options.keep is not None else state / topology.cluster
            if options.keep is not None:
                refuse_running(options.keep)
            nodes = start_nodes(topology, base, progress, options.timeout)
    except ClusterError as exc:
        raise JobError(str(exc)) from None
    try:
        yield nodes
    finally:
        if options.keep is not None and nodes.started:
            progress.console.print(nodes.keep(str(group[0].topology.resolve())))
        else:
            nodes.close()


def run_job(spark: SparkSession, options: JobOptions, console: Any) -> list[ScenarioResult]:
    """Every scenario file of ``options``: see :func:`run_scenarios`."""
    try:
        scenarios = [load_scenario(p) for p in options.scenarios]
    except ScenarioError as exc:
        raise JobError(str(exc)) from None
    return run_scenarios(spark, scenarios, options, console)


def run_scenarios(
    spark: SparkSession, scenarios: Sequence[Scenario], options: JobOptions, console: Any
) -> list[ScenarioResult]:
    """Every scenario, its outputs under ``options.out/<scenario>``; the summary of all of
    them in ``options.out`` and on the console. Consecutive scenarios on the same topology
    share one cluster."""
    names = [s.name for s in scenarios]
    if len(set(names)) != len(names):
        raise JobError(f"scenario names must differ: {', '.join(names)}")
    if options.keep is not None and len(_groups(scenarios)) > 1:
        raise JobError("--keep keeps one cluster: give scenarios that share one topology file")
    options.out.mkdir(parents=True, exist_ok=True)
    results: list[ScenarioResult] = []
    with contextlib.ExitStack() as stack:
        if options.cluster is None and options.keep is None:
            stack.enter_context(_home())  # a kept cluster registers its nodes for the user
        state = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="qmgr-load-")))
        for group in _groups(scenarios):
            with (
                report.progress(console) as progress,
                _cluster(group, options, state, progress) as nodes,
            ):
                for scenario in group:
                    progress.console.print(
                        f"[bold]scenario {scenario.name}[/]: {scenario.description}"
                    )
                    result = run_scenario(
                        spark,
                        scenario,
                        nodes,
                        options.out / scenario.name,
                        progress,
                        options.timeout,
                    )
                    report.write_scenario(result)
                    results.append(result)
    report.write_summary(options.out, results)
    report.print_results(console, results, wide=options.wide)
    return results


@contextlib.contextmanager
def _home() -> Iterator[None]:
    """Nodes the job starts register under a home of their own (not the user's ~/.qmgr)."""
    from qmgr.launcher.launch import home_for_nodes

    with (
        tempfile.TemporaryDirectory(prefix="qmgr-load-home-") as home,
        home_for_nodes(Path(home)),
    ):
        yield


def spark_session(master: str | None) -> SparkSession:
    """The job's session: on ``master``; without one, the master spark-submit set, else
    local[*]."""
    from qmgr.spark.session import DEFAULT_MASTER, register_source, session

    if master is None and os.environ.get("PYSPARK_GATEWAY_PORT"):
        spark = SparkSession.builder.appName("qmgr-load").getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        register_source(spark)
        return spark
    from pyspark.errors import PySparkRuntimeError

    from qmgr.spark.session import JAVA_OPTIONS, JAVA_OPTIONS_ENV

    try:
        return session("qmgr-load", master or DEFAULT_MASTER)
    except PySparkRuntimeError as exc:
        if exc.getCondition() != "JAVA_GATEWAY_EXITED":
            raise
        options = os.environ.get(JAVA_OPTIONS_ENV, JAVA_OPTIONS)
        raise JobError(
            f"Spark's JVM exited as it started (its reason is above); its options: "
            f"{options!r} ({JAVA_OPTIONS_ENV})"
        ) from None


def parse_args(argv: Sequence[str]) -> JobOptions:
    parser = argparse.ArgumentParser(
        prog="qmgr.spark.job", description="The qmgr load-and-ordering job (see qmgr load --help)."
    )
    parser.add_argument("scenarios", nargs="+", type=Path, metavar="SCENARIO")
    parser.add_argument("--master", help="Spark master URL (default: local[*] or spark-submit's)")
    parser.add_argument("--out", type=Path, default=Path("load-report"))
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--cluster", help="Run on this running cluster (qmgr cluster up)")
    where.add_argument(
        "--compose",
        action="store_true",
        help="Run on the topology's compose cluster, through the ports it publishes",
    )
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument(
        "--wide", action="store_true", help="The table per publisher with every column"
    )
    args = parser.parse_args(list(argv))
    return JobOptions(
        scenarios=tuple(args.scenarios),
        out=args.out,
        master=args.master,
        cluster=args.cluster,
        compose=args.compose,
        timeout=args.timeout,
        wide=args.wide,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """spark-submit entry point; exit code 1 when anything acknowledged was lost or
    duplicated, 2 when the job failed."""
    options = parse_args(sys.argv[1:] if argv is None else argv)
    console = report.console()
    try:
        spark = spark_session(options.master)
        try:
            results = run_job(spark, options, console)
        finally:
            spark.stop()
    except JobError as exc:
        console.print(f"[red]qmgr load: {exc}[/]")
        return 2
    return 0 if all(report.clean(r) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
