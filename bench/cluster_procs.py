"""Processes for the cluster benchmark.

- Nodes: a cluster of real `qmgr start` processes on loopback (full repositories with Raft,
  partial repositories joining through them) and standalone nodes, kill -9 and restart on the
  same address, MQSC polling helpers, stop of every node started.
- Clients: publisher and subscriber worker processes (spawned once, fed jobs through a queue),
  so the clients share no GIL with the measuring process; publications carry their kind,
  sequence number and send time in the first bytes of a 100-byte body.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing as mp
import os
import queue
import signal
import struct
import subprocess
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from types import FrameType
from typing import Any

from qmgr.client import OutgoingMessage, QueueManagerClient, StreamPublisher
from qmgr.launcher.cluster_launch import free_ports
from qmgr.launcher.launch import NodeProcess, start_together
from qmgr.launcher.poll import wait_for
from qmgr.security.files import generate_secret
from qmgr.security.keys import member_secret

ROUTE = "qmgr.route"  # nodes a copy passed through the cluster, origin first


class BenchNode(NodeProcess):
    """One `qmgr start` process with a fixed port, so a restart keeps its address."""

    def __init__(
        self, name: str, base: Path, port: int, args: list[str], env: dict[str, str] | None = None
    ) -> None:
        super().__init__(
            name,
            log=base / f"{name}.log",
            data_dir=base / name,
            listen=f"127.0.0.1:{port}",
            extra_args=args,
            env=env,
            start_timeout=40.0,
        )
        self.port = port
        self.address = self.listen

    def hosts_known(self, topic_object: str) -> set[str]:
        """The queue managers this node knows as hosts of a clustered topic object."""
        ok, records = self.c.mqsc_ok(f"DISPLAY TCLUSTER({topic_object})")
        if not ok:
            return set()
        return {r.attrs["CLUSQMGR"] for r in records if r.attrs.get("CLSTATE") == "ACTIVE"}

    def stop(self, timeout: float = 5.0) -> int:
        """SIGTERM, then SIGKILL if it does not go within ``timeout`` seconds; its exit code."""
        self._drop_client()
        if self.proc is None:
            return 0
        if not self.alive:
            return self.proc.returncode
        try:
            return super().stop(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(10)


class BenchCluster:
    """A standalone node and/or one cluster: full repositories first (started together, Raft
    on fixed ports), then partial repositories joining through them. Full repositories get a
    generated cluster secret (in their environment), partial repositories the member secret
    derived from it; or they run ``--insecure`` when asked."""

    def __init__(self, base: Path, cluster: str = "BENCH", *, insecure: bool = False) -> None:
        self.base = base
        self.cluster = cluster
        self.insecure = insecure
        env = {k: v for k, v in os.environ.items() if not k.startswith("QMGR_CLUSTER_SECRET")}
        secret = generate_secret()
        self.fr_env = env if insecure else {**env, "QMGR_CLUSTER_SECRET": secret}
        member = member_secret(secret).text
        self.member_env = env if insecure else {**env, "QMGR_CLUSTER_SECRET": member}
        self.nodes: dict[str, BenchNode] = {}

    def __getitem__(self, name: str) -> BenchNode:
        return self.nodes[name]

    def start(
        self, full: Iterable[str], partial: Iterable[str], standalone: Iterable[str] = ()
    ) -> BenchCluster:
        full, partial, standalone = list(full), list(partial), list(standalone)
        ports = free_ports(2 * len(full) + len(partial) + len(standalone))
        grpc_ports, raft_ports = ports[: len(full)], ports[len(full) : 2 * len(full)]
        rest = iter(ports[2 * len(full) :])
        raft = [f"127.0.0.1:{p}" for p in raft_ports]
        insecure = ["--insecure"] if self.insecure else []
        for name, port, me in zip(full, grpc_ports, raft, strict=True):
            args = ["--cluster", self.cluster, "--full-repository", "--raft", me]
            args += ["--raft-peers", ",".join(raft), *insecure]
            self.nodes[name] = BenchNode(name, self.base, port, args, self.fr_env)
        join = ["--cluster", self.cluster, "--join", ",".join(f"127.0.0.1:{p}" for p in grpc_ports)]
        for name in partial:
            self.nodes[name] = BenchNode(
                name, self.base, next(rest), [*join, *insecure], self.member_env
            )
        for name in standalone:
            self.nodes[name] = BenchNode(name, self.base, next(rest), [])
        start_together(self.nodes[n] for n in [*full, *standalone])
        start_together(self.nodes[n] for n in partial)
        return self

    def define_topic(self, host: str, name: str, topic: str, clroute: str = "TOPICHOST") -> None:
        self[host].c.mqsc(
            f"DEFINE TOPIC({name}) TOPICSTR('{topic}') CLUSTER({self.cluster}) CLROUTE({clroute})"
        )

    def wait_definition(self, name: str, hosts: Iterable[str], on: Iterable[str]) -> None:
        want = set(hosts)
        for node in on:
            n = self[node]

            def known(n: BenchNode = n) -> bool:
                return want <= n.hosts_known(name)

            wait_for(
                known,
                30.0,
                0.02,
                what=f"{name} hosted by {sorted(want)} on {node}",
                retry=Exception,
            )

    def wait_proxy(self, host: str, origin: str, topic: str, present: bool = True) -> None:
        n = self[host]
        wait_for(
            lambda: ((origin, topic) in n.proxies()) == present,
            30.0,
            0.02,
            what=f"proxy {origin}:{topic} {'at' if present else 'gone from'} {host}",
            retry=Exception,
        )

    def stop(self) -> None:
        """Stop every node (those already dead are skipped); never raises."""
        for node in self.nodes.values():
            try:
                node.stop()
            except Exception:
                with contextlib.suppress(Exception):
                    node.kill()


def raise_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit so ``finally`` blocks stop the processes we started."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


# ---------------------------------------------------------------------------------------------
# Client processes: a publisher and a subscriber each run in a worker process of their own (no
# GIL shared with the measurement), fed jobs through a queue so they start only once.

HEADER = struct.Struct("!BId")  # kind, sequence number, send time (seconds since the epoch)
WARMUP, MEASURED = 0, 1
PAYLOAD_SIZE = 100


def body(kind: int, seq: int, sent: float) -> bytes:
    return HEADER.pack(kind, seq, sent).ljust(PAYLOAD_SIZE, b"x")


def parse(data: bytes) -> tuple[int, int, float]:
    kind, seq, sent = HEADER.unpack_from(data)
    return int(kind), int(seq), float(sent)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile of ``values`` (0 for none)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


def _clients() -> Callable[[str], QueueManagerClient]:
    cache: dict[str, QueueManagerClient] = {}

    def get(address: str) -> QueueManagerClient:
        if address not in cache:
            cache[address] = QueueManagerClient(address, timeout=60)
        return cache[address]

    return get


def _warm_up(pub: StreamPublisher, topic: str, count: int, persistent: bool) -> None:
    for i in range(count):
        pub.publish(topic, OutgoingMessage(body(WARMUP, i, time.time()), persistent=persistent))
    pub.flush()
    time.sleep(0.1)


def job_subscribe(
    ctx: JobContext, address: str, topic: str, expected: int, idle_timeout: float
) -> dict[str, Any]:
    """Subscribe, report ready, then receive ``expected`` measured publications (or stop after
    ``idle_timeout`` seconds without any): count, first/last arrival, latency percentiles."""
    sub = ctx.client(address).subscribe(topic, max_batch=1000)
    ctx.ready()
    got = 0
    first = last = 0.0
    latencies: list[float] = []
    node_latencies: list[float] = []
    routes: Counter[str] = Counter()
    try:
        while got < expected:
            batch = sub.receive_batch(timeout=idle_timeout)
            if not batch:
                break
            for m in batch:
                kind, _, sent = parse(m.body)
                if kind != MEASURED:
                    continue
                if got == 0:
                    first = m.received_at
                got += 1
                last = m.received_at
                latencies.append(m.received_at - sent)
                node_latencies.append(m.received_at - m.put_time_ms / 1000.0)
                routes[str(m.properties.get(ROUTE, ""))] += 1
    finally:
        sub.close()
    return {
        "got": got,
        "first": first,
        "last": last,
        "p50": percentile(latencies, 50),
        "p99": percentile(latencies, 99),
        "node_p50": percentile(node_latencies, 50),
        "node_p99": percentile(node_latencies, 99),
        "routes": dict(routes),
    }


def job_publish(
    ctx: JobContext,
    address: str,
    topic: str,
    count: int,
    persistent: bool,
    rate: float = 0.0,
    warmup: int = 300,
) -> dict[str, Any]:
    """Publish ``count`` measured publications, at full speed (``rate`` 0: batches of 100 on a
    stream) or paced at ``rate`` per second (a small batch every ~2 ms, each message stamped when
    it is published). Returns the start and end times and every send time."""
    batch = 100 if rate <= 0 else max(1, min(100, round(rate * 0.002)))
    pub = ctx.client(address).stream_publisher(batch_size=batch, window=64)
    _warm_up(pub, topic, warmup, persistent)
    sent: list[float] = []
    tick = batch / rate if rate > 0 else 0.0
    ctx.ready()  # the measured publications start now
    start = time.time()
    due = time.perf_counter()
    for seq in range(count):
        if tick and seq % batch == 0:
            wait = due - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            due += tick
        now = time.time()
        sent.append(now)
        pub.publish(topic, OutgoingMessage(body(MEASURED, seq, now), persistent=persistent))
    pub.close()
    return {"start": start, "end": time.time(), "sent": sent}


def job_publish_until_stopped(ctx: JobContext, address: str, topic: str) -> dict[str, Any]:
    """Publish one publication at a time in a tight loop until the worker's stop event is set."""
    client = ctx.client(address)
    seq = 0
    ctx.ready()
    while not ctx.stop.is_set():
        client.publish(topic, OutgoingMessage(body(MEASURED, seq, time.time()), persistent=False))
        seq += 1
    return {"published": seq}


class JobContext:
    def __init__(self, results: Any, stop: Any) -> None:
        self.results = results
        self.stop = stop
        self.client = _clients()

    def ready(self) -> None:
        self.results.put(("ready", None))


JOBS: dict[str, Callable[..., dict[str, Any]]] = {
    "subscribe": job_subscribe,
    "publish": job_publish,
    "publish_until_stopped": job_publish_until_stopped,
}


def _worker_main(jobs: Any, results: Any, stop: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
    ctx = JobContext(results, stop)
    while True:
        job = jobs.get()
        if job is None:
            return
        name, kwargs = job
        try:
            results.put(("done", JOBS[name](ctx, **kwargs)))
        except Exception:
            results.put(("error", traceback.format_exc()))


class ClientWorker:
    """A client process that runs one job at a time."""

    def __init__(self, name: str) -> None:
        ctx = mp.get_context("spawn")
        self.name = name
        self.jobs: Any = ctx.Queue()
        self.results: Any = ctx.Queue()
        self.stop_event: Any = ctx.Event()
        self.proc = ctx.Process(
            target=_worker_main, args=(self.jobs, self.results, self.stop_event), name=name
        )
        self.proc.start()

    def submit(self, job: str, **kwargs: Any) -> None:
        self.stop_event.clear()
        self.jobs.put((job, kwargs))

    def wait(self, kind: str, timeout: float = 120.0) -> Any:
        """The next report of ``kind`` ("ready" or "done"); raises if the job failed."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self.proc.is_alive():
                raise RuntimeError(
                    f"{self.name}: no '{kind}' report (worker alive: {self.proc.is_alive()})"
                )
            try:
                got, value = self.results.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            if got == "error":
                raise RuntimeError(f"{self.name} job failed:\n{value}")
            if got == kind:
                return value

    def close(self) -> None:
        if self.proc.is_alive():
            self.stop_event.set()
            self.jobs.put(None)
            self.proc.join(3)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(3)
