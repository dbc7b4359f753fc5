"""DISPLAY TPSTATUS ADMIN, DISPLAY PUBSUB TPCOUNT and managed queue names, as IBM MQ documents
them: ADMIN names the topic object of an admin node (blank otherwise), TPCOUNT is the number of
topic nodes in the topic tree, managed subscription queues have names MQSC can address."""

from __future__ import annotations

from dataclasses import replace

from qmgr.core.admin import Record, execute
from qmgr.core.qmgr import QueueManager, managed_queue_name
from qmgr.core.queue import QueueDef
from qmgr.core.subscription import Subscription
from tests.unit.core.conftest import RecordingJournal, msg


def run(qm: QueueManager, command: str) -> list[Record]:
    ok, records = execute(qm, command)
    assert ok, (command, [r.render() for r in records])
    return records


def attrs(record: Record) -> dict[str, str]:
    return dict(record.attrs)


def tpstatus(qm: QueueManager, topic: str) -> dict[str, str]:
    return attrs(run(qm, f"DISPLAY TPSTATUS('{topic}') TYPE(TOPIC)")[0])


def tpcount(qm: QueueManager) -> int:
    return int(attrs(run(qm, "DISPLAY PUBSUB")[0])["TPCOUNT"])


def test_admin_is_blank_when_no_object_defines_the_node(qm: QueueManager) -> None:
    status = tpstatus(qm, "Weather/London")
    # the values come from SYSTEM.BASE.TOPIC, but it is not the node's administered object
    assert status["ADMIN"] == ""
    assert status["PUB"] == "ENABLED" and status["DURSUB"] == "YES" and status["DEFPRTY"] == "0"
    assert status["MDURMDL"] == "SYSTEM.DURABLE.MODEL.QUEUE"


def test_admin_names_the_object_of_an_admin_node_only(qm: QueueManager) -> None:
    run(qm, "DEFINE TOPIC(WEATHER) TOPICSTR('Weather') DEFPRTY(6)")
    assert tpstatus(qm, "Weather")["ADMIN"] == "WEATHER"
    below = tpstatus(qm, "Weather/London")
    assert below["ADMIN"] == "" and below["DEFPRTY"] == "6"  # inherited, not administered
    wildcard = [attrs(r) for r in run(qm, "DISPLAY TPSTATUS('Weather/#') TYPE(TOPIC)")]
    assert {(r["TOPICSTR"], r["ADMIN"]) for r in wildcard} == {("Weather", "WEATHER")}
    run(qm, "DELETE TOPIC(WEATHER)")
    assert tpstatus(qm, "Weather")["ADMIN"] == ""


def test_tpcount_counts_the_nodes_of_the_topic_tree(qm: QueueManager) -> None:
    assert tpcount(qm) == 1  # the root node, SYSTEM.BASE.TOPIC's
    run(qm, "DEFINE TOPIC(SPORT) TOPICSTR('Sport')")
    assert tpcount(qm) == 2
    qm.subscribe("Sport/Football", name="S1")
    qm.subscribe("Sport/Football", name="S2")  # same node
    qm.subscribe("Sport", name="S3")  # the administered node
    assert tpcount(qm) == 3
    qm.publish("News", msg("n"), retain=True)  # retained publication: a node
    assert tpcount(qm) == 4
    qm.publish("Sport/Tennis", msg("t"))  # published string: a node
    assert tpcount(qm) == 5
    qm.subscribe("Weather/UK/London", name="S4")  # a node per level: 3 new nodes
    assert tpcount(qm) == 8
    qm.subscribe("Cars/+/Prices", name="S5")  # held at 'Cars', before the wildcard level
    qm.subscribe("Cars/#", name="S6")
    assert tpcount(qm) == 9
    nodes = {attrs(r)["TOPICSTR"] for r in run(qm, "DISPLAY TPSTATUS('#') TYPE(TOPIC)")}
    assert len(nodes) == tpcount(qm)
    assert {"", "Weather", "Weather/UK", "Cars"} <= nodes and "Cars/#" not in nodes
    assert attrs(run(qm, "DISPLAY PUBSUB")[0])["SUBCOUNT"] == "6"


def test_managed_queue_names_fit_48_characters_and_are_addressable(qm: QueueManager) -> None:
    durable, _ = qm.subscribe("Prices/IBM", name="D1", durable=True)
    non_durable, _ = qm.subscribe("Prices/IBM", name="N1")
    assert durable.dest.startswith("SYSTEM.MANAGED.DURABLE.") and len(durable.dest) <= 48
    assert non_durable.dest.startswith("SYSTEM.MANAGED.NDURABLE.") and len(non_durable.dest) <= 48
    assert durable.dest == managed_queue_name(durable.sub_id, True)
    qm.publish("Prices/IBM", msg("101"))
    for sub in (durable, non_durable):
        queue = attrs(run(qm, f"DISPLAY QLOCAL({sub.dest})")[0])
        assert queue["QUEUE"] == sub.dest and queue["CURDEPTH"] == "1"
        assert attrs(run(qm, f"DISPLAY QSTATUS({sub.dest})")[0])["CURDEPTH"] == "1"
        (got,) = qm.get(sub.dest)
        assert got.body == b"101"
    listed = {attrs(r)["QUEUE"] for r in run(qm, "DISPLAY QLOCAL(SYSTEM.MANAGED.*)")}
    assert listed == {durable.dest, non_durable.dest}


def test_a_name_longer_than_48_characters_is_refused_by_display(qm: QueueManager) -> None:
    ok, records = execute(qm, "DISPLAY QLOCAL(SYSTEM.MANAGED.DURABLE." + "A" * 40 + ")")
    assert not ok and records[0].code == "AMQ8424E"  # name too long, nothing displayed


def _old_style_subscription(qm: QueueManager) -> Subscription:
    """A durable subscription restored as earlier versions stored it: a 63-character queue."""
    sub_id = qm.new_id()
    long_name = f"SYSTEM.MANAGED.DURABLE.{sub_id[8:]}"
    assert len(long_name) == 63
    queue = qm.restore_queue(QueueDef(long_name, managed=True, defpsist=True))
    queue.restore(replace(msg("kept", persistent=True), sequence=1))
    queue.restore(replace(msg("high", persistent=True, priority=9), sequence=2))
    sub = Subscription(
        name="OLD.SUB",
        sub_id=sub_id,
        topic_str="Old/Topic",
        dest=long_name,
        durable=True,
        managed=True,
    )
    qm.pubsub.restore(sub, 0.0)
    return sub


def test_restored_long_managed_queue_is_renamed_with_its_messages(
    qm: QueueManager, journal: RecordingJournal
) -> None:
    old = _old_style_subscription(qm)
    renamed = qm.migrate_managed_queues()
    new_name = managed_queue_name(old.sub_id, True)
    assert renamed == [(old.dest, new_name)] and len(new_name) <= 48
    assert old.dest not in qm.queues and qm.pubsub.subs["OLD.SUB"].dest == new_name
    assert qm.pubsub.subs["OLD.SUB"].sub_id == old.sub_id  # the same subscription
    # stored as moved: the new queue and the subscription saved, the old queue dropped
    assert ("queue", old.dest) not in journal.objects and ("queue", new_name) in journal.objects
    assert journal.objects[("sub", "OLD.SUB")]["dest"] == new_name
    assert {q for q, _ in journal.messages.values()} == {new_name}
    assert attrs(run(qm, f"DISPLAY QSTATUS({new_name})")[0])["CURDEPTH"] == "2"
    qm.publish("Old/Topic", msg("new"))
    assert [m.body for m in qm.get(new_name, limit=3)] == [b"high", b"kept", b"new"]
    assert qm.migrate_managed_queues() == []  # nothing left to migrate


def test_migration_leaves_short_names_and_provided_queues_alone(qm: QueueManager) -> None:
    run(qm, "DEFINE QLOCAL(" + "APP." + "Q" * 40 + ")")
    qm.subscribe("A", name="PROVIDED", durable=True, dest="APP." + "Q" * 40)
    managed, _ = qm.subscribe("B", name="MANAGED", durable=True)
    assert qm.migrate_managed_queues() == []
    assert qm.pubsub.subs["MANAGED"].dest == managed.dest
