"""One `qmgr demo` run: the cluster started, a subscription per Receiver thread, the load
published from PUB1, and what every subscription received."""

from __future__ import annotations

import contextlib
import random
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from qmgr.cli.demo_report import Receipt, SubscriptionResult
from qmgr.launcher import cluster_start

PUBLISHER = "PUB1"
SUBSCRIPTIONS = (("SUB1", "Prices/#"), ("SUB1", "Orders/#"), ("SUB2", "Prices/Fruit/+"))
TOPICS = (
    "Prices/Fruit/Apples",
    "Prices/Fruit/Pears",
    "Prices/Veg/Carrots",
    "Orders/Retail",
    "Orders/Wholesale",
)
ROUTE = "qmgr.route"
SEED = 20_000
QUIET = 15.0  # seconds without a new copy after which the missing ones count as lost
GRACE = 0.5  # seconds of listening after the last expected copy, so duplicates show


def _sent_ms(props: Any, fallback: int) -> int:
    """When the publisher sent it (its ``sent_ms`` property; a copy's PutTime is its put on
    the subscriber's queue, as in MQ)."""
    sent = props.get("sent_ms")
    return sent if isinstance(sent, int) and not isinstance(sent, bool) else fallback


class Receiver(threading.Thread):
    """Takes one subscription's copies off the wire in its own thread, in arrival order."""

    def __init__(self, node: str, pattern: str, sub: Any, publisher: str) -> None:
        super().__init__(name=f"demo-{node}-{pattern}", daemon=True)
        self.node = node
        self.pattern = pattern
        self.sub = sub
        self.publisher = publisher
        self.receipts: list[Receipt] = []
        self.foreign = 0
        self.error: BaseException | None = None
        self._stop_event = threading.Event()

    @property
    def count(self) -> int:
        return len(self.receipts) + self.foreign

    def run(self) -> None:
        try:
            while True:
                batch = self.sub.receive_batch(timeout=0.2)
                if not batch and self._stop_event.is_set():
                    return
                for msg in batch:
                    props = msg.properties
                    seq, publisher = props.get("seq"), props.get("publisher")
                    if publisher != self.publisher or not isinstance(seq, int):
                        self.foreign += 1
                        continue
                    self.receipts.append(
                        Receipt(
                            topic=msg.topic,
                            publisher=publisher,
                            seq=int(seq),
                            put_time_ms=_sent_ms(props, msg.put_time_ms),
                            received_at=msg.received_at,
                            route=str(props.get(ROUTE) or ""),
                        )
                    )
        except Exception as exc:  # shown in the report; the node may have gone away
            self.error = exc

    def finish(self) -> SubscriptionResult:
        self._stop_event.set()
        self.join(timeout=5)
        with contextlib.suppress(Exception):
            self.sub.close()
        return SubscriptionResult(self.node, self.pattern, list(self.receipts), self.foreign)


class DemoRun:
    """One demo run: cluster, clients, subscriptions, load."""

    def __init__(
        self, topology: Any, source: str, base: Path, console: Any, timeout: float
    ) -> None:
        self.topology = topology
        self.source = source
        self.base = base
        self.console = console
        self.timeout = timeout
        self.launches: list[cluster_start.Launch] = []
        self.clients: dict[str, Any] = {}
        self.receivers: list[Receiver] = []
        self.publisher_id = f"demo-{uuid.uuid4().hex[:8]}"

    def execute(self, messages: int) -> dict[str, Any]:
        from qmgr.client import QueueManagerClient

        console = self.console
        console.print(
            f"[bold]qmgr demo[/]: cluster {self.topology.cluster}, "
            f"{len(self.topology.nodes)} nodes, state in {self.base}"
        )
        started = time.monotonic()
        with cluster_start.progress_display(console) as progress:
            cluster_start.start(self.topology, self.base, self.launches, progress, self.timeout)
            for x in self.launches:
                self.clients[x.spec.name] = QueueManagerClient(x.address, timeout=10)
            self._wait_topics(progress)
            for node, pattern in SUBSCRIPTIONS:
                sub = self.clients[node].subscribe(pattern, max_batch=1000)
                self.receivers.append(Receiver(node, pattern, sub, self.publisher_id))
            for r in self.receivers:
                r.start()
            self._wait_proxies(progress)
        ready_s = time.monotonic() - started
        console.print(f"cluster ready in {ready_s:.1f} s; publishing {messages} from {PUBLISHER}")
        with cluster_start.progress_display(console) as progress:
            sent, publish_s, accepted = self._publish(messages, progress)
            self._drain(sent, progress)
        results = [r.finish() for r in self.receivers]
        rate = messages / publish_s if publish_s else 0.0
        title = (
            f"{accepted} publications from {PUBLISHER} in {publish_s:.1f} s ({rate:,.0f}/s), "
            f"half persistent, over {len(TOPICS)} topic strings"
        )
        meta = {
            "cluster": self.topology.cluster,
            "messages": messages,
            "publisher": PUBLISHER,
            "publisher_id": self.publisher_id,
            "sent": sent,
            "publish_seconds": round(publish_s, 3),
            "publish_rate": round(rate, 1),
            "startup_seconds": round(ready_s, 3),
            "nodes": {x.spec.name: x.proc.pid for x in self.launches},
        }
        return {"results": results, "sent": sent, "title": title, "meta": meta}

    def _wait_topics(self, progress: Any) -> None:
        topics = cluster_start.clustered_topics(self.topology)
        wanted = [(t.name, t.node) for t in topics]
        checks = {
            name: cluster_start.knows_topics(client, wanted)
            for name, client in self.clients.items()
        }
        cluster_start.wait_until(
            "clustered topics known on every node", checks, progress, self.timeout
        )

    def _wait_proxies(self, progress: Any) -> None:
        topics = cluster_start.clustered_topics(self.topology)
        wanted: dict[str, set[tuple[str, str]]] = {}
        for node, pattern in SUBSCRIPTIONS:
            for holder in cluster_start.proxy_holders(topics, pattern, PUBLISHER):
                wanted.setdefault(holder, set()).add((node, pattern))
        checks = {
            name: cluster_start.holds_proxies(self.clients[name], want)
            for name, want in sorted(wanted.items())
        }
        cluster_start.wait_until("proxy subscriptions on the hosts", checks, progress, self.timeout)

    def _publish(
        self, messages: int, progress: Any
    ) -> tuple[dict[str, dict[str, int]], float, int]:
        seqs: Counter[str] = Counter()
        # half persistent, chosen at random (fixed seed) so that persistence does not line up
        # with the hosts' round robin
        persistent = [True] * (messages // 2) + [False] * (messages - messages // 2)
        random.Random(SEED).shuffle(persistent)
        task = progress.add_task(f"publishing from {PUBLISHER}", total=messages)
        self._receive_tasks(progress)
        started = time.monotonic()
        pub = self.clients[PUBLISHER].stream_publisher(batch_size=250, window=8)
        try:
            for i in range(messages):
                topic = TOPICS[i % len(TOPICS)]
                seq = seqs[topic]
                seqs[topic] += 1
                pub.publish(
                    topic,
                    f"{topic} #{seq}".encode(),
                    properties={
                        "seq": seq,
                        "publisher": self.publisher_id,
                        "sent_ms": int(time.time() * 1000),
                    },
                    persistent=persistent[i],
                )
                if i % 500 == 499:
                    progress.update(task, completed=i + 1)
                    self._show_received(progress)
            result = pub.close()
        except BaseException:
            with contextlib.suppress(Exception):
                pub.close()
            raise
        elapsed = time.monotonic() - started
        progress.update(task, completed=messages)
        sent = {t: {self.publisher_id: seqs[t]} for t in TOPICS if seqs[t]}
        return sent, elapsed, result.accepted

    def _receive_tasks(self, progress: Any) -> None:
        self._tasks = [
            progress.add_task(f"{r.node} receiving {r.pattern}", total=None) for r in self.receivers
        ]

    def _show_received(self, progress: Any) -> None:
        for task, r in zip(self._tasks, self.receivers, strict=True):
            progress.update(task, completed=r.count)

    def _drain(self, sent: dict[str, dict[str, int]], progress: Any) -> None:
        """Wait until every subscription has had as many copies as were published for it, or
        nothing new arrived for QUIET seconds; then listen GRACE seconds more for duplicates."""
        from cluster.topics import topic_matches

        expected = [
            sum(sum(by.values()) for t, by in sent.items() if topic_matches(r.pattern, t))
            for r in self.receivers
        ]
        for task, total in zip(self._tasks, expected, strict=True):
            progress.update(task, total=total)
        last_total, last_change = -1, time.monotonic()
        while True:
            self._show_received(progress)
            counts = [r.count for r in self.receivers]
            if all(c >= e for c, e in zip(counts, expected, strict=True)):
                break
            if sum(counts) != last_total:
                last_total, last_change = sum(counts), time.monotonic()
            elif time.monotonic() - last_change > QUIET:
                break
            if any(r.error is not None for r in self.receivers):
                break
            time.sleep(0.1)
        time.sleep(GRACE)
        self._show_received(progress)

    def close(self, keep: bool) -> None:
        for r in self.receivers:
            if r.is_alive():
                r.finish()
        for client in self.clients.values():
            with contextlib.suppress(Exception):
                client.close()
        if keep:
            if self.launches:
                from qmgr.launcher.cluster_state import write_state

                state = cluster_start.state(self.topology, self.source, self.launches)
                write_state(self.base, state)
            return
        if self.launches:
            with self.console.status(f"stopping {len(self.launches)} nodes"):
                cluster_start.stop(self.base, self.launches)
