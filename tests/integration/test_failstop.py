"""A failed commit is fail-stop, against real node processes: the node logs the real SQLite
error, turns health NOT_SERVING, answers every waiting and later call at once (never success for
what was not committed, never a hang, MQSC included) and exits non-zero; after a restart every
acknowledged persistent put and publication is there and none reported failed is."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from qmgr.client import MQClientError
from qmgr.client.errors import ConnectionFailed
from qmgr.node.server import STORE_FAULT_ENV
from qmgr.wire import admin_pb2
from tests.integration.conftest import NodeProcess

RESOURCE_PROBLEM = 2102
BODY_PAD = b"." * 4096


class Outcome:
    def __init__(self) -> None:
        self.acked: set[bytes] = set()
        self.failed: set[bytes] = set()  # answered with an error: must not be stored
        self.lock = threading.Lock()
        self.first_failure = threading.Event()


def _setup(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(FS.Q) MAXDEPTH(100000)")
        qm.mqsc("DEFINE QLOCAL(FS.DEST) MAXDEPTH(100000)")
        qm.create_subscription("fs/t", name="FS.SUB", durable=True, destination="FS.DEST")


def _worker(node: NodeProcess, kind: str, out: Outcome, limit: int) -> None:
    with node.client() as qm:
        extra = 0
        for i in range(limit):
            body = f"{kind}-{i}-".encode() + BODY_PAD
            try:
                if kind == "put":
                    qm.put("FS.Q", body, persistent=True)
                else:
                    qm.publish("fs/t", body, persistent=True)
            except ConnectionFailed:
                return  # ambiguous only if the process went away mid-call: not counted
            except MQClientError as exc:
                assert exc.reason == RESOURCE_PROBLEM, exc
                with out.lock:
                    out.failed.add(body)
                out.first_failure.set()
                extra += 1
                if extra >= 5:  # later calls are refused at once too
                    return
                continue
            with out.lock:
                out.acked.add(body)


def _watch_health(address: str, seen: list[int]) -> None:
    with grpc.insecure_channel(address) as ch:
        stream = health_pb2_grpc.HealthStub(ch).Watch(
            health_pb2.HealthCheckRequest(service=""), timeout=180
        )
        with contextlib.suppress(grpc.RpcError):
            for update in stream:
                seen.append(update.status)


def _drain(qm: object, queue: str) -> list[bytes]:
    got: list[bytes] = []
    while True:
        batch = qm.get_many(queue, 500)  # type: ignore[attr-defined]
        if not batch:
            return got
        got.extend(m.body for m in batch)


def _run_until_fail_stop(node: NodeProcess, limit: int) -> Outcome:
    """Put and publish persistent messages from two threads until the store fails; check the
    node goes NOT_SERVING, answers MQSC promptly and exits non-zero with the SQLite error."""
    out = Outcome()
    seen: list[int] = []
    watcher = threading.Thread(target=_watch_health, args=(node.address, seen), daemon=True)
    watcher.start()
    workers = [
        threading.Thread(target=_worker, args=(node, kind, out, limit), daemon=True)
        for kind in ("put", "publish")
    ]
    for w in workers:
        w.start()
    assert out.first_failure.wait(120), "the store never failed"
    # MQSC meanwhile: answered or refused, but never left hanging
    with grpc.insecure_channel(node.address) as ch:
        mqsc = ch.unary_unary(
            "/qmgr.wire.Admin/Mqsc",
            request_serializer=admin_pb2.MqscRequest.SerializeToString,
            response_deserializer=admin_pb2.MqscResponse.FromString,
        )
        try:
            mqsc(admin_pb2.MqscRequest(command="DISPLAY QMGR"), timeout=15)
        except grpc.RpcError as exc:
            assert exc.code() != grpc.StatusCode.DEADLINE_EXCEEDED, "MQSC hung"
    for w in workers:
        w.join(60)
        assert not w.is_alive(), "a client call hung"
    assert node.proc is not None
    rc = node.proc.wait(60)
    assert rc != 0
    watcher.join(30)
    assert health_pb2.HealthCheckResponse.NOT_SERVING in seen, seen
    log = node.log.read_text()
    assert "database or disk is full" in log, log[-3000:]
    assert "NOT_SERVING" in log
    assert "cannot rollback" not in log
    assert out.acked, "nothing was acknowledged before the fault"
    return out


def _check_after_restart(node: NodeProcess, out: Outcome) -> None:
    with node.client() as qm:
        got = _drain(qm, "FS.Q") + _drain(qm, "FS.DEST")
    assert len(got) == len(set(got)), "duplicates after restart"
    missing = out.acked - set(got)
    assert not missing, f"{len(missing)} acknowledged messages lost"
    resurrected = out.failed & set(got)
    assert not resurrected, f"{len(resurrected)} messages reported failed are stored"


def test_commit_fault_is_fail_stop(tmp_path: Path) -> None:
    node = NodeProcess("QM1", tmp_path)
    node.start()
    try:
        _setup(node)
        node.stop()
        node.env = {**node.env, STORE_FAULT_ENV: "25"}
        node.start()
        out = _run_until_fail_stop(node, limit=1000)
        assert out.failed
        node.env = {k: v for k, v in node.env.items() if k != STORE_FAULT_ENV}
        node.start()
        _check_after_restart(node, out)
        # and it serves normally again
        with node.client() as qm:
            qm.put("FS.Q", b"after", persistent=True)
            m = qm.get("FS.Q", wait_ms=5000)
            assert m is not None and m.body == b"after"
    finally:
        node.kill()


@contextlib.contextmanager
def _tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs for a full disk: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="a real full disk needs a small tmpfs, which only root can mount",
)
def test_full_disk_is_fail_stop(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "disk", "3m") as disk:
        node = NodeProcess("QM1", tmp_path)
        node.data_dir = disk / "QM1"  # the log and the node registry stay off the small disk
        node.start()
        try:
            _setup(node)
            out = _run_until_fail_stop(node, limit=5000)
            node.kill()
            subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
            node.start()
            _check_after_restart(node, out)
        finally:
            node.kill()
