"""Full repositories replicate the cluster repository with Raft: real processes on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.records import RepoEvent
from cluster.repository import ApplyResult, Cmd, ErrorCode
from qmgr.launcher.poll import wait_for
from qmgr.node.raft import (
    PASSWORD_SUPPORTED,
    RaftConfig,
    RaftConfigError,
    RaftTimers,
    RaftUnavailable,
    RepositoryReplica,
)
from qmgr.security.files import generate_secret

HARNESS = Path(__file__).with_name("raft_member.py")
ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 20.0  # generous bound for polling loops; never asserted on


def free_addresses(n: int) -> list[str]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [f"127.0.0.1:{s.getsockname()[1]}" for s in socks]
    finally:
        for s in socks:
            s.close()


SECRET = generate_secret()  # every member's, unless a test gives another


class Member:
    """One ``raft_member.py`` process, spoken to in JSON lines; ``password`` replaces the
    cluster secret it is given (in its environment)."""

    def __init__(
        self, addr: str, peers: list[str], data_dir: Path, password: str = SECRET, **extra: str
    ) -> None:
        self.addr, self.peers, self.data_dir, self.extra = addr, peers, data_dir, extra
        self.password = password
        self.proc: subprocess.Popen[str] | None = None
        self.lines: queue.Queue[str] = queue.Queue()

    def start(self) -> Member:
        args = [sys.executable, str(HARNESS), "--self", self.addr, "--peers", ",".join(self.peers)]
        args += ["--cluster", "CL1", "--data-dir", str(self.data_dir)]
        for key, value in self.extra.items():
            args += [f"--{key.replace('_', '-')}", value]
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), "QMGR_CLUSTER_SECRET": self.password},
        )
        self.lines = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc, self.lines), daemon=True).start()
        assert self.lines.get(timeout=DEADLINE) == "READY"
        return self

    @staticmethod
    def _read(proc: subprocess.Popen[str], lines: queue.Queue[str]) -> None:
        assert proc.stdout is not None
        with proc.stdout:
            for line in proc.stdout:
                lines.put(line.strip())

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        answer: dict[str, Any] = json.loads(self.lines.get(timeout=DEADLINE))
        return answer

    def submit(self, cmd: dict[str, Any]) -> dict[str, Any]:
        return self.ask({"submit": cmd, "timeout": 10})

    def snapshot(self) -> dict[str, Any]:
        return self.ask({"snapshot": True})

    def status(self) -> dict[str, Any]:
        return self.ask({"status": True})

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        if self.proc is not None and self.proc.stdin is not None:
            with contextlib.suppress(OSError):  # its reader thread closes stdout at the end
                self.proc.stdin.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


def leader_of(members: list[Member]) -> Member | None:
    """The member every live member agrees is leader, if there is one."""
    leaders = {m.status()["leader"] for m in members}
    if len(leaders) != 1 or None in leaders:
        return None
    return next((m for m in members if m.addr in leaders), None)


def same_snapshots(members: list[Member], revision: int) -> dict[str, Any] | None:
    snaps = [m.snapshot() for m in members]
    if snaps[0]["revision"] == revision and all(s == snaps[0] for s in snaps):
        return snaps[0]
    return None


@pytest.fixture
def group(tmp_path: Path) -> Iterator[list[Member]]:
    addrs = free_addresses(3)
    members = [
        Member(a, addrs, tmp_path / f"fr{i}", compact_after="4") for i, a in enumerate(addrs)
    ]
    for m in members:
        m.start()
    yield members
    for m in members:
        m.stop()


def test_three_members_replicate_accept_anywhere_and_survive_the_leader(
    group: list[Member],
) -> None:
    leader = wait_for(lambda: leader_of(group), DEADLINE, what="a leader elected by all three")
    follower = next(m for m in group if m is not leader)

    # A change submitted on a follower is forwarded, committed and applied everywhere.
    join = follower.submit(Cmd.join_member("QM1", "QM1_id", "127.0.0.1:1414"))
    assert join == {"ok": True, "error": None, "events": 1}
    defined = follower.submit(Cmd.define_topic("SPORTS", "QM1", "Sport", "CL1", "TOPICHOST"))
    assert defined == {"ok": True, "error": None, "events": 1}
    snap = wait_for(
        lambda: same_snapshots(group, 2), DEADLINE, what="both commands on every member"
    )
    assert [t["name"] for t in snap["topics"]] == ["SPORTS"]

    # A define of the same object name with another CLROUTE is rejected by every replica,
    # whichever member proposes it; the rejected commands change nobody's state.
    group[0].submit(Cmd.join_member("QM2", "QM2_id", "127.0.0.1:1415"))
    conflict = Cmd.define_topic("SPORTS", "QM2", "Sport", "CL1", "DIRECT")
    errors = [m.submit(conflict) for m in group]
    for answer in errors:
        assert answer["ok"] is False
        assert answer["error"]["code"] == ErrorCode.CLUSTER_TOPIC_CONFLICT.value
        assert answer["error"]["reason"] == 3368
    assert len({json.dumps(a, sort_keys=True) for a in errors}) == 1
    snap = wait_for(
        lambda: same_snapshots(group, 3), DEADLINE, what="the same state after the rejections"
    )
    assert [(t["name"], t["qmgr"]) for t in snap["topics"]] == [("SPORTS", "QM1")]

    # kill -9 the leader: the other two elect a new one and keep accepting changes.
    leader.kill()
    survivors = [m for m in group if m is not leader]
    new_leader = wait_for(
        lambda: leader_of(survivors), DEADLINE, what="a new leader among the survivors"
    )
    assert new_leader is not leader
    for i, member in enumerate(survivors):
        answer = member.submit(Cmd.define_topic(f"NEWS{i}", "QM2", f"News/{i}", "CL1"))
        assert answer["ok"] is True
    after = wait_for(lambda: same_snapshots(survivors, 5), DEADLINE, what="new definitions on both")
    assert {t["name"] for t in after["topics"]} == {"SPORTS", "NEWS0", "NEWS1"}

    # The killed member restarts on its data directory and catches up with what it missed.
    leader.start()
    wait_for(lambda: same_snapshots(group, 5), DEADLINE, what="the restarted member caught up")
    assert (
        wait_for(lambda: leader_of(group), DEADLINE, what="all three agree on a leader") is not None
    )
    # Log compaction (compact_after=4) wrote our JSON snapshot, not a pickle, on every member.
    dumps = [m.data_dir / "raft-snapshot.json" for m in group]
    wait_for(
        lambda: all(d.exists() for d in dumps), DEADLINE, what="a snapshot file on every member"
    )
    for dump in dumps:
        doc = json.loads(dump.read_text())
        assert doc["format"] == "qmgr-raft-snapshot"
        assert doc["repository"]["cluster"] == "CL1"


def test_status_names_the_leader_and_partners(group: list[Member]) -> None:
    wait_for(lambda: leader_of(group), DEADLINE, what="a leader")
    status = group[0].status()
    assert status["self"] == group[0].addr
    assert set(status["partners"]) == {m.addr for m in group[1:]}
    wait_for(
        lambda: set(group[0].status()["partners"].values()) == {"connected"},
        DEADLINE,
        what="partners connected",
    )
    assert status["leader"] in {m.addr for m in group}
    assert group[0].status()["quorum_connected"] is True
    # a majority is still connected with one partner gone, not with both
    group[2].kill()
    wait_for(
        lambda: group[0].status()["partners"][group[2].addr] == "disconnected",
        DEADLINE,
        what="gone",
    )
    assert group[0].status()["quorum_connected"] is True
    # PySyncObj keeps the leader it last heard of while connected to nobody: quorum_connected
    # is what tells a full repository it cannot commit
    group[1].kill()
    wait_for(
        lambda: group[0].status()["quorum_connected"] is False,
        DEADLINE,
        what="no majority connected",
    )


def test_single_replica_async_submit_events_in_log_order_and_replay(tmp_path: Path) -> None:
    (addr,) = free_addresses(1)
    seen: list[tuple[str, ...]] = []

    def record(events: list[RepoEvent]) -> None:
        seen.append(tuple(e.kind.value for e in events))

    config = RaftConfig(addr, (addr,), "CL1", password=SECRET, data_dir=tmp_path)
    with RepositoryReplica(config, on_events=record) as replica:
        replica.wait_ready(DEADLINE)

        async def propose() -> list[ApplyResult]:
            return [
                await replica.submit_async(Cmd.join_member("QM1", "QM1_id", "127.0.0.1:1")),
                await replica.submit_async(Cmd.define_topic("T", "QM1", "A/B", "CL1")),
                await replica.submit_async({"v": 1, "op": "no_such_op"}),
            ]

        joined, defined, bad = asyncio.run(propose())
        assert joined.ok and defined.ok
        assert bad.error is not None and bad.error.code is ErrorCode.PARM_VALUE_ERROR
        assert seen == [("member_joined",), ("topic_defined",)]
        before = replica.snapshot()
    with pytest.raises(RaftUnavailable):
        replica.submit(Cmd.leave_member("QM1"))
    # Restarted on the same data directory: the journal is replayed through on_events.
    seen.clear()
    with RepositoryReplica(config, on_events=record) as again:
        again.wait_ready(DEADLINE)
        wait_for(
            lambda: again.snapshot() == before, DEADLINE, what="the state rebuilt from the journal"
        )
        assert seen == [("member_joined",), ("topic_defined",)]


def test_a_single_replica_commits_each_change_without_waiting_for_its_idle_tick(
    tmp_path: Path,
) -> None:
    """One full repository is its own majority: a change it appended is committed at once,
    not when the Raft thread's idle wait ends. With that wait made longer than each submit
    may take, every submit still commits (and is in the journal replayed at restart)."""
    (addr,) = free_addresses(1)
    timers = RaftTimers(tick=2.0)  # twice the time a submit may take
    config = RaftConfig(addr, (addr,), "CL1", data_dir=tmp_path, timers=timers)
    with RepositoryReplica(config) as replica:
        replica.wait_ready(DEADLINE)
        assert replica.submit(Cmd.join_member("QM1", "QM1_id", "127.0.0.1:1"), timeout=1.0).ok
        for i in range(10):
            define = Cmd.define_topic(f"T{i}", "QM1", f"A/{i}", "CL1")
            assert replica.submit(define, timeout=1.0).ok
        before = replica.snapshot()
    with RepositoryReplica(config) as again:
        again.wait_ready(DEADLINE)
        wait_for(
            lambda: again.snapshot() == before, DEADLINE, what="the state rebuilt from the journal"
        )


def test_submit_without_quorum_raises_unavailable(tmp_path: Path) -> None:
    addrs = free_addresses(3)  # the two partners never start
    with RepositoryReplica(RaftConfig(addrs[0], tuple(addrs), "CL1", password=SECRET)) as lonely:
        with pytest.raises(RaftUnavailable, match="no commit"):
            lonely.submit(Cmd.join_member("QM1", "QM1_id", "127.0.0.1:1"), timeout=0.5)
        assert lonely.snapshot()["revision"] == 0
        assert lonely.status()["leader"] is None
        assert lonely.status()["quorum_connected"] is False


@pytest.mark.skipif(PASSWORD_SUPPORTED, reason="the 'cryptography' package is installed")
def test_a_password_without_cryptography_is_refused_not_ignored(tmp_path: Path) -> None:
    (addr,) = free_addresses(1)
    config = RaftConfig(addr, (), "CL1", password="secret", data_dir=tmp_path)
    with pytest.raises(RaftConfigError, match="cryptography"):
        RepositoryReplica(config)


@pytest.mark.skipif(
    not PASSWORD_SUPPORTED,
    reason="PySyncObj's cluster password needs the 'cryptography' package (not installed)",
)
def test_a_member_with_the_wrong_password_does_not_join(tmp_path: Path) -> None:
    addrs = free_addresses(3)
    good = [Member(a, addrs, tmp_path / a[-5:], password="right") for a in addrs[:2]]
    bad = Member(addrs[2], addrs, tmp_path / "bad", password="wrong")
    try:
        for m in (*good, bad):
            m.start()
        wait_for(
            lambda: leader_of(good), DEADLINE, what="the two members with the right password elect"
        )
        assert good[0].submit(Cmd.join_member("QM1", "QM1_id", "127.0.0.1:1"))["ok"] is True
        wait_for(lambda: same_snapshots(good, 1), DEADLINE, what="the change on both good members")
        end = time.monotonic() + 3
        while time.monotonic() < end:  # for a few seconds, the outsider learns nothing
            assert bad.status()["leader"] is None
            assert bad.snapshot()["revision"] == 0
            time.sleep(0.2)
    finally:
        for m in (*good, bad):
            m.stop()


def test_a_member_restarted_without_quorum_serves_committed_entries_only_then_commits_the_rest(
    tmp_path: Path,
) -> None:
    addrs = free_addresses(2)

    def config(addr: str) -> RaftConfig:
        return RaftConfig(addr, tuple(addrs), "CL1", password=SECRET, data_dir=tmp_path / addr[-5:])

    replicas = {a: RepositoryReplica(config(a)) for a in addrs}
    try:
        first = replicas[addrs[0]]
        first.wait_ready(DEADLINE)
        assert first.submit(Cmd.join_member("QM1", "QM1_id", "127.0.0.1:1")).ok
        leader = wait_for(lambda: first.leader, DEADLINE, what="a leader")
        follower = next(a for a in addrs if a != leader)
        wait_for(
            lambda: replicas[follower].snapshot() == first.snapshot(), DEADLINE, what="replicated"
        )
        replicas.pop(follower).close()
        # appended to the leader's log, never committed: the only other member is down
        with pytest.raises(RaftUnavailable):
            replicas[leader].submit(Cmd.define_topic("T", "QM1", "A/B", "CL1"), timeout=0.5)
        committed = replicas[leader].snapshot()
        replicas.pop(leader).close()
        # restarted alone: its journal holds the uncommitted entry, its view does not
        replicas[leader] = alone = RepositoryReplica(config(leader))
        wait_for(
            lambda: alone.snapshot() == committed, DEADLINE, what="the committed view replayed"
        )
        status = wait_for(
            lambda: (s := alone.status())["last_applied"] == s["commit_index"] and s,
            DEADLINE,
            what="the journal replayed up to the recorded commit index",
        )
        assert status["log_size"] > status["commit_index"]  # the define is in the log
        assert alone.snapshot() == committed and alone.leader is None
        # the quorum returns: the define queued in the log commits, on both
        replicas[follower] = RepositoryReplica(config(follower))
        for replica in replicas.values():
            wait_for(
                lambda r=replica: [t["name"] for t in r.snapshot()["topics"]] == ["T"],
                DEADLINE,
                what="the queued define committed",
            )
    finally:
        for replica in replicas.values():
            replica.close()
