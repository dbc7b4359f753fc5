"""The node process: one gRPC port serving Messaging, Admin and health; READY line; SIGTERM;
SIGUSR2 moves the clock of a node started for a test (``ClockFile``)."""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from qmgr.core.clock import OffsetClock
from qmgr.node.config import (
    ClusterSettings,
    ConfigError,
    NodeConfig,
    TlsSettings,
    channel_settings,
)
from qmgr.node.ready import READY_SERVICE
from qmgr.node.runtime import NodeRuntime
from qmgr.security.users import Users, UsersFileError
from qmgr.store import StoreFailed

if TYPE_CHECKING:  # the Service Bus port's modules load only on a node that hosts a namespace
    from qmgr.node.amqp_server import AmqpServer
    from qmgr.node.sbport import ServiceBusPort

log = logging.getLogger("qmgr.node")

# Tests only: the N-th commit of the store fails as on a full disk (see SqliteStore).
STORE_FAULT_ENV = "QMGR_TEST_STORE_FAIL_AT_COMMIT"
# Tests only: the node's clock can be moved forward through this file (see ``ClockFile``);
# without it the node runs on the wall clock.
CLOCK_FILE_ENV = "QMGR_TEST_CLOCK_FILE"

# the young generation is collected every GC_YOUNG allocations (the interpreter's default: 700)
GC_YOUNG = 10_000
GC_OLDER = 20  # collections of a generation per collection of the next one
# allocated blocks (pymalloc's, of up to 512 bytes: about one object each) the heap grows by
# before what has survived is frozen (see ``Collector``): about what a full collection walks
# at most, some 0.2 s
GC_FREEZE_STEP = 1_000_000
GC_THAW_GROWTH = 16  # the heap grown so many times since the last thaw: thaw (see ``Collector``)
# the heap (in blocks) that growth is counted from at least: a node that took a million
# messages (some 3.5 GB) is not thawed while it grows, only a heap past 64,000,000 blocks
GC_THAW_FLOOR = 4_000_000
GC_SLOW = 1.0  # seconds: a collection this long is logged (every request waited for it)


def settle_memory() -> None:
    """Once the node has started: what the start built (modules, the store's contents, the
    cluster view) lives as long as the process, so it is frozen out of the collector's sight
    and a full collection walks only what was made since; the young generation is collected
    less often. A node under load keeps many objects in flight (messages on queues and on
    channels, their copies, stored copies): with the interpreter's default thresholds a node
    forwarding persistent publications spent about a third of its CPU time in the collector,
    in full collections of about 90 ms each (a pause every publication in flight waits for)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG, GC_OLDER, GC_OLDER)
    if not any(isinstance(callback, Collector) for callback in gc.callbacks):
        gc.callbacks.append(Collector())


class Collector:
    """Keeps full collections short in a node that holds millions of objects (a backlog of a
    million messages): a full collection walks every object the collector tracks, seconds
    for a few gigabytes, during which the node answers nothing. Each time the heap has grown
    by ``GC_FREEZE_STEP`` blocks since the last freeze (checked after each collection of the
    middle generation, where survivors pass to the oldest), what exists is frozen: out of the
    collector's sight, so a full collection walks at most about a step's worth of objects.

    A frozen object freed by its reference count is freed as usual; one that becomes garbage
    in a reference cycle (or was already, uncollected, when frozen) waits until it is thawed.
    So the frozen are thawed (collected as usual again: nothing is frozen until the next full
    collection, one long one, has walked them) when the heap has fallen below half what it was
    at the last freeze (a backlog drained) and when it has grown ``GC_THAW_GROWTH`` times since
    the last thaw (from ``GC_THAW_FLOOR`` at least): what freezing keeps from collection stays
    within a fixed multiple of what was live, at the cost of a full walk of the heap once per
    halving or sixteenfold growth. Allocated blocks are what the heap is counted in: reading
    them costs next to nothing, unlike counting objects. Collections longer than ``GC_SLOW``
    are logged.

    ``blocks``, ``freeze``, ``unfreeze`` and ``clock`` are the interpreter's unless given (a
    test gives its own)."""

    def __init__(
        self,
        blocks: Callable[[], int] = sys.getallocatedblocks,
        freeze: Callable[[], None] = gc.freeze,
        unfreeze: Callable[[], None] = gc.unfreeze,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._blocks, self._freeze, self._unfreeze, self._clock = blocks, freeze, unfreeze, clock
        self._started = 0.0
        self._frozen_at = blocks()  # blocks at the last freeze
        self._thawed_at = self._frozen_at  # blocks at the last thaw (or start)
        self._thawing = False  # thawed, no full collection since: none frozen until there is

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        generation = info.get("generation", 0)
        if phase == "start":
            self._started = self._clock()
            return
        took = self._clock() - self._started
        if took > GC_SLOW:
            log.warning("a collection of generation %d held the node for %.1f s", generation, took)
        if generation == 0:
            return
        if generation == 2:
            self._thawing = False
        blocks = self._blocks()
        if self._thawing:
            return
        grown = blocks > max(self._thawed_at, GC_THAW_FLOOR) * GC_THAW_GROWTH
        if blocks < self._frozen_at // 2 or grown:
            self._unfreeze()
            self._frozen_at = self._thawed_at = blocks
            self._thawing = True
        elif blocks - self._frozen_at >= GC_FREEZE_STEP:
            self._freeze()
            self._frozen_at = blocks


GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.so_reuseport", 0),
]


async def serve(config: NodeConfig, on_ready: Callable[[str, str], None] | None = None) -> None:
    """Serve until SIGTERM; ``on_ready(address, servicebus)`` once serving (``servicebus``: the
    Service Bus port's HOST:PORT, or "")."""
    from qmgr.rpc.services import MESSAGING_SERVICE, add_services, interceptors

    users = _users(config)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    health_servicer = health.aio.HealthServicer()
    failures: list[StoreFailed] = []

    async def not_serving() -> None:
        for service in ("", MESSAGING_SERVICE, READY_SERVICE):
            await health_servicer.set(service, health_pb2.HealthCheckResponse.NOT_SERVING)

    def store_failed(failure: StoreFailed) -> None:
        """Fail-stop: a commit failed, so what was not committed must not be served; the
        process exits non-zero and a restart serves exactly what is on disk."""
        failures.append(failure)
        log.critical("%s: %s; health NOT_SERVING, stopping", config.name, failure)
        loop.create_task(not_serving())
        stop.set()

    clock_file = os.environ.get(CLOCK_FILE_ENV)
    test_clock = OffsetClock() if clock_file else None  # else the wall clock
    runtime = NodeRuntime(
        config, clock=test_clock, store_fault_at_commit=int(os.environ.get(STORE_FAULT_ENV) or 0)
    )
    runtime.on_store_failed = store_failed
    runtime.start()
    await runtime.durable()  # what the start created (Config.json entities) is on disk
    server = grpc.aio.server(options=GRPC_OPTIONS, interceptors=interceptors(runtime, users))
    add_services(server, runtime)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    port = _listen(server, config)
    if port == 0:
        raise SystemExit(f"qmgr: cannot listen on {config.address}")
    await server.start()
    await health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    await health_servicer.set(MESSAGING_SERVICE, health_pb2.HealthCheckResponse.SERVING)
    host = config.host if ":" not in config.host else f"[{config.host}]"
    advertised = host if config.host not in ("0.0.0.0", "::") else socket.gethostname()
    joiner = ChannelJoin(runtime, f"{advertised}:{port}")
    if config.cluster is not None:
        try:
            await joiner.start(config.cluster)
        except Exception as exc:
            log.error("cannot join cluster %s: %s", config.cluster.cluster, exc)
            await server.stop(grace=0)
            if runtime.agent is not None:
                await runtime.agent.stop()
            await runtime.stop()
            raise SystemExit(f"qmgr: {config.name} cannot join cluster: {exc}") from None
    elif runtime.channels.defs.ready():
        problem = joiner.problem(runtime.channels.defs.cluster)
        if problem:
            await server.stop(grace=0)
            await runtime.stop()
            raise SystemExit(
                f"qmgr: {config.name} has cluster channels (DISPLAY CHANNEL) but {problem}"
            )
        await joiner.join()  # rejoin the cluster its channel definitions name
    sb_port, sb_ready, amqp = await _servicebus_port(runtime, config)
    if sb_port is None and runtime.servicebus is not None:
        await server.stop(grace=0)
        await runtime.stop()
        raise SystemExit(
            f"qmgr: {config.name} cannot listen on {config.servicebus_host}:"
            f"{config.servicebus_port} for Service Bus (--servicebus-port): {sb_ready}"
        )
    runtime.bridges.start()  # after the cluster join: what they publish is routed
    if on_ready is not None:
        on_ready(f"{host}:{port}", sb_ready.partition("=")[2])
    for sig in (signal.SIGTERM, signal.SIGINT):  # before READY: a stop right after it is clean
        loop.add_signal_handler(sig, stop.set)
    if clock_file and test_clock is not None:
        moved = ClockFile(Path(clock_file), test_clock, _clock_moved(runtime, amqp))
        loop.add_signal_handler(signal.SIGUSR2, moved.apply)
    settle_memory()
    print(f"READY name={config.name} addr={host}:{port}{sb_ready}", flush=True)
    await health_servicer.set(READY_SERVICE, health_pb2.HealthCheckResponse.SERVING)
    await stop.wait()
    log.info("stopping %s", config.name)
    await health_servicer.enter_graceful_shutdown()
    if runtime.agent is not None:
        await runtime.agent.stop()
    if sb_port is not None:
        await sb_port.stop()
    await server.stop(grace=2.0)
    await runtime.stop()
    if failures:
        raise SystemExit(f"qmgr: {config.name} stopped: {failures[0]}")
    print(f"STOPPED name={config.name}", file=sys.stderr, flush=True)


async def _servicebus_port(
    runtime: NodeRuntime, config: NodeConfig
) -> tuple[ServiceBusPort | None, str, AmqpServer | None]:
    """The Service Bus port of a node hosting a namespace, what the READY line says of it
    (`` sb=HOST:PORT``) and its AMQP server; (None, why, None) when it cannot listen;
    (None, "", None) without a namespace."""
    if runtime.servicebus is None:
        return None, "", None
    from qmgr.node.amqp_server import AmqpServer  # a namespace's host only
    from qmgr.node.sbport import ServiceBusPort, server_context

    tls = config.tls
    try:
        context = server_context(
            config.data_dir, tls.cert if tls else None, tls.key if tls else None
        )
        amqp = AmqpServer(runtime)
        sb = ServiceBusPort(
            runtime,
            config.servicebus_host,
            config.servicebus_port,
            context,
            amqp_handler=amqp.handle,
            amqp_close=amqp.close_all,
        )
        bound = await sb.start()
    except (OSError, ValueError) as exc:
        return None, str(exc), None
    host = config.servicebus_host
    shown = host if ":" not in host else f"[{host}]"
    return sb, f" sb={shown}:{bound}", amqp


def _clock_moved(runtime: NodeRuntime, amqp: AmqpServer | None) -> Callable[[], None]:
    """What runs when the clock was moved: the Service Bus timers, which are now due."""

    def moved() -> None:
        if runtime.servicebus is not None:
            runtime.servicebus.clock_moved()
        if amqp is not None:
            amqp.clock_moved()

    return moved


class ClockFile:
    """Tests only (``QMGR_TEST_CLOCK_FILE``): moves a running node's clock forward, so a test
    sees a lock, a time to live, a scheduled time or a token expire without waiting for it.
    The test writes the offset (seconds, a float: the total since the start, never less than
    before) to ``path`` and sends SIGUSR2; :meth:`apply` moves the clock, runs ``moved`` (what
    the moved clock has made due) and then writes the offset applied, or ``error: why``, to
    ``path.ack``, so the test knows when it took effect. Each file is replaced whole (written
    beside it, then renamed), so neither side reads one half written."""

    def __init__(self, path: Path, clock: OffsetClock, moved: Callable[[], None]) -> None:
        self.path = path
        self.ack = path.with_name(path.name + ".ack")
        self.clock = clock
        self.moved = moved

    def apply(self) -> str:
        """Move the clock as the file says; what was written to the ack file."""
        try:
            text = self.path.read_text(encoding="utf-8").strip()
            try:
                offset = float(text)
            except ValueError:
                raise ValueError(f"not a number of seconds: {text!r}") from None
            self.clock.move_to(offset)
            self.moved()
        except (OSError, ValueError) as exc:
            answer = f"error: {self.path}: {exc}"
            log.error("cannot move the clock: %s", answer)
        else:
            answer = repr(offset)
            log.warning("the clock was moved forward: now %s s ahead of the wall clock", answer)
        replace_file(self.ack, answer)
        return answer


def replace_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole: to a file beside it, then renamed over it."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


class ChannelJoin:
    """Starts the node's cluster agent: from the start options (``--cluster``), or from its
    CLUSRCVR and CLUSSDR channel definitions (at the DEFINE that completes them, or at start
    when they are stored)."""

    def __init__(self, runtime: NodeRuntime, listening: str) -> None:
        self.rt = runtime
        self.listening = listening
        runtime.channels.join_problem = self.problem
        runtime.channels.join = self.join

    def _address(self) -> str:
        """The address the node advertises: its CLUSRCVR's CONNAME, else where it listens."""
        receiver = self.rt.channels.defs.receiver()
        return receiver.conname if receiver is not None and receiver.conname else self.listening

    def problem(self, cluster: str) -> str:
        try:
            channel_settings(self.rt.config, cluster, ())
        except ConfigError as exc:
            return f"this queue manager cannot join cluster {cluster}: {exc}"
        return ""

    async def start(self, settings: ClusterSettings, background: bool = False) -> None:
        from cluster.records import WorkloadAttrs
        from qmgr.node.cluster.agent import ClusterAgent

        defs = self.rt.channels.defs
        start_join = settings.join
        if not settings.full_repository:
            settings = replace(
                settings, join=tuple(dict.fromkeys([*settings.join, *defs.join_addresses()]))
            )
        agent = ClusterAgent(self.rt, settings, self._address())
        agent.start_join = start_join
        receiver = defs.receiver()
        if receiver is not None:
            agent.clusrcvr = {
                "CHANNEL": receiver.name,
                "CONNAME": receiver.conname,
                "DESCR": receiver.descr,
            }
            agent.workload = WorkloadAttrs().with_changes(receiver.workload)
        self.rt.agent = agent
        await agent.start(background)

    async def join(self) -> None:
        defs = self.rt.channels.defs
        settings = channel_settings(self.rt.config, defs.cluster, ())  # joins: its CLUSSDRs
        log.info(
            "%s joins cluster %s through %s",
            self.rt.config.name,
            defs.cluster,
            defs.join_addresses(),
        )
        try:
            await self.start(settings, background=True)
        except Exception:
            log.exception("cannot join cluster %s", defs.cluster)
            if self.rt.agent is not None:
                await self.rt.agent.stop()
            self.rt.agent = None


def _users(config: NodeConfig) -> Users | None:
    """The users of ``--auth`` (a file that cannot be used stops the start); without it, a
    warning when applications beyond this machine can connect unauthenticated."""
    from qmgr.rpc.auth import load_users

    if config.auth_file is not None:
        try:
            return load_users(config.auth_file)
        except UsersFileError as exc:
            raise SystemExit(f"qmgr: {config.name}: cannot use the users file: {exc}") from None
    if not is_loopback(config.host):
        log.warning(
            "%s listens on %s without --auth: anyone who can reach the port may put, get, "
            "publish, subscribe and run MQSC",
            config.name,
            config.host,
        )
    return None


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def server_credentials(tls: TlsSettings) -> grpc.ServerCredentials:
    """TLS for the node's port; with a CA, clients must show a certificate it issued."""
    try:
        pair = (tls.key.read_bytes(), tls.cert.read_bytes())
        ca = tls.ca.read_bytes() if tls.ca is not None else None
    except OSError as exc:
        raise SystemExit(f"qmgr: cannot read TLS files: {exc}") from None
    return grpc.ssl_server_credentials([pair], root_certificates=ca, require_client_auth=bool(ca))


def _listen(server: grpc.aio.Server, config: NodeConfig) -> int:
    if config.tls is None:
        return server.add_insecure_port(f"{config.host}:{config.port}")
    return server.add_secure_port(f"{config.host}:{config.port}", server_credentials(config.tls))


def run(config: NodeConfig, on_ready: Callable[[str, str], None] | None = None) -> None:
    asyncio.run(serve(config, on_ready))
