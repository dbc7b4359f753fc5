"""Local queue semantics as IBM MQ documents them."""

from __future__ import annotations

import pytest

from qmgr.core.clock import ManualClock
from qmgr.core.errors import MQError
from qmgr.core.qmgr import QueueManager
from qmgr.core.queue import QueueDef
from tests.unit.core.conftest import RecordingJournal, msg


def test_priority_order_then_fifo(qm: QueueManager) -> None:
    qm.define_queue(QueueDef("Q"))
    qm.put(
        "Q",
        [msg("a", priority=0), msg("b", priority=5), msg("c", priority=0), msg("d", priority=5)],
    )
    got = [m.body for m in qm.get("Q", limit=10)]
    assert got == [b"b", b"d", b"a", b"c"]


def test_defaults_resolve_from_queue(qm: QueueManager) -> None:
    qm.define_queue(QueueDef("Q", defpsist=True, defprty=7))
    (m,) = qm.put("Q", [msg(persistent=None, priority=-1)])
    assert m.persistent is True and m.priority == 7
    assert len(m.message_id) == 48


def test_maxdepth_rejects_whole_batch(qm: QueueManager) -> None:
    qm.define_queue(QueueDef("Q", maxdepth=2))
    qm.put("Q", [msg()])
    with pytest.raises(MQError) as err:
        qm.put("Q", [msg(), msg()])
    assert err.value.reason_name == "MQRC_Q_FULL" and err.value.reason == 2053
    assert qm.queue("Q").depth == 1


def test_maxmsgl(qm: QueueManager) -> None:
    qm.define_queue(QueueDef("Q", maxmsgl=4))
    with pytest.raises(MQError) as err:
        qm.put("Q", [msg(b"12345")])
    assert err.value.reason_name == "MQRC_MSG_TOO_BIG_FOR_Q"


def test_put_and_get_inhibited(qm: QueueManager) -> None:
    qm.define_queue(QueueDef("Q", put_enabled=False))
    with pytest.raises(MQError, match="PUT_INHIBITED"):
        qm.put("Q", [msg()])
    qm.alter_queue("Q", put_enabled=True, get_enabled=False)
    qm.put("Q", [msg()])
    with pytest.raises(MQError, match="GET_INHIBITED"):
        qm.get("Q")


def test_unknown_queue(qm: QueueManager) -> None:
    with pytest.raises(MQError) as err:
        qm.put("NOPE", [msg()])
    assert err.value.reason == 2085


def test_expiry_uses_the_clock(qm: QueueManager, clock: ManualClock) -> None:
    qm.define_queue(QueueDef("Q"))
    qm.put("Q", [msg("short", ttl=1.0), msg("long", ttl=100.0)])
    clock.advance(2.0)
    assert [m.body for m in qm.get("Q", limit=10)] == [b"long"]


def test_browse_does_not_remove_and_pages(qm: QueueManager) -> None:
    qm.define_queue(QueueDef("Q"))
    qm.put("Q", [msg("a"), msg("b"), msg("c")])
    first = qm.browse("Q", limit=2)
    assert [m.body for m in first] == [b"a", b"b"]
    rest = qm.browse("Q", after=first[-1].sequence, limit=10)
    assert [m.body for m in rest] == [b"c"]
    assert qm.queue("Q").depth == 3


def test_get_by_correl_id(qm: QueueManager) -> None:
    qm.define_queue(QueueDef("Q"))
    qm.put("Q", [msg("a", correl_id=b"1"), msg("b", correl_id=b"2")])
    (m,) = qm.get("Q", correl_id=b"2")
    assert m.body == b"b"


def test_syncpoint_commit_removes(qm: QueueManager, journal: RecordingJournal) -> None:
    qm.define_queue(QueueDef("Q"))
    qm.put("Q", [msg("a", persistent=True)])
    (m,) = qm.get("Q", unit_of_work="u1")
    assert qm.queue("Q").uncommitted == 1
    assert m.sequence in journal.messages  # still stored until commit
    assert qm.commit("u1") == 1
    assert m.sequence not in journal.messages
    assert qm.queue("Q").depth == 0 and qm.queue("Q").uncommitted == 0


def test_syncpoint_backout_returns_in_order_with_count(
    qm: QueueManager, journal: RecordingJournal
) -> None:
    qm.define_queue(QueueDef("Q"))
    qm.put("Q", [msg("a", persistent=True), msg("b", persistent=True), msg("c")])
    qm.get("Q", unit_of_work="u1", limit=2)
    assert qm.backout("u1") == 2
    got = qm.get("Q", limit=3)
    assert [m.body for m in got] == [b"a", b"b", b"c"]
    assert [m.backout_count for m in got] == [1, 1, 0]


def test_backout_threshold_moves_to_backout_queue(
    qm: QueueManager, journal: RecordingJournal
) -> None:
    qm.define_queue(QueueDef("BOQ"))
    qm.define_queue(QueueDef("Q", bothresh=2, boqname="BOQ"))
    qm.put("Q", [msg("poison", persistent=True)])
    for uow in ("u1", "u2"):
        qm.get("Q", unit_of_work=uow)
        qm.backout(uow)
    assert qm.queue("Q").depth == 0
    (m,) = qm.get("BOQ")
    assert m.body == b"poison" and m.backout_count == 2
    stored = [q for q, _ in journal.messages.values()]
    assert stored == []  # got from BOQ outside syncpoint


def test_persistent_only_journaled(qm: QueueManager, journal: RecordingJournal) -> None:
    qm.define_queue(QueueDef("Q"))
    qm.put("Q", [msg("np", persistent=False), msg("p", persistent=True)])
    assert [m.body for _, m in journal.messages.values()] == [b"p"]


def test_delete_queue_rules(qm: QueueManager) -> None:
    qm.define_queue(QueueDef("Q"))
    qm.put("Q", [msg()])
    with pytest.raises(MQError, match="Q_NOT_EMPTY"):
        qm.delete_queue("Q")
    qm.delete_queue("Q", purge=True)
    assert "Q" not in qm.queues


def test_define_existing_needs_replace(qm: QueueManager) -> None:
    qm.define_queue(QueueDef("Q", maxdepth=10))
    with pytest.raises(MQError, match="ALREADY_EXISTS"):
        qm.define_queue(QueueDef("Q"))
    qm.put("Q", [msg()])
    qm.define_queue(QueueDef("Q", maxdepth=20), replace=True)
    assert qm.queue("Q").definition.maxdepth == 20 and qm.queue("Q").depth == 1
