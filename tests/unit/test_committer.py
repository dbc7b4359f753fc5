"""The group commit (qmgr.node.committer) on a real SQLite store: what a waiter is told is on
disk, changes of one event-loop turn share a commit, answers keep their order, only commits
measured cheap are made on the event loop, and a failing commit fails everyone (fail-stop)."""

from __future__ import annotations

import asyncio
import math
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from qmgr.node.committer import Committer
from qmgr.store import StoreFailed
from qmgr.store.sqlite import Op, SqliteStore


def _in_files(path: Path, query: str) -> list[Any]:
    """``query`` on what a process killed now would leave: the database and its write-ahead log
    as they are in the files (copied: the running store holds the database exclusively)."""
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("qmgr.sqlite", "qmgr.sqlite-wal"):
            if (path / name).exists():
                shutil.copyfile(path / name, Path(tmp) / name)
        db = sqlite3.connect(Path(tmp) / "qmgr.sqlite")
        try:
            return db.execute(query).fetchall()
        finally:
            db.close()


def _on_disk(path: Path) -> dict[str, str]:
    return dict(_in_files(path, "SELECT key, value FROM kv WHERE key LIKE 'k%'"))


@pytest.mark.parametrize("thread", [False, True])  # on the event loop, by the writer thread
def test_what_a_waiter_is_told_is_durable_is_on_disk(tmp_path: Path, thread: bool) -> None:
    async def run() -> None:
        store = SqliteStore(tmp_path)
        # any commit counts as cheap (on the event loop once one was measured), or none does
        committer = Committer(store, cheap_commit=0.0 if thread else math.inf)
        committer.start()
        store.set_value("k1", "a")
        await committer.durable()
        assert _on_disk(tmp_path) == {"k1": "a"}
        store.set_value("k2", "b")
        store.set_value("k3", "c")
        await committer.durable()
        assert _on_disk(tmp_path) == {"k1": "a", "k2": "b", "k3": "c"}
        await committer.stop()

    asyncio.run(run())


class _TimedStore(SqliteStore):
    """A store whose commits take as long as the test says, on a clock of the test's own, and
    which records where each was made (the rows are always written on the event loop)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.now = 0.0
        self.takes = 0.0  # seconds the next commits take
        self.where: list[str] = []

    def clock(self) -> float:
        return self.now

    def finish(self, written: int | None) -> None:
        main = threading.current_thread() is threading.main_thread()
        self.where.append("loop" if main else "thread")
        self.now += self.takes
        super().finish(written)


def test_only_commits_measured_cheap_are_made_on_the_event_loop(tmp_path: Path) -> None:
    """A flush can take 10 ms on a busy disk: the event loop never waits for one unless the
    commits of its kind were measured cheap lately. A kind not measured yet goes to the
    writer thread; one slow commit sends the next ones there until fast ones bring the
    estimate down again; commits without a flush (Service Bus completions) are measured
    apart."""

    async def run() -> list[str]:
        store = _TimedStore(tmp_path)
        committer = Committer(store, cheap_commit=0.001, clock=store.clock)
        committer.start()
        n = 0

        async def commit(takes: float, kind: str = "flush") -> None:
            nonlocal n
            store.takes = takes
            n += 1
            if kind == "flush":
                store.set_value(f"k{n}", "v")
            else:
                store.append("sb_settle", ("q", n))
            await committer.durable()

        await commit(0.0)  # not measured yet: thread
        await commit(0.0)  # measured cheap: loop
        await commit(0.008)  # still expected cheap: loop, and now known to be slow
        await commit(0.0)  # thread ...
        await commit(0.0, "settle")  # another kind, not measured yet: thread
        await commit(0.0, "settle")  # measured cheap while flushes are slow: loop
        await commit(0.0)  # ... thread: the estimate falls slowly
        for _ in range(20):
            await commit(0.0)
        await committer.stop()
        return store.where

    where = asyncio.run(run())
    assert where[:7] == ["thread", "loop", "loop", "thread", "thread", "loop", "thread"]
    assert where[7:].count("thread") >= 5 and where[-1] == "loop"  # fast again: back


def _tell(told: list[str], label: str) -> Callable[[StoreFailed | None], None]:
    """A waiter's callback: appends ``label:error`` to ``told``."""
    return lambda error: told.append(f"{label}:{error}")


def test_changes_of_one_turn_share_a_commit_and_answers_keep_their_order(tmp_path: Path) -> None:
    async def run() -> tuple[list[str], int]:
        store = SqliteStore(tmp_path)
        committer = Committer(store)
        committer.start()
        told: list[str] = []
        for i in range(5):  # five connections, one settlement each, in one loop turn
            store.set_value(f"k{i}", "x")
            committer.when_durable(_tell(told, str(i)))
        committer.when_durable(lambda error: told.append(f"nothing new:{error}"))
        assert told == []
        await committer.durable()
        commits = store._commits
        committer.when_durable(lambda error: told.append(f"already:{error}"))
        await committer.stop()
        return told, commits

    told, commits = asyncio.run(run())
    assert told == [*(f"{i}:None" for i in range(5)), "nothing new:None", "already:None"]
    assert commits == 1
    assert len(_on_disk(tmp_path)) == 5


class _HeldStore(SqliteStore):
    """A store whose commits (by the writer thread) wait until the test lets them go on, and
    which records what each group held."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.entered = threading.Event()
        self.release = threading.Event()
        self.groups: list[list[str]] = []

    def write(self, ops: list[Op]) -> int | None:
        self.groups.append([args[0] for _, args in ops])
        return super().write(ops)

    def finish(self, written: int | None) -> None:
        self.entered.set()
        assert self.release.wait(30)
        super().finish(written)


def test_what_arrives_while_a_commit_is_written_is_the_next_group(tmp_path: Path) -> None:
    """Connections whose changes arrive while a group is with the writer thread share the next
    commit, taken as soon as that one is done; each waiter is told only once its own changes
    are on disk, in the order they were given."""

    async def run() -> tuple[list[str], list[list[str]]]:
        store = _HeldStore(tmp_path)
        committer = Committer(store, cheap_commit=0.0)
        committer.start()
        told: list[str] = []
        for name in ("a", "b"):  # two connections in one loop turn: the writer thread
            store.set_value(f"k{name}", "x")
            committer.when_durable(_tell(told, name))
        await asyncio.to_thread(store.entered.wait, 30)
        for name in ("c", "d", "e"):  # three more while the first group is being written
            store.set_value(f"k{name}", "x")
            committer.when_durable(_tell(told, name))
            await asyncio.sleep(0)  # each in a loop turn of its own
        assert told == []
        store.release.set()
        await committer.durable()
        await committer.stop()
        return told, store.groups

    told, groups = asyncio.run(run())
    assert groups == [["ka", "kb"], ["kc", "kd", "ke"]]
    assert told == [f"{name}:None" for name in "abcde"]
    assert len(_on_disk(tmp_path)) == 5


def test_stop_commits_what_nobody_waited_for(tmp_path: Path) -> None:
    async def run() -> None:
        store = SqliteStore(tmp_path)
        committer = Committer(store, idle_interval=3600, cheap_commit=0.0)
        committer.start()
        for i in range(100):
            store.set_value(f"k{i}", "v")
        await committer.stop()

    asyncio.run(run())
    assert len(_on_disk(tmp_path)) == 100


def test_a_failing_commit_fails_every_waiter_and_every_later_one(tmp_path: Path) -> None:
    async def run() -> tuple[list[str], list[StoreFailed]]:
        store = SqliteStore(tmp_path, fail_at_commit=1)
        failures: list[StoreFailed] = []
        committer = Committer(store, on_failure=failures.append)
        committer.start()
        told: list[str] = []
        store.set_value("k1", "lost")
        committer.when_durable(lambda error: told.append(type(error).__name__))
        with pytest.raises(StoreFailed, match="disk is full"):
            await committer.durable()
        store.set_value("k2", "after")
        with pytest.raises(StoreFailed):
            await committer.durable()
        committer.when_durable(lambda error: told.append(type(error).__name__))
        await committer.stop()
        return told, failures

    told, failures = asyncio.run(run())
    assert told == ["StoreFailed", "StoreFailed"]
    assert len(failures) == 1
    assert _on_disk(tmp_path) == {}


def _synchronous(store: SqliteStore) -> int:
    return int(store._conn.execute("PRAGMA synchronous").fetchone()[0])


def test_only_a_group_of_completions_is_committed_without_a_flush(tmp_path: Path) -> None:
    """FULL (2) for everything but a group made only of Service Bus completions, which is
    written to the write-ahead log (it survives the process being killed) and flushed with
    the next full commit: NORMAL (1)."""
    store = SqliteStore(tmp_path)
    store.append("sb_put", ("q", 1, b"a", "{}"))
    store.append("sb_put", ("q", 2, b"b", "{}"))
    store.commit(store.take()[0])
    assert _synchronous(store) == 2
    store.append("sb_settle", ("q", 1))
    store.commit(store.take()[0])
    assert _synchronous(store) == 1
    store.append("sb_settle", ("q", 2))
    store.append("sb_put", ("q", 3, b"c", "{}"))  # a send in the same group: flushed
    store.commit(store.take()[0])
    assert _synchronous(store) == 2
    store.append("sb_del", ("q", 3))  # a receive-and-delete removal: flushed
    store.commit(store.take()[0])
    assert _synchronous(store) == 2
    # the files as a kill -9 would leave them hold every committed change
    assert _in_files(tmp_path, "SELECT COUNT(*) FROM sb_messages") == [(0,)]
    store.close()
