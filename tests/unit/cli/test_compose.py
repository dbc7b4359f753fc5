"""docker compose generation from a topology: the committed compose/ files are what the default
topology generates, the YAML reads back as the data it was written from, and the services
carry the node flags of the topology."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from qmgr.cli.cluster import cluster
from qmgr.launcher.cluster_launch import node_args
from qmgr.launcher.compose import (
    CONFIG_MOUNT,
    DOCKER_SOCKET,
    ENV_FILE,
    IMAGE_UID,
    IN_NETWORK_VAR,
    INIT_SERVICE,
    LOAD_SCENARIOS,
    LOAD_SERVICE,
    MEMBER_ENV_FILE,
    compose_document,
    compose_files,
    published_ports,
    to_yaml,
)
from qmgr.launcher.topology import (
    NodeAddresses,
    TopologyError,
    load_topology,
    mqsc_commands,
    parse_topology,
    plan_addresses,
)
from qmgr.security.files import write_private
from qmgr.security.keys import member_secret, parse_secret

REPO = Path(__file__).resolve().parents[3]
COMPOSE = REPO / "compose"
NODES = ["FR1", "FR2", "FR3", "HOSTA1", "HOSTA2", "HOSTB1", "PUB1", "SUB1", "SUB2", "SB1"]
WITH_MQSC = ["HOSTA1", "HOSTA2", "HOSTB1", "SB1"]


def committed_topology() -> Any:
    return load_topology(COMPOSE / "cluster.toml")


def read_yaml(text: str) -> Any:
    """The YAML, by PyYAML when it is installed, else by a reader for the block subset that
    to_yaml writes (mappings, sequences of scalars, JSON-quoted strings, ints, booleans)."""
    try:
        import yaml
    except ImportError:
        return _SubsetReader(text).read()
    return yaml.safe_load(text)


class _SubsetReader:
    def __init__(self, text: str) -> None:
        self.lines = [
            (len(line) - len(line.lstrip(" ")), line.strip())
            for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")
        ]
        self.i = 0

    def read(self) -> Any:
        value = self.block(0)
        assert self.i == len(self.lines), f"unread line {self.lines[self.i]}"
        return value

    def block(self, indent: int) -> Any:
        if self.lines[self.i][1].startswith("- "):
            items = []
            while self.i < len(self.lines) and self.lines[self.i][0] == indent:
                content = self.lines[self.i][1]
                assert content.startswith("- "), content
                items.append(self.scalar(content[2:]))
                self.i += 1
            return items
        mapping: dict[str, Any] = {}
        while self.i < len(self.lines) and self.lines[self.i][0] == indent:
            content = self.lines[self.i][1]
            key, sep, rest = self.split_key(content)
            assert sep, f"not a mapping entry: {content}"
            assert key not in mapping, f"duplicate key {key}"
            self.i += 1
            if rest:
                mapping[key] = self.scalar(rest)
            else:
                deeper = self.lines[self.i][0]
                assert deeper > indent or self.lines[self.i][1].startswith("- ")
                mapping[key] = self.block(deeper)
        assert self.i == len(self.lines) or self.lines[self.i][0] < indent, self.lines[self.i]
        return mapping

    @staticmethod
    def split_key(content: str) -> tuple[str, str, str]:
        if content.startswith('"'):
            end = json.JSONDecoder().raw_decode(content)[1]
            key, rest = json.loads(content[:end]), content[end:]
            assert rest.startswith(":")
            return key, ":", rest[1:].strip()
        key, sep, rest = content.partition(":")
        return key, sep, rest.strip()

    @staticmethod
    def scalar(text: str) -> Any:
        if text == "{}":
            return {}
        if text == "[]":
            return []
        if text in ("true", "false"):
            return text == "true"
        if text.startswith('"'):
            return json.loads(text)
        return int(text)


def test_committed_compose_files_are_what_the_topology_generates() -> None:
    files = compose_files(committed_topology(), "cluster.toml")
    for rel, text in files.items():
        assert (COMPOSE / rel).read_text() == text, (
            f"compose/{rel} is stale: regenerate with `qmgr cluster compose compose/cluster.toml`"
        )
    committed = {f"init/{p.name}" for p in (COMPOSE / "init").iterdir()}
    assert committed == {rel for rel in files if rel.startswith("init/")}


def test_compose_command_writes_the_same_files(tmp_path: Path) -> None:
    shutil.copy(COMPOSE / "cluster.toml", tmp_path / "cluster.toml")
    shutil.copytree(COMPOSE / "servicebus", tmp_path / "servicebus")
    result = CliRunner().invoke(cluster, ["compose", str(tmp_path / "cluster.toml")])
    assert result.exit_code == 0, result.output
    for rel in (
        "docker-compose.yml",
        "servicebus/SB1.json",
        *(f"init/{n}.mqsc" for n in WITH_MQSC),
    ):
        assert (tmp_path / rel).read_text() == (COMPOSE / rel).read_text()
        assert f"wrote {tmp_path / rel}" in result.output


def test_compose_command_out_dir_and_built_in_default(tmp_path: Path) -> None:
    result = CliRunner().invoke(cluster, ["compose", "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "docker-compose.yml").is_file()
    assert sorted(p.name for p in (tmp_path / "out" / "init").iterdir()) == [
        f"{n}.mqsc" for n in WITH_MQSC
    ]
    doc = read_yaml((tmp_path / "out" / "docker-compose.yml").read_text())
    (mount,) = [v for v in doc["services"]["SB1"]["volumes"] if v.endswith(":ro")]
    copy = tmp_path / "out" / mount.split(":")[0]
    shipped = load_topology(None).node("SB1").servicebus_config
    assert shipped is not None and copy.read_bytes() == shipped.read_bytes()


def test_the_yaml_reads_back_as_the_document() -> None:
    text = (COMPOSE / "docker-compose.yml").read_text()
    assert read_yaml(text) == compose_document(committed_topology())


def test_services_follow_the_topology() -> None:
    doc = read_yaml((COMPOSE / "docker-compose.yml").read_text())
    services = doc["services"]
    nodes = NODES
    assert list(services) == [*nodes, INIT_SERVICE, LOAD_SERVICE]
    for name in nodes:
        svc = services[name]
        assert svc["hostname"] == name
        assert svc["volumes"][0] == f"{name}-data:/data"
        assert f"{name}-data" in doc["volumes"]
        command = svc["command"]
        assert command[:8] == [
            "qmgr",
            "start",
            "--name",
            name,
            "--listen",
            "0.0.0.0:7000",
            "--data-dir",
            "/data",
        ]
        assert command[8:10] == ["--cluster", "DEMO"]
        if name.startswith("FR"):
            assert command[10:] == [
                "--full-repository",
                "--raft",
                f"{name}:7100",
                "--raft-peers",
                "FR1:7100,FR2:7100,FR3:7100",
            ]
            assert "depends_on" not in svc  # full repositories start together
        else:
            assert command[10:12] == ["--join", "FR1:7000,FR2:7000,FR3:7000"]
            assert svc["depends_on"] == {
                n: {"condition": "service_healthy"} for n in ("FR1", "FR2", "FR3")
            }
        # the gRPC health service, asked by `qmgr health` (SERVING once the node is ready)
        assert svc["healthcheck"]["test"] == [
            "CMD",
            "python3",
            "-m",
            "qmgr.cli.health",
            "--quiet",
            "127.0.0.1:7000",
        ]
    sb1 = services["SB1"]
    assert sb1["command"][12:] == [
        "--servicebus-config",
        CONFIG_MOUNT,
        "--servicebus-port",
        "0.0.0.0:5672",
    ]
    assert sb1["volumes"] == ["SB1-data:/data", f"./servicebus/SB1.json:{CONFIG_MOUNT}:ro"]
    init = services[INIT_SERVICE]
    assert init["depends_on"] == {n: {"condition": "service_healthy"} for n in nodes}
    assert "./init:/init:ro" in init["volumes"]
    script = init["command"][2]
    for host in WITH_MQSC:
        assert f"qmgr runmqsc {host}:7000 -f /init/{host}.mqsc" in script
    assert [script.index(f"/init/{n}.mqsc") for n in WITH_MQSC] == sorted(
        script.index(f"/init/{n}.mqsc") for n in WITH_MQSC
    )
    assert "PUB1" not in script and "SUB1" not in script


def test_init_scripts_hold_each_nodes_mqsc() -> None:
    assert (COMPOSE / "init" / "HOSTB1.mqsc").read_text().splitlines()[1:] == [
        "DEFINE TOPIC(ORDERS) TOPICSTR('Orders') CLUSTER(DEMO) CLROUTE(TOPICHOST)"
    ]
    (bridge,) = (COMPOSE / "init" / "SB1.mqsc").read_text().splitlines()[1:]
    assert bridge.startswith("DEFINE BRIDGE(PRICES.SB) DIRECTION(TOSB) TOPICSTR('Prices/#')")


def _container_plan(names: list[str], frs: set[str]) -> dict[str, NodeAddresses]:
    return {n: NodeAddresses(f"{n}:7000", f"{n}:7100" if n in frs else None) for n in names}


def test_the_compose_file_and_the_local_launcher_agree() -> None:
    """Every container runs `qmgr` with the arguments `qmgr cluster up` gives that node (its
    addresses being the containers'), plus the data volume, with the Config.json and the
    Service Bus port where the container has them; init files hold the MQSC `cluster up`
    runs, in the same node order."""
    topology = committed_topology()
    doc = read_yaml((COMPOSE / "docker-compose.yml").read_text())
    plan = _container_plan(NODES, {n.name for n in topology.full_repositories})
    for spec in topology.nodes:
        launcher = ["qmgr", *node_args(topology, spec, plan)]
        command = list(doc["services"][spec.name]["command"])
        assert command[command.index("--data-dir") + 1] == "/data"
        del command[command.index("--data-dir") : command.index("--data-dir") + 2]
        assert launcher[launcher.index("--listen") + 1] == f"{spec.name}:7000"
        assert command[command.index("--listen") + 1] == "0.0.0.0:7000"
        launcher[launcher.index("--listen") + 1] = "0.0.0.0:7000"
        if spec.servicebus_config is not None:
            i = launcher.index("--servicebus-config") + 1
            assert launcher[i] == str(COMPOSE / "servicebus" / "SB1.json")
            launcher[i] = CONFIG_MOUNT
        if spec.hosts_servicebus:
            i = launcher.index("--servicebus-port") + 1
            assert launcher[i] == "127.0.0.1:0"
            launcher[i] = "0.0.0.0:5672"
        assert command == launcher, spec.name
        init = COMPOSE / "init" / f"{spec.name}.mqsc"
        if mqsc_commands(spec):
            assert init.read_text().splitlines()[1:] == mqsc_commands(spec)
        else:
            assert not init.exists()


def test_published_ports_are_the_ports_the_launcher_gives_with_a_base_port() -> None:
    """With base_port, `qmgr runmqsc localhost:PORT` reaches the same node whether the
    cluster runs as processes (`qmgr cluster up`) or as containers."""
    text = (
        (COMPOSE / "cluster.toml")
        .read_text()
        .replace('cluster = "DEMO"', 'cluster = "DEMO"\nbase_port = 21000')
    )
    topology = parse_topology(text, "t", COMPOSE)
    plan = plan_addresses(topology, "127.0.0.1", lambda n: [])
    doc = compose_document(topology)
    for spec in topology.nodes:
        port = plan[spec.name].listen.rsplit(":", 1)[1]
        mapping = doc["services"][spec.name]["ports"][0]
        assert (
            mapping
            == f"${{QMGR_PUBLISH_ADDRESS:-127.0.0.1}}:${{QMGR_PORT_{spec.name}:-{port}}}:7000"
        )
    assert doc["services"]["SB1"]["ports"][1] == (
        "${QMGR_PUBLISH_ADDRESS:-127.0.0.1}:${QMGR_SB_PORT_SB1:-5672}:5672"
    )


def test_without_a_base_port_nodes_publish_from_17000_and_namespaces_from_5672() -> None:
    text = 'cluster = "C"\n[[node]]\nname = "FR1"\nrole = "full"\n'
    text += '[[node]]\nname = "SBA"\nservicebus = true\n[[node]]\nname = "SBB"\nservicebus = true\n'
    ports = published_ports(parse_topology(text))
    assert [(p.node, p.variable, p.port, p.target) for p in ports] == [
        ("FR1", "QMGR_PORT_FR1", 17000, 7000),
        ("SBA", "QMGR_PORT_SBA", 17001, 7000),
        ("SBA", "QMGR_SB_PORT_SBA", 5672, 5672),
        ("SBB", "QMGR_PORT_SBB", 17002, 7000),
        ("SBB", "QMGR_SB_PORT_SBB", 5673, 5672),
    ]
    doc = compose_document(parse_topology(text))
    assert doc["services"]["SBB"]["command"][-3:] == [
        "--servicebus",
        "--servicebus-port",
        "0.0.0.0:5672",
    ]
    assert all(":ro" not in v for v in doc["services"]["SBB"]["volumes"])
    header = compose_files(parse_topology(text), "t.toml")["docker-compose.yml"]
    assert "SBB  Service Bus (AMQP, HTTP) 5673 ($QMGR_SB_PORT_SBB)" in header


def test_the_load_job_is_a_one_shot_service_behind_its_profile() -> None:
    """It runs `qmgr load --compose` inside the compose network (the nodes by service name),
    once mqsc-init has run; it sees the scenarios and this directory where a scenario's
    relative topology path finds the same file as on the host, and the engine's socket."""
    doc = read_yaml((COMPOSE / "docker-compose.yml").read_text())
    load = doc["services"][LOAD_SERVICE]
    assert load["profiles"] == [LOAD_SERVICE] and load["restart"] == "no"
    assert load["build"]["target"] == "load" and load["image"] != doc["services"]["FR1"]["image"]
    assert load["command"][:2] == ["qmgr", "load"]
    assert load["command"][-3:] == ["--compose", "--out", "/reports"]
    assert load["environment"][IN_NETWORK_VAR] == "1"
    assert load["environment"]["DOCKER_HOST"] == f"unix://{DOCKER_SOCKET}"
    assert load["depends_on"] == {INIT_SERVICE: {"condition": "service_completed_successfully"}}
    assert load["user"] == "root"  # the engine's socket is root's
    assert load["volumes"] == [
        "../scenarios:/scenarios:ro",
        ".:/compose:ro",
        "load-reports:/reports",
        f"${{QMGR_DOCKER_SOCKET:-{DOCKER_SOCKET}}}:{DOCKER_SOCKET}",
    ]
    assert "load-reports" in doc["volumes"]
    if (REPO / "scenarios").is_dir():
        for name in LOAD_SCENARIOS:
            scenario = REPO / "scenarios" / f"{name}.toml"
            assert scenario.is_file(), name
            # its topology, seen from /scenarios/NAME.toml in the container, is /compose/...
            topology = tomllib.loads(scenario.read_text())["topology"]
            assert (scenario.parent / topology).resolve() == COMPOSE / "cluster.toml", name
    dockerfile = (COMPOSE / "Dockerfile").read_text()
    assert " AS node\n" in dockerfile and " AS load\n" in dockerfile


def test_every_image_is_built_on_the_base_the_dockerfile_names_unless_told() -> None:
    doc = read_yaml((COMPOSE / "docker-compose.yml").read_text())
    dockerfile = (COMPOSE / "Dockerfile").read_text()
    assert "ARG BASE_IMAGE=python:3.11-slim\n" in dockerfile
    # every stage starts from the one on BASE_IMAGE
    assert "FROM ${BASE_IMAGE} AS system\n" in dockerfile
    froms = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("FROM ")]
    assert froms[0] == "${BASE_IMAGE}" and "${BASE_IMAGE}" not in froms[1:]
    for name, svc in doc["services"].items():
        assert svc["build"]["args"] == {"BASE_IMAGE": "${QMGR_BASE_IMAGE:-python:3.11-slim}"}, name
    assert "QMGR_BASE_IMAGE" in (COMPOSE / "build-image").read_text()


def test_the_project_is_named_after_the_cluster_on_the_command_line() -> None:
    topology = parse_topology('cluster = "C"\n[[node]]\nname = "FR1"\nrole = "full"\n')
    assert "name" not in compose_document(topology)  # docker-compose 1.29 refuses the key
    header = compose_files(topology, "t.toml")["docker-compose.yml"]
    assert "docker compose -p qmgr-c up --build" in header


def test_nodes_read_their_secret_from_an_env_file_and_no_committed_file_holds_one() -> None:
    """Full repositories read cluster.env (the cluster secret), partial repositories
    member.env (the member secret only)."""
    doc = read_yaml((COMPOSE / "docker-compose.yml").read_text())
    roles = {n.name: n.full_repository for n in load_topology(COMPOSE / "cluster.toml").nodes}
    assert any(roles.values()) and not all(roles.values())
    for name, svc in doc["services"].items():
        assert "QMGR_CLUSTER_SECRET" not in svc.get("environment", {})
        if name in (INIT_SERVICE, LOAD_SERVICE):
            assert svc.get("env_file") is None
        else:
            assert svc["env_file"] == [ENV_FILE if roles[name] else MEMBER_ENV_FILE], name
    committed = subprocess.run(
        ["git", "ls-files", "compose"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    for env_file in (ENV_FILE, MEMBER_ENV_FILE):
        assert f"compose/{env_file}" not in committed
        ignored = subprocess.run(
            ["git", "check-ignore", "-q", f"compose/{env_file}"], cwd=REPO, check=False
        )
        assert ignored.returncode == 0, f"compose/{env_file} is not in .gitignore"
    for rel in committed:
        text = (REPO / rel).read_text()
        assert "QMGR_CLUSTER_SECRET=" not in text and "password =" not in text, rel


def _env(path: Path) -> tuple[str, str]:
    key, _, value = path.read_text().strip().partition("=")
    return key, value


def test_compose_creates_the_env_files_private_and_keeps_existing_ones(tmp_path: Path) -> None:
    result = CliRunner().invoke(cluster, ["compose", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    env, member_env = tmp_path / ENV_FILE, tmp_path / MEMBER_ENV_FILE
    for path in (env, member_env):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert f"wrote {path}" in result.output
    key, secret = _env(env)
    assert key == "QMGR_CLUSTER_SECRET" and len(secret) >= 40
    assert parse_secret(secret).is_repository_secret
    assert _env(member_env) == (key, member_secret(secret).text)
    assert parse_secret(_env(member_env)[1]).raft_password is None
    assert "keep it out of git" in result.output
    again = CliRunner().invoke(cluster, ["compose", "--out", str(tmp_path)])
    assert again.exit_code == 0 and env.read_text() == f"{key}={secret}\n"
    assert str(env) not in again.output and str(member_env) not in again.output


def test_a_member_env_file_that_does_not_match_the_cluster_env_is_rewritten(
    tmp_path: Path,
) -> None:
    """An existing cluster.env (of an earlier version, or replaced by hand) stays the cluster
    secret; member.env is derived from it when missing or stale."""
    write_private(tmp_path / ENV_FILE, "# kept\nQMGR_CLUSTER_SECRET=older-secret_1\n")
    write_private(tmp_path / MEMBER_ENV_FILE, "QMGR_CLUSTER_SECRET=member1:stale\n")
    result = CliRunner().invoke(cluster, ["compose", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / ENV_FILE).read_text() == "# kept\nQMGR_CLUSTER_SECRET=older-secret_1\n"
    assert _env(tmp_path / MEMBER_ENV_FILE)[1] == member_secret("older-secret_1").text


def test_a_member_secret_in_cluster_env_is_refused(tmp_path: Path) -> None:
    write_private(tmp_path / ENV_FILE, f"QMGR_CLUSTER_SECRET={member_secret('s').text}\n")
    result = CliRunner().invoke(cluster, ["compose", "--out", str(tmp_path)])
    assert result.exit_code == 1 and "already a member secret" in result.output
    assert "need the cluster secret" in result.output
    assert not (tmp_path / MEMBER_ENV_FILE).exists()


def test_compose_puts_the_topologys_secret_file_in_the_env_file(tmp_path: Path) -> None:
    write_private(tmp_path / "c.secret", "the-secret_1\n")
    (tmp_path / "t.toml").write_text(
        'cluster = "C"\nsecret_file = "c.secret"\n[[node]]\nname = "FR1"\nrole = "full"\n'
    )
    result = CliRunner().invoke(cluster, ["compose", str(tmp_path / "t.toml")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / ENV_FILE).read_text() == "QMGR_CLUSTER_SECRET=the-secret_1\n"
    assert _env(tmp_path / MEMBER_ENV_FILE)[1] == member_secret("the-secret_1").text


def test_a_secret_an_env_file_cannot_carry_is_refused(tmp_path: Path) -> None:
    write_private(tmp_path / "c.secret", "has $dollar\n")
    (tmp_path / "t.toml").write_text(
        'cluster = "C"\nsecret_file = "c.secret"\n[[node]]\nname = "FR1"\nrole = "full"\n'
    )
    result = CliRunner().invoke(cluster, ["compose", str(tmp_path / "t.toml")])
    assert result.exit_code == 1 and "cannot go into an env file" in result.output
    assert not (tmp_path / ENV_FILE).exists() and not (tmp_path / MEMBER_ENV_FILE).exists()


def test_the_image_runs_as_the_non_root_user_the_compose_notes_name() -> None:
    dockerfile = (COMPOSE / "Dockerfile").read_text()
    assert f"--uid {IMAGE_UID}" in dockerfile
    users = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("USER ")]
    assert users and users[-1].split(":")[0] == "qmgr"


def test_names_that_cannot_be_host_names_are_refused(tmp_path: Path) -> None:
    text = 'cluster = "C"\n[[node]]\nname = "FR_1"\nrole = "full"\n'
    with pytest.raises(TopologyError, match="'FR_1' cannot be a container host name"):
        compose_document(parse_topology(text))
    (tmp_path / "t.toml").write_text(text)
    result = CliRunner().invoke(cluster, ["compose", str(tmp_path / "t.toml")])
    assert result.exit_code == 1
    assert "'FR_1' cannot be a container host name" in result.output
    assert not (tmp_path / "docker-compose.yml").exists()


def test_to_yaml_quotes_what_a_yaml_reader_would_change() -> None:
    data = {
        "yes": "no",
        "on": True,
        "plain-key.1": 7,
        "needs: quoting": ["a: b", "# not a comment", "'single'", 'dou"ble', "line\nbreak", "é"],
        "empty": {},
        "none": [],
        "nested": {"deeper": {"n": -3}},
    }
    text = to_yaml(data)
    assert '"yes": "no"' in text and '"on": true' in text and "plain-key.1: 7" in text
    assert read_yaml(text) == data


def test_to_yaml_rejects_values_it_cannot_write() -> None:
    with pytest.raises(TypeError):
        to_yaml({"x": [1.5]})


def _docker_compose() -> list[str] | None:
    """``docker compose`` (v2) or ``docker-compose`` (v1.29), whichever works here."""
    candidates = []
    if docker := shutil.which("docker"):
        candidates.append([docker, "compose"])
    if legacy := shutil.which("docker-compose"):
        candidates.append([legacy])
    for command in candidates:
        try:
            probe = subprocess.run(
                [*command, "version"], capture_output=True, text=True, timeout=20
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            return command
    return None


def test_docker_compose_accepts_the_file(tmp_path: Path) -> None:
    command = _docker_compose()
    if command is None:
        pytest.skip("docker compose is not available here (no compose plugin, no docker-compose)")
    shutil.copytree(COMPOSE, tmp_path / "compose", ignore=shutil.ignore_patterns("*.whl"))
    work = tmp_path / "compose"
    (work / ENV_FILE).unlink(missing_ok=True)
    (work / MEMBER_ENV_FILE).unlink(missing_ok=True)
    missing = subprocess.run(
        [*command, "-f", "docker-compose.yml", "config", "--quiet"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=work,
    )
    assert missing.returncode != 0 and ENV_FILE in missing.stdout + missing.stderr
    created = CliRunner().invoke(cluster, ["compose", str(work / "cluster.toml")])
    assert created.exit_code == 0, created.output
    result = subprocess.run(
        [*command, "-f", "docker-compose.yml", "config"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=work,
    )
    assert result.returncode == 0, result.stderr
    for env_file in (ENV_FILE, MEMBER_ENV_FILE):
        secret = _env(work / env_file)[1]
        assert f"QMGR_CLUSTER_SECRET: {secret}" in result.stdout
