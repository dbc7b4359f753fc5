"""A member that proved who it is but misbehaves, against real nodes: what it proved (its
queue manager name) bounds what it can touch."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from qmgr.client.connect import call_metadata
from qmgr.client.types import OutgoingMessage
from qmgr.security.member import CHANNEL
from qmgr.wire import admin_pb2, admin_pb2_grpc
from qmgr.wire import cluster_pb2 as cpb
from qmgr.wire import cluster_pb2_grpc as crpc
from tests.integration.app_security import Nodes, add_user, nodes
from tests.integration.cluster_nodes import Cluster
from tests.integration.conftest import NodeProcess
from tests.integration.members import proof_for
from tests.integration.test_member_auth import (
    TOPIC,
    cl,
    forged_hello,
    heard_from_pub1,
    received,
    shared,
)

__all__ = ["cl", "nodes", "shared"]


def test_a_member_cannot_open_a_channel_under_another_members_qmid(shared: Cluster) -> None:
    """FORGER proves it is FORGER, then names PUB1's QMID in its hello: the receiver keeps
    its position per QMID, so a sequence pushed there would make PUB1's real publications
    look like duplicates (acknowledged and dropped)."""
    sub1 = shared["SUB1"]
    sub, position, qmid, before = heard_from_pub1(shared, f"{TOPIC}/x")
    for claimed in (qmid, "?PUB1"):  # PUB1's QMID, and the QMID of state kept by name
        proof = proof_for(sub1.address, "FORGER", CHANNEL)
        refused = forged_hello(sub1.address, "FORGER", claimed, proof)
        assert refused.code() is grpc.StatusCode.PERMISSION_DENIED, refused
        assert f"QMID {claimed} is not queue manager FORGER's" in (refused.details() or "")
    assert position() == (qmid, before)
    assert sub.receive_batch(timeout=1) == []
    shared["PUB1"].c.publish(f"{TOPIC}/x", OutgoingMessage("after", persistent=True))
    assert received(sub, 1) == ["after"]
    sub.close()


OTHER_UID = 65534  # nobody


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
@pytest.mark.parametrize("planted", ["directory", "database"])
def test_a_data_directory_holding_another_users_files_is_refused(
    tmp_path: Path, planted: str
) -> None:
    """Another local user who made the data directory (say under /tmp), or left a file in it,
    could read or swap the node's database: the node does not start on it."""
    data = tmp_path / "QM1"
    data.mkdir(mode=0o777)
    os.chmod(data, 0o777)
    victim = data
    if planted == "database":
        victim = data / "qmgr.sqlite"
        victim.write_bytes(b"")
        os.chmod(victim, 0o666)
    os.chown(victim, OTHER_UID, OTHER_UID)
    node = NodeProcess("QM1", tmp_path)
    try:
        with pytest.raises(RuntimeError) as failed:
            node.start(timeout=30)
    finally:
        node.kill()  # should it have started
    assert f"{victim} in the data directory belongs to uid {OTHER_UID}" in str(failed.value)
    assert victim.stat().st_uid == OTHER_UID  # left as it was


FORGED = "FORGED qmgr.node INFO all is well"


def _log_lines(path: Path) -> list[str]:
    return path.read_text(errors="replace").splitlines()


def test_names_from_an_unauthenticated_caller_cannot_forge_log_lines(
    nodes: Nodes, tmp_path: Path
) -> None:
    """A user name (--auth) or a claimed sender (a hello) with a line break is refused, and
    what is logged of it stays on one line."""
    users_file = tmp_path / "users.json"
    add_user(users_file, "admin", "admin-Pa55", "mqm")
    node = nodes.start("QM1", "--auth", str(users_file))
    with grpc.insecure_channel(node.address) as channel:
        stub = admin_pb2_grpc.AdminStub(channel)
        with pytest.raises(grpc.RpcError) as bad:
            stub.Mqsc(
                admin_pb2.MqscRequest(command="DISPLAY QMGR"),
                metadata=call_metadata(f"x\n{FORGED}", "pw"),
                timeout=10,
            )
    assert bad.value.code() is grpc.StatusCode.UNAUTHENTICATED
    assert "names no valid user name" in (bad.value.details() or "")
    nodes.stop_all()
    assert not any(line.startswith("FORGED") for line in _log_lines(node.log))


def test_a_claimed_sender_cannot_forge_log_lines(cl: Cluster) -> None:
    sub1 = cl["SUB1"]
    refused = forged_hello(sub1.address, f"PUB1\n{FORGED}", "PUB1_x", None)
    assert refused.code() is grpc.StatusCode.UNAUTHENTICATED
    cl.stop()
    assert not any(line.startswith("FORGED") for line in _log_lines(sub1.log))


def test_a_channel_without_a_hello_is_not_held_open(shared: Cluster) -> None:
    """An unauthenticated caller opens Peer.Channel and sends nothing: the node ends the
    stream instead of keeping it (and its state) forever."""
    silence = threading.Event()

    def nothing() -> Iterator[cpb.ChannelRequest]:
        silence.wait(60)
        return
        yield

    with grpc.insecure_channel(shared["SUB1"].address) as channel:
        call = crpc.PeerStub(channel).Channel(nothing(), timeout=60)
        with pytest.raises(grpc.RpcError) as ended:
            list(call)
    silence.set()
    assert ended.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "no hello within" in (ended.value.details() or "")
    assert shared["SUB1"].mqsc("DISPLAY QMGR")  # still serving
