"""The cluster-sender channel's send loop on a real SQLite store and group committer, with a
connection that records what is sent: batches leave in key order, each only once its items
and its sent mark are committed, and while one waits for its commit the next ones are taken
and share the following commit (the channel does not wait for a commit per batch)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from pathlib import Path
from typing import Any, cast

from cluster.channel import Key
from cluster.routing import Purpose
from qmgr.core.message import Message
from qmgr.node.cluster.items import Forwarded, Item
from qmgr.node.cluster.outbound import SENT_KIND, ChannelManager, Identity
from qmgr.node.committer import Committer
from qmgr.rpc.peer_client import Dialer, PeerConnection
from qmgr.store.sqlite import Op, SqliteStore

BATCH = 4  # items per batch in these tests


class _GatedStore(SqliteStore):
    """A store whose commits (by the writer thread) wait for the test to let each one go,
    and which records the highest sent mark each commit made durable (the rows of a group are
    written on the event loop, its commit waits in the thread)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.gate = threading.Semaphore(0)
        self.entered = threading.Semaphore(0)
        self.durable_mark: Key = (0, 0)  # read on the event loop once a commit is told
        self.marks_per_commit: list[int] = []
        self.marks: list[dict[str, int]] = []  # the sent marks of the group being committed

    def write(self, ops: list[Op]) -> int | None:
        self.marks = [
            json.loads(args[2]) for kind, args in ops if kind == "save" and args[0] == SENT_KIND
        ]
        return super().write(ops)

    def finish(self, written: int | None) -> None:
        self.entered.release()
        assert self.gate.acquire(timeout=30)
        super().finish(written)
        self.marks_per_commit.append(len(self.marks))
        for data in self.marks:
            self.durable_mark = max(self.durable_mark, (int(data["epoch"]), int(data["seq"])))


class _Recorder:
    """The connection: records each batch with the sent mark durable when it left."""

    def __init__(self, store: _GatedStore) -> None:
        self.store = store
        self.sent: list[tuple[list[Key], Key]] = []
        self.changed = asyncio.Event()
        self.acks: asyncio.Queue[Key] = asyncio.Queue()

    def send(self, items: Any) -> list[tuple[Item, Exception]]:
        self.sent.append(([item.key for item in items], self.store.durable_mark))
        self.changed.set()
        return []

    async def next_ack(self) -> Key:
        return await self.acks.get()


async def _sent(conn: _Recorder, batches: int) -> None:
    while len(conn.sent) < batches:
        conn.changed.clear()
        await asyncio.wait_for(conn.changed.wait(), 30)


def _publish(manager: ChannelManager, count: int) -> None:
    for _ in range(count):
        msg = Message("AB" * 24, b"x", persistent=True)
        manager.send_publication("SUB1", Forwarded("T", msg, ("PUB1",), Purpose.DELIVER))


def test_batches_leave_in_order_after_their_mark_and_share_commits(tmp_path: Path) -> None:
    """While the first batch waits for its commit, two more are taken (their marks
    journaled); none leaves before the commit holding its mark, and the two share the next
    commit instead of waiting for one each."""

    async def run() -> tuple[list[tuple[list[Key], Key]], list[int]]:
        store = _GatedStore(tmp_path)
        # every commit by the writer thread, none unless waited for
        committer = Committer(store, idle_interval=3600, cheap_commit=0)
        committer.start()
        seq = iter(range(1, 10_000))
        manager = ChannelManager(
            Identity("PUB1", "127.0.0.1:1", "C"),
            store,
            1,
            lambda: next(seq),
            lambda peer: "127.0.0.1:2",
            lambda peer: (),
            lambda peer, status, reason: None,
            committer.durable,
            lambda peer, item, reason, text: None,
            cast(Dialer, None),
        )
        ch = manager.channel("SUB1")
        ch.sm.batch = BATCH
        ch.stopped = True  # no task of its own: this test drives the send loop
        ch.sm.hello_answer((0, 0))  # the connection is up: RUNNING
        _publish(manager, BATCH)
        conn = _Recorder(store)
        pump = asyncio.get_running_loop().create_task(ch._pump(cast(PeerConnection, conn)))
        await asyncio.to_thread(store.entered.acquire, timeout=30)  # the first mark's commit
        _publish(manager, 2 * BATCH)
        for _ in range(500):  # 5 s at most
            if ch.sm.batches == 3:
                break
            await asyncio.sleep(0.01)
        assert ch.sm.batches == 3, "the next batches are taken while the first one waits"
        assert conn.sent == []  # taken, not sent: the first mark is not committed yet
        store.gate.release()
        await _sent(conn, 1)
        await asyncio.to_thread(store.entered.acquire, timeout=30)  # the others' commit
        await asyncio.sleep(0.05)
        assert len(conn.sent) == 1
        store.gate.release()
        await _sent(conn, 3)
        pump.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pump
        await committer.stop()
        return conn.sent, store.marks_per_commit

    sent, marks_per_commit = asyncio.run(run())
    keys = [key for batch, _ in sent for key in batch]
    assert keys == sorted(keys) and len(keys) == len(set(keys)) == 3 * BATCH
    for batch, durable_mark in sent:  # store and forward
        assert durable_mark >= batch[-1]
    assert marks_per_commit == [1, 2]  # the two batches taken meanwhile share one commit
