"""Single queue manager publish/subscribe as IBM MQ documents it."""

from __future__ import annotations

import pytest

from cluster.topics import TopicObject
from qmgr.core.clock import ManualClock
from qmgr.core.errors import MQError
from qmgr.core.message import Message
from qmgr.core.qmgr import QueueManager
from qmgr.core.queue import QueueDef
from tests.unit.core.conftest import RecordingJournal, msg


def bodies(qm: QueueManager, queue: str) -> list[bytes]:
    return [m.body for m in qm.get(queue, limit=1000)]


def test_wildcards_and_one_copy_per_subscription(qm: QueueManager) -> None:
    a, _ = qm.subscribe("Sport/#", name="A")
    b, _ = qm.subscribe("Sport/+/Results", name="B")
    c, _ = qm.subscribe("Sport/Football/Results", name="C")
    d, _ = qm.subscribe("News/#", name="D")
    assert qm.publish("Sport/Football/Results", msg("goal")) == 3
    assert qm.publish("Sport", msg("root")) == 1  # '#' matches zero levels
    assert bodies(qm, a.dest) == [b"goal", b"root"]
    assert bodies(qm, b.dest) == [b"goal"]
    assert bodies(qm, c.dest) == [b"goal"]
    assert bodies(qm, d.dest) == []


def test_delivered_copy_carries_publication_properties(qm: QueueManager) -> None:
    s, _ = qm.subscribe("a/b", name="S", userdata="hello")
    qm.publish("a/b", msg("x", properties={"k": 1}))
    (m,) = qm.get(s.dest)
    props = m.publication_properties()
    assert props["MQTopicString"] == "a/b" and props["MQSubUserData"] == "hello"
    assert props["k"] == 1
    assert m.correl_id == bytes.fromhex(s.sub_id)


def test_wildcard_is_literal_inside_a_level(qm: QueueManager) -> None:
    s, _ = qm.subscribe("a/b#", name="S")
    qm.publish("a/bc", msg())
    qm.publish("a/b#", msg("literal"))
    assert bodies(qm, s.dest) == [b"literal"]


def test_publish_topic_with_wildcard_level_rejected(qm: QueueManager) -> None:
    with pytest.raises(MQError) as err:
        qm.publish("a/#", msg())
    assert err.value.reason == 2425


def test_pub_disabled_rejects(qm: QueueManager) -> None:
    qm.define_topic(TopicObject("T", "sport", {"PUB": "DISABLED"}))
    with pytest.raises(MQError, match="PUT_INHIBITED"):
        qm.publish("sport/x", msg())
    qm.publish("news", msg())  # other branches unaffected


def test_sub_disabled_and_dursub(qm: QueueManager) -> None:
    qm.define_topic(TopicObject("T", "a", {"SUB": "DISABLED"}))
    qm.define_topic(TopicObject("U", "b", {"DURSUB": "NO"}))
    with pytest.raises(MQError, match="SUB_INHIBITED"):
        qm.subscribe("a/x", name="S1")
    with pytest.raises(MQError, match="DURABILITY_NOT_ALLOWED"):
        qm.subscribe("b/x", name="S2", durable=True)
    qm.subscribe("b/x", name="S3", durable=False)


def test_defpsist_and_defprty_from_topic(qm: QueueManager) -> None:
    qm.define_topic(TopicObject("T", "p", {"DEFPSIST": "YES", "DEFPRTY": "6"}))
    s, _ = qm.subscribe("p/#", name="S", durable=True)
    qm.publish("p/q", msg(persistent=None, priority=-1))
    (m,) = qm.get(s.dest)
    assert m.persistent is True and m.priority == 6


def test_retained_publication_goes_to_new_subscribers(qm: QueueManager) -> None:
    qm.publish("price/x", msg("old"), retain=True)
    qm.publish("price/x", msg("new"), retain=True)
    qm.publish("price/x", msg("not retained"))
    s, _ = qm.subscribe("price/+", name="S")
    (m,) = qm.get(s.dest)
    assert m.body == b"new" and m.retained and m.publication_properties()["MQIsRetained"] is True
    s2, _ = qm.subscribe("price/x", name="S2", new_publications_only=True)
    assert qm.get(s2.dest) == []
    assert qm.clear_retained("price/x")
    s3, _ = qm.subscribe("price/x", name="S3")
    assert qm.get(s3.dest) == []


def test_retained_copy_from_a_topic_host_goes_to_subscriptions_that_lack_it(
    qm: QueueManager, journal: RecordingJournal
) -> None:
    waiting, _ = qm.subscribe("price/+", name="WAITING")
    new_only, _ = qm.subscribe("price/x", name="NEWONLY", new_publications_only=True)
    sent = Message("AB" * 24, b"held", persistent=True)
    assert qm.receive_retained("price/x", sent.copy()) == 1
    (m,) = qm.get(waiting.dest)
    assert m.body == b"held" and m.publication_properties()["MQIsRetained"] is True
    assert qm.get(new_only.dest) == []
    assert journal.retained["price/x"].body == b"held"  # kept here, persistent
    # the same publication again (a proxy refresh): nobody gets it twice
    assert qm.receive_retained("price/x", sent.copy()) == 0
    assert qm.get(waiting.dest) == []
    # a later subscriber here is served from the copy kept here
    later, _ = qm.subscribe("price/x", name="LATER")
    assert [m.body for m in qm.get(later.dest)] == [b"held"]


def test_retained_copy_with_a_bad_topic_is_refused(qm: QueueManager) -> None:
    with pytest.raises(MQError) as err:
        qm.receive_retained("price/#", Message("CD" * 24, b"x"))
    assert err.value.reason_name == "MQRC_TOPIC_STRING_ERROR"
    assert qm.pubsub.retained == {}


def test_persistent_retained_is_journaled(qm: QueueManager, journal: RecordingJournal) -> None:
    qm.publish("t", msg("p", persistent=True), retain=True)
    assert journal.retained["t"].body == b"p"
    qm.publish("t", msg("np", persistent=False), retain=True)
    assert "t" not in journal.retained


def test_non_durable_unsubscribe_removes_managed_queue(qm: QueueManager) -> None:
    s, _ = qm.subscribe("a", name="S")
    assert s.dest.startswith("SYSTEM.MANAGED.NDURABLE.")
    qm.unsubscribe("S")
    assert s.dest not in qm.queues
    assert qm.publish("a", msg()) == 0


def test_durable_subscription_resumes_and_conflicts(
    qm: QueueManager, journal: RecordingJournal
) -> None:
    s, resumed = qm.subscribe("a", name="D", durable=True)
    assert not resumed and ("sub", "D") in journal.objects
    assert s.dest.startswith("SYSTEM.MANAGED.DURABLE.")
    again, resumed = qm.subscribe("a", name="D", durable=True)
    assert resumed and again.sub_id == s.sub_id
    with pytest.raises(MQError, match="SUB_ALREADY_EXISTS"):
        qm.subscribe("b", name="D", durable=True)


def test_non_durable_messages_are_not_stored(qm: QueueManager, journal: RecordingJournal) -> None:
    qm.subscribe("a", name="N")
    d, _ = qm.subscribe("a", name="D", durable=True)
    qm.publish("a", msg(persistent=True))
    assert [q for q, _ in journal.messages.values()] == [d.dest]


def test_npmsgdlv_allavail_ignores_full_queue(qm: QueueManager) -> None:
    qm.define_queue(QueueDef("SMALL", maxdepth=0))
    qm.define_queue(QueueDef("BIG"))
    qm.subscribe("a", name="S1", dest="SMALL")
    qm.subscribe("a", name="S2", dest="BIG")
    assert qm.publish("a", msg(persistent=False)) == 1


def test_pmsgdlv_alldur_fails_whole_publication(qm: QueueManager) -> None:
    qm.define_queue(QueueDef("SMALL", maxdepth=0))
    qm.define_queue(QueueDef("BIG"))
    qm.subscribe("a", name="S1", dest="SMALL", durable=True)
    qm.subscribe("a", name="S2", dest="BIG", durable=True)
    with pytest.raises(MQError) as err:
        qm.publish("a", msg(persistent=True))
    assert err.value.reason_name == "MQRC_PUBLICATION_FAILURE"
    assert qm.queue("BIG").depth == 0  # nothing delivered


def test_usedlq_rescues_undeliverable_copy(qm: QueueManager) -> None:
    qm.define_queue(QueueDef("DLQ"))
    qm.attrs.deadq = "DLQ"
    qm.define_queue(QueueDef("SMALL", maxdepth=0))
    qm.subscribe("a", name="S1", dest="SMALL", durable=True)
    assert qm.publish("a", msg(persistent=True)) == 1
    assert qm.queue("DLQ").depth == 1


def test_wildcard_block(qm: QueueManager) -> None:
    qm.define_topic(TopicObject("T", "Sport/Football", {"WILDCARD": "BLOCK"}))
    above, _ = qm.subscribe("Sport/#", name="A")
    below, _ = qm.subscribe("Sport/Football/#", name="B")
    exact, _ = qm.subscribe("Sport/Football/Results", name="C")
    qm.publish("Sport/Football/Results", msg())
    qm.publish("Sport/Tennis", msg())
    assert len(qm.get(above.dest, limit=10)) == 1  # only Tennis
    assert len(qm.get(below.dest, limit=10)) == 1
    assert len(qm.get(exact.dest, limit=10)) == 1


def test_pubprty_overrides_priority(qm: QueueManager) -> None:
    s, _ = qm.subscribe("a", name="S", pubprty="3")
    qm.publish("a", msg(priority=8))
    (m,) = qm.get(s.dest)
    assert m.priority == 3


def test_topic_changes_invalidate_cached_policy(qm: QueueManager) -> None:
    qm.subscribe("a/b", name="S")
    qm.publish("a/b", msg())
    qm.define_topic(TopicObject("T", "a", {"PUB": "DISABLED"}))
    with pytest.raises(MQError, match="PUT_INHIBITED"):
        qm.publish("a/b", msg())
    qm.delete_topic("T")
    qm.publish("a/b", msg())


def test_a_copy_carries_the_time_it_was_put_on_the_subscriber_queue(
    qm: QueueManager, clock: ManualClock
) -> None:
    """MQ sets PutDate/PutTime of a publication it forwards to a subscriber to when it puts the
    copy there (MQMD settings for publications forwarded by a queue manager): a publication
    from another queue manager, or a retained one given to a later subscriber, carries the
    time of that put, not the publisher's."""
    s, _ = qm.subscribe("price/#", name="S")
    forwarded = msg("from a topic host")
    forwarded.put_time = clock.now() - 5.0  # put by its publisher elsewhere, 5 s ago
    qm.deliver_publication("price/x", forwarded)
    qm.publish("price/y", msg("retained"), retain=True)
    published_at = clock.now()
    (copy, _) = qm.get(s.dest, limit=10)
    assert copy.put_time == clock.now()
    clock.advance(30.0)
    later, _ = qm.subscribe("price/y", name="LATER")
    (retained,) = qm.get(later.dest)
    assert retained.put_time == published_at + 30.0
