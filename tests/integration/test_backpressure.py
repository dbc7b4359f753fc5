"""Back-pressure on a real node: managed subscription queues are bounded by the model queues'
MAXDEPTH (shown by DISPLAY QMODEL, changed by ALTER QMODEL, kept across restarts), a full
subscription queue is handled by PMSGDLV/NPMSGDLV/USEDLQ as MQ documents, and a subscriber that
never reads cannot make the node's memory grow without bound."""

from __future__ import annotations

from pathlib import Path

import pytest

from qmgr.client import MQClientError, OutgoingMessage
from tests.integration.conftest import NodeProcess


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _one(qm: object, command: str) -> dict[str, str]:
    records = qm.mqsc(command)  # type: ignore[attr-defined]
    assert len(records) == 1, records
    return dict(records[0].attrs)


def test_model_queues_bound_managed_queues_and_are_stored(node: NodeProcess) -> None:
    with node.client() as qm:
        for model in ("SYSTEM.DURABLE.MODEL.QUEUE", "SYSTEM.NDURABLE.MODEL.QUEUE"):
            shown = _one(qm, f"DISPLAY QMODEL({model}) MAXDEPTH")
            assert shown["MAXDEPTH"] == "100000"
        dest = qm.create_subscription("bp/a", name="BP.A", durable=True)
        assert _one(qm, f"DISPLAY QLOCAL({dest}) MAXDEPTH")["MAXDEPTH"] == "100000"
        qm.mqsc("ALTER QMODEL(SYSTEM.DURABLE.MODEL.QUEUE) MAXDEPTH(1234)")
    node.restart()  # kill -9: the change was committed before MQSC answered
    with node.client() as qm:
        assert _one(qm, "DISPLAY QMODEL(SYSTEM.DURABLE.MODEL.QUEUE) MAXDEPTH")["MAXDEPTH"] == "1234"
        dest = qm.create_subscription("bp/b", name="BP.B", durable=True)
        assert _one(qm, f"DISPLAY QLOCAL({dest}) MAXDEPTH")["MAXDEPTH"] == "1234"


def test_full_subscription_queue_follows_msgdlv_rules(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("ALTER QMODEL(SYSTEM.DURABLE.MODEL.QUEUE) MAXDEPTH(2)")
        full = qm.create_subscription("bp/t", name="BP.FULL", durable=True)
        qm.mqsc("DEFINE QLOCAL(BP.ROOM) MAXDEPTH(1000)")
        qm.create_subscription("bp/t", name="BP.ROOM", durable=True, destination="BP.ROOM")
        assert qm.publish("bp/t", b"1", persistent=True) == 2
        assert qm.publish("bp/t", b"2", persistent=True) == 2
        # PMSGDLV(ALLDUR), the default: a persistent publication that cannot reach a durable
        # subscription fails and reaches nobody
        with pytest.raises(MQClientError) as err:
            qm.publish("bp/t", b"3", persistent=True)
        assert err.value.reason_name == "MQRC_PUBLICATION_FAILURE"
        # NPMSGDLV(ALLAVAIL), the default: a non-persistent one reaches those that can take it
        assert qm.publish("bp/t", b"4", persistent=False) == 1
        # USEDLQ(YES), the default, once the queue manager has a dead-letter queue
        qm.mqsc("ALTER QMGR DEADQ(SYSTEM.DEAD.LETTER.QUEUE)")
        assert qm.publish("bp/t", b"5", persistent=True) == 2
        assert [m.body for m in qm.get_many("BP.ROOM", 10)] == [b"1", b"2", b"4", b"5"]
        assert [m.body for m in qm.get_many(full, 10)] == [b"1", b"2"]
        dead = qm.get_many("SYSTEM.DEAD.LETTER.QUEUE", 10)
        assert [m.body for m in dead] == [b"5"]
        # PMSGDLV(ALLAVAIL) on the topic: persistent publications no longer fail either
        qm.mqsc("ALTER QMGR DEADQ(' ')")
        qm.mqsc("DEFINE TOPIC(BP.T) TOPICSTR('bp/t') PMSGDLV(ALLAVAIL)")
        for body in (b"6", b"7", b"8"):
            qm.publish("bp/t", body, persistent=True)
        assert [m.body for m in qm.get_many(full, 10)] == [b"6", b"7"]


def test_unread_subscription_keeps_node_memory_bounded(node: NodeProcess) -> None:
    """200,000 non-persistent 1 KiB publications to a durable subscription nobody reads: the
    queue stops at the model's MAXDEPTH and NPMSGDLV(ALLAVAIL) drops the rest, so the node's
    memory grows by about MAXDEPTH messages (old code: ~300 MiB, every message kept)."""
    maxdepth = 20_000
    with node.client() as qm:
        qm.mqsc(f"ALTER QMODEL(SYSTEM.DURABLE.MODEL.QUEUE) MAXDEPTH({maxdepth})")
        dest = qm.create_subscription("bp/slow", name="BP.SLOW", durable=True)
        assert node.proc is not None
        before = _rss_mib(node.proc.pid)
        body = b"m" * 1024
        batch = [("bp/slow", OutgoingMessage(body, persistent=False)) for _ in range(1000)]
        delivered = 0
        for _ in range(200):
            delivered += qm.publish_many(batch).deliveries
        after = _rss_mib(node.proc.pid)
        depth = int(_one(qm, f"DISPLAY QSTATUS({dest}) CURDEPTH")["CURDEPTH"])
    assert delivered == maxdepth and depth == maxdepth
    growth = after - before
    # MAXDEPTH messages of ~1.4 KiB each is ~30 MiB; 200k kept would be ~300 MiB
    assert growth < 120, f"node RSS grew by {growth:.0f} MiB ({before:.0f} -> {after:.0f})"
    print(f"node RSS {before:.0f} MiB -> {after:.0f} MiB for 200000 publications")
