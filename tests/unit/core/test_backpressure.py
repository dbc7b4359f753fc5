"""Back-pressure in the domain: managed subscription queues take MAXDEPTH from the model queues,
PMSGDLV/NPMSGDLV/USEDLQ decide what a publisher sees when one is full, per-topic statistics are
bounded, and application values outside MQ's ranges never get past ``accept``."""

from __future__ import annotations

import pytest

from cluster.topics import TopicObject
from qmgr.core import pubsub as pubsub_module
from qmgr.core.admin import execute
from qmgr.core.errors import MQError
from qmgr.core.qmgr import DEAD_LETTER_QUEUE, DURABLE_MODEL, NDURABLE_MODEL, QueueManager
from qmgr.core.queue import DEFAULT_MODEL_MAXDEPTH, QueueDef
from tests.unit.core.conftest import RecordingJournal, msg


def run(qm: QueueManager, command: str) -> list[dict[str, str]]:
    ok, records = execute(qm, command)
    assert ok, (command, [r.render() for r in records])
    return [dict(r.attrs) for r in records]


def test_system_models_exist_and_set_managed_maxdepth(qm: QueueManager) -> None:
    models = run(qm, "DISPLAY QMODEL(SYSTEM.*) MAXDEPTH DEFTYPE")
    assert {m["QUEUE"]: (m["MAXDEPTH"], m["DEFTYPE"]) for m in models} == {
        DURABLE_MODEL: (str(DEFAULT_MODEL_MAXDEPTH), "PERMDYN"),
        NDURABLE_MODEL: (str(DEFAULT_MODEL_MAXDEPTH), "TEMPDYN"),
    }
    durable, _ = qm.subscribe("a", name="D", durable=True)
    plain, _ = qm.subscribe("a", name="N")
    assert qm.queues[durable.dest].definition.maxdepth == DEFAULT_MODEL_MAXDEPTH
    assert qm.queues[plain.dest].definition.maxdepth == DEFAULT_MODEL_MAXDEPTH
    assert len(durable.dest) <= 48 and len(plain.dest) <= 48


def test_alter_qmodel_is_stored_and_used_for_new_subscriptions(
    qm: QueueManager, journal: RecordingJournal
) -> None:
    run(qm, "ALTER QMODEL(SYSTEM.NDURABLE.MODEL.QUEUE) MAXDEPTH(7) MAXMSGL(1000)")
    assert journal.objects[("qmodel", NDURABLE_MODEL)]["maxdepth"] == 7
    sub, _ = qm.subscribe("a", name="N")
    d = qm.queues[sub.dest].definition
    assert (d.maxdepth, d.maxmsgl) == (7, 1000)
    (shown,) = run(qm, "DISPLAY QUEUE(SYSTEM.NDURABLE.MODEL.QUEUE) TYPE(QMODEL) MAXDEPTH")
    assert shown["TYPE"] == "QMODEL" and shown["MAXDEPTH"] == "7"


def test_topic_names_its_model(qm: QueueManager) -> None:
    run(qm, "DEFINE QMODEL(SMALL.MODEL) MAXDEPTH(2)")
    qm.define_topic(TopicObject("T", "small", attrs={"MNDURMDL": "SMALL.MODEL"}))
    sub, _ = qm.subscribe("small/x", name="S")
    assert qm.queues[sub.dest].definition.maxdepth == 2
    run(qm, "DELETE QMODEL(SMALL.MODEL)")
    with pytest.raises(MQError) as err:
        qm.subscribe("small/y", name="S2")
    assert err.value.reason_name == "MQRC_UNKNOWN_OBJECT_NAME"
    assert not execute(qm, "DELETE QMODEL(SYSTEM.DURABLE.MODEL.QUEUE)")[0]


def _full_subscriptions(qm: QueueManager) -> tuple[str, str, str]:
    """A durable and a non-durable subscription whose queues are full, and one with room."""
    run(qm, "ALTER QMODEL(SYSTEM.DURABLE.MODEL.QUEUE) MAXDEPTH(1)")
    run(qm, "ALTER QMODEL(SYSTEM.NDURABLE.MODEL.QUEUE) MAXDEPTH(1)")
    dur, _ = qm.subscribe("t", name="DUR", durable=True)
    nondur, _ = qm.subscribe("t", name="NONDUR")
    qm.define_queue(QueueDef("ROOM", maxdepth=100))
    room, _ = qm.subscribe("t", name="ROOM", dest="ROOM")
    assert qm.publish("t", msg("fill", persistent=False)) == 3
    return dur.dest, nondur.dest, room.dest


def test_persistent_to_full_durable_fails_under_alldur(qm: QueueManager) -> None:
    _, _, room = _full_subscriptions(qm)
    with pytest.raises(MQError) as err:
        qm.publish("t", msg("p", persistent=True))
    assert err.value.reason_name == "MQRC_PUBLICATION_FAILURE"
    assert qm.queues[room].depth == 1  # delivered to nobody


def test_non_persistent_to_full_queues_is_dropped_under_allavail(qm: QueueManager) -> None:
    dur, nondur, room = _full_subscriptions(qm)
    assert qm.publish("t", msg("np", persistent=False)) == 1
    assert [q.depth for q in (qm.queues[dur], qm.queues[nondur], qm.queues[room])] == [1, 1, 2]


def test_usedlq_rescues_what_does_not_fit(qm: QueueManager) -> None:
    _, _, room = _full_subscriptions(qm)
    qm.define_queue(QueueDef(DEAD_LETTER_QUEUE, maxdepth=100))
    qm.attrs.deadq = DEAD_LETTER_QUEUE
    assert qm.publish("t", msg("p", persistent=True)) == 3  # two to the DLQ, one to ROOM
    assert qm.queues[DEAD_LETTER_QUEUE].depth == 2 and qm.queues[room].depth == 2


def test_pmsgdlv_all_fails_for_a_full_non_durable(qm: QueueManager) -> None:
    qm.define_topic(TopicObject("T", "t", attrs={"PMSGDLV": "ALL", "USEDLQ": "NO"}))
    _full_subscriptions(qm)
    with pytest.raises(MQError):
        qm.publish("t", msg("p", persistent=True))


def test_topic_statistics_are_bounded(qm: QueueManager, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pubsub_module, "TOPIC_STATS_LIMIT", 100)
    monkeypatch.setattr(pubsub_module, "TOPIC_STATS_HARD_LIMIT", 400)
    qm.pubsub._stats_bound = 100
    qm.subscribe("kept/#", name="K")
    qm.publish("retained", msg("r"), retain=True)
    for i in range(5000):
        qm.publish(f"gone/{i}", msg("x"))
    counts = qm.pubsub.pub_counts
    assert len(counts) <= 200 and "retained" in counts
    for i in range(1000):  # every topic used: the hard limit drops the least recent
        qm.publish(f"kept/{i}", msg("x"))
    assert len(counts) <= 400 and "kept/999" in counts
    assert len(qm.pubsub.last_pub) == len(counts)


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"priority": 10}, "MQRC_PRIORITY_ERROR"),
        ({"priority": -2}, "MQRC_PRIORITY_ERROR"),
        ({"ttl": -0.001}, "MQRC_EXPIRY_ERROR"),
        ({"ttl": float("inf")}, "MQRC_EXPIRY_ERROR"),
        ({"ttl": 100_000_000.0}, "MQRC_EXPIRY_ERROR"),
    ],
)
def test_accept_refuses_values_outside_mq_ranges(
    qm: QueueManager, journal: RecordingJournal, changes: dict[str, object], reason: str
) -> None:
    qm.define_queue(QueueDef("Q"))
    sub, _ = qm.subscribe("t", name="S")
    for action in (
        lambda: qm.put("Q", [msg("ok"), msg("bad", **changes)]),
        lambda: qm.publish("t", msg("bad", **changes)),
    ):
        with pytest.raises(MQError) as err:
            action()
        assert err.value.reason_name == reason
    assert qm.queues["Q"].depth == 0 and qm.queues[sub.dest].depth == 0
    assert not journal.messages
