"""The store's log is checkpointed every ``CHECKPOINT_PAGES`` pages, and what a long log holds
comes back when the store is opened again (a real SQLite file)."""

from __future__ import annotations

import os
from pathlib import Path

from qmgr.servicebus.message import SbMessage, Stored
from qmgr.store.sbcodec import encode_stored
from qmgr.store.sqlite import CHECKPOINT_PAGES, SqliteStore


def test_the_log_is_checkpointed_at_the_store_s_own_mark(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    try:
        row = store._conn.execute("PRAGMA wal_autocheckpoint").fetchone()
        assert row[0] == CHECKPOINT_PAGES
    finally:
        store.close()


def test_settlements_in_a_log_past_the_old_mark_come_back_after_a_reopen(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    n = 3000
    stored = Stored(message=SbMessage(body=b""), sequence_number=0, enqueued_time=1.0)
    for seq in range(1, n + 1):
        stored.sequence_number = seq
        store.append("sb_put", ("q", seq, os.urandom(100), encode_stored(stored)))
    store.commit(store.take()[0])
    for seq in range(1, n + 1):  # one group per settlement, as one receiver makes them
        store.append("sb_lock", ("q", seq))
        store.commit(store.take()[0])
        if seq % 2:
            store.append("sb_settle", ("q", seq))
            store.commit(store.take()[0])
    wal = Path(f"{store.path}-wal")
    assert wal.stat().st_size > 1000 * 4096  # past SQLite's default mark, not checkpointed
    # the files as a kill would leave them (a close would checkpoint the log): copied open
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in (store.path.name, wal.name):
        (copy / name).write_bytes((tmp_path / name).read_bytes())
    store.close()
    again = SqliteStore(copy)
    try:
        loaded = again.load().servicebus
        assert [s.sequence_number for _, s in loaded.messages] == list(range(2, n + 1, 2))
        assert loaded.locked == {("q", seq) for seq in range(2, n + 1, 2)}
    finally:
        again.close()
