"""`qmgr load SCENARIO...`: the Spark load-and-ordering job (:mod:`qmgr.spark.job`)."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import Any

import click

from qmgr.cli.edge import LaunchCommand

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class LoadFailure(click.ClickException):
    """A scenario that cannot run, a stage that failed or no Java: exit code 2 (1 is kept for
    a run that lost or duplicated something acknowledged)."""

    exit_code = 2


@dataclass
class Stopped:
    """The signal that stopped the job (SIGINT until another one arrives). While ``deferred``
    a signal is only recorded: the job stops once that ends (when Spark's JVM is up and can be
    stopped; cut short while it starts, it stays behind)."""

    signum: int = signal.SIGINT
    received: bool = False
    deferred: bool = False

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class _QuietPy4J(logging.Filter):
    """Once the job is stopped by a signal, py4j's report of the Spark call the signal cut
    short (logged with its traceback on the root logger) is left out."""

    def __init__(self, stopped: Stopped) -> None:
        super().__init__()
        self.stopped = stopped

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.stopped.received:
            return True
        return not (record.name.startswith("py4j") or "py4j" in Path(record.pathname).parts)

    @staticmethod
    def loggers() -> list[logging.Logger]:
        """The root logger (py4j logs some failures there) and py4j's own."""
        names = [n for n in logging.root.manager.loggerDict if n.split(".")[0] == "py4j"]
        return [logging.getLogger(), *(logging.getLogger(n) for n in names)]


@contextlib.contextmanager
def stop_signals(stopped: Stopped) -> Iterator[Stopped]:
    """SIGINT (Ctrl-C), SIGTERM and SIGHUP stop the job alike: a KeyboardInterrupt, whose way
    out stops the nodes the job started and the Spark session (which cancels its running
    jobs). Signals after the first are ignored so that nothing cuts that clean-up short; the
    first is recorded in ``stopped``."""
    if threading.current_thread() is not threading.main_thread():
        yield stopped
        return
    old = {s: signal.getsignal(s) for s in STOP_SIGNALS}

    def ignore(signum: int, frame: FrameType | None) -> None:
        return None

    def handler(signum: int, frame: FrameType | None) -> None:
        stopped.signum = signum
        stopped.received = True
        for s in STOP_SIGNALS:
            signal.signal(s, ignore)
        if not stopped.deferred:
            raise KeyboardInterrupt

    quiet = _QuietPy4J(stopped)
    loggers = quiet.loggers()
    for logger in loggers:
        logger.addFilter(quiet)
    for s in STOP_SIGNALS:
        signal.signal(s, handler)
    try:
        yield stopped
    finally:
        for s, previous in old.items():
            signal.signal(s, previous)
        for logger in loggers:
            logger.removeFilter(quiet)


def _check_java() -> None:
    from qmgr.spark.java import JavaError, check_java

    try:
        check_java()
    except JavaError as exc:
        raise LoadFailure(str(exc)) from None


def _stop_spark(spark: Any, interrupted: bool) -> None:
    """Stop the session; after a signal a failure to do so (its JVM gone) is not reported."""
    if not interrupted:
        spark.stop()
        return
    with contextlib.suppress(Exception):
        spark.sparkContext.setLogLevel("OFF")  # the aborted stage's errors are no news
    with contextlib.suppress(Exception):
        spark.stop()


@click.command(cls=LaunchCommand)
@click.argument("scenarios", nargs=-1, required=True, type=click.Path(dir_okay=False, exists=True))
@click.option(
    "--master",
    help="Spark master URL (spark://HOST:PORT, local[N], ...). Default: local[*].",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default="load-report",
    show_default=True,
    help="Directory for the outputs: per scenario metrics.json/.csv, hosts.csv, routes.csv, "
    "receipts.parquet and chart.png; summary.json, summary.csv and chart.png for the run.",
)
@click.option(
    "--cluster",
    help="Run on this running cluster (started by `qmgr cluster up`) instead of starting the "
    "scenario's topology; it needs every node of the topology (no fault injection).",
)
@click.option(
    "--compose",
    is_flag=True,
    help="Run on the compose cluster of the scenario's topology (docker compose up of the file "
    "`qmgr cluster compose` made), through the ports it publishes on this machine (the same "
    "QMGR_PUBLISH_ADDRESS and QMGR_PORT_NODE variables), or from the compose file's load "
    "service by service name; a kill fault only there (it kills the node's container).",
)
@click.option(
    "--keep",
    type=click.Path(file_okay=False),
    help="Leave the cluster running afterwards, its state, data and logs in this directory "
    "(~/.qmgr/clusters/CLUSTER lets `qmgr cluster status` and `qmgr cluster down` find it), "
    "to explore it with qmgr runmqsc and qmgr sb.",
)
@click.option(
    "--messages",
    type=click.IntRange(1, 10**9),
    help="Messages per publisher in every scenario, instead of the files' (a shorter or longer run).",
)
@click.option(
    "--wide",
    is_flag=True,
    help="Show the table per publisher with every column (sent, acknowledged, displacement, "
    "p95, max...), as wide as it takes; the default table fits the terminal and has a row per "
    "subscriber. Every column is in metrics.csv and summary.json either way.",
)
@click.option(
    "--timeout",
    default=60.0,
    show_default=True,
    help="Seconds each start-up step (nodes ready, topics known, proxies in place) may take.",
)
def load(
    scenarios: tuple[str, ...],
    master: str | None,
    out: str,
    cluster: str | None,
    compose: bool,
    messages: int | None,
    keep: str | None,
    wide: bool,
    timeout: float,
) -> None:
    """Run the load-and-ordering job for each SCENARIO (a TOML file, see scenarios/): start
    its topology, publish N publishers × M messages through the "qmgr" Spark data source, drain
    every measured subscription (MQ and Service Bus) and report per publisher × subscriber:
    sent, acknowledged, received, lost, duplicated, out of order, displacement, latency
    percentiles, the delivered pace and the share per topic host. The console shows a row per
    subscriber (--wide: per publisher, every column) and ends each scenario with a verdict per
    subscriber (order kept or lost, anything lost or duplicated, the fault, which side was the
    limit).

    The same job runs under spark-submit: spark-submit qmgr/spark/job.py SCENARIO... --out DIR.
    Exit code 1 when anything acknowledged was lost or duplicated; 2 when no Java runtime
    (17 or newer) is found; 128 + the signal's number when SIGINT (Ctrl-C), SIGTERM or SIGHUP
    stopped it, after stopping the nodes it started (with --keep they stay, as asked)."""
    try:
        from qmgr.spark.job import JobError, JobOptions, run_scenarios, spark_session
        from qmgr.spark.report import clean, console
        from qmgr.spark.scenario import ScenarioError, load_scenario
    except ImportError as exc:
        raise click.ClickException(
            f"the load job needs the [spark] extra (pip install 'qmgr[spark]'): {exc}"
        ) from None
    if compose and (cluster or keep):
        raise click.UsageError("--compose runs on the compose cluster: no --cluster or --keep")
    try:  # every scenario checked before Spark starts
        parsed = [load_scenario(Path(s)) for s in scenarios]
    except ScenarioError as exc:
        raise LoadFailure(str(exc)) from None
    if messages is not None:
        parsed = [replace(s, load=replace(s.load, messages=messages)) for s in parsed]
    options = JobOptions(
        scenarios=tuple(Path(s) for s in scenarios),
        out=Path(out),
        master=master,
        cluster=cluster,
        compose=compose,
        timeout=timeout,
        keep=Path(keep).resolve() if keep else None,
        wide=wide,
    )
    out_console = console()
    stopped = Stopped()
    interrupted = False
    try:
        with stop_signals(stopped):  # a signal during the Java check stops the job the same way
            _check_java()
            stopped.deferred = True
            try:
                spark = spark_session(master)
            except JobError as exc:
                raise LoadFailure(str(exc)) from None
            finally:
                stopped.deferred = False
            with stop_signals(stopped):  # again: Spark put a SIGINT handler of its own in place
                try:
                    if stopped.received:
                        raise KeyboardInterrupt
                    results = run_scenarios(spark, parsed, options, out_console)
                except JobError as exc:
                    raise LoadFailure(str(exc)) from None
                except KeyboardInterrupt:
                    interrupted = True
                    raise
                finally:
                    _stop_spark(spark, interrupted)
    except KeyboardInterrupt:
        name = signal.Signals(stopped.signum).name
        click.echo(f"qmgr load: stopped by {name}", err=True)
        click.get_current_context().exit(stopped.exit_code)
    click.get_current_context().exit(0 if all(clean(r) for r in results) else 1)
