"""The compose cluster under a real Docker engine: the node image built without a registry
(compose/build-image: a debootstrap base, the project's wheels installed offline), the compose
files generated into a temporary directory (secrets there too), `docker-compose up` with every
port published on loopback, every service healthy through the gRPC health service, a short
load through the published ports (MQ from PUB1 to a durable subscription on SUB1 and through
the bridge on SB1 into Service Bus; the real azure-servicebus SDK against SB1), a restart of a
container that keeps its durable state, the Spark load job from this machine through the
published ports and from the compose file's load service (its image built offline too) on the
nodes by service name, with a node's container killed and started again through the Docker
engine, and a teardown that leaves nothing behind.

Skips (saying why) where no engine answers and none can be started, or where there is no
compose command; it installs nothing."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytest.importorskip("azure.servicebus")

from azure.servicebus import ServiceBusClient, ServiceBusMessage  # noqa: E402

from qmgr.client import QueueManagerClient  # noqa: E402
from qmgr.launcher.cluster_start import holds_proxies, knows_topics  # noqa: E402
from qmgr.launcher.compose import published_ports  # noqa: E402
from qmgr.launcher.health import check  # noqa: E402
from qmgr.launcher.poll import wait_for  # noqa: E402
from qmgr.launcher.topology import load_topology  # noqa: E402
from qmgr.node.ready import READY_SERVICE  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "compose"
IMAGE = "qmgr:local"
LOAD_IMAGE = "qmgr-load:local"
BASE_IMAGE = "qmgr-base:bookworm"
NODES = [n.name for n in load_topology(COMPOSE / "cluster.toml").nodes]
TOPIC = "Prices/Fruit/Apple"
COMPOSE_SCENARIOS = REPO / "scenarios" / "compose"  # for the load service, on this cluster
# messages per publisher in the load runs (4 publishers each): enough for a kill mid-stream;
# the volume runs are the soak tests' and bench/'s
LOAD_MESSAGES = 25


def _run(args: list[str], timeout: float, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # type: ignore[call-overload]
        args, capture_output=True, text=True, timeout=timeout, check=False, **kwargs
    )


def _engine_answers() -> bool:
    try:
        return _run(["docker", "info", "--format", "{{.ServerVersion}}"], 30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A Docker engine that answers: the running one, or `dockerd` started here (as root) and
    stopped at the end."""
    if shutil.which("docker") is None:
        pytest.skip("no docker command: install Debian's docker.io to run the compose test")
    if _engine_answers():
        yield
        return
    dockerd = shutil.which("dockerd")
    if dockerd is None or os.geteuid() != 0:
        pytest.skip(
            "no Docker engine answers and none can be started here "
            f"({'no dockerd' if dockerd is None else 'not root'})"
        )
    log = tmp_path_factory.mktemp("dockerd") / "dockerd.log"
    with log.open("w") as out:
        proc = subprocess.Popen([dockerd], stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not _engine_answers():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.terminate()
            proc.wait(30)
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-5:])
            pytest.skip(f"no Docker engine answers and dockerd could not start:\n{tail}")
        time.sleep(1)
    try:
        yield
    finally:
        proc.terminate()
        proc.wait(60)


@pytest.fixture(scope="module")
def compose_command(engine: None) -> list[str]:
    """`docker compose` (v2) or `docker-compose` (1.29), whichever works here."""
    for command in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(command[0]) is None:
            continue
        try:
            if _run([*command, "version"], 30).returncode == 0:
                return command
        except (OSError, subprocess.TimeoutExpired):
            continue
    pytest.skip("no compose command: neither `docker compose` nor `docker-compose` works")


@pytest.fixture(scope="module")
def image(engine: None) -> str:
    """qmgr:local built offline by compose/build-image (the debootstrap base is made once per
    machine and kept)."""
    has_base = _run(["docker", "image", "inspect", BASE_IMAGE], 30).returncode == 0
    if not has_base and shutil.which("debootstrap") is None:
        pytest.skip(f"no {BASE_IMAGE} image and no debootstrap to make it without a registry")
    env = {**os.environ, "PYTHON": sys.executable}
    built = _run([str(COMPOSE / "build-image"), IMAGE], 900, env=env)
    assert built.returncode == 0, built.stdout + built.stderr
    return IMAGE


@dataclass
class Build:
    """A `compose/build-image` run in the background, its output in ``log``."""

    proc: subprocess.Popen[bytes]
    log: Path

    def result(self, timeout: float) -> str:
        """Wait for it; its output, asserting that it succeeded."""
        returncode = self.proc.wait(timeout)
        output = self.log.read_text(errors="replace")
        assert returncode == 0, output
        return output


@pytest.fixture(scope="module")
def load_build(image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Build]:
    """qmgr-load:local built offline by compose/build-image --load (the node image again, from
    Docker's build cache, then Debian's JRE and the [spark] extra's packages, cached too while
    their wheels stay the same), started in the background as soon as the node image is
    there and the cluster healthy: it runs during the tests before the load service's run,
    which mostly wait on the containers."""
    env = {**os.environ, "PYTHON": sys.executable}
    log = tmp_path_factory.mktemp("load-build") / "build-image.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(COMPOSE / "build-image"), "--load", image, LOAD_IMAGE],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    build = Build(proc, log)
    try:
        yield build
    finally:
        if proc.poll() is None:
            proc.terminate()  # its trap removes the wheels it made
            proc.wait(60)


@pytest.fixture(scope="module")
def load_image(load_build: Build) -> str:
    load_build.result(900)
    return LOAD_IMAGE


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@dataclass
class ComposeCluster:
    command: list[str]
    directory: Path
    project: str
    env: dict[str, str]
    ports: dict[str, int] = field(default_factory=dict)  # node -> published gRPC port
    sb_port: int = 0  # SB1's published Service Bus port

    def compose(self, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        return _run(
            [*self.command, "-p", self.project, *args],
            timeout,
            cwd=self.directory,
            env=self.env,
        )

    def address(self, node: str) -> str:
        return f"127.0.0.1:{self.ports[node]}"

    def client(self, node: str) -> QueueManagerClient:
        return QueueManagerClient(self.address(node), timeout=20)

    def connection_string(self) -> str:
        host = "localhost" if self.sb_port == 5672 else f"localhost:{self.sb_port}"
        return (
            f"Endpoint=sb://{host};SharedAccessKeyName=RootManageSharedAccessKey;"
            "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"
        )

    def containers(self, *filters: str) -> list[dict[str, str]]:
        """The project's containers (all states) as docker ps JSON lines."""
        out = _run(
            [
                "docker",
                "ps",
                "-a",
                "--filter",
                f"label=com.docker.compose.project={self.project}",
                *(x for f in filters for x in ("--filter", f)),
                "--format",
                "{{json .}}",
            ],
            60,
        )
        assert out.returncode == 0, out.stderr
        return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]

    def state(self, service: str) -> dict[str, object]:
        return self.states()[service]

    def states(self) -> dict[str, dict[str, object]]:
        """The State of every container of the project by service, from one `docker inspect`
        (a service with several containers, as a `run` of load, is not among them)."""
        ids = [c["ID"] for c in self.containers()]
        out = _run(
            ["docker", "inspect", "--format", "{{json .Config.Labels}}\t{{json .State}}", *ids], 60
        )
        assert out.returncode == 0, out.stderr
        services: Counter[str] = Counter()
        states: dict[str, dict[str, object]] = {}
        for line in out.stdout.splitlines():
            labels, state = line.split("\t")
            service = json.loads(labels)["com.docker.compose.service"]
            services[service] += 1
            states[service] = json.loads(state)
        return {k: v for k, v in states.items() if services[k] == 1}

    def wait_healthy(self, services: list[str], timeout: float = 180) -> None:
        """Every node service healthy (its healthcheck: `qmgr health`) and mqsc-init exited 0."""
        deadline = time.monotonic() + timeout
        while True:
            pending = []
            states = self.states()
            for service in services:
                state = states[service]
                health = state.get("Health") or {}
                assert isinstance(health, dict)
                if health.get("Status") != "healthy":
                    pending.append(f"{service}: {state.get('Status')} {health.get('Status')}")
            init = states["mqsc-init"]
            if init.get("Status") == "exited":
                assert init.get("ExitCode") == 0, self.compose("logs", "mqsc-init").stdout
            else:
                pending.append(f"mqsc-init: {init.get('Status')}")
            if not pending:
                return
            if time.monotonic() > deadline:
                logs = self.compose("logs", "--tail", "20").stdout
                raise AssertionError(f"not healthy: {pending}\n{logs}")
            time.sleep(1)


@pytest.fixture(scope="module")
def cluster(
    compose_command: list[str],
    image: str,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[ComposeCluster]:
    directory = tmp_path_factory.mktemp("compose") / "compose"
    directory.mkdir()
    shutil.copy(COMPOSE / "cluster.toml", directory / "cluster.toml")
    shutil.copytree(COMPOSE / "servicebus", directory / "servicebus")
    # the load service mounts ../scenarios, as in the repository
    shutil.copytree(COMPOSE_SCENARIOS, directory.parent / "scenarios" / COMPOSE_SCENARIOS.name)
    made = _run(
        [sys.executable, "-m", "qmgr.cli.main", "cluster", "compose", "cluster.toml"],
        60,
        cwd=directory,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    assert (directory / "cluster.env").stat().st_mode & 0o777 == 0o600
    project = f"qmgrtest{uuid.uuid4().hex[:10]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("QMGR_")}
    env["COMPOSE_PROJECT_NAME"] = project
    ports: dict[str, int] = {}
    sb_port = 0
    for published in published_ports(load_topology(directory / "cluster.toml")):
        if published.servicebus:
            # 5672, as Microsoft's emulator, when it is free here
            port = published.port if _port_free(published.port) else _free_port()
            sb_port = port
        else:
            port = _free_port()
            ports[published.node] = port
        env[published.variable] = str(port)
    cl = ComposeCluster(compose_command, directory, project, env, ports, sb_port)
    try:
        up = cl.compose("up", "-d", "--no-build")
        assert up.returncode == 0, up.stdout + up.stderr
        cl.wait_healthy(NODES)
        if any("load_image" in getattr(i, "fixturenames", ()) for i in request.session.items):
            request.getfixturevalue("load_build")  # builds during the tests before its use
        yield cl
    finally:
        down = cl.compose("down", "-v", "--remove-orphans", "--timeout", "20")
        left = {
            kind: _run(
                [
                    "docker",
                    kind,
                    "ls",
                    "-q",
                    "--filter",
                    f"label=com.docker.compose.project={project}",
                ],
                60,
            ).stdout.split()
            for kind in ("volume", "network")
        }
        left["container"] = [c["ID"] for c in cl.containers()]
        assert down.returncode == 0, down.stdout + down.stderr
        assert left == {"volume": [], "network": [], "container": []}


def _receive_mq(c: QueueManagerClient, name: str, count: int) -> list[bytes]:
    """Resume durable subscription ``name`` on Prices/# and take ``count`` messages, then
    look once more for anything extra."""
    sub = c.subscribe("Prices/#", name=name, durable=True)
    try:
        bodies: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(bodies) < count and time.monotonic() < deadline:
            bodies += [m.body for m in sub.receive_batch(timeout=2)]
        bodies += [m.body for m in sub.receive_batch(timeout=2)]
    finally:
        sub.close()
    return bodies


def _receive_sb(client: ServiceBusClient, count: int, **entity: str) -> list[str]:
    receiver = (
        client.get_queue_receiver(entity["queue"], max_wait_time=3)
        if "queue" in entity
        else client.get_subscription_receiver(
            entity["topic"], entity["subscription"], max_wait_time=3
        )
    )
    bodies: list[str] = []
    with receiver:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            batch = receiver.receive_messages(max_message_count=100, max_wait_time=3)
            for msg in batch:
                bodies.append(b"".join(msg.body).decode())
                receiver.complete_message(msg)
            if not batch and len(bodies) >= count:
                break
    return bodies


def _exactly_once(received: list[bytes] | list[str], sent: list[str]) -> None:
    counts = Counter(x.decode() if isinstance(x, bytes) else x for x in received)
    assert sorted(counts) == sorted(sent), "lost or unexpected messages"
    assert max(counts.values()) == 1, [k for k, v in counts.items() if v > 1]


def test_every_node_is_healthy_ready_and_reachable_on_its_published_port(
    cluster: ComposeCluster,
) -> None:
    for node in NODES:
        assert check(cluster.address(node), READY_SERVICE) == "SERVING", node
    with cluster.client("FR1") as c:
        members = {r.attrs.get("CLUSQMGR") for r in c.mqsc("DISPLAY CLUSQMGR(*)")}
    assert set(NODES) <= members
    cli = _run(
        [sys.executable, "-m", "qmgr.cli.main", "runmqsc", cluster.address("SB1")],
        60,
        input="DISPLAY BRIDGE(PRICES.SB) ALL\n",
    )
    assert cli.returncode == 0, cli.stderr
    assert "STATUS(RUNNING)" in cli.stdout and "SBENTITY(prices)" in cli.stdout
    # a service outside the profile 'load' was not started
    assert not cluster.containers("label=com.docker.compose.service=load")


def test_mq_publications_reach_the_subscriber_and_servicebus_once(
    cluster: ComposeCluster,
) -> None:
    """Persistent publications on PUB1 go through the topic hosts of Prices (HOSTA1, HOSTA2)
    to a durable subscription on SUB1 and to the bridge on SB1, which sends them to the
    Service Bus topic 'prices'; each arrives once at both ends."""
    with cluster.client("SUB1") as c:
        c.create_subscription("Prices/#", name="COMPOSE.SUB")
    want = {("SUB1", "Prices/#"), ("SB1", "Prices/#")}
    for host in ("HOSTA1", "HOSTA2"):
        with cluster.client(host) as c:
            wait_for(holds_proxies(c, want), 60, 0.5, what=f"proxies on {host}", retry=Exception)
    with cluster.client("PUB1") as c:
        wait_for(
            knows_topics(c, {("PRICES", "HOSTA1"), ("PRICES", "HOSTA2")}),
            60,
            0.5,
            what="PRICES known on PUB1",
            retry=Exception,
        )
        sent = [f"mq-{i}" for i in range(200)]
        for start in range(0, len(sent), 50):
            for body in sent[start : start + 50]:
                c.publish(TOPIC, body, persistent=True)
    with cluster.client("SUB1") as c:
        _exactly_once(_receive_mq(c, "COMPOSE.SUB", len(sent)), sent)
    with ServiceBusClient.from_connection_string(cluster.connection_string()) as sb:
        _exactly_once(_receive_sb(sb, len(sent), topic="prices", subscription="all"), sent)


def test_the_sdk_sends_and_receives_through_the_published_servicebus_port(
    cluster: ComposeCluster,
) -> None:
    sent = [f"sb-{i}" for i in range(100)]
    with ServiceBusClient.from_connection_string(cluster.connection_string()) as sb:
        with sb.get_queue_sender("queue.1") as sender:
            sender.send_messages([ServiceBusMessage(body) for body in sent])
        _exactly_once(_receive_sb(sb, len(sent), queue="queue.1"), sent)


def test_restarted_containers_come_back_with_their_durable_state(cluster: ComposeCluster) -> None:
    """`docker-compose restart`: SUB1's durable subscription keeps the persistent publications
    it holds, SB1 its Service Bus queue's messages and its bridge."""
    with cluster.client("PUB1") as c:
        kept_mq = [f"kept-mq-{i}" for i in range(20)]
        for body in kept_mq:
            c.publish(TOPIC, body, persistent=True)
    with cluster.client("SUB1") as c:
        queue = c.create_subscription("Prices/#", name="COMPOSE.SUB")  # resumed: its queue
        wait_for(
            lambda: _depth(c, queue) == len(kept_mq),
            60,
            0.5,
            what="publications held by SUB1's subscription",
            retry=Exception,
        )
    kept_sb = [f"kept-sb-{i}" for i in range(20)]
    with ServiceBusClient.from_connection_string(cluster.connection_string()) as sb:
        with sb.get_queue_sender("queue.1") as sender:
            sender.send_messages([ServiceBusMessage(body) for body in kept_sb])
        # the bridge moved the 20 publications to Service Bus too: drain them before
        _exactly_once(_receive_sb(sb, len(kept_mq), topic="prices", subscription="all"), kept_mq)
    before = {s: cluster.state(s)["StartedAt"] for s in ("SUB1", "SB1")}
    restarted = cluster.compose("restart", "SUB1", "SB1")
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    after = {s: cluster.state(s)["StartedAt"] for s in ("SUB1", "SB1")}
    assert all(after[s] != before[s] for s in before)
    cluster.wait_healthy(NODES)
    with cluster.client("SUB1") as c:
        _exactly_once(_receive_mq(c, "COMPOSE.SUB", len(kept_mq)), kept_mq)
    with cluster.client("SB1") as c:
        (bridge,) = c.mqsc("DISPLAY BRIDGE(PRICES.SB) ALL")
    assert bridge.attrs["SBENTITY"] == "prices" and bridge.attrs["DIRECTION"] == "TOSB"
    with ServiceBusClient.from_connection_string(cluster.connection_string()) as sb:
        _exactly_once(_receive_sb(sb, len(kept_sb), queue="queue.1"), kept_sb)


def test_a_node_killed_with_sigkill_loses_and_duplicates_nothing(cluster: ComposeCluster) -> None:
    """kill -9 of SUB1's container while its durable subscription holds persistent
    publications; more are published while it is down (the topic hosts keep them for it).
    Started again, it delivers every one of them exactly once."""
    before = [f"before-kill-{i}" for i in range(30)]
    with cluster.client("PUB1") as c:
        for body in before:
            c.publish(TOPIC, body, persistent=True)
    with cluster.client("SUB1") as c:
        queue = c.create_subscription("Prices/#", name="COMPOSE.SUB")
        wait_for(
            lambda: _depth(c, queue) == len(before),
            60,
            0.5,
            what="publications held by SUB1",
            retry=Exception,
        )
    (container,) = cluster.containers("label=com.docker.compose.service=SUB1")
    killed = _run(["docker", "kill", "--signal", "KILL", container["ID"]], 60)
    assert killed.returncode == 0, killed.stderr
    wait_for(
        lambda: check(cluster.address("SUB1"), READY_SERVICE) != "SERVING",
        30,
        0.5,
        what="SUB1 down",
        retry=Exception,
    )
    during = [f"while-down-{i}" for i in range(30)]
    with cluster.client("PUB1") as c:
        for body in during:
            c.publish(TOPIC, body, persistent=True)
    started = cluster.compose("start", "SUB1")
    assert started.returncode == 0, started.stdout + started.stderr
    cluster.wait_healthy(NODES)
    with cluster.client("SUB1") as c:
        _exactly_once(_receive_mq(c, "COMPOSE.SUB", len(before + during)), before + during)
    with ServiceBusClient.from_connection_string(cluster.connection_string()) as sb:
        got = _receive_sb(sb, len(before + during), topic="prices", subscription="all")
    _exactly_once(got, before + during)  # SB1's bridge was not affected


def _depth(c: QueueManagerClient, queue: str) -> int:
    (record,) = c.mqsc(f"DISPLAY QLOCAL({queue}) CURDEPTH")
    return int(record.attrs["CURDEPTH"])


def test_the_spark_load_job_runs_on_the_compose_cluster(
    cluster: ComposeCluster, tmp_path: Path
) -> None:
    """`qmgr load --compose` on this machine, against the containers through their published
    ports: the demo's two-hosts scenario (MQ, the bridge into Service Bus sessions, the
    sequenced helper), nothing acknowledged lost or duplicated. (Order kept through one topic
    host, the demo's one-host scenario, is the load service's orders scenario below: the same
    cluster, topic host and check; each scenario is a minute or more of Spark here.)"""
    pytest.importorskip("pyspark")
    scenarios = [REPO / "scenarios" / "demo" / "2-prices-two-hosts.toml"]
    out = tmp_path / "report"
    done = _run(
        [
            sys.executable,
            "-m",
            "qmgr.cli.main",
            "load",
            *map(str, scenarios),
            "--compose",
            "--messages",
            str(LOAD_MESSAGES),
            "--out",
            str(out),
        ],
        600,
        cwd=REPO,
        env=cluster.env,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == {"prices-two-hosts"}
    totals = {
        (name, row["subscriber"]): row
        for name, data in summary.items()
        for row in data["metrics"]
        if row["publisher"] == "*"
    }
    subscribers = {key[1] for key in totals}
    assert {"PRICES", "SB-SESSIONS", "SB-SEQUENCED"} <= subscribers
    for key, row in totals.items():
        if key[1] == "*":
            continue
        assert row["sent"] == row["acknowledged"] == 4 * LOAD_MESSAGES, key
        assert (row["lost"], row["duplicated"]) == (0, 0), key
        assert row["received"] >= row["sent"], key
    assert totals[("prices-two-hosts", "SB-SEQUENCED")]["out_of_order"] == 0


def test_the_load_service_runs_the_job_on_the_compose_nodes_and_kills_one(
    cluster: ComposeCluster, load_image: str
) -> None:
    """`docker-compose --profile load run --rm load qmgr load ... --compose`: Spark in the load
    service's container drives the compose nodes by service name. Orders through HOSTB1, then
    Prices through HOSTA1 and HOSTA2 with HOSTA1's container killed at 40% and started again
    through the engine's socket: each message once, the report in the volume load-reports."""
    before = cluster.state("HOSTA1")["StartedAt"]
    out = "/reports/compose-test"
    done = cluster.compose(
        "--profile",
        "load",
        "run",
        "--rm",
        "-T",
        "load",
        "qmgr",
        "load",
        *(f"/scenarios/compose/{f}.toml" for f in ("orders", "kill-host")),
        "--compose",
        "--messages",
        str(LOAD_MESSAGES),
        "--out",
        out,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert cluster.state("HOSTA1")["StartedAt"] != before  # killed and started again
    cluster.wait_healthy(NODES)
    read = (
        "import json, os; print(json.dumps({'files': sorted(os.listdir('{out}')), "
        "'summary': json.load(open('{out}/summary.json'))}))"
    ).replace("{out}", out)
    shown = cluster.compose(
        "--profile", "load", "run", "--rm", "--no-deps", "-T", "load", "python3", "-c", read
    )
    assert shown.returncode == 0, shown.stdout + shown.stderr
    report = json.loads(shown.stdout.strip().splitlines()[-1])
    assert {"summary.json", "summary.csv", "compose-orders", "compose-kill-host"} <= set(
        report["files"]
    )
    summary = report["summary"]
    assert set(summary) == {"compose-orders", "compose-kill-host"}
    assert summary["compose-orders"]["meta"]["killed"] is None
    assert summary["compose-kill-host"]["meta"]["killed"] == "HOSTA1"
    for name, data in summary.items():  # one subscriber each
        (total,) = [r for r in data["metrics"] if r["publisher"] == "*" and r["subscriber"] != "*"]
        assert total["sent"] == total["acknowledged"] == 4 * LOAD_MESSAGES, name
        assert (total["lost"], total["duplicated"]) == (0, 0), name
        assert total["received"] >= total["sent"], name
        if name == "compose-orders":
            assert total["out_of_order"] == 0  # one topic host keeps order
