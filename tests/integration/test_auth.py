"""Connection authentication (`qmgr start --auth FILE`) against real nodes: no or wrong
credentials are refused (MQRC_NOT_AUTHORIZED, UNAUTHENTICATED) and nothing is done; a user
outside group mqm may message but not run MQSC (PERMISSION_DENIED); members of mqm may do
everything; the CLI takes --user and a password from QMGR_PASSWORD or a prompt, never argv;
a users file that cannot be used stops the start with a clear message."""

from __future__ import annotations

import asyncio
import os
import pty
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from qmgr.client import AsyncQueueManagerClient, MQClientError, QueueManagerClient
from qmgr.client.connect import call_metadata
from qmgr.launcher.launch import Launched
from tests.integration.app_security import QMGR, Nodes, add_user, make_certs, nodes, qmgr

__all__ = ["nodes"]

ADMIN = ("admin", "admin-Pa55")
APP = ("app", "app-Pa55")


def with_users(path: Path) -> Path:
    """A users file at ``path`` with ADMIN (in group mqm) and APP."""
    add_user(path, *ADMIN, "mqm")
    add_user(path, *APP)
    return path


@pytest.fixture
def users_file(tmp_path: Path) -> Path:
    return with_users(tmp_path / "users.json")


@pytest.fixture(scope="module")
def auth_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Launched]:
    """One node with --auth and queue AUTH.Q for the tests that only call it: what they are
    refused changes nothing, and what they are allowed leaves AUTH.Q as they found it."""
    base = tmp_path_factory.mktemp("auth")
    started = Nodes(base)
    try:
        launched = started.start("QM1", "--auth", str(with_users(base / "users.json")))
        with admin(launched) as qm:
            qm.mqsc("DEFINE QLOCAL(AUTH.Q)")
        yield launched
    finally:
        started.stop_all()


@pytest.fixture
def node(auth_node: Launched) -> Launched:
    """The module's node with AUTH.Q empty (should a test that failed have left a message)."""
    with admin(auth_node) as qm:
        qm.mqsc("CLEAR QLOCAL(AUTH.Q)")
    return auth_node


def admin(node: Launched) -> QueueManagerClient:
    return QueueManagerClient(node.address, timeout=20, user=ADMIN[0], password=ADMIN[1])


def refused(call: object, *args: object, **kwargs: object) -> MQClientError:
    with pytest.raises(MQClientError) as raised:
        call(*args, **kwargs)  # type: ignore[operator]
    assert raised.value.reason == 2035 and raised.value.reason_name == "MQRC_NOT_AUTHORIZED"
    return raised.value


def test_no_credentials_are_refused_and_nothing_is_done(node: Launched) -> None:
    with QueueManagerClient(node.address, timeout=10) as anon:
        error = refused(anon.put, "AUTH.Q", b"x")
        assert "requires a user and password" in error.text
        refused(anon.mqsc, "DEFINE QLOCAL(ANON.Q)")
        refused(anon.get, "AUTH.Q")
        refused(anon.subscribe, "auth/topic", name="ANON.SUB", durable=True)
        refused(anon.get, "AUTH.Q", unit_of_work="u1")  # the Connect stream
        publisher = anon.stream_publisher()
        publisher.publish("auth/topic", b"x")
        refused(publisher.flush)
        refused(anon.consumer("AUTH.Q").receive, 5)
    with admin(node) as qm:
        assert qm.browse("AUTH.Q") == []
        assert qm.mqsc("DISPLAY QLOCAL(ANON.Q)", check=False)[0].code.startswith("AMQ8147")
        assert qm.mqsc("DISPLAY SUB(ANON.SUB)", check=False)[0].code.startswith("AMQ8147")


def test_the_grpc_status_is_unauthenticated_or_permission_denied(node: Launched) -> None:
    from qmgr.wire import admin_pb2, admin_pb2_grpc, cluster_pb2, cluster_pb2_grpc

    with grpc.insecure_channel(node.address) as channel:
        stub = admin_pb2_grpc.AdminStub(channel)
        with pytest.raises(grpc.RpcError) as anon:
            stub.Mqsc(admin_pb2.MqscRequest(command="DISPLAY QMGR"))
        assert anon.value.code() == grpc.StatusCode.UNAUTHENTICATED
        metadata = call_metadata(*APP)  # the header the SDK sends
        with pytest.raises(grpc.RpcError) as app:
            stub.Mqsc(admin_pb2.MqscRequest(command="DISPLAY QMGR"), metadata=metadata)
        assert app.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert dict(app.value.trailing_metadata())["mq-reason"] == "2035"
        for garbage in ("Basic !!!", "Bearer abc", "Basic " + "YWxpY2U="):  # no ':'
            with pytest.raises(grpc.RpcError) as bad:
                stub.Mqsc(
                    admin_pb2.MqscRequest(command="DISPLAY QMGR"),
                    metadata=(("authorization", garbage),),
                )
            assert bad.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.RpcError) as member_call:  # answered by the service itself
            cluster_pb2_grpc.RepositoryStub(channel).Propose(cluster_pb2.ProposeRequest())
        assert "user and password" not in (member_call.value.details() or "")
        health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert health.status == health_pb2.HealthCheckResponse.SERVING  # not subject to --auth


def test_a_wrong_password_is_refused_and_nothing_put(node: Launched) -> None:
    for user, password in (("app", "wrong"), ("app", ""), ("nobody", APP[1]), ("admin", APP[1])):
        with QueueManagerClient(node.address, timeout=10, user=user, password=password) as qm:
            error = refused(qm.put, "AUTH.Q", b"forged")
            assert f"user '{user}'" in error.text and "password is wrong" in error.text
            refused(qm.publish, "auth/topic", b"forged")
    with admin(node) as qm:
        assert qm.browse("AUTH.Q") == []


def test_a_user_outside_mqm_messages_but_cannot_run_mqsc(node: Launched) -> None:
    with QueueManagerClient(node.address, timeout=20, user=APP[0], password=APP[1]) as app:
        app.put("AUTH.Q", b"hello")
        with app.unit_of_work() as uow:
            got = app.get("AUTH.Q", unit_of_work=uow)
            assert got is not None and got.body == b"hello"
        with app.subscribe("auth/topic") as sub:
            assert app.publish("auth/topic", b"news") == 1
            msg = sub.receive(timeout=10)
            assert msg is not None and msg.body == b"news"
        error = refused(app.mqsc, "DEFINE QLOCAL(APP.DEFINED)")
        assert "not in group mqm" in error.text
    with admin(node) as qm:
        assert qm.mqsc("DISPLAY QLOCAL(APP.DEFINED)", check=False)[0].code.startswith("AMQ8147")


def test_an_mqm_user_does_everything_with_either_client(node: Launched) -> None:
    with admin(node) as qm:
        qm.mqsc("DEFINE TOPIC(AUTH.T) TOPICSTR('auth/admin')")
        qm.put("AUTH.Q", b"from admin")

    async def scenario() -> None:
        async with AsyncQueueManagerClient(
            node.address, timeout=20, user=ADMIN[0], password=ADMIN[1]
        ) as qm:
            assert (await qm.mqsc("DISPLAY TOPIC(AUTH.T)"))[0]["TOPICSTR"] == "auth/admin"
            got = await qm.get("AUTH.Q", unit_of_work="u1")
            assert got is not None and got.body == b"from admin"
            assert await qm.commit("u1") == 1
            sub = await qm.subscribe("auth/admin")
            await qm.publish("auth/admin", b"p")
            msg = await sub.receive(timeout=10)
            assert msg is not None and msg.body == b"p"
            await sub.aclose()
        async with AsyncQueueManagerClient(node.address, timeout=10) as anon:
            with pytest.raises(MQClientError) as error:
                await anon.put("AUTH.Q", b"x")
            assert error.value.reason == 2035

    asyncio.run(scenario())


def test_cli_with_user_and_password_from_the_environment(node: Launched) -> None:
    admin_env = {"QMGR_PASSWORD": ADMIN[1]}
    done = qmgr(
        "runmqsc", node.address, "--user", "admin", env=admin_env, input="DEFINE QLOCAL(CLI.Q)\n"
    )
    assert done.returncode == 0, done.stderr
    app_env = {"QMGR_USER": "app", "QMGR_PASSWORD": APP[1]}
    done = qmgr("put", node.address, "CLI.Q", "by app", env=app_env)
    assert done.returncode == 0, done.stderr
    done = qmgr("get", node.address, "CLI.Q", env=app_env)
    assert done.returncode == 0 and done.stdout.strip() == "by app"
    sub = subprocess.Popen(
        [QMGR, "sub", node.address, "cli/news", "-n", "1", "--wait", "20"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **app_env},
    )
    assert sub.stderr is not None and "subscribed" in sub.stderr.readline()
    done = qmgr("pub", node.address, "cli/news", "extra", env=app_env)
    assert done.returncode == 0 and "1 local deliveries" in done.stdout, done.stderr
    assert sub.communicate(timeout=30)[0].strip() == "cli/news: extra"
    done = qmgr("runmqsc", node.address, env=app_env, input="DISPLAY QMGR\n")
    assert done.returncode == 20 and "MQRC_NOT_AUTHORIZED" in done.stderr
    done = qmgr("put", node.address, "CLI.Q", "anonymous")
    assert done.returncode != 0 and "MQRC_NOT_AUTHORIZED" in done.stderr
    done = qmgr("put", node.address, "CLI.Q", "no password", "--user", "app")
    assert done.returncode != 0 and "QMGR_PASSWORD" in done.stderr  # no terminal to ask on
    with admin(node) as qm:
        assert qm.browse("CLI.Q") == []


def test_add_user_takes_the_password_from_env_or_prompt_never_argv(
    nodes: Nodes, tmp_path: Path
) -> None:
    path = tmp_path / "users.json"
    done = qmgr("auth", "add-user", str(path), "carol", "s3cret-on-argv")
    assert done.returncode != 0 and not path.exists()  # no argument takes a password
    add_user(path, "carol", "from-env", "mqm")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "from-env" not in path.read_text()
    # on a terminal, the password is asked for twice and not echoed
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "QMGR_PASSWORD"}
    proc = subprocess.Popen(
        [QMGR, "auth", "add-user", str(path), "dave"],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    output = b""
    for _ in range(2):
        while not output.rstrip().endswith(b":"):
            output += os.read(leader, 1024)
        os.write(leader, b"typed-Pa55\n")
        output = b""
    assert proc.wait(30) == 0
    os.close(leader)
    done = qmgr("auth", "list", str(path))
    assert done.stdout.split("\n")[:2] == ["carol\tmqm", "dave\t-"]
    assert "typed-Pa55" not in path.read_text() and "scrypt$" in path.read_text()
    node = nodes.start("QM1", "--auth", str(path))
    with QueueManagerClient(node.address, timeout=20, user="dave", password="typed-Pa55") as qm:
        assert qm.publish("dave/topic", b"dave's password works") == 0
        refused(qm.mqsc, "DISPLAY QMGR")
    done = qmgr("auth", "remove-user", str(path), "carol")
    assert done.returncode == 0 and qmgr("auth", "list", str(path)).stdout == "dave\t-\n"
    done = qmgr("auth", "remove-user", str(path), "carol")
    assert done.returncode != 0 and "no user 'carol'" in done.stderr


@pytest.mark.parametrize(
    ("content", "named"),
    [
        ('{"users": {\n  "x": \n}', "line 3"),
        ('{"users": {"alice": {"hash": "md5$abc", "groups": []}}}', "user 'alice'"),
        ("", "line 1"),
    ],
)
def test_a_garbage_users_file_stops_the_start(tmp_path: Path, content: str, named: str) -> None:
    path = tmp_path / "users.json"
    path.write_text(content)
    done = subprocess.run(
        [QMGR, "start", "--name", "QM1", "--auth", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "QMGR_HOME": str(tmp_path / "home")},
    )
    assert done.returncode != 0 and "READY" not in done.stdout
    assert "cannot use the users file" in done.stderr and named in done.stderr
    assert str(path) in done.stderr


def test_auth_over_tls(nodes: Nodes, users_file: Path, tmp_path: Path) -> None:
    certs = make_certs(tmp_path / "pki")
    node = nodes.start("QM1", *certs.node_args(), "--auth", str(users_file))
    with QueueManagerClient(
        node.address, timeout=20, tls_ca=certs.ca, user=ADMIN[0], password=ADMIN[1]
    ) as qm:
        qm.mqsc("DEFINE QLOCAL(BOTH.Q)")
    done = qmgr(
        "put",
        node.address,
        "BOTH.Q",
        "tls and auth",
        *("--tls-ca", str(certs.ca), "--user", "app"),
        env={"QMGR_PASSWORD": APP[1]},
    )
    assert done.returncode == 0, done.stderr
    with QueueManagerClient(node.address, timeout=10, tls_ca=certs.ca) as anon:
        refused(anon.get, "BOTH.Q")


def test_a_client_certificate_stands_in_for_a_password(
    nodes: Nodes, users_file: Path, tmp_path: Path
) -> None:
    certs = make_certs(tmp_path / "pki")
    add_user(users_file, "alice", "alice-Pa55")  # the user the client certificate names
    node = nodes.start("QM1", *certs.node_args(require_client=True), "--auth", str(users_file))
    tls = {"tls_ca": certs.ca, "tls_cert": certs.client_cert, "tls_key": certs.client_key}
    with QueueManagerClient(
        node.address, timeout=20, **tls, user=ADMIN[0], password=ADMIN[1]
    ) as qm:
        qm.mqsc("DEFINE QLOCAL(CERT.Q)")
    with QueueManagerClient(node.address, timeout=20, **tls) as alice:
        alice.put("CERT.Q", b"by certificate")
        with alice.unit_of_work() as uow:
            got = alice.get("CERT.Q", unit_of_work=uow)
            assert got is not None and got.body == b"by certificate"
        with alice.subscribe("cert/topic") as sub:
            publisher = alice.stream_publisher(batch_size=5)
            for i in range(10):
                publisher.publish("cert/topic", f"m{i}")
            assert publisher.close().accepted == 10
            assert [sub.receive(timeout=10) is not None for _ in range(10)] == [True] * 10
        error = refused(alice.mqsc, "DEFINE QLOCAL(ALICE.Q)")
        assert "not in group mqm" in error.text
    with QueueManagerClient(node.address, timeout=20, **tls, user="app", password="wrong") as qm:
        refused(qm.put, "CERT.Q", b"a wrong password is not rescued by the certificate")
    stranger = {**tls, "tls_cert": certs.stranger_cert, "tls_key": certs.stranger_key}
    with QueueManagerClient(node.address, timeout=20, **stranger) as mallory:
        error = refused(mallory.put, "CERT.Q", b"forged")
        assert "mallory" in error.text and "names no user" in error.text
        refused(mallory.subscribe, "cert/topic")
        publisher = mallory.stream_publisher()
        publisher.publish("cert/topic", b"forged")
        refused(publisher.flush)
    with QueueManagerClient(
        node.address, timeout=20, **tls, user=ADMIN[0], password=ADMIN[1]
    ) as qm:
        assert qm.browse("CERT.Q") == []
        assert qm.mqsc("DISPLAY QLOCAL(ALICE.Q)", check=False)[0].code.startswith("AMQ8147")
    # where the port does not require client certificates, none stands in for a password
    optional = nodes.start("QM2", *certs.node_args(), "--auth", str(users_file))
    with QueueManagerClient(optional.address, timeout=20, **tls) as alice:
        assert "none was given" in refused(alice.put, "CERT.Q", b"x").text


def test_a_users_file_readable_by_others_is_used_with_a_warning(
    nodes: Nodes, users_file: Path
) -> None:
    users_file.chmod(0o644)
    node = nodes.start("QM1", "--auth", str(users_file))
    with admin(node) as qm:
        qm.mqsc("DISPLAY QMGR")
    assert "make it 0600" in node.log.read_text()


def test_listening_beyond_loopback_without_auth_warns_once(nodes: Nodes) -> None:
    wide = nodes.start("QM1", listen="0.0.0.0:0")
    local = nodes.start("QM2")
    port = wide.address.rpartition(":")[2]
    with QueueManagerClient(f"127.0.0.1:{port}", timeout=20) as qm:
        qm.mqsc("DISPLAY QMGR")
    assert wide.log.read_text().count("without --auth") == 1
    assert "without --auth" not in local.log.read_text()
