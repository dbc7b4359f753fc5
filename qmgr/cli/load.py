"""`qmgr load SCENARIO...`: the Spark load-and-ordering job (:mod:`qmgr.spark.job`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import click


@click.command()
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
    "QMGR_PUBLISH_ADDRESS and QMGR_PORT_NODE variables); no fault injection.",
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
    timeout: float,
) -> None:
    """Run the load-and-ordering job for each SCENARIO (a TOML file, see scenarios/): start
    its topology, publish N publishers × M messages through the "qmgr" Spark data source, drain
    every measured subscription (MQ and Service Bus) and report per publisher × subscriber:
    sent, acknowledged, received, lost, duplicated, out of order, displacement, latency
    percentiles and the share per topic host.

    The same job runs under spark-submit: spark-submit qmgr/spark/job.py SCENARIO... --out DIR.
    Exit code 1 when anything acknowledged was lost or duplicated."""
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
        raise click.ClickException(str(exc)) from None
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
    )
    out_console = console()
    spark = spark_session(master)
    try:
        results = run_scenarios(spark, parsed, options, out_console)
    except JobError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        spark.stop()
    click.get_current_context().exit(0 if all(clean(r) for r in results) else 1)
