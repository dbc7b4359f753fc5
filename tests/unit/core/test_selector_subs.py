"""DEFINE SUB SELECTOR: a subscription receives only the publications its selector selects."""

from __future__ import annotations

from qmgr.core import selection
from qmgr.core.clock import ManualClock
from qmgr.core.errors import REASONS
from qmgr.core.message import Message
from qmgr.core.qmgr import QueueManager
from qmgr.core.subscription import Subscription
from qmgr.filters.selector import compile_selector
from tests.unit.core.conftest import RecordingJournal, msg
from tests.unit.core.test_mqsc_exec import attrs, fail, run


def bodies(qm: QueueManager, queue: str) -> list[bytes]:
    return [m.body for m in qm.queues[queue].browse(qm.clock.now(), limit=1000)]


def publish(qm: QueueManager, topic: str, body: str, **properties: object) -> int:
    return qm.publish(topic, msg(body, properties=dict(properties)))


def test_selector_chooses_publications_by_property(qm: QueueManager) -> None:
    run(qm, "DEFINE QLOCAL(RED.Q)")
    run(qm, "DEFINE QLOCAL(ALL.Q)")
    run(
        qm,
        "DEFINE SUB(RED) TOPICSTR('paint/#') DEST(RED.Q) SELECTOR('colour = ''red'' AND size > 2')",
    )
    run(qm, "DEFINE SUB(ALL) TOPICSTR('paint/#') DEST(ALL.Q)")
    assert publish(qm, "paint/a", "1", colour="red", size=3) == 2
    assert publish(qm, "paint/a", "2", colour="blue", size=3) == 1
    assert publish(qm, "paint/b", "3", colour="red", size=1) == 1
    assert publish(qm, "paint/b", "4", colour="red") == 1  # size missing: UNKNOWN, not selected
    assert publish(qm, "paint/b", "5", Colour="red", size=5) == 1  # names are case-sensitive
    assert publish(qm, "paint/b", "6", colour="red", size="big") == 1  # type mismatch: FALSE
    assert publish(qm, "paint/c", "7", colour="red", size=2.5) == 2
    assert bodies(qm, "RED.Q") == [b"1", b"7"]
    assert bodies(qm, "ALL.Q") == [b"1", b"2", b"3", b"4", b"5", b"6", b"7"]
    assert attrs(run(qm, "DISPLAY SBSTATUS(RED)")[0])["NUMMSGS"] == "2"


def test_selector_grammar_through_a_subscription(qm: QueueManager) -> None:
    run(qm, "DEFINE QLOCAL(Q)")
    selector = (
        "(region IN ('eu', 'us') OR code LIKE 'X!_%' ESCAPE '!') AND qty BETWEEN 1 AND 10 "
        "AND note IS NULL AND NOT urgent AND qty * 2 + 1 >= 3 AND JMSPriority > 3"
    )
    run(
        qm,
        f"DEFINE SUB(S) TOPICSTR('t') DEST(Q) SELECTOR('{selector.replace(chr(39), chr(39) * 2)}')",
    )
    cases = [
        ("a", {"region": "eu", "qty": 5, "urgent": False}, 4, True),
        ("b", {"code": "X_1", "qty": 1, "urgent": False}, 9, True),
        ("c", {"code": "XY1", "qty": 1, "urgent": False}, 9, False),
        ("d", {"region": "eu", "qty": 11, "urgent": False}, 9, False),
        ("e", {"region": "eu", "qty": 5, "urgent": False, "note": "n"}, 9, False),
        ("f", {"region": "eu", "qty": 5, "urgent": True}, 9, False),
        ("g", {"region": "eu", "qty": 5}, 9, False),  # urgent missing: NOT UNKNOWN is UNKNOWN
        ("h", {"region": "eu", "qty": 5, "urgent": False}, 3, False),  # JMSPriority
    ]
    for body, props, priority, _ in cases:
        qm.publish("t", Message("", body.encode(), props, priority=priority))
    assert sorted(bodies(qm, "Q")) == [c[0].encode() for c in cases if c[3]]  # priority order


def test_evaluation_error_means_not_selected(qm: QueueManager) -> None:
    run(qm, "DEFINE QLOCAL(Q)")
    run(qm, "DEFINE SUB(S) TOPICSTR('t') DEST(Q) SELECTOR('n / d > 1 OR always = TRUE')")
    publish(qm, "t", "zero", n=4, d=0)  # integer division by zero: not selected
    publish(qm, "t", "text", n="4", d=2)  # arithmetic on a string: not selected
    publish(qm, "t", "two", n=4, d=2)
    publish(qm, "t", "always", always=True)
    assert bodies(qm, "Q") == [b"two", b"always"]


def test_syntax_error_is_2459_and_changes_nothing(qm: QueueManager) -> None:
    queues_before = set(qm.queues)
    for command in [
        "DEFINE SUB(S) TOPICSTR('t') DESTCLAS(MANAGED) SELECTOR('colour = ')",
        "DEFINE SUB(S) TOPICSTR('t') DESTCLAS(MANAGED) SELECTOR('colour != ''red''')",
        "DEFINE SUB(S) TOPICSTR('t') DESTCLAS(MANAGED) SELECTOR('x LIKE ''a!'' ESCAPE ''!''')",
        "DEFINE SUB(S) TOPICSTR('t') DESTCLAS(MANAGED) SELECTOR('sys.Label = ''x''')",
    ]:
        record = fail(qm, command)
        detail = attrs(record)
        assert detail["REASON"] == "MQRC_SELECTOR_SYNTAX_ERROR", record.render()
        assert "SELECTOR is not valid" in detail["DETAIL"]
        assert "(line 1, column" in detail["DETAIL"]
        assert f"{REASONS['MQRC_SELECTOR_SYNTAX_ERROR']:X}" in record.text  # 99B
    assert REASONS["MQRC_SELECTOR_SYNTAX_ERROR"] == 2459
    assert "S" not in qm.pubsub.subs
    assert set(qm.queues) == queues_before  # no managed queue left behind


def test_display_sub_shows_selector_and_seltype(qm: QueueManager) -> None:
    run(qm, "DEFINE QLOCAL(Q)")
    run(qm, "DEFINE SUB(WITH) TOPICSTR('t') DEST(Q) SELECTOR('a = 1')")
    run(qm, "DEFINE SUB(WITHOUT) TOPICSTR('t') DEST(Q)")
    with_sel = attrs(run(qm, "DISPLAY SUB(WITH) ALL")[0])
    assert with_sel["SELECTOR"] == "a = 1" and with_sel["SELTYPE"] == "STANDARD"
    without = attrs(run(qm, "DISPLAY SUB(WITHOUT) SELTYPE")[0])
    assert without["SELTYPE"] == "NONE"


def test_selector_cannot_be_altered(qm: QueueManager) -> None:
    run(qm, "DEFINE QLOCAL(Q)")
    run(qm, "DEFINE SUB(S) TOPICSTR('t') DEST(Q) SELECTOR('a = 1')")
    assert fail(qm, "ALTER SUB(S) SELECTOR('a = 2')").code == "AMQ8427E"
    record = fail(qm, "DEFINE SUB(S) TOPICSTR('t') DEST(Q) SELECTOR('a = 2') REPLACE")
    assert attrs(record)["REASON"] == "MQRC_SELECTOR_NOT_ALTERABLE"
    record = fail(qm, "DEFINE SUB(S) TOPICSTR('t') DEST(Q) SELECTOR('a = ') REPLACE")
    assert attrs(record)["REASON"] == "MQRC_SELECTOR_SYNTAX_ERROR"
    run(qm, "DEFINE SUB(S) TOPICSTR('t') DEST(Q) SELECTOR('a = 1') USERDATA('u') REPLACE")
    assert qm.pubsub.subs["S"].selector == "a = 1"
    assert qm.pubsub.subs["S"].userdata == "u"


def test_retained_publications_respect_the_selector(qm: QueueManager) -> None:
    run(qm, "DEFINE QLOCAL(Q)")
    qm.publish("r/a", msg("keep", properties={"k": 1}), retain=True)
    qm.publish("r/b", msg("skip", properties={"k": 2}), retain=True)
    run(qm, "DEFINE SUB(S) TOPICSTR('r/#') DEST(Q) SELECTOR('k = 1')")
    assert bodies(qm, "Q") == [b"keep"]


def test_selector_is_journaled_and_survives_a_restart(
    qm: QueueManager, clock: ManualClock, journal: RecordingJournal
) -> None:
    run(qm, "DEFINE QLOCAL(Q)")
    run(qm, "DEFINE SUB(S) TOPICSTR('t') DEST(Q) SELECTOR('colour = ''red''')")
    saved = journal.objects[("sub", "S")]
    assert saved["selector"] == "colour = 'red'"
    # A new queue manager restored from what was journaled, as the node does on start.
    again = QueueManager("QM1", clock, RecordingJournal())
    again.restore_queue(qm.queues["Q"].definition)
    again.pubsub.restore(Subscription.from_dict(dict(saved)), clock.now())
    publish(again, "t", "blue", colour="blue")
    publish(again, "t", "red", colour="red")
    assert bodies(again, "Q") == [b"red"]
    assert attrs(run(again, "DISPLAY SUB(S) SELTYPE")[0])["SELTYPE"] == "STANDARD"


def test_stored_selector_that_no_longer_parses_selects_nothing(qm: QueueManager) -> None:
    run(qm, "DEFINE QLOCAL(Q)")
    run(qm, "DEFINE SUB(S) TOPICSTR('t') DEST(Q)")
    # e.g. written by an older version that stored SELECTOR without checking it
    qm.pubsub.replace(qm.pubsub.subs["S"].altered_with(selector="colour = "))
    publish(qm, "t", "x", colour="red")
    assert bodies(qm, "Q") == []


def test_publication_without_selector_subscriptions_is_unchanged(qm: QueueManager) -> None:
    run(qm, "DEFINE QLOCAL(Q)")
    run(qm, "DEFINE SUB(S) TOPICSTR('t') DEST(Q) SELECTOR('')")
    assert qm.pubsub.subs["S"].selector == ""
    publish(qm, "t", "x")
    assert bodies(qm, "Q") == [b"x"]
    assert attrs(run(qm, "DISPLAY SUB(S) SELTYPE")[0])["SELTYPE"] == "NONE"


def test_publication_from_another_queue_manager_is_filtered_where_the_sub_lives(
    qm: QueueManager,
) -> None:
    # Proxy subscriptions carry no selector: a peer forwards every publication on the topic and
    # the queue manager that holds the subscription applies the selector.
    run(qm, "DEFINE QLOCAL(Q)")
    run(qm, "DEFINE SUB(S) TOPICSTR('t/#') DEST(Q) SELECTOR('JMSPriority >= 5 AND k = ''v''')")
    forwarded = [
        Message("ID1", b"high", {"k": "v"}, persistent=True, priority=7),
        Message("ID2", b"low", {"k": "v"}, persistent=True, priority=2),
        Message("ID3", b"other", {"k": "w"}, persistent=True, priority=9),
    ]
    assert [qm.deliver_publication("t/x", m) for m in forwarded] == [1, 0, 0]
    assert bodies(qm, "Q") == [b"high"]


def test_jms_header_fields(qm: QueueManager, clock: ManualClock) -> None:
    run(qm, "DEFINE QLOCAL(Q)")
    run(
        qm,
        "DEFINE SUB(S) TOPICSTR('t') DEST(Q) SELECTOR('JMSDeliveryMode = ''PERSISTENT'' "
        "AND JMSCorrelationID = ''ID:0a0b'' AND JMSTimestamp > 0 AND JMSExpiration = 0')",
    )
    qm.publish("t", Message("", b"yes", persistent=True, correl_id=b"\x0a\x0b"))
    qm.publish("t", Message("", b"np", persistent=False, correl_id=b"\x0a\x0b"))
    qm.publish("t", Message("", b"other", persistent=True, correl_id=b"\x0c"))
    qm.publish("t", Message("", b"expires", persistent=True, correl_id=b"\x0a\x0b", ttl=60))
    assert bodies(qm, "Q") == [b"yes"]
    (copy,) = qm.queues["Q"].browse(clock.now())
    fields = selection.header_fields(copy)
    assert fields["JMSMessageID"] == f"ID:{copy.message_id.lower()}"
    assert compile_selector(f"JMSMessageID = 'ID:{copy.message_id.lower()}'").matches({}, fields)
