"""`qmgr demo`: the main job on one machine. Starts a node, defines a topic tree, subscribes,
publishes a load with sequence numbers, and reports what arrived: counts, order, latency."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from qmgr.cli.launch import start_node

MQSC = """\
DEFINE TOPIC(DEMO.SPORT) TOPICSTR('demo/sport') DEFPSIST(NO)
DEFINE TOPIC(DEMO.NEWS) TOPICSTR('demo/news') DEFPSIST(YES)
DEFINE QLOCAL(DEMO.AUDIT) MAXDEPTH(1000000)
DEFINE SUB(DEMO.AUDIT.SUB) TOPICSTR('demo/#') DEST(DEMO.AUDIT)
"""

TOPICS = ["demo/sport/football", "demo/sport/tennis", "demo/news/world"]


def _percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


@click.command()
@click.option("--messages", default=20_000, show_default=True, help="Publications to send.")
@click.option("--data-dir", type=click.Path(file_okay=False), help="Keep the node's data here.")
@click.option("--json-out", type=click.Path(dir_okay=False), help="Also write the report as JSON.")
def demo(messages: int, data_dir: str | None, json_out: str | None) -> None:
    """Start a node, define topics, subscribe, publish, and report what arrived."""
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from qmgr.client import OutgoingMessage, QueueManagerClient

    console = Console()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(data_dir) if data_dir else Path(tmp)
        console.print("[bold]qmgr demo[/]: starting queue manager DEMO …")
        node = start_node("DEMO", data_dir=base / "DEMO", log=base / "DEMO.log")
        console.print(f"node DEMO ready at {node.address}")
        try:
            client = QueueManagerClient(node.address)
            for line in MQSC.splitlines():
                rec = client.mqsc(line)[0]
                console.print(f"  {line}\n    [green]{rec.code}: {rec.text}[/]")
            subs = {
                "demo/sport/#": client.subscribe("demo/sport/#", max_batch=1000),
                "demo/+/football": client.subscribe("demo/+/football", max_batch=1000),
                "demo/news/world": client.subscribe("demo/news/world", max_batch=1000),
            }
            pub = client.stream_publisher(batch_size=200, window=8)
            with Progress(console=console) as progress:
                task = progress.add_task("publishing", total=messages)
                for i in range(messages):
                    topic = TOPICS[i % len(TOPICS)]
                    body = json.dumps({"seq": i, "sent": time.time()}).encode()
                    pub.publish(topic, OutgoingMessage(body))
                    if i % 500 == 0:
                        progress.update(task, completed=i)
                result = pub.close()
                progress.update(task, completed=messages)
            report = _collect(subs, messages)
            audit = client.mqsc("DISPLAY QLOCAL(DEMO.AUDIT) CURDEPTH")[0]["CURDEPTH"]
        finally:
            node.proc.terminate()
            node.proc.wait(30)
    table = Table(title=f"{result.accepted} publications, {result.deliveries} deliveries")
    for col in ("subscription", "expected", "received", "out of order", "p50 ms", "p99 ms"):
        table.add_column(col, justify="right" if col != "subscription" else "left")
    for row in report:
        table.add_row(
            row["topic"],
            str(row["expected"]),
            str(row["received"]),
            str(row["out_of_order"]),
            f"{row['p50_ms']:.2f}",
            f"{row['p99_ms']:.2f}",
        )
    table.add_row("DEMO.AUDIT (durable, demo/#)", str(messages), audit, "-", "-", "-")
    console.print(table)
    if json_out:
        Path(json_out).write_text(json.dumps(report, indent=2))


def _collect(subs: dict[str, Any], messages: int) -> list[dict[str, Any]]:
    from cluster.topics import topic_matches

    out = []
    for pattern, sub in subs.items():
        expected = sum(
            1 for i in range(messages) if topic_matches(pattern, TOPICS[i % len(TOPICS)])
        )
        seqs: list[int] = []
        latencies: list[float] = []
        while len(seqs) < expected:
            msg = sub.receive(timeout=10)
            if msg is None:
                break
            payload = json.loads(msg.body)
            seqs.append(payload["seq"])
            latencies.append((msg.received_at - payload["sent"]) * 1000)
        sub.close()
        out.append(
            {
                "topic": pattern,
                "expected": expected,
                "received": len(seqs),
                "out_of_order": sum(1 for a, b in zip(seqs, seqs[1:], strict=False) if b < a),
                "p50_ms": _percentile(latencies, 50),
                "p99_ms": _percentile(latencies, 99),
            }
        )
    return out
