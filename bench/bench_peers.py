"""qmgr next to its peers, in one run: Mosquitto at QoS 0 and QoS 1, and a raw gRPC relay.

Run: .venv/bin/python bench/bench_peers.py [--messages N] [--rounds R] [--quick]

Mosquitto comes from Debian: as root, `apt-get install mosquitto mosquitto-clients` (the broker
and its C clients mosquitto_pub and mosquitto_sub; the bench starts a broker of its own on a free
loopback port, so the package's service need not run). Without them the Mosquitto rows are
skipped with a message and the rest runs.

Pairs, each side measured right after the other in every round (the order flips each round),
N messages of 100 bytes each way (200,000 by default):

1. Mosquitto QoS 0 end to end with its C clients (mosquitto_sub -C started first and
   subscribed, then mosquitto_pub -l fed N lines; timed from the first line written until the
   subscriber has all N and exits) against one qmgr node, non-persistent, one subscriber;
2. Mosquitto QoS 1, in memory (persistence off, its default of 20 messages in flight per
   client; no limit on its queue per subscriber, which by default drops QoS 1 messages past
   1,000 queued: the node never drops) against one node, persistent (its durable path: fsynced
   group commits) with a durable subscription;
3. a raw gRPC relay of three legs, publisher -> forwarder -> subscriber (three processes, plain
   grpcio streams of batches of 100 with an answer per batch, the node's protobuf messages on
   the wire and no qmgr node or SDK code), against the same route through three qmgr nodes:
   publisher node -> topic host -> subscriber node (PUB1 -> HOST1 -> SUB1, non-persistent, the
   cluster with its secret).

The qmgr clients are the SDK's fastest: a StreamPublisher (batches of 100, 64 in flight) and a
subscription read with receive_batch (up to 1,000 a delivery), each in a process of its own
(bench/cluster_procs.py's client workers), so the measuring process shares no GIL with them; a
qmgr rate is measured publications received / (last received - first sent), after a warm-up.

Prints each measurement, then a summary: messages/s (median of the rounds), the CPU the server
processes used per message (the node's, the three nodes' together, or Mosquitto's broker's,
from /proc/<pid>/stat; not the clients') and the ratios node / Mosquitto and qmgr three nodes /
raw three legs (median of the per-round ratios).
--quick: 10,000 messages, one round (for the test: about 15 s).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_node import cpu_seconds  # noqa: E402
from bench.cluster_procs import (  # noqa: E402
    JOBS,
    MEASURED,
    WARMUP,
    BenchCluster,
    ClientWorker,
    JobContext,
    body,
    free_ports,
    raise_on_sigterm,
)
from qmgr.launcher.poll import wait_for  # noqa: E402
from qmgr.wire import messaging_pb2 as pb  # noqa: E402

BATCH = 100
LINE = b"x" * 100 + b"\n"  # one Mosquitto message: mosquitto_pub -l sends the line, no newline
DEFAULT_MESSAGES, QUICK_MESSAGES = 200_000, 10_000
MOSQUITTO_TOPIC, READY_TOPIC = "bench/peers", "bench/ready"
READY = b"ready\n"  # retained on READY_TOPIC: mosquitto_sub prints it once subscribed
INSTALL = "as root: apt-get install mosquitto mosquitto-clients (Debian)"
DURABLE = "PEERS.DURABLE"
RELAY_SERVICE, RELAY_METHOD = "peers.Relay", "Stream"
RELAY_PATH = f"/{RELAY_SERVICE}/{RELAY_METHOD}"
STALL_S = 15.0  # a run ends when nothing more arrived for this long


# ---------------------------------------------------------------------------------------------
# Jobs for bench/cluster_procs.py's client workers. The workers are spawned: each imports this
# script again (as __mp_main__), so these entries are in its JOBS too.


def job_count(
    ctx: JobContext, address: str, topic: str, expected: int, name: str = "", durable: bool = False
) -> dict[str, Any]:
    """Subscribe, report ready, count measured publications (warm-up ones are skipped) until
    ``expected`` or STALL_S without any; the time the last batch was taken off the wire."""
    sub = ctx.client(address).subscribe(topic, name=name, durable=durable, max_batch=1000)
    ctx.ready()
    got = 0
    last = 0.0
    try:
        while got < expected:
            batch = sub.receive_batch(timeout=STALL_S)
            if not batch:
                break
            got += sum(1 for m in batch if m.body[0] == MEASURED)
            last = batch[-1].received_at
    finally:
        sub.close()
    return {"got": got, "last": last}


def _batches(kind: int, count: int) -> Iterator[pb.PublishRequest]:
    for first in range(0, count, BATCH):
        req = pb.PublishRequest(batch_id=first // BATCH + 1)
        for seq in range(first, min(first + BATCH, count)):
            p = req.publications.add(topic="Relay/raw")
            p.message.body = body(kind, seq, time.time())
        yield req


def job_raw_publish(ctx: JobContext, address: str, count: int, warmup: int = 300) -> dict[str, Any]:
    """Stream ``count`` publications in batches to the relay's first leg (after a warm-up
    stream of its own: connections up on every leg); returns when every batch is answered."""
    with grpc.insecure_channel(address) as channel:
        call = channel.stream_stream(
            RELAY_PATH,
            request_serializer=pb.PublishRequest.SerializeToString,
            response_deserializer=pb.PublishResponse.FromString,
        )
        for _ in call(_batches(WARMUP, warmup)):
            pass
        ctx.ready()
        start = time.time()
        accepted = sum(r.accepted for r in call(_batches(MEASURED, count)))
    return {"start": start, "accepted": accepted}


def job_raw_serve(ctx: JobContext, downstream: str = "") -> dict[str, Any]:
    """A relay leg until the worker is stopped: a forwarder (to ``downstream``) or, without
    one, the subscriber, which reports ('done') each stream that carried measured
    publications. Reports its address with 'ready'."""
    asyncio.run(_serve(ctx, downstream))
    return {}


async def _serve(ctx: JobContext, downstream: str) -> None:
    channel = grpc.aio.insecure_channel(downstream) if downstream else None

    def answer(req: pb.PublishRequest) -> pb.PublishResponse:
        return pb.PublishResponse(batch_id=req.batch_id, accepted=len(req.publications))

    async def forward(
        requests: AsyncIterator[pb.PublishRequest], context: Any
    ) -> AsyncIterator[pb.PublishResponse]:
        assert channel is not None
        call = channel.stream_stream(
            RELAY_PATH,
            request_serializer=pb.PublishRequest.SerializeToString,
            response_deserializer=pb.PublishResponse.FromString,
        )()

        async def drain() -> None:
            async for _ in call:
                pass

        answers = asyncio.create_task(drain())
        async for req in requests:
            await call.write(req)
            yield answer(req)
        await call.done_writing()
        await answers

    async def receive(
        requests: AsyncIterator[pb.PublishRequest], context: Any
    ) -> AsyncIterator[pb.PublishResponse]:
        got, last = 0, 0.0
        async for req in requests:
            measured = sum(1 for p in req.publications if p.message.body[0] == MEASURED)
            if measured:
                got += measured
                last = time.time()
            yield answer(req)
        if got:
            ctx.results.put(("done", {"got": got, "last": last}))

    handler = grpc.stream_stream_rpc_method_handler(
        forward if downstream else receive,
        request_deserializer=pb.PublishRequest.FromString,
        response_serializer=pb.PublishResponse.SerializeToString,
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(RELAY_SERVICE, {RELAY_METHOD: handler}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    ctx.results.put(("ready", f"127.0.0.1:{port}"))
    while not ctx.stop.is_set():
        await asyncio.sleep(0.1)
    await server.stop(0)
    if channel is not None:
        await channel.close()


JOBS.update({"peers_count": job_count, "raw_publish": job_raw_publish, "raw_serve": job_raw_serve})


# ---------------------------------------------------------------------------------------------
# Mosquitto


@dataclass(frozen=True)
class MosquittoTools:
    broker: str
    pub: str
    sub: str

    def version(self) -> str:
        """'mosquitto version 2.0.11' (the first line of its help)."""
        done = subprocess.run([self.broker, "-h"], capture_output=True, text=True, timeout=10)
        return (done.stdout.strip().splitlines() or ["mosquitto"])[0]


def find_mosquitto() -> MosquittoTools | None:
    """The broker and its C clients on PATH (the broker also in /usr/sbin), or None."""
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin"])
    found = [shutil.which(n, path=path) for n in ("mosquitto", "mosquitto_pub", "mosquitto_sub")]
    if None in found:
        return None
    broker, pub, sub = (str(f) for f in found)
    return MosquittoTools(broker, pub, sub)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 0.5).close()
    except OSError:
        return False
    return True


@dataclass(frozen=True)
class Run:
    """One measurement: messages received, seconds, the server's CPU per message (µs)."""

    got: int
    seconds: float
    cpu_us: float | None = None

    @property
    def rate(self) -> float:
        return self.got / self.seconds if self.seconds > 0 else 0.0


class Mosquitto:
    """A broker of our own on a free loopback port, in memory, and runs of its C clients."""

    def __init__(self, tools: MosquittoTools, base: Path) -> None:
        self.tools = tools
        self.base = base
        port = free_ports(1)[0]
        self.addr = ["-h", "127.0.0.1", "-p", str(port)]
        conf = base / "mosquitto.conf"
        conf.write_text(
            f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
            "max_queued_messages 0\n"
        )
        with open(base / "mosquitto.log", "wb") as log:
            self.proc = subprocess.Popen(
                [tools.broker, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=log
            )
        try:
            wait_for(
                lambda: _listening(port), 30.0, 0.02, what="mosquitto listening", retry=Exception
            )
            retained = ["-q", "1", "-r", "-t", READY_TOPIC, "-m", READY.strip().decode()]
            subprocess.run([tools.pub, *self.addr, *retained], check=True, timeout=20)
        except BaseException:
            self.stop()
            raise
        self._lines: dict[int, bytes] = {}

    def run(self, qos: int, n: int) -> Run:
        """mosquitto_sub -C (subscribed: it printed the retained ready line), mosquitto_pub -l
        (one warm-up line through first), then N lines; until the subscriber has them all."""
        lines = self._lines.setdefault(n, LINE * n)
        out = self.base / "mosquitto_sub.out"
        client = [*self.addr, "-q", str(qos)]
        topics = ["-t", MOSQUITTO_TOPIC, "-t", READY_TOPIC]
        with open(out, "wb") as sink:
            sub = subprocess.Popen(
                [self.tools.sub, *client, *topics, "-C", str(n + 2)],
                stdout=sink,
                stderr=subprocess.DEVNULL,
            )
        pub: subprocess.Popen[bytes] | None = None
        try:
            wait_for(
                lambda: out.stat().st_size >= len(READY),
                30.0,
                0.02,
                what="mosquitto_sub subscribed",
                retry=Exception,
            )
            # mosquitto_pub -l (2.0.11) ends at the end of its input without waiting for the QoS
            # 1 messages still in flight: its input stays open until the subscriber is done
            pub = subprocess.Popen(
                [self.tools.pub, *client, "-t", MOSQUITTO_TOPIC, "-l"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            assert pub.stdin is not None
            pub.stdin.write(LINE)
            pub.stdin.flush()
            base_size = len(READY) + len(LINE)
            wait_for(
                lambda: out.stat().st_size >= base_size,
                30.0,
                0.02,
                what="the warm-up line through Mosquitto",
                retry=Exception,
            )
            cpu0 = cpu_seconds(self.proc.pid)
            ended: list[float] = []

            def wait_sub() -> None:
                sub.wait()
                ended.append(time.perf_counter())

            waiter = threading.Thread(target=wait_sub, daemon=True)
            waiter.start()
            start = time.perf_counter()
            pub.stdin.write(lines)
            pub.stdin.flush()
            last_size, last_growth = -1, time.perf_counter()
            while waiter.is_alive():
                waiter.join(0.5)
                size = out.stat().st_size
                if size != last_size:
                    last_size, last_growth = size, time.perf_counter()
                elif time.perf_counter() - last_growth > STALL_S:
                    sub.kill()
                    waiter.join()
                    ended[:] = [last_growth]
            cpu = cpu_seconds(self.proc.pid) - cpu0
            got = max(0, (out.stat().st_size - base_size) // len(LINE))
            return Run(got, ended[0] - start, cpu / max(got, 1) * 1e6)
        finally:
            for proc in (pub, sub):
                if proc is None:
                    continue
                if proc.stdin is not None:
                    proc.stdin.close()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


# ---------------------------------------------------------------------------------------------
# The cases


@dataclass(frozen=True)
class Pair:
    node: str  # the key of the qmgr side
    peer: str  # the key of the peer's side
    ratio: str  # how the ratio node / peer is named


LABELS = {
    "mosq0": "Mosquitto QoS 0 (C clients, in memory)",
    "node_np": "qmgr node, non-persistent, 1 subscriber",
    "mosq1": "Mosquitto QoS 1 (in memory, 20 in flight)",
    "node_p": "qmgr node, persistent (fsync), durable sub",
    "raw3": "raw gRPC: publisher -> forwarder -> subscriber",
    "qmgr3": "qmgr: PUB1 -> HOST1 -> SUB1, non-persistent",
}
WIDTH = max(len(label) for label in LABELS.values())
PAIRS = [
    Pair("node_np", "mosq0", "qmgr node non-persistent / Mosquitto QoS 0"),
    Pair("node_p", "mosq1", "qmgr node persistent / Mosquitto QoS 1"),
    Pair("qmgr3", "raw3", "qmgr three nodes / raw gRPC three legs"),
]


class Bench:
    def __init__(
        self,
        cl: BenchCluster,
        mosquitto: Mosquitto | None,
        workers: dict[str, ClientWorker],
        n: int,
    ) -> None:
        self.cl = cl
        self.mosquitto = mosquitto
        self.pub, self.sub = workers["publisher"], workers["subscriber"]
        self.n = n
        workers["raw-subscriber"].submit("raw_serve")
        self.raw_sub = workers["raw-subscriber"]
        raw_sub_address = self.raw_sub.wait("ready", 60)
        workers["raw-forwarder"].submit("raw_serve", downstream=raw_sub_address)
        self.raw_address = workers["raw-forwarder"].wait("ready", 60)
        self.results: dict[str, list[Run]] = {k: [] for k in LABELS}

    def qmgr_run(
        self, route: list[str], topic: str, *, persistent: bool, proxy_on: str = ""
    ) -> Run:
        """The publisher worker publishes n to the route's first node, the subscriber worker
        counts them on its last; the CPU per message of the route's nodes together."""
        pub_node, sub_node = route[0], route[-1]
        durable = {"name": DURABLE, "durable": True} if persistent else {}
        subscriber = self.cl[sub_node]
        self.sub.submit(
            "peers_count", address=subscriber.address, topic=topic, expected=self.n, **durable
        )
        self.sub.wait("ready", 60)
        if proxy_on:
            self.cl.wait_proxy(proxy_on, sub_node, topic)
        self.pub.submit(
            "publish",
            address=self.cl[pub_node].address,
            topic=topic,
            count=self.n,
            persistent=persistent,
        )
        self.pub.wait("ready", 60)
        pids = [p.pid for p in (self.cl[name].proc for name in route) if p is not None]
        cpu0 = sum(cpu_seconds(pid) for pid in pids)
        got = self.sub.wait("done", 900)
        cpu = sum(cpu_seconds(pid) for pid in pids) - cpu0
        sent = self.pub.wait("done", 900)
        return Run(got["got"], got["last"] - sent["start"], cpu / max(got["got"], 1) * 1e6)

    def raw_run(self) -> Run:
        self.pub.submit("raw_publish", address=self.raw_address, count=self.n)
        self.pub.wait("ready", 60)
        sent = self.pub.wait("done", 900)
        got = self.raw_sub.wait("done", 60)
        return Run(got["got"], got["last"] - sent["start"])

    def measure(self, key: str) -> Run | None:
        if key in ("mosq0", "mosq1"):
            if self.mosquitto is None:
                return None
            return self.mosquitto.run(0 if key == "mosq0" else 1, self.n)
        if key == "node_np":
            return self.qmgr_run(["SOLO"], "Peers/np", persistent=False)
        if key == "node_p":
            return self.qmgr_run(["SOLO"], "Peers/p", persistent=True)
        if key == "qmgr3":
            route = ["PUB1", "HOST1", "SUB1"]
            return self.qmgr_run(route, "Relay/np", persistent=False, proxy_on="HOST1")
        return self.raw_run()

    def rounds(self, rounds: int) -> None:
        for r in range(rounds):
            for pair in PAIRS:
                order = (pair.node, pair.peer) if r % 2 else (pair.peer, pair.node)
                for key in order:
                    run = self.measure(key)
                    if run is None:
                        continue
                    self.results[key].append(run)
                    print(
                        f"  round {r + 1}/{rounds}  {LABELS[key]:<{WIDTH}} {describe(run, self.n)}"
                    )


def describe(run: Run, n: int) -> str:
    lost = f"  ({n - run.got:,} MISSING)" if run.got < n else ""
    cpu = f"  server CPU {run.cpu_us:.1f} µs/msg" if run.cpu_us is not None else ""
    return f"{run.got:>9,} in {run.seconds:6.2f} s {run.rate:>10,.0f} msg/s{cpu}{lost}"


def summary(results: dict[str, list[Run]], n: int, rounds: int, have_mosquitto: bool) -> None:
    print()
    print(f"Summary: {n:,} messages of 100 bytes, median of {rounds} round(s)")
    print(f"  {'case':<{WIDTH}} {'msg/s':>10}  {'CPU µs/msg':>10}  rounds (msg/s)")
    for key, label in LABELS.items():
        runs = results[key]
        if not runs:
            print(f"  {label:<{WIDTH}} {'skipped':>10}")
            continue
        rate = statistics.median(r.rate for r in runs)
        cpus = [r.cpu_us for r in runs if r.cpu_us is not None]
        cpu = f"{statistics.median(cpus):10.1f}" if cpus else f"{'-':>10}"
        each = ", ".join(f"{r.rate:,.0f}" for r in runs)
        missing = sum(n - r.got for r in runs)
        print(
            f"  {label:<{WIDTH}} {rate:>10,.0f}  {cpu}  {each}"
            + (f"  ({missing:,} missing)" if missing else "")
        )
    print(
        "  CPU per message received: the node's, the three nodes' together, or Mosquitto's"
        " broker's (the clients' not counted)"
    )
    print()
    print("Ratios (median of the per-round ratios; both sides of a pair ran back to back)")
    for pair in PAIRS:
        node, peer = results[pair.node], results[pair.peer]
        if not peer:
            print(f"  {pair.ratio:<{WIDTH}} skipped (Mosquitto not installed)")
            continue
        ratios = [a.rate / b.rate for a, b in zip(node, peer, strict=True) if b.rate]
        each = ", ".join(f"{x:.2f}" for x in ratios)
        print(f"  {pair.ratio:<{WIDTH}} {statistics.median(ratios):>6.2f}  (rounds: {each})")
    if not have_mosquitto:
        print(f"  Mosquitto skipped: install it {INSTALL}")


def start_cluster(cl: BenchCluster) -> None:
    cl.start(["FR1"], ["HOST1", "PUB1", "SUB1"], standalone=["SOLO"])
    cl.define_topic("HOST1", "RELAY", "Relay", "TOPICHOST")
    cl.wait_definition("RELAY", ["HOST1"], on=["PUB1", "SUB1"])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, help=f"per measurement ({DEFAULT_MESSAGES:,})")
    parser.add_argument("--rounds", type=int, help="rounds of every measurement (3)")
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK_MESSAGES:,} messages, one round"
    )
    args = parser.parse_args()
    n = args.messages or (QUICK_MESSAGES if args.quick else DEFAULT_MESSAGES)
    rounds = args.rounds or (1 if args.quick else 3)
    raise_on_sigterm()
    tools = find_mosquitto()
    print(f"qmgr and its peers: {n:,} messages of 100 bytes per measurement, {rounds} round(s)")
    if tools is None:
        print(f"Mosquitto skipped: mosquitto, mosquitto_pub or mosquitto_sub not found; {INSTALL}")
    else:
        print(
            f"{tools.version()}: persistence off, max_queued_messages 0 (its default, 1,000,"
            " drops QoS 1 messages for a subscriber that falls behind; a node never drops)"
        )
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        base = Path(tmp)
        cl = BenchCluster(base)
        names = ("publisher", "subscriber", "raw-forwarder", "raw-subscriber")
        workers: dict[str, ClientWorker] = {}
        mosquitto: Mosquitto | None = None
        try:
            workers = {name: ClientWorker(name) for name in names}
            start_cluster(cl)
            if tools is not None:
                mosquitto = Mosquitto(tools, base)
            bench = Bench(cl, mosquitto, workers, n)
            bench.rounds(rounds)
            results = bench.results
        except KeyboardInterrupt:
            print("interrupted: stopping every process this benchmark started")
            sys.exit(130)
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not stop clean-up
            for w in workers.values():
                w.close()
            if mosquitto is not None:
                mosquitto.stop()
            cl.stop()
    summary(results, n, rounds, tools is not None)
    print(f"run time {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
