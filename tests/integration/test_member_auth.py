"""Members prove who they are, against real node processes (issue 9, reproductions 2 and 3):
raw gRPC calls with the generated stubs play the attacker.

- A forged hello (the right cluster name, no or a wrong member proof) is refused with
  UNAUTHENTICATED before anything changes: the sender's position stays, and its real
  publications still arrive afterwards.
- A forged Watch under another member's name, and a Propose without a proof (or by one member
  about another, or a force_remove, or a join as a full repository), are refused and change
  nothing.
- A node with the wrong secret cannot join: its start fails and says why. A node re-created
  under a known name (a new QMID) is refused until RESET CLUSTER removes the old one.
- With TLS (certificates of the cluster CA): the cluster works; a member presenting another
  queue manager's certificate, or a client certificate, is refused.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest

from cluster.repository import Cmd
from qmgr.client import QueueManagerClient
from qmgr.client.types import OutgoingMessage
from qmgr.launcher.poll import wait_for
from qmgr.security.member import CHANNEL, PROPOSE, WATCH
from qmgr.security.pki import Issued, issue, make_ca
from qmgr.wire import cluster_pb2 as cpb
from qmgr.wire import cluster_pb2_grpc as crpc
from qmgr.wire import messages_pb2 as mpb
from tests.integration.cluster_nodes import Cluster, ClusterNode, free_ports
from tests.integration.members import CALL_TIMEOUT, SECRET, connect, proof_for

TOPIC = "Auth/Prices"


def forged_hello(
    address: str, sender: str, qmid: str, proof: cpb.MemberProof | None, seq: int = 2**62
) -> grpc.RpcError:
    """Open a channel as ``sender`` and push a publication with a huge sequence number;
    returns the error that ended the stream."""
    hello = cpb.ChannelHello(sender=sender, address="127.0.0.1:1", cluster="DEMO", qmid=qmid)
    if proof is not None:
        hello.proof.CopyFrom(proof)
    msg = mpb.Message(
        message_id=f"{seq:048x}", body=b"forged", persistence=mpb.PERSISTENT, priority=4
    )
    pub = cpb.ForwardedPublication(topic="Auth/x", message=msg, route=[sender], purpose=cpb.DELIVER)
    item = cpb.ChannelItem(epoch=2**62, seq=seq, publication=pub)
    requests = [
        cpb.ChannelRequest(hello=hello),
        cpb.ChannelRequest(batch=cpb.ChannelBatch(items=[item])),
    ]
    return refusal(
        address, lambda ch: crpc.PeerStub(ch).Channel(iter(requests), timeout=CALL_TIMEOUT)
    )


def refusal(
    address: str,
    call: Callable[[grpc.Channel], Iterable[Any]],
    credentials: grpc.ChannelCredentials | None = None,
) -> grpc.RpcError:
    """The error that ends the stream ``call`` opens (it must end with one)."""
    with connect(address, credentials) as channel, pytest.raises(grpc.RpcError) as raised:
        for _ in call(channel):
            pass
    return raised.value


def watch(address: str, join: dict[str, Any], proof: cpb.MemberProof | None) -> grpc.RpcError:
    request = cpb.WatchRequest(join_command_json=json.dumps(join))
    if proof is not None:
        request.proof.CopyFrom(proof)
    return refusal(address, lambda ch: crpc.RepositoryStub(ch).Watch(request, timeout=CALL_TIMEOUT))


def propose(address: str, command: dict[str, Any], proof: cpb.MemberProof | None) -> grpc.RpcError:
    request = cpb.ProposeRequest(command_json=json.dumps(command))
    if proof is not None:
        request.proof.CopyFrom(proof)
    with grpc.insecure_channel(address) as channel, pytest.raises(grpc.RpcError) as raised:
        crpc.RepositoryStub(channel).Propose(request, timeout=CALL_TIMEOUT)
    return raised.value


def clusqmgr(node: ClusterNode) -> dict[str, dict[str, str]]:
    return {r["CLUSQMGR"]: r for r in node.mqsc("DISPLAY CLUSQMGR(*) ALL")}


def received(sub: Any, want: int, timeout: float = 20) -> list[str]:
    got: list[str] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        got.extend(m.body.decode() for m in sub.receive_batch(timeout=1))
    return got


@contextmanager
def authenticated_cluster(base: Path) -> Iterator[Cluster]:
    """A full repository FR1, a publisher PUB1 and a subscriber SUB1 hosting a DIRECT topic,
    all with the cluster secret; every node stopped afterwards."""
    cluster = Cluster(base, secret=SECRET).start(["FR1"], ["PUB1", "SUB1"])
    try:
        cluster.define_topic("SUB1", "AUTHT", "Auth", clroute="DIRECT")
        cluster.define_topic("PUB1", "PUBT", "Pubs", clroute="TOPICHOST")
        cluster.wait_definition("AUTHT", ["SUB1"], on=["PUB1"])
        cluster.wait_definition("PUBT", ["PUB1"], on=["SUB1", "FR1"])
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One authenticated cluster for the tests whose forged calls must change nothing: each
    checks the cluster is as it found it, so they can follow one another on it."""
    with authenticated_cluster(tmp_path_factory.mktemp("member_auth")) as cluster:
        yield cluster


@pytest.fixture
def cl(tmp_path: Path) -> Iterator[Cluster]:
    """An authenticated cluster of one test's own, for tests that kill or re-create SUB1."""
    with authenticated_cluster(tmp_path) as cluster:
        yield cluster


def heard_from_pub1(cl: Cluster, topic: str) -> tuple[Any, Callable[[], tuple[str, str]], str, str]:
    """SUB1 subscribes to ``topic`` and hears one publication ("before") from PUB1. Returns
    the subscription, SUB1's receiving position for PUB1 (a function: QMID, last sequence),
    PUB1's QMID and the position once that publication is committed."""
    sub1 = cl["SUB1"]
    sub = sub1.c.subscribe(topic)
    cl.wait_proxy("PUB1", "SUB1", topic)
    cl["PUB1"].c.publish(topic, OutgoingMessage("before", persistent=True))
    assert received(sub, 1) == ["before"]

    def position() -> tuple[str, str]:
        rows = [
            r
            for r in sub1.mqsc("DISPLAY CHSTATUS(*)")
            if r.get("CHLTYPE") == "CLUSRCVR" and r.get("RQMNAME") == "PUB1"
        ]
        assert len(rows) == 1
        return rows[0]["RQMID"], rows[0]["LSTSEQNO"]

    qmid, before = wait_for(
        lambda: position()[1] != "0.0" and position(),
        20.0,
        what="PUB1's publication committed on SUB1",
        retry=Exception,
    )
    return sub, position, qmid, before


def test_a_forged_hello_is_refused_and_moves_nothing(shared: Cluster) -> None:
    sub1 = shared["SUB1"]
    sub, position, qmid, before = heard_from_pub1(shared, f"{TOPIC}/x")
    no_proof = forged_hello(sub1.address, "PUB1", qmid, None)
    assert no_proof.code() is grpc.StatusCode.UNAUTHENTICATED
    assert "PUB1: no member proof" in (no_proof.details() or "")
    wrong = proof_for(sub1.address, "PUB1", CHANNEL, secret="guessed")
    wrong_secret = forged_hello(sub1.address, "PUB1", qmid, wrong)
    assert wrong_secret.code() is grpc.StatusCode.UNAUTHENTICATED
    assert "PUB1: member proof does not match the cluster secret" in (wrong_secret.details() or "")
    # a genuine proof of another member does not pass as PUB1's
    other = proof_for(sub1.address, "FR1", CHANNEL)
    as_other = forged_hello(sub1.address, "PUB1", qmid, other)
    assert as_other.code() is grpc.StatusCode.PERMISSION_DENIED
    assert "proof is for FR1, the call claims PUB1" in (as_other.details() or "")
    # a proof made for another method, or used twice, does not open a channel either
    for_watch = proof_for(sub1.address, "PUB1", WATCH)
    assert forged_hello(sub1.address, "PUB1", qmid, for_watch).code() is (
        grpc.StatusCode.UNAUTHENTICATED
    )
    replay = forged_hello(sub1.address, "PUB1", qmid, for_watch)
    assert "unknown, used or expired" in (replay.details() or "")
    assert position() == (qmid, before)
    assert sub.receive_batch(timeout=1) == []  # nothing forged was delivered
    # the real PUB1 goes on being heard
    shared["PUB1"].c.publish(f"{TOPIC}/x", OutgoingMessage("after", persistent=True))
    assert received(sub, 1) == ["after"]
    wait_for(
        lambda: position()[1] != before, 20.0, what="PUB1's position moving on", retry=Exception
    )
    sub.close()


def test_a_forged_watch_under_another_members_name_is_refused(shared: Cluster) -> None:
    fr1 = shared["FR1"]
    members = clusqmgr(fr1)
    hijack = Cmd.join_member("PUB1", "PUB1_0000beef", "127.0.0.1:1")
    unproven = watch(fr1.address, hijack, None)
    assert unproven.code() is grpc.StatusCode.UNAUTHENTICATED
    assert "PUB1: no member proof" in (unproven.details() or "")
    wrong = watch(fr1.address, hijack, proof_for(fr1.address, "PUB1", WATCH, secret="guessed"))
    assert wrong.code() is grpc.StatusCode.UNAUTHENTICATED
    assert "member proof does not match the cluster secret" in (wrong.details() or "")
    # SUB1 itself (it has the secret) cannot join under PUB1's name ...
    as_sub1 = proof_for(fr1.address, "SUB1", WATCH)
    other = watch(fr1.address, hijack, as_sub1)
    assert other.code() is grpc.StatusCode.PERMISSION_DENIED
    # ... nor declare itself a full repository
    repos = Cmd.join_member("SUB1", members["SUB1"]["QMID"], "127.0.0.1:1", "REPOS")
    as_fr = watch(fr1.address, repos, proof_for(fr1.address, "SUB1", WATCH))
    assert as_fr.code() is grpc.StatusCode.PERMISSION_DENIED
    assert "cannot join as a full repository" in (as_fr.details() or "")
    assert clusqmgr(fr1) == members
    assert ("PUBT", "PUB1") in shared["SUB1"].tcluster()


def test_an_unauthenticated_propose_is_refused_and_changes_nothing(shared: Cluster) -> None:
    fr1 = shared["FR1"]
    members = clusqmgr(fr1)
    removal = Cmd.force_remove(qmname="PUB1")
    unproven = propose(fr1.address, removal, None)
    assert unproven.code() is grpc.StatusCode.UNAUTHENTICATED
    assert "no member proof" in (unproven.details() or "")
    # a member cannot ask for RESET CLUSTER, even about itself
    for who in ("SUB1", "PUB1"):
        refused = propose(
            fr1.address, Cmd.force_remove(qmname=who), proof_for(fr1.address, who, PROPOSE)
        )
        assert refused.code() is grpc.StatusCode.PERMISSION_DENIED
        assert "RESET CLUSTER" in (refused.details() or "")
    # nor change what another member hosts
    delete = Cmd.delete_topic("PUBT", "PUB1")
    theirs = propose(fr1.address, delete, proof_for(fr1.address, "SUB1", PROPOSE))
    assert theirs.code() is grpc.StatusCode.PERMISSION_DENIED
    assert "only about itself" in (theirs.details() or "")
    assert clusqmgr(fr1) == members
    assert ("PUBT", "PUB1") in shared["SUB1"].tcluster()
    assert ("PUBT", "PUB1") in fr1.tcluster()


def test_a_member_with_the_wrong_secret_cannot_join(shared: Cluster, tmp_path: Path) -> None:
    port = free_ports(1)[0]
    bad = ClusterNode(
        "BAD1", tmp_path, port, ["--cluster", "DEMO", "--join", shared["FR1"].address]
    )
    bad.env["QMGR_CLUSTER_SECRET"] = "not the cluster secret"
    with pytest.raises(RuntimeError, match="did not become ready") as failed:
        bad.start(timeout=30)
    assert "the server's proof does not match the cluster secret" in str(failed.value)
    assert bad.proc is None or bad.proc.wait(timeout=10) != 0
    assert "BAD1" not in clusqmgr(shared["FR1"])


def test_a_node_without_the_secret_cannot_join(shared: Cluster, tmp_path: Path) -> None:
    port = free_ports(1)[0]
    join = ["--cluster", "DEMO", "--join", shared["FR1"].address, "--insecure"]
    bad = ClusterNode("BAD2", tmp_path, port, join)
    bad.env.pop("QMGR_CLUSTER_SECRET", None)
    with pytest.raises(RuntimeError, match="did not become ready") as failed:
        bad.start(timeout=30)
    assert "no member proof" in str(failed.value)
    assert "BAD2" not in clusqmgr(shared["FR1"])


def test_a_node_with_a_secret_does_not_join_a_cluster_without_one(tmp_path: Path) -> None:
    """An --insecure cluster proves nothing: a node holding a secret will not take it for its
    own (and the insecure nodes stay as they were)."""
    grpc_port, raft_port, port = free_ports(3)
    raft = f"127.0.0.1:{raft_port}"
    fr_args = ["--cluster", "DEMO", "--full-repository", "--raft", raft, "--raft-peers", raft]
    fr1 = ClusterNode("FR1", tmp_path, grpc_port, [*fr_args, "--insecure"])
    fr1.env.pop("QMGR_CLUSTER_SECRET", None)
    fr1.start()
    try:
        join = ["--cluster", "DEMO", "--join", fr1.address]
        node = ClusterNode("SAFE1", tmp_path, port, join)
        node.env["QMGR_CLUSTER_SECRET"] = SECRET
        with pytest.raises(RuntimeError, match="did not become ready") as failed:
            node.start(timeout=30)
        assert "FR1 has no cluster secret" in str(failed.value)
        assert set(clusqmgr(fr1)) == {"FR1"}
    finally:
        fr1.kill()


def test_a_new_qmid_under_a_known_name_is_refused_until_reset_cluster(cl: Cluster) -> None:
    sub1 = cl["SUB1"]
    old = clusqmgr(cl["FR1"])["SUB1"]["QMID"]
    sub1.kill()
    assert sub1.data_dir is not None
    shutil.rmtree(sub1.data_dir)
    with pytest.raises(RuntimeError, match="did not become ready") as failed:
        sub1.start(timeout=30)
    assert f"SUB1 is already in cluster DEMO with QMID {old}" in str(failed.value)
    assert clusqmgr(cl["FR1"])["SUB1"]["QMID"] == old
    cl["FR1"].mqsc("RESET CLUSTER(DEMO) ACTION(FORCEREMOVE) QMNAME(SUB1) QUEUES(NO)")
    sub1.start()
    new = wait_for(
        lambda: clusqmgr(cl["FR1"]).get("SUB1", {}).get("QMID"),
        20.0,
        what="SUB1 rejoined",
        retry=Exception,
    )
    assert new != old


def test_a_member_restarted_on_its_data_keeps_its_qmid_and_rejoins(cl: Cluster) -> None:
    sub1 = cl["SUB1"]
    old = clusqmgr(cl["FR1"])["SUB1"]["QMID"]
    sub1.kill()
    sub1.start()
    assert clusqmgr(cl["FR1"])["SUB1"]["QMID"] == old


# ------------------------------------------------------------------ TLS


def _write(base: Path, name: str, issued: Issued) -> tuple[Path, Path]:
    base.mkdir(parents=True, exist_ok=True)
    cert, key = base / f"{name}.crt", base / f"{name}.key"
    cert.write_bytes(issued.cert_pem)
    key.write_bytes(issued.key_pem)
    key.chmod(0o600)
    return cert, key


class TlsCluster(Cluster):
    """A cluster whose nodes serve TLS and present their member certificates."""

    def __init__(self, base: Path, secret: str | None, swap: dict[str, str] | None = None) -> None:
        super().__init__(base, secret=secret)
        now = datetime.now(UTC)
        self.ca = make_ca("DEMO", now)
        self.pki = base / "pki"
        self.pki.mkdir(parents=True, exist_ok=True)
        (self.pki / "ca.crt").write_bytes(self.ca.cert_pem)
        self.issued = {n: issue(self.ca, n, now) for n in ("FR1", "PUB1", "SUB1", "SUB2")}
        self.admin = issue(self.ca, "admin", now, member=False)
        _write(self.pki, "admin", self.admin)
        self.swap = swap or {}  # node name -> whose certificate it presents

    def credentials(self, issued: Issued) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca.cert_pem,
            private_key=issued.key_pem,
            certificate_chain=issued.cert_pem,
        )

    def _node(self, name: str, port: int, args: list[str]) -> ClusterNode:
        cert, key = _write(self.pki, name, self.issued[self.swap.get(name, name)])
        tls = ["--tls-cert", str(cert), "--tls-key", str(key), "--tls-ca", str(self.pki / "ca.crt")]
        node = super()._node(name, port, [*args, *tls])
        node.c_factory = lambda address: tls_client(address, self)  # type: ignore[attr-defined]
        return node


def tls_client(address: str, cl: TlsCluster) -> QueueManagerClient:
    """A client of a TLS node presenting the administrator's client certificate."""
    ca, cert, key = cl.pki / "ca.crt", cl.pki / "admin.crt", cl.pki / "admin.key"
    return QueueManagerClient(address, timeout=20, tls_ca=ca, tls_cert=cert, tls_key=key)


@pytest.fixture
def use_tls_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    original = ClusterNode.c

    def c(self: ClusterNode) -> QueueManagerClient:
        factory = getattr(self, "c_factory", None)
        if factory is None:
            return original.fget(self)  # type: ignore[attr-defined,no-any-return]
        if self._client is None:
            self._client = factory(self.address)
        return self._client

    monkeypatch.setattr(ClusterNode, "c", property(c))


@pytest.mark.parametrize("secret", [None, SECRET], ids=["tls", "tls+secret"])
def test_a_tls_cluster_works_end_to_end(
    tmp_path: Path, secret: str | None, use_tls_clients: None
) -> None:
    cl = TlsCluster(tmp_path, secret)
    try:
        cl.start(["FR1"], ["PUB1", "SUB1"])
        cl.define_topic("SUB1", "AUTHT", "Auth", clroute="DIRECT")
        cl.wait_definition("AUTHT", ["SUB1"], on=["PUB1"])
        sub = cl["SUB1"].c.subscribe(f"{TOPIC}/x")
        cl.wait_proxy("PUB1", "SUB1", f"{TOPIC}/x")
        cl["PUB1"].c.publish(f"{TOPIC}/x", OutgoingMessage("over tls", persistent=True))
        assert received(sub, 1) == ["over tls"]
        sub.close()
        fr1 = cl["FR1"].address
        # a client certificate is no member certificate, whatever name it claims
        admin = cl.credentials(cl.admin)
        request = cpb.WatchRequest(
            join_command_json=json.dumps(Cmd.join_member("admin", "admin_1", "h:1"))
        )
        if secret is not None:
            request.proof.CopyFrom(proof_for(fr1, "admin", WATCH, credentials=admin))
        client = refusal(
            fr1, lambda ch: crpc.RepositoryStub(ch).Watch(request, timeout=CALL_TIMEOUT), admin
        )
        assert client.code() is grpc.StatusCode.PERMISSION_DENIED
        assert "not a member certificate (client admin)" in (client.details() or "")
        # SUB1's certificate does not open a channel as PUB1
        sub1_cert = cl.credentials(cl.issued["SUB1"])
        hello = cpb.ChannelHello(sender="PUB1", address="127.0.0.1:1", cluster="DEMO", qmid="x")
        if secret is not None:
            hello.proof.CopyFrom(proof_for(fr1, "PUB1", CHANNEL, credentials=sub1_cert))
        hellos = [cpb.ChannelRequest(hello=hello)]
        other = refusal(
            fr1,
            lambda ch: crpc.PeerStub(ch).Channel(iter(hellos), timeout=CALL_TIMEOUT),
            sub1_cert,
        )
        assert other.code() is grpc.StatusCode.PERMISSION_DENIED
        assert "certificate presented is queue manager SUB1's" in (other.details() or "")
    finally:
        cl.stop()


def test_a_member_presenting_another_queue_managers_certificate_cannot_join(
    tmp_path: Path, use_tls_clients: None
) -> None:
    cl = TlsCluster(tmp_path, None, swap={"SUB2": "SUB1"})
    try:
        cl.start(["FR1"], ["PUB1"])
        port = free_ports(1)[0]
        join = ["--cluster", "DEMO", "--join", cl["FR1"].address]
        bad = cl._node("SUB2", port, join)
        with pytest.raises(RuntimeError, match="did not become ready") as failed:
            bad.start(timeout=30)
        assert "SUB2: the certificate presented is queue manager SUB1's" in str(failed.value)
        assert "SUB2" not in clusqmgr(cl["FR1"])
    finally:
        cl.stop()
