"""The SQLite store on real files: what is committed comes back, typed, after a reopen."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from qmgr.core.message import Message
from qmgr.core.values import Int32
from qmgr.store.sqlite import SqliteStore
from tests.integration.conftest import NodeProcess


def test_committed_changes_come_back_typed(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    first = store.load()
    shared = {
        "i32": Int32(5),
        "i64": 2**40,
        "f": 0.5,
        "b": False,
        "s": "x",
        "raw": b"\x01",
        "n": None,
    }
    copies = [Message("id1", b"body", shared, True, 4, sequence=seq, topic="t/1") for seq in (1, 2)]
    store.message_added("Q1", copies[0])
    store.message_added("Q2", copies[1])
    store.message_added("Q1", Message("id2", b"gone", {}, True, sequence=3))
    store.message_removed("Q1", Message("id2", b"gone", {}, True, sequence=3))
    store.object_saved("queue", "Q1", {"name": "Q1"})
    store.retained_saved("t/1", Message("id3", b"ret", {"k": 1}, True, sequence=4, topic="t/1"))
    ops, upto = store.take()
    store.commit(ops)
    store.message_added("Q1", Message("id4", b"never committed", {}, True, sequence=5))
    store.close()

    again = SqliteStore(tmp_path)
    loaded = again.load()
    assert loaded.uid == first.uid and loaded.epoch == first.epoch + 1
    assert [(q, m.sequence, m.body) for q, m in loaded.messages] == [
        ("Q1", 1, b"body"),
        ("Q2", 2, b"body"),
    ]
    props = loaded.messages[1][1].properties
    assert (
        props == shared and isinstance(props["i32"], Int32) and not isinstance(props["i64"], Int32)
    )
    assert loaded.messages[0][1].priority == 4 and loaded.messages[0][1].topic == "t/1"
    assert loaded.objects == {"queue": {"Q1": {"name": "Q1"}}}
    assert [m.body for m in loaded.retained] == [b"ret"]
    assert loaded.max_sequence == 4
    again.close()


def test_a_store_held_by_another_process_stops_the_start_with_a_clear_error(
    tmp_path: Path,
) -> None:
    """The running node holds its database exclusively; a node started on a data directory
    whose database another process holds says so and does not start; once the file is free it
    starts and finds what was committed."""
    node = NodeProcess("QM1", tmp_path)
    node.start()
    try:
        with node.client() as qm:
            qm.mqsc("DEFINE QLOCAL(KEPT)")
            qm.put("KEPT", b"before", persistent=True)
    finally:
        assert node.stop() == 0
    assert node.data_dir is not None
    holder = sqlite3.connect(node.data_dir / "qmgr.sqlite")
    try:
        holder.execute("BEGIN IMMEDIATE")  # another process writing
        with pytest.raises(RuntimeError, match="is in use by another process"):
            node.start(timeout=30)
    finally:
        holder.close()
        node.kill()  # should it have started
    node.start()
    try:
        with node.client() as qm:
            assert qm.get("KEPT").body == b"before"
    finally:
        node.kill()
