"""The cluster secret, against real processes: a member without one does not start (unless
--insecure), a full repository does not start with a member secret, a crafted pickle sent to a
full repository's Raft port runs nothing and is dropped while the cluster goes on, a partial
repository holding the member secret cannot speak Raft to a full repository, and what a node
keeps on disk is readable by its user only."""

from __future__ import annotations

import json
import os
import pickle
import socket
import stat
import struct
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pysyncobj.pickle as pysyncobj_pickle
import pytest
from cryptography.fernet import Fernet
from pysyncobj.encryptor import getEncryptor

from cluster.repository import Cmd
from qmgr.launcher.poll import wait_for
from qmgr.node import raft_pickle
from qmgr.security.files import generate_secret, write_private
from qmgr.security.keys import member_secret, parse_member_secret, raft_password
from qmgr.security.member import member_key
from tests.integration.cluster_nodes import Cluster, free_ports
from tests.integration.conftest import NodeProcess

DROP_WAIT = 20.0  # bound on waiting for the node to close the connection; never asserted on


# -- refusing to start -----------------------------------------------------------------------------


def _without_secret(tmp_path: Path, **env: str) -> NodeProcess:
    """A node (not started) whose environment holds no cluster secret but ``env``."""
    node = NodeProcess("FR1", tmp_path)
    for key in ("QMGR_CLUSTER_SECRET", "QMGR_CLUSTER_SECRET_FILE"):
        node.env.pop(key, None)
    node.env.update(env)
    return node


def _fr_args(raft_port: int) -> list[str]:
    raft = f"127.0.0.1:{raft_port}"
    return ["--cluster", "DEMO", "--full-repository", "--raft", raft, "--raft-peers", raft]


def test_qmgr_start_refuses_a_full_repository_without_a_secret(tmp_path: Path) -> None:
    node = _without_secret(tmp_path)
    (raft,) = free_ports(1)
    result = node.cli("start", "--name", "FR1", *_fr_args(raft))
    assert result.returncode != 0
    assert "a full repository needs the cluster secret" in result.stderr
    assert "unpickles" in result.stderr and "--insecure" in result.stderr
    assert "READY" not in result.stdout
    with socket.socket() as s:  # nothing was left listening on the Raft port
        s.bind(("127.0.0.1", raft))


def test_qmgr_start_refuses_a_partial_repository_without_a_secret_or_certificate(
    tmp_path: Path,
) -> None:
    node = _without_secret(tmp_path)
    result = node.cli("start", "--name", "PR1", "--cluster", "DEMO", "--join", "127.0.0.1:1")
    assert result.returncode != 0
    assert "a partial repository needs the cluster secret" in result.stderr
    assert "--tls-ca" in result.stderr and "--insecure" in result.stderr


@pytest.mark.parametrize("how", ["env", "file"])
def test_qmgr_start_refuses_insecure_with_a_secret(tmp_path: Path, how: str) -> None:
    secret_file = write_private(tmp_path / "cluster.secret", generate_secret())
    env = (
        {"QMGR_CLUSTER_SECRET": generate_secret()}
        if how == "env"
        else {"QMGR_CLUSTER_SECRET_FILE": str(secret_file)}
    )
    node = _without_secret(tmp_path, **env)
    (raft,) = free_ports(1)
    result = node.cli("start", "--name", "FR1", *_fr_args(raft), "--insecure")
    assert result.returncode != 0
    assert "--insecure contradicts the cluster secret" in result.stderr


@pytest.mark.parametrize("how", ["env", "file"])
def test_a_full_repository_refuses_a_member_secret(tmp_path: Path, how: str) -> None:
    member = member_secret(generate_secret()).text
    secret_file = write_private(tmp_path / "member.secret", member + "\n")
    env = (
        {"QMGR_CLUSTER_SECRET": member}
        if how == "env"
        else {"QMGR_CLUSTER_SECRET_FILE": str(secret_file)}
    )
    node = _without_secret(tmp_path, **env)
    (raft,) = free_ports(1)
    result = node.cli("start", "--name", "FR1", *_fr_args(raft))
    assert result.returncode != 0
    assert "--full-repository needs the cluster secret, not a member secret" in result.stderr
    assert "READY" not in result.stdout
    with socket.socket() as s:  # nothing was left listening on the Raft port
        s.bind(("127.0.0.1", raft))


def test_a_malformed_member_secret_is_refused_at_start(tmp_path: Path) -> None:
    node = _without_secret(tmp_path, QMGR_CLUSTER_SECRET="member1:cut-sho")
    result = node.cli("start", "--name", "PR1", "--cluster", "DEMO", "--join", "127.0.0.1:1")
    assert result.returncode != 0
    assert "the cluster secret cannot be used: the member secret holds" in result.stderr


def test_a_full_repository_starts_with_its_secret_in_a_file(tmp_path: Path) -> None:
    secret_file = write_private(tmp_path / "cluster.secret", generate_secret() + "\n")
    node = _without_secret(tmp_path, QMGR_CLUSTER_SECRET_FILE=str(secret_file))
    (raft,) = free_ports(1)
    node.data_dir = None
    node.extra_args = _fr_args(raft)
    node.start()
    try:
        with node.client() as qm:
            assert qm.mqsc_ok("DISPLAY QMGR")[0]
    finally:
        node.kill()


# -- a crafted pickle on the Raft port -------------------------------------------------------------


class _Payload:
    """Unpickling this runs a shell command (what an attacker sends)."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (self.command,))


def _frame(data: bytes) -> bytes:
    """As PySyncObj frames a message: native int length, then the (compressed) bytes."""
    return struct.pack("i", len(data)) + data


def _attacks(marker: Path) -> dict[str, bytes]:
    evil = _Payload(f"touch {marker}")
    bare = zlib.compress(pickle.dumps(evil, 2), 3)
    shaped = zlib.compress(
        pickle.dumps({"type": "append_entries", "term": 1 << 20, "entries": [evil]}, 2), 3
    )
    # a genuine Fernet token (current timestamp, valid layout) under a key that is not the
    # cluster's: PySyncObj reads its timestamp, then must refuse it on the HMAC
    forged = Fernet(Fernet.generate_key()).encrypt(bare)
    return {
        "bare pickle": _frame(bare),
        "pickle shaped as a Raft message": _frame(shaped),
        "Fernet token under another key": _frame(forged),
        "Fernet-looking garbage": _frame(b"gAAAAA" + os.urandom(120).hex().encode()),
    }


def _raft_address(cl: Cluster, name: str) -> tuple[str, int]:
    args = cl[name].args
    host, _, port = args[args.index("--raft") + 1].rpartition(":")
    return host, int(port)


def _send_and_await_drop(address: tuple[str, int], frame: bytes) -> bytes:
    """Send ``frame`` on a new connection; return what the node sent before closing it."""
    got = b""
    with socket.create_connection(address, timeout=DROP_WAIT) as sock:
        sock.sendall(frame)
        deadline = time.monotonic() + DROP_WAIT
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(4096)
            except ConnectionResetError:
                return got
            if not chunk:
                return got
            got += chunk
    raise AssertionError(f"the node kept the connection open for {DROP_WAIT:g}s")


@pytest.fixture
def secure(tmp_path: Path) -> Iterator[Cluster]:
    """Three full repositories and HOST1 of one test's own (one that forces HOST1 out)."""
    cl = Cluster(tmp_path).start(["FR1", "FR2", "FR3"], ["HOST1"])
    yield cl
    cl.stop()


@pytest.fixture(scope="module")
def shared_secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The same cluster for the tests that leave it as it was: attacks it drops, and a
    definition of a topic of their own."""
    cl = Cluster(tmp_path_factory.mktemp("secure")).start(["FR1", "FR2", "FR3"], ["HOST1"])
    yield cl
    cl.stop()


@pytest.fixture
def insecure(tmp_path: Path) -> Iterator[Cluster]:
    cl = Cluster(tmp_path, insecure=True).start(["FR1"], ["HOST1"])
    yield cl
    cl.stop()


def _assert_still_serving(cl: Cluster, topic: str) -> None:
    for name in cl.frs:
        wait_for(
            lambda n=name: cl[n].mqsc("DISPLAY QMGR ALL")[0].get("RAFTLEADER"),
            20.0,
            what=f"a Raft leader known to {name}",
            retry=Exception,
        )
    cl.define_topic("HOST1", topic, topic.title())
    cl.wait_definition(topic, ["HOST1"])


def test_a_crafted_pickle_on_the_raft_port_runs_nothing_and_is_dropped(
    shared_secure: Cluster, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    for name in shared_secure.frs:
        for what, frame in _attacks(marker).items():
            answer = _send_and_await_drop(_raft_address(shared_secure, name), frame)
            assert answer == b"", f"{name} answered a {what}"
            assert not marker.exists(), f"{name} ran the payload of a {what}"
    _assert_still_serving(shared_secure, "ORDERS")
    assert not marker.exists()
    assert all(
        shared_secure[n].proc is not None and shared_secure[n].proc.poll() is None
        for n in shared_secure.nodes
    )


def test_even_an_insecure_full_repository_does_not_run_a_pickled_payload(
    insecure: Cluster, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    attacks = _attacks(marker)
    for what in ("bare pickle", "pickle shaped as a Raft message"):
        assert _send_and_await_drop(_raft_address(insecure, "FR1"), attacks[what]) == b""
        assert not marker.exists(), f"the insecure node ran the payload of a {what}"
    _assert_still_serving(insecure, "PRICES")
    assert not marker.exists()


# -- a partial repository speaking Raft ------------------------------------------------------------


class _RaftSpeaker:
    """Speaks PySyncObj's transport to a ``--raft`` port as a full repository would. A frame is
    a native int length and a Fernet token (key from ``password``, PySyncObj's
    ``getEncryptor``) of zlib(pickle(message)). The dialer sends a random key; the listener
    answers (that key, a random key of its own); from then on each side wraps every message as
    (the other side's key, message). The dialer then names itself (``readonly``) and may send
    ``apply_command``, which a leader appends to the Raft log."""

    def __init__(self, address: tuple[str, int], password: str | bytes) -> None:
        self.fernet = getEncryptor(password)
        self.sock = socket.create_connection(address, timeout=DROP_WAIT)
        self.buffer = b""
        self.my_key = os.urandom(32)
        self.their_key: bytes | None = None

    def close(self) -> None:
        self.sock.close()

    def send(self, message: Any) -> None:
        if self.their_key is not None:
            message = (self.their_key, message)
        data = zlib.compress(pysyncobj_pickle.dumps(message), 3)
        token = self.fernet.encrypt_at_time(data, int(time.monotonic()))
        self.sock.sendall(_frame(token))

    def receive(self) -> Any:
        """The node's next message; None once it closed the connection."""
        while True:
            if len(self.buffer) >= 4:
                (size,) = struct.unpack("i", self.buffer[:4])
                if len(self.buffer) >= 4 + size:
                    token, self.buffer = self.buffer[4 : 4 + size], self.buffer[4 + size :]
                    data = zlib.decompress(self.fernet.decrypt(token))
                    key, message = raft_pickle.loads(data)
                    assert key == self.my_key
                    return message
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                return None
            except TimeoutError:
                raise AssertionError(
                    f"the node neither answered nor closed the connection in {DROP_WAIT:g}s"
                ) from None
            if not chunk:
                return None
            self.buffer += chunk

    def open(self) -> bool:
        """The key exchange; True when the node answered it."""
        self.send(self.my_key)
        answer = self.receive()
        if answer is None:
            return False
        self.their_key = answer
        self.send("readonly")
        return True

    def apply(self, command: dict[str, Any]) -> dict[str, Any] | None:
        """Ask the node to append ``command`` as the repository's ``apply_json`` (method id 0,
        a regular command); its answer, or None when it dropped the connection."""
        text = json.dumps(command, sort_keys=True, separators=(",", ":"))
        entry = b"\x00" + pysyncobj_pickle.dumps((0, (text,)))
        self.send({"type": "apply_command", "command": entry, "request_id": 1})
        while (message := self.receive()) is not None:
            if isinstance(message, dict) and message.get("type") == "apply_command_response":
                return message
        return None


def _leader_raft_address(cl: Cluster) -> tuple[str, int]:
    leader = wait_for(
        lambda: cl["FR1"].mqsc("DISPLAY QMGR ALL")[0]["RAFTLEADER"],
        20.0,
        what="a Raft leader",
        retry=Exception,
    )
    host, _, port = str(leader).rpartition(":")
    return host, int(port)


def test_a_partial_repository_holding_the_member_secret_cannot_speak_raft(
    secure: Cluster,
) -> None:
    """HOST1 holds the member secret only. Whatever it makes of it as PySyncObj's password,
    its frames fail authentication at every full repository and the connection is dropped
    before anything is read: it cannot force out a member. With the cluster secret (a full
    repository's) the same frames are appended, so the attempt is the real thing."""
    assert secure["HOST1"].env["QMGR_CLUSTER_SECRET"] == secure.member_secret
    text = secure.member_secret
    assert text is not None
    member = parse_member_secret(text)
    attempts: dict[str, str | bytes] = {
        "the member secret's text": text,
        "its base64url part": text.removeprefix("member1:"),
        "its bytes": member.raw,
        "the member proof key": member_key(member, "DEMO"),
    }
    force_out = Cmd.force_remove(qmname="HOST1")
    for name in secure.frs:
        for what, password in attempts.items():
            speaker = _RaftSpeaker(_raft_address(secure, name), password)
            try:
                assert not speaker.open(), f"{name} answered a key exchange under {what}"
            finally:
                speaker.close()
            speaker = _RaftSpeaker(_raft_address(secure, name), password)
            try:
                speaker.their_key = os.urandom(32)  # as if the exchange had happened
                assert speaker.apply(force_out) is None, f"{name} answered {what}"
            finally:
                speaker.close()
    for name in secure.frs:
        assert "HOST1" in {r["CLUSQMGR"] for r in secure[name].mqsc("DISPLAY CLUSQMGR(*)")}
    _assert_still_serving(secure, "ORDERS")

    # the control: a full repository's Raft password gets the same command appended
    assert secure.secret is not None
    speaker = _RaftSpeaker(_leader_raft_address(secure), raft_password(secure.secret))
    try:
        assert speaker.open()
        answer = speaker.apply(force_out)
    finally:
        speaker.close()
    assert answer is not None and "error" not in answer and answer["log_idx"] > 0
    wait_for(
        lambda: "HOST1" not in {r["CLUSQMGR"] for r in secure["FR1"].mqsc("DISPLAY CLUSQMGR(*)")},
        20.0,
        what="HOST1 forced out of the repository",
        retry=Exception,
    )


def test_a_partial_repository_given_the_cluster_secret_still_joins(tmp_path: Path) -> None:
    cl = Cluster(tmp_path, partials_hold_cluster_secret=True).start(["FR1"], ["HOST1", "SUB1"])
    try:
        assert cl["HOST1"].env["QMGR_CLUSTER_SECRET"] == cl.secret
        cl.define_topic("HOST1", "ORDERS", "Orders")
        cl.wait_definition("ORDERS", ["HOST1"])
    finally:
        cl.stop()


# -- at rest ---------------------------------------------------------------------------------------


def _modes(root: Path) -> dict[str, int]:
    return {
        str(p.relative_to(root.parent)): stat.S_IMODE(p.lstat().st_mode)
        for p in (root, *root.rglob("*"))
    }


def _assert_private(root: Path) -> None:
    modes = _modes(root)
    loose = {
        path: oct(mode)
        for path, mode in modes.items()
        if mode != (0o700 if (root.parent / path).is_dir() else 0o600)
    }
    assert not loose, f"readable by others: {loose}"


def test_a_node_keeps_its_data_private(tmp_path: Path) -> None:
    node = NodeProcess("QM1", tmp_path)
    node.start()
    try:
        with node.client() as qm:
            qm.mqsc("DEFINE QLOCAL(PAYROLL)")
            qm.put("PAYROLL", b"salary", persistent=True)
        _assert_private(tmp_path / "QM1")
        assert {"QM1/qmgr.sqlite", "QM1/qmgr.sqlite-wal"} <= set(_modes(tmp_path / "QM1"))
    finally:
        node.kill()


def test_a_full_repository_keeps_its_raft_journal_private(shared_secure: Cluster) -> None:
    shared_secure.define_topic("HOST1", "JOURNAL", "Journal")
    shared_secure.wait_definition("JOURNAL", ["HOST1"])
    for name in ("FR1", "HOST1"):
        _assert_private(shared_secure.base / name)
    assert any("raft" in path for path in _modes(shared_secure.base / "FR1"))


def test_a_data_directory_left_readable_is_made_private_at_start(tmp_path: Path) -> None:
    node = NodeProcess("QM1", tmp_path)
    node.start()
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(PAYROLL)")
        qm.put("PAYROLL", b"salary", persistent=True)
    node.stop()
    data = tmp_path / "QM1"
    for path in (data, *data.rglob("*")):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    (data / "notes").mkdir(mode=0o755)
    (data / "notes" / "old.txt").write_text("kept")
    node.start()
    try:
        _assert_private(data)
        with node.client() as qm:
            msg = qm.get("PAYROLL", wait_ms=5000)
            assert msg is not None and msg.body == b"salary"
    finally:
        node.kill()
