"""Data directories written before the binary header: rows whose header is JSON text load
and keep working next to new binary rows, through the real store and a real node; and a group
that adds and removes a message leaves the file as writing both would have."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from qmgr.core.message import Message
from qmgr.core.values import Int32
from qmgr.store.sqlite import SqliteStore
from tests.integration.conftest import NodeProcess


def _old_header(priority: int, props: list[list[object]], topic: str = "") -> str:
    """A header as the store wrote it before the binary form: JSON text."""
    return json.dumps(
        {
            "p": props,
            "pr": priority,
            "ex": None,
            "c": "0a0b",
            "t": 1700000000.5,
            "bo": 1,
            "r": "REPLY",
            "tp": topic,
            "ud": "",
            "rt": False,
        },
        separators=(",", ":"),
    )


def _write_old_rows(db_path: Path, queue: str, first_seq: int) -> None:
    db = sqlite3.connect(db_path)
    try:
        with db:
            db.executemany(
                "INSERT INTO messages (seq, queue, message_id, body, header) VALUES (?,?,?,?,?)",
                [
                    (
                        first_seq,
                        queue,
                        "old-1",
                        b"old one",
                        _old_header(5, [["colour", "s", "red"], ["n", "i", 7]]),
                    ),
                    (
                        first_seq + 1,
                        queue,
                        "old-2",
                        b"old two",
                        _old_header(0, [["raw", "y", "00ff"], ["big", "l", 2**40]], "t/x"),
                    ),
                ],
            )
            db.execute(
                "INSERT INTO retained (topic, seq, message_id, body, header) VALUES (?,?,?,?,?)",
                ("t/x", first_seq + 2, "old-r", b"kept", _old_header(0, [], "t/x")),
            )
    finally:
        db.close()


def test_the_store_loads_json_rows_next_to_binary_ones(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    store.load()
    store.message_added("Q", Message("new-1", b"new", {"k": Int32(1)}, True, 2, sequence=1))
    store.commit(store.take()[0])
    store.close()
    _write_old_rows(tmp_path / "qmgr.sqlite", "Q", 10)

    store = SqliteStore(tmp_path)
    loaded = store.load()
    got = {m.message_id: m for _, m in loaded.messages}
    assert [m.message_id for _, m in loaded.messages] == ["new-1", "old-1", "old-2"]
    assert got["old-1"].properties == {"colour": "red", "n": 7}
    assert isinstance(got["old-1"].properties["n"], Int32)
    assert got["old-1"].priority == 5 and got["old-1"].correl_id == b"\x0a\x0b"
    assert got["old-1"].backout_count == 1 and got["old-1"].reply_to_queue == "REPLY"
    assert got["old-2"].properties == {"raw": b"\x00\xff", "big": 2**40}
    assert isinstance(got["new-1"].properties["k"], Int32)
    assert [m.body for m in loaded.retained] == [b"kept"]
    assert loaded.max_sequence == 12
    # an old row removed and a rewritten one (as a backout count change writes it)
    store.message_removed("Q", got["old-1"])
    store.message_updated("Q", got["old-2"].copy(backout_count=2))
    store.commit(store.take()[0])
    store.close()

    again = SqliteStore(tmp_path)
    loaded = again.load()
    assert [(m.message_id, m.backout_count) for _, m in loaded.messages] == [
        ("new-1", 0),
        ("old-2", 2),
    ]
    again.close()


def test_a_group_adding_and_removing_a_message_leaves_what_writing_both_would(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path)
    store.load()
    kept = Message("kept", b"k", {}, True, sequence=1)
    back = Message("back", b"b", {}, True, sequence=2)
    store.message_added("Q", kept)
    store.message_added("Q", back)
    store.commit(store.take()[0])
    # one group: a new message delivered before the group is written, a stored one got, put
    # back under its sequence (INSERT OR REPLACE) and got again, and one added that stays
    store.message_added("Q", Message("passing", b"p", {}, True, sequence=3))
    store.message_removed("Q", Message("passing", b"p", {}, True, sequence=3))
    store.message_removed("Q", back)
    store.message_added("Q", back)
    store.message_removed("Q", back)
    store.message_added("Q", Message("stays", b"s", {}, True, sequence=4))
    store.commit(store.take()[0])
    store.close()

    again = SqliteStore(tmp_path)
    assert [m.message_id for _, m in again.load().messages] == ["kept", "stays"]
    again.close()


def test_a_node_restarted_on_a_data_directory_with_json_rows_serves_them(tmp_path: Path) -> None:
    node = NodeProcess("QM1", tmp_path)
    node.start()
    try:
        with node.client() as qm:
            qm.mqsc("DEFINE QLOCAL(OLD)")
            qm.put("OLD", b"binary", persistent=True, properties={"p": Int32(3)})
    finally:
        assert node.stop() == 0
    assert node.data_dir is not None
    _write_old_rows(node.data_dir / "qmgr.sqlite", "OLD", 1000)

    node.start()
    try:
        with node.client() as qm:
            first = qm.get("OLD")  # priority 5: ahead of the others (priority 0)
            assert first is not None and first.body == b"old one"
            assert first.properties == {"colour": "red", "n": 7}
            second = qm.get("OLD")
            assert second is not None and second.body == b"binary"
            assert second.properties == {"p": 3} and isinstance(second.properties["p"], Int32)
            qm.put("OLD", b"after", persistent=True)
    finally:
        node.kill()  # kill -9: what was acknowledged must be on disk

    node.start()
    try:
        with node.client() as qm:
            bodies = [m.body for m in qm.get_many("OLD", 10)]
            assert bodies == [b"old two", b"after"]
    finally:
        assert node.stop() == 0
