"""The Service Bus tables of the SQLite store on real files: what the namespace's journal was
told comes back, typed and in order, after a reopen; what was not committed does not."""

from __future__ import annotations

import datetime as dt
import math
import sqlite3
import uuid
from pathlib import Path

import pytest

from qmgr.core.message import Message
from qmgr.core.values import Int32
from qmgr.servicebus.message import MessageState, SbMessage, Stored
from qmgr.store.servicebus import SbStoreJournal, under
from qmgr.store.sqlite import SqliteStore


def _commit(store: SqliteStore) -> None:
    ops, _ = store.take()
    store.commit(ops)


def _stored(seq: int, body: bytes = b"x", **kw: object) -> Stored:
    return Stored(SbMessage(body=body), seq, 1_700_000_000.0 + seq, **kw)  # type: ignore[arg-type]


def _reopen(path: Path) -> SqliteStore:
    return SqliteStore(path)


def test_entities_messages_sessions_and_values_come_back(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    store.load()
    j = SbStoreJournal(store)
    j.entity_saved("events", {"kind": "topic", "v": 1})
    j.entity_saved("events/Subscriptions/audit", {"kind": "subscription"})
    j.entity_saved("orders", {"kind": "queue"})
    j.entity_saved("EVENTS", {"kind": "topic", "v": 2})  # an update keeps its place
    props = {
        "i32": Int32(7),
        "i64": 2**40,
        "f": 0.25,
        "b": True,
        "s": "text",
        "raw": b"\x00\xff",
        "none": None,
    }
    message = SbMessage(
        body=b"\x00body",
        message_id="m1",
        session_id="s1",
        subject="label",
        time_to_live=math.inf,
        properties=props,
        extra={"annotations": {"x-opt-a": uuid.UUID(int=5), "when": dt.datetime(2026, 1, 2)}},
    )
    token = uuid.uuid4()
    stored = Stored(
        message,
        sequence_number=3,
        enqueued_time=1_700_000_000.5,
        expires_at=math.inf,
        state=MessageState.DEFERRED,
        delivery_count=2,
        lock_token=token,
        locked_until=1_700_000_060.0,
        enqueued_sequence_number=9,
        hop_count=1,
        dead_letter_source="events/Subscriptions/audit",
        size=321,
    )
    j.message_added("orders", stored)
    j.message_added("orders", _stored(4, expires_at=1_700_000_100.0, state=MessageState.SCHEDULED))
    j.message_added("orders/$DeadLetterQueue", _stored(1))
    j.session_state_saved("orders", "s1", b"state-1")
    j.session_state_saved("orders", "s2", b"state-2")
    j.session_state_saved("orders", "s2", None)  # null clears
    j.value_saved("seq:orders", "4")
    j.value_saved("gone", "1")
    j.value_saved("gone", "")  # an empty value deletes the key
    _commit(store)
    j.message_added("orders", _stored(5, b"never committed"))
    store.close()

    again = _reopen(tmp_path)
    sb = again.load().servicebus
    assert sb.entities == [
        ("events", {"kind": "topic", "v": 2}),
        ("events/Subscriptions/audit", {"kind": "subscription"}),
        ("orders", {"kind": "queue"}),
    ]
    assert [(e, s.sequence_number) for e, s in sb.messages] == [
        ("orders", 3),
        ("orders", 4),
        ("orders/$DeadLetterQueue", 1),
    ]
    got = sb.messages[0][1]
    assert got.message.properties == props
    assert isinstance(got.message.properties["i32"], Int32)
    assert not isinstance(got.message.properties["i64"], Int32)
    assert got.message.extra == message.extra
    assert got.message.body == b"\x00body" and got.message.time_to_live == math.inf
    assert (got.message.message_id, got.message.session_id, got.message.subject) == (
        "m1",
        "s1",
        "label",
    )
    assert got.message.correlation_id is None
    assert got.state is MessageState.DEFERRED and got.delivery_count == 2
    assert got.expires_at == math.inf and got.enqueued_time == 1_700_000_000.5
    assert (got.enqueued_sequence_number, got.hop_count) == (9, 1)
    assert got.dead_letter_source == "events/Subscriptions/audit" and got.size == 321
    assert got.lock_token is None and got.locked_until == 0.0  # a restart releases locks
    scheduled = sb.messages[1][1]
    assert scheduled.state is MessageState.SCHEDULED and scheduled.expires_at == 1_700_000_100.0
    assert sb.sessions == [("orders", "s1", b"state-1")]
    assert sb.values == {"seq:orders": "4"}
    again.close()


def test_a_change_is_kept_as_it_was_when_made(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    store.load()
    j = SbStoreJournal(store)
    s = _stored(1)
    j.message_added("q", s)
    s.delivery_count = 5  # changed in memory, never told to the journal
    s.message.properties["late"] = 1
    _commit(store)
    store.close()
    (entity, got), *_ = _reopen(tmp_path).load().servicebus.messages
    assert got.delivery_count == 0 and got.message.properties == {}


def test_updates_and_removals(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    store.load()
    j = SbStoreJournal(store)
    for seq in (1, 2, 3):
        j.message_added("Orders", _stored(seq))
    _commit(store)
    updated = _stored(2, delivery_count=3)
    updated.message.properties = {"changed": "by abandon"}
    j.message_updated("orders", updated)  # paths compare case-insensitively
    j.message_removed("ORDERS", 1)
    _commit(store)
    store.close()
    sb = _reopen(tmp_path).load().servicebus
    assert [(s.sequence_number, s.delivery_count) for _, s in sb.messages] == [(2, 3), (3, 0)]
    assert sb.messages[0][1].message.properties == {"changed": "by abandon"}


def test_deleting_an_entity_deletes_what_hangs_off_it(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    store.load()
    j = SbStoreJournal(store)
    paths = [
        "t",
        "t/Subscriptions/s",
        "t/Subscriptions/s/Rules/r",
        "t/Subscriptions/s2",
        "t2",
        "a",
        "a/b",  # a queue whose name extends another's: not part of it
        "a/Rules/x",  # a queue named so: rules hang off subscriptions only
    ]
    for path in paths:
        j.entity_saved(path, {"p": path})
    for entity in ("t/Subscriptions/s", "t/Subscriptions/s/$DeadLetterQueue", "a", "a/b"):
        j.message_added(entity, _stored(1))
        j.session_state_saved(entity, "sid", b"x")
    j.message_added("a/$DeadLetterQueue", _stored(1))
    _commit(store)
    j.entity_deleted("T")
    j.entity_deleted("a")
    _commit(store)
    store.close()
    sb = _reopen(tmp_path).load().servicebus
    assert [p for p, _ in sb.entities] == ["t2", "a/b", "a/Rules/x"]
    assert [e for e, _ in sb.messages] == ["a/b"]
    assert [e for e, _, _ in sb.sessions] == ["a/b"]


def test_deleting_a_subscription_keeps_its_topic_and_siblings(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    store.load()
    j = SbStoreJournal(store)
    for path in (
        "t",
        "t/Subscriptions/s",
        "t/Subscriptions/s/Rules/$Default",
        "t/Subscriptions/s2",
    ):
        j.entity_saved(path, {})
    j.entity_deleted("t/Subscriptions/S")
    _commit(store)
    store.close()
    assert [p for p, _ in _reopen(tmp_path).load().servicebus.entities] == [
        "t",
        "t/Subscriptions/s2",
    ]


@pytest.mark.parametrize(
    ("path", "parent", "expected"),
    [
        ("q", "Q", True),
        ("q/$DeadLetterQueue", "q", True),
        ("q/x", "q", False),
        ("t/Subscriptions/s", "t", True),
        ("t/subscriptions/s/rules/r", "t/Subscriptions/s", True),
        ("q/Rules/r", "q", False),
        ("qq", "q", False),
    ],
)
def test_under(path: str, parent: str, expected: bool) -> None:
    assert under(path, parent) is expected


def test_mq_and_servicebus_changes_share_a_commit(tmp_path: Path) -> None:
    """One group commit holds both sides; a commit that fails writes neither."""
    store = SqliteStore(tmp_path, fail_at_commit=2)
    store.load()
    j = SbStoreJournal(store)
    store.message_added("Q1", Message("id1", b"mq", {}, True, sequence=1))
    j.message_added("orders", _stored(1, b"sb"))
    _commit(store)
    store.message_added("Q1", Message("id2", b"mq2", {}, True, sequence=2))
    j.message_added("orders", _stored(2, b"sb2"))
    ops, _ = store.take()
    with pytest.raises(sqlite3.OperationalError):
        store.commit(ops)
    store.close()
    loaded = _reopen(tmp_path).load()
    assert [m.body for _, m in loaded.messages] == [b"mq"]
    assert [s.message.body for _, s in loaded.servicebus.messages] == [b"sb"]
