"""The SQLite store: a journal that collects durable changes and commits them in groups.

The node's event loop appends changes (cheap: one tuple each) and writes whatever has
accumulated into one transaction (``write``); a single writer thread commits it (``finish``: the
flush, which needs no Python lock), see ``qmgr.node.committer``. The running node holds the
file in SQLite's exclusive locking mode (no file lock taken and released per transaction; the
log's index in the process's memory), so nothing else opens it while the node runs. WAL mode with
synchronous=FULL: a committed group survives the process being killed and the machine losing
power. A group made only of Service Bus completions and lock marks is committed with
synchronous=NORMAL: written to the write-ahead log before anyone is told (so it survives the
process being killed) and flushed to the disk with the next full commit or checkpoint; a power
loss in between can only bring a completed message back for another delivery, which peek-lock's
at-least-once delivery allows, or leave a lock the restart took uncounted, and saves a flush per
completion. The database is created with
mode 0600 (SQLite gives its -wal file the same mode).

The log is copied back into the database (a checkpoint: the pages written, then two flushes)
once it holds ``CHECKPOINT_PAGES`` pages rather than SQLite's default 1,000. A checkpoint runs
inside the commit that crosses the mark, on the event loop when commits measure cheap, and
Service Bus settlements write about three pages per commit (a row's table and index leaves, the
lock marks' leaf), so at the default a node settling a few thousand messages a second
checkpointed over ten times a second, each time flushing twice and copying the same few hot
pages again. The log grows to about 33 MB before it is reused; a restart replays it. A
stream of nothing but settlements is thus flushed less often (by a checkpoint, every few
thousand messages), which widens only the power-loss case above: a process killed loses
nothing written to the log.

A group is written as one executemany per run of changes of one kind. A message the group both
adds and removes (a persistent publication delivered, or a transmission-queue row confirmed by
the peer, before the group was written: most of them on a busy node) is left out: the
transaction is atomic, so the file ends as it would had both been written, and such a message
costs no row, no log page and, when a whole group is like that, no flush. Message headers are
binary (``qmgr.store.codec``); rows written with JSON headers still load.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qmgr.core.message import Message
from qmgr.store import StoreInUse
from qmgr.store.codec import decode_message, encode_header, encode_properties
from qmgr.store.servicebus import (
    SB_SCHEMA,
    SB_SQL,
    SbLoaded,
    coalesce_lock_marks,
    load_servicebus,
    register_functions,
    upgrade_schema,
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS objects (
    kind TEXT NOT NULL, name TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (kind, name));
CREATE TABLE IF NOT EXISTS messages (
    seq INTEGER PRIMARY KEY, queue TEXT NOT NULL, message_id TEXT NOT NULL,
    body BLOB NOT NULL, header TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS retained (
    topic TEXT PRIMARY KEY, seq INTEGER NOT NULL, message_id TEXT NOT NULL,
    body BLOB NOT NULL, header TEXT NOT NULL);
"""

Op = tuple[str, tuple[Any, ...]]

CHECKPOINT_PAGES = 8000  # log pages that start a checkpoint (see the docstring)

# the changes a group may consist of to be committed without a flush (see the docstring)
RELAXED = frozenset({"sb_settle", "sb_lock", "sb_unlock"})

_SQL = {
    "add": "INSERT OR REPLACE INTO messages (seq, queue, message_id, body, header) VALUES (?,?,?,?,?)",
    "del": "DELETE FROM messages WHERE seq = ?",
    "upd": "UPDATE messages SET header = ? WHERE seq = ?",
    "save": "INSERT OR REPLACE INTO objects (kind, name, data) VALUES (?,?,?)",
    "drop": "DELETE FROM objects WHERE kind = ? AND name = ?",
    "ret": "INSERT OR REPLACE INTO retained (topic, seq, message_id, body, header) VALUES (?,?,?,?,?)",
    "unret": "DELETE FROM retained WHERE topic = ?",
    "kv": "INSERT OR REPLACE INTO kv (key, value) VALUES (?,?)",
    **SB_SQL,
}


def transient_messages(ops: list[Op], written_seq: int) -> tuple[set[int], int, bool]:
    """Which of ``ops`` a commit may leave out, with the same end state: a message the group
    adds and later removes (a persistent publication delivered, or a transmission-queue row
    confirmed by the peer, before the group is written). Its adds are left out; so is its
    removal if its sequence is above ``written_seq`` (the highest ever written: no older row
    of that sequence can be on disk), else the removal stays and deletes what may be there. A
    rewrite of such a message left in between updates nothing. Returns the indexes to leave
    out, the highest sequence now written, and whether the group holds anything but message
    adds and removals."""
    added: dict[int, int] = {}
    again: dict[int, list[int]] = {}  # a sequence added more than once before its removal
    skip: set[int] = set()
    top = written_seq
    others = False
    for i, (kind, args) in enumerate(ops):
        if kind == "add":
            seq = args[0]
            if seq > top:
                top = seq
            earlier = added.get(seq)
            if earlier is not None:
                again.setdefault(seq, []).append(earlier)
            added[seq] = i
        elif kind == "del":
            seq = args[0]
            at = added.pop(seq, None)
            if at is not None:
                skip.add(at)
                if again:
                    skip.update(again.pop(seq, ()))
                if seq > written_seq:
                    skip.add(i)
        else:
            others = True
    return skip, top, others


def runs(ops: list[Op], skip: set[int]) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """``ops`` but those at the indexes in ``skip``, as runs of one kind (one executemany
    each), in order."""
    out: list[tuple[str, list[tuple[Any, ...]]]] = []
    kind = ""
    rows: list[tuple[Any, ...]] = []
    for i, (k, args) in enumerate(ops):
        if skip and i in skip:
            continue
        if k != kind:
            rows = []
            out.append((k, rows))
            kind = k
        rows.append(args)
    return out


@dataclass
class Loaded:
    """Everything a node needs to come back after a restart."""

    uid: str
    epoch: int
    objects: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    messages: list[tuple[str, Message]] = field(default_factory=list)
    retained: list[Message] = field(default_factory=list)
    max_sequence: int = 0
    kv: dict[str, str] = field(default_factory=dict)
    servicebus: SbLoaded = field(default_factory=SbLoaded)


def _connect(path: Path) -> sqlite3.Connection:
    # created 0600 before SQLite opens it: SQLite gives its -wal the database's mode
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        # one process owns the file while it runs: no file lock taken and dropped per
        # transaction (and the write-ahead log's index lives in the process, not in a shared
        # -shm file); the lock is taken now, so a file held elsewhere stops the start at once
        conn.execute("PRAGMA locking_mode=EXCLUSIVE")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("BEGIN EXCLUSIVE")
        conn.execute("COMMIT")
    except sqlite3.OperationalError as exc:
        conn.close()
        if "locked" in str(exc):
            raise StoreInUse(
                f"{path} is in use by another process (a node already running on this data "
                "directory, or a tool holding the file open)"
            ) from None
        raise
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(f"PRAGMA wal_autocheckpoint={CHECKPOINT_PAGES}")
    return conn


class SqliteStore:
    """Implements :class:`qmgr.core.journal.Journal`; ``take`` and ``commit`` move the
    collected changes to disk."""

    def __init__(self, data_dir: Path, *, fail_at_commit: int = 0) -> None:
        """``fail_at_commit`` (tests only): the N-th non-empty commit raises
        ``sqlite3.OperationalError("database or disk is full")`` and writes nothing."""
        data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._fail_at_commit = fail_at_commit
        self._commits = 0
        self.path = data_dir / "qmgr.sqlite"
        self._conn = _connect(self.path)
        self._full = True  # the connection's synchronous setting is FULL
        register_functions(self._conn)
        self._conn.executescript(SCHEMA + SB_SCHEMA)
        upgrade_schema(self._conn)
        self._pending: list[Op] = []
        self.appended = 0  # changes collected so far
        self.committed = 0  # changes known to be on disk
        # the highest sequence a message row was ever written with (rows above it are not on
        # disk, so a group removing such a row it added itself need not touch the table)
        row = self._conn.execute("SELECT MAX(seq) FROM messages").fetchone()
        self._written_seq = int(row[0] or 0)
        self._last_props: object = None
        self._last_encoded = b""

    # -- start-up ---------------------------------------------------------------------------

    def load(self) -> Loaded:
        c = self._conn
        kv = dict(c.execute("SELECT key, value FROM kv").fetchall())
        uid = kv.get("uid") or uuid.uuid4().hex[:8]
        epoch = int(kv.get("epoch", "0")) + 1
        c.execute("BEGIN")
        c.execute(_SQL["kv"], ("uid", uid))
        c.execute(_SQL["kv"], ("epoch", str(epoch)))
        c.execute("COMMIT")
        loaded = Loaded(uid=uid, epoch=epoch, kv=kv)
        for kind, name, data in c.execute("SELECT kind, name, data FROM objects"):
            loaded.objects.setdefault(kind, {})[name] = json.loads(data)
        for seq, queue, mid, body, header in c.execute(
            "SELECT seq, queue, message_id, body, header FROM messages ORDER BY seq"
        ):
            loaded.messages.append((queue, decode_message(seq, mid, body, header)))
        for seq, mid, body, header in c.execute(
            "SELECT seq, message_id, body, header FROM retained"
        ):
            loaded.retained.append(decode_message(seq, mid, body, header))
        row = c.execute(
            "SELECT MAX(m) FROM (SELECT MAX(seq) AS m FROM messages UNION ALL "
            "SELECT MAX(seq) FROM retained)"
        ).fetchone()
        loaded.max_sequence = int(row[0] or 0)
        loaded.servicebus = load_servicebus(c)
        return loaded

    # -- Journal ----------------------------------------------------------------------------

    def append(self, kind: str, args: tuple[Any, ...]) -> None:
        """Collect one change (``kind`` names its statement) for the next group commit."""
        self._pending.append((kind, args))
        self.appended += 1

    def _header(self, msg: Message) -> bytes:
        if msg.properties is not self._last_props:  # copies of one publication share them
            self._last_encoded = encode_properties(msg.properties)
            self._last_props = msg.properties
        return encode_header(msg, self._last_encoded)

    def message_added(self, queue: str, msg: Message) -> None:
        # ``append`` and ``_header`` written out: once per persistent copy, on the event loop
        if msg.properties is not self._last_props:
            self._last_encoded = encode_properties(msg.properties)
            self._last_props = msg.properties
        header = encode_header(msg, self._last_encoded)
        self._pending.append(("add", (msg.sequence, queue, msg.message_id, msg.body, header)))
        self.appended += 1

    def message_removed(self, queue: str, msg: Message) -> None:
        self._pending.append(("del", (msg.sequence,)))
        self.appended += 1

    def message_updated(self, queue: str, msg: Message) -> None:
        self.append("upd", (self._header(msg), msg.sequence))

    def object_saved(self, kind: str, name: str, data: dict[str, Any]) -> None:
        self.append("save", (kind, name, json.dumps(data)))

    def object_deleted(self, kind: str, name: str) -> None:
        self.append("drop", (kind, name))

    def retained_saved(self, topic: str, msg: Message) -> None:
        self.append("ret", (topic, msg.sequence, msg.message_id, msg.body, self._header(msg)))

    def retained_deleted(self, topic: str) -> None:
        self.append("unret", (topic,))

    def set_value(self, key: str, value: str) -> None:
        self.append("kv", (key, value))

    # -- group commit -----------------------------------------------------------------------

    @property
    def has_pending(self) -> bool:
        return bool(self._pending)

    def take(self) -> tuple[list[Op], int]:
        """Hand over the collected changes (event-loop side) with the count they reach."""
        ops, self._pending = self._pending, []
        return ops, self.appended

    def commit(self, ops: list[Op]) -> None:
        """Write ``ops`` in one transaction and commit it (``write``, then ``finish``)."""
        self.finish(self.write(ops))

    def write(self, ops: list[Op]) -> int | None:
        """Open a transaction and write ``ops`` into it, not committed yet: one executemany
        per run of one kind, without the messages the group both adds and removes (see
        ``transient_messages``). Returns what ``finish`` takes (None: nothing to commit)."""
        if not ops:
            return None
        self._commits += 1
        if self._commits == self._fail_at_commit:
            raise sqlite3.OperationalError("database or disk is full")
        c = self._conn
        skip, top, others = transient_messages(ops, self._written_seq)
        if others:  # Service Bus changes: their lock marks coalesced (on the ops left)
            if skip:
                ops, skip = [op for i, op in enumerate(ops) if i not in skip], set()
            ops = coalesce_lock_marks(ops)
        full = any(kind not in RELAXED for kind, _ in ops)
        if full != self._full:
            c.execute("PRAGMA synchronous=FULL" if full else "PRAGMA synchronous=NORMAL")
            self._full = full
        c.execute("BEGIN")
        with self._rolled_back_on_error():
            for kind, rows in runs(ops, skip):
                c.executemany(_SQL[kind], rows)
        return top

    def finish(self, written: int | None) -> None:
        """Commit the transaction ``write`` opened: its pages go to the write-ahead log, which
        is flushed to the disk unless the group is only Service Bus completions. The flush is
        the slow part of a commit, and SQLite holds no Python lock while it waits for it."""
        if written is None:
            return
        with self._rolled_back_on_error():
            self._conn.execute("COMMIT")
        self._written_seq = written

    @contextlib.contextmanager
    def _rolled_back_on_error(self) -> Iterator[None]:
        try:
            yield
        except BaseException:
            # SQLite may have rolled back already (SQLITE_FULL, SQLITE_IOERR): a second
            # rollback would fail and hide the real error, which is what the caller must see.
            if self._conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self._conn.close()
