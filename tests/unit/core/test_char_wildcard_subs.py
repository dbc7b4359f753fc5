"""WSCHEMA(CHAR) subscriptions on one queue manager: DEFINE SUB, DISPLAY SUB, matching,
retained publications and WILDCARD(BLOCK), as IBM MQ documents them."""

from __future__ import annotations

import pytest

from cluster.topics import TopicObject
from qmgr.core.admin import execute
from qmgr.core.errors import MQError
from qmgr.core.qmgr import QueueManager
from tests.unit.core.conftest import msg


def run(qm: QueueManager, command: str) -> dict[str, str]:
    ok, records = execute(qm, command)
    assert ok, (command, [r.render() for r in records])
    return dict(records[0].attrs)


def bodies(qm: QueueManager, queue: str) -> list[bytes]:
    return [m.body for m in qm.get(queue, limit=1000)]


PUBLISHED = ("Prices/Fruit/Apples", "Prices/Fruit/Pears", "Prices/Vegetables/Apples", "Pricez")


def publish_all(qm: QueueManager) -> None:
    for topic in PUBLISHED:
        qm.publish(topic, msg(topic))


def test_define_sub_wschema_char_matches_characters(qm: QueueManager) -> None:
    run(qm, "DEFINE QLOCAL(STAR.Q)")
    run(qm, "DEFINE QLOCAL(ONE.Q)")
    run(qm, "DEFINE QLOCAL(TOPIC.Q)")
    run(qm, "DEFINE SUB(STAR) TOPICSTR('Prices*Apples') DEST(STAR.Q) WSCHEMA(CHAR)")
    run(qm, "DEFINE SUB(ONE) TOPICSTR('Pr?ces/Fruit/*') DEST(ONE.Q) WSCHEMA(CHAR)")
    # the default scheme is TOPIC: '*' is an ordinary character there
    run(qm, "DEFINE SUB(TOPIC) TOPICSTR('Prices*Apples') DEST(TOPIC.Q)")
    assert run(qm, "DISPLAY SUB(STAR) WSCHEMA")["WSCHEMA"] == "CHAR"
    assert run(qm, "DISPLAY SUB(TOPIC) WSCHEMA")["WSCHEMA"] == "TOPIC"
    publish_all(qm)
    assert bodies(qm, "STAR.Q") == [b"Prices/Fruit/Apples", b"Prices/Vegetables/Apples"]
    assert bodies(qm, "ONE.Q") == [b"Prices/Fruit/Apples", b"Prices/Fruit/Pears"]
    assert bodies(qm, "TOPIC.Q") == []


def test_bad_wschema_is_refused_and_nothing_is_made(qm: QueueManager) -> None:
    run(qm, "DEFINE QLOCAL(Q)")
    ok, records = execute(qm, "DEFINE SUB(S) TOPICSTR('a*') DEST(Q) WSCHEMA(GLOB)")
    assert not ok and records[0].code == "AMQ8425E" and "WSCHEMA" in records[0].render()
    assert "S" not in qm.pubsub.subs


def test_wschema_cannot_be_altered(qm: QueueManager) -> None:
    run(qm, "DEFINE QLOCAL(Q)")
    run(qm, "DEFINE SUB(S) TOPICSTR('a*') DEST(Q) WSCHEMA(CHAR)")
    ok, records = execute(qm, "ALTER SUB(S) WSCHEMA(TOPIC)")
    assert not ok and records[0].code == "AMQ8427E"
    assert qm.pubsub.subs["S"].wschema == "CHAR"


def test_api_subscription_with_char_scheme_and_unsubscribe(qm: QueueManager) -> None:
    s, _ = qm.subscribe("IBM/*/Results", name="S", wschema="CHAR")
    assert qm.publish("IBM/Patents/Software/Results", msg("deep")) == 1
    assert qm.publish("IBM/Results", msg("no")) == 0  # '/*/' needs two slashes
    assert qm.publish("IBM//Results", msg("empty")) == 1  # '*' may be empty
    assert bodies(qm, s.dest) == [b"deep", b"empty"]
    qm.unsubscribe("S")
    assert qm.publish("IBM/Patents/Software/Results", msg("gone")) == 0


def test_topic_scheme_characters_are_literal_in_char_scheme(qm: QueueManager) -> None:
    s, _ = qm.subscribe("Sport/#", name="S", wschema="CHAR")
    assert qm.publish("Sport/Football", msg("x")) == 0
    t, _ = qm.subscribe("Sport/%*", name="T", wschema="CHAR")
    assert qm.publish("Sport/*", msg("star")) == 1
    assert bodies(qm, t.dest) == [b"star"] and bodies(qm, s.dest) == []


def test_retained_publication_reaches_a_new_char_subscription(qm: QueueManager) -> None:
    qm.publish("Prices/Fruit/Apples", msg("kept"), retain=True)
    qm.publish("Prices/Fruit/Pears", msg("other"), retain=True)
    s, _ = qm.subscribe("Prices*Apples", name="S", wschema="CHAR")
    (m,) = qm.get(s.dest, limit=10)
    assert m.body == b"kept" and m.retained


def test_wildcard_block_applies_to_char_wildcards_above_the_object(qm: QueueManager) -> None:
    qm.define_topic(TopicObject("FRUIT", "Prices/Fruit", {"WILDCARD": "BLOCK"}))
    above, _ = qm.subscribe("Prices*", name="ABOVE", wschema="CHAR")  # covers as '#'
    below, _ = qm.subscribe("Prices/Fruit/A*", name="BELOW", wschema="CHAR")
    exact, _ = qm.subscribe("Prices/Fruit/Apples", name="EXACT", wschema="CHAR")
    qm.publish("Prices/Fruit/Apples", msg("a"))
    assert bodies(qm, above.dest) == []
    assert bodies(qm, below.dest) == [b"a"]
    assert bodies(qm, exact.dest) == [b"a"]


def test_sub_disabled_is_resolved_before_the_first_wildcard(qm: QueueManager) -> None:
    qm.define_topic(TopicObject("FRUIT", "Prices/Fruit", {"SUB": "DISABLED"}))
    with pytest.raises(MQError) as err:
        qm.subscribe("Prices/Fruit/A*", name="S", wschema="CHAR")
    assert err.value.reason_name == "MQRC_SUB_INHIBITED"
    assert "S" not in qm.pubsub.subs
    qm.subscribe("Prices/*", name="T", wschema="CHAR")  # resolves at 'Prices': allowed
