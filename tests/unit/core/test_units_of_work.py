"""Units of work owned by a connection or stream: partial commit, untake, backout by owner."""

from __future__ import annotations

import pytest

from qmgr.core.errors import MQError
from qmgr.core.message import Message
from qmgr.core.qmgr import QueueManager
from qmgr.core.queue import QueueDef


class FixedClock:
    def now(self) -> float:
        return 1000.0


def make() -> QueueManager:
    qm = QueueManager("QM", FixedClock())
    qm.define_queue(QueueDef("Q"))
    qm.put("Q", [Message("", str(i).encode()) for i in range(6)])
    return qm


def bodies(msgs: list[Message]) -> list[bytes]:
    return [m.body for m in msgs]


def test_partial_commit_keeps_the_rest_in_the_unit_of_work() -> None:
    qm = make()
    assert bodies(qm.get("Q", unit_of_work="S", owner="C1", limit=4)) == [b"0", b"1", b"2", b"3"]
    assert qm.commit("S", owner="C1", count=3) == 3
    assert qm.queues["Q"].uncommitted == 1
    assert qm.backout("S", owner="C1") == 1
    got = qm.get("Q", limit=10)
    assert bodies(got) == [b"3", b"4", b"5"] and got[0].backout_count == 1


def test_a_unit_of_work_belongs_to_its_owner() -> None:
    qm = make()
    qm.get("Q", unit_of_work="U", owner="C1", limit=2)
    for attempt in (
        lambda: qm.commit("U", owner="C2"),
        lambda: qm.backout("U"),
        lambda: qm.get("Q", unit_of_work="U", owner="C2"),
    ):
        with pytest.raises(MQError) as err:
            attempt()
        assert err.value.reason_name == "MQRC_HCONN_ERROR"
    qm.get("Q", unit_of_work="V", owner="C1")
    assert qm.backout_owned("C1") == 3
    assert not qm.uows and qm.queues["Q"].depth == 6


def test_untake_returns_messages_as_if_never_got() -> None:
    qm = make()
    qm.get("Q", unit_of_work="S", owner="S", limit=3)
    assert bodies(qm.untake("S", 2, owner="S")) == [b"2", b"1"]
    assert qm.commit("S", owner="S") == 1
    got = qm.get("Q", limit=10)
    assert bodies(got) == [b"1", b"2", b"3", b"4", b"5"]
    assert all(m.backout_count == 0 for m in got)


def test_backout_counts_only_the_oldest_given() -> None:
    qm = QueueManager("QM", FixedClock())
    qm.define_queue(QueueDef("BOQ"))
    qm.define_queue(QueueDef("Q", bothresh=1, boqname="BOQ"))
    qm.put("Q", [Message("", str(i).encode()) for i in range(4)])
    qm.get("Q", unit_of_work="S", owner="S", limit=3)
    assert qm.backout("S", owner="S", counted=1) == 3
    assert bodies(qm.get("BOQ", limit=10)) == [b"0"]  # counted: reached BOTHRESH
    got = qm.get("Q", limit=10)
    assert bodies(got) == [b"1", b"2", b"3"]  # in their order, never counted
    assert [m.backout_count for m in got] == [0, 0, 0]
    assert qm.queues["Q"].uncommitted == 0


def test_get_stops_before_a_message_that_does_not_fit() -> None:
    qm = QueueManager("QM", FixedClock())
    qm.define_queue(QueueDef("Q"))
    qm.put("Q", [Message("", b"x" * n) for n in (10, 10, 50, 10)])
    assert bodies(qm.get("Q", limit=10, max_bytes=30)) == [b"x" * 10] * 2
    assert qm.get("Q", limit=10, max_bytes=30) == []  # 50 bytes never fit: not taken
    assert len(qm.get("Q", limit=10, max_bytes=30, first_max_bytes=60)) == 1
    msg = qm.queues["Q"].peek(1000.0)
    assert msg is not None and msg.size == 10
