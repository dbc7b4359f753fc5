"""MQSC commands run against a queue manager: runmqsc's records and their attributes."""

from __future__ import annotations

from qmgr.core.admin import Record, execute
from qmgr.core.clock import ManualClock
from qmgr.core.qmgr import QueueManager
from tests.unit.core.conftest import RecordingJournal, msg


def run(qm: QueueManager, command: str) -> list[Record]:
    ok, records = execute(qm, command)
    assert ok, (command, [r.render() for r in records])
    return records


def fail(qm: QueueManager, command: str) -> Record:
    ok, records = execute(qm, command)
    assert not ok, command
    return records[0]


def attrs(record: Record) -> dict[str, str]:
    return dict(record.attrs)


def test_define_display_alter_delete_qlocal(qm: QueueManager, clock: ManualClock) -> None:
    assert run(qm, "DEFINE QLOCAL(APP.ONE) MAXDEPTH(10) DESCR('first queue')")[0].code == "AMQ8006I"
    run(qm, "DEF QL(APP.TWO) LIKE(APP.ONE)")
    (one,) = run(qm, "DISPLAY QLOCAL(APP.ONE)")
    assert one.code == "AMQ8409I"
    a = attrs(one)
    assert a["QUEUE"] == "APP.ONE" and a["MAXDEPTH"] == "10" and a["DESCR"] == "first queue"
    assert a["CURDEPTH"] == "0" and a["DEFPSIST"] == "NO"
    generic = run(qm, "DISPLAY QLOCAL(APP.*)")
    assert [r.attrs for r in generic] == [
        [("QUEUE", "APP.ONE"), ("TYPE", "QLOCAL")],
        [("QUEUE", "APP.TWO"), ("TYPE", "QLOCAL")],
    ]
    assert attrs(run(qm, "DIS Q(APP.TWO) MAXDEPTH")[0]) == {
        "QUEUE": "APP.TWO",
        "TYPE": "QLOCAL",
        "MAXDEPTH": "10",
    }
    run(qm, "ALTER QLOCAL(APP.TWO) MAXDEPTH(20) PUT(DISABLED)")
    assert attrs(run(qm, "DISPLAY QLOCAL(APP.TWO) ALL")[0])["PUT"] == "DISABLED"
    assert run(qm, "DELETE QLOCAL(APP.TWO)")[0].code == "AMQ8007I"
    assert fail(qm, "DISPLAY QLOCAL(APP.TWO)").code == "AMQ8147E"


def test_define_existing_and_replace(qm: QueueManager) -> None:
    run(qm, "DEFINE QLOCAL(Q) MAXDEPTH(5)")
    assert fail(qm, "DEFINE QLOCAL(Q) MAXDEPTH(6)").code == "AMQ8150E"
    run(qm, "DEFINE QLOCAL(Q) MAXDEPTH(6) REPLACE")
    assert attrs(run(qm, "DISPLAY QLOCAL(Q)")[0])["MAXDEPTH"] == "6"


def test_qstatus_clear_and_delete_not_empty(qm: QueueManager, clock: ManualClock) -> None:
    run(qm, "DEFINE QLOCAL(Q)")
    qm.put("Q", [msg(), msg()])
    clock.advance(30)
    status = attrs(run(qm, "DISPLAY QSTATUS(Q)")[0])
    assert status["CURDEPTH"] == "2" and status["MSGAGE"] == "30" and status["LPUTDATE"]
    assert fail(qm, "DELETE QLOCAL(Q)").code == "AMQ8143E"
    assert run(qm, "CLEAR QLOCAL(Q)")[0].code == "AMQ8022I"
    assert attrs(run(qm, "DISPLAY QSTATUS(Q)")[0])["CURDEPTH"] == "0"


def test_topic_object_and_tpstatus_resolution(qm: QueueManager) -> None:
    run(qm, "DEFINE TOPIC(SPORT) TOPICSTR('Sport') DEFPSIST(YES) PUB(ENABLED)")
    run(qm, "DEFINE TOPIC(FOOTBALL) TOPICSTR('Sport/Football') DEFPRTY(7)")
    t = attrs(run(qm, "DISPLAY TOPIC(FOOTBALL)")[0])
    assert t["TOPICSTR"] == "Sport/Football" and t["DEFPSIST"] == "ASPARENT" and t["DEFPRTY"] == "7"
    status = attrs(run(qm, "DISPLAY TPSTATUS('Sport/Football/Results') TYPE(TOPIC)")[0])
    assert status["ADMIN"] == "" and status["DEFPSIST"] == "YES" and status["DEFPRTY"] == "7"
    assert attrs(run(qm, "DISPLAY TPSTATUS('Sport/Football')")[0])["ADMIN"] == "FOOTBALL"
    assert status["PUB"] == "ENABLED" and status["RETAINED"] == "NO"
    assert fail(qm, "ALTER TOPIC(FOOTBALL) TOPICSTR('Other')").code.endswith("E")
    run(qm, "ALTER TOPIC(FOOTBALL) PUB(DISABLED)")
    assert attrs(run(qm, "DISPLAY TPSTATUS('Sport/Football') TYPE(TOPIC)")[0])["PUB"] == "DISABLED"
    run(qm, "DELETE TOPIC(FOOTBALL)")
    assert attrs(run(qm, "DISPLAY TPSTATUS('Sport/Football') TYPE(TOPIC)")[0])["ADMIN"] == ""
    assert attrs(run(qm, "DISPLAY TPSTATUS('Sport') TYPE(TOPIC)")[0])["ADMIN"] == "SPORT"


def test_define_sub_display_and_status(qm: QueueManager) -> None:
    run(qm, "DEFINE QLOCAL(DEST.Q)")
    run(qm, "DEFINE TOPIC(PRICES) TOPICSTR('price')")
    assert (
        run(qm, "DEFINE SUB(PRICE.SUB) TOPICOBJ(PRICES) TOPICSTR('#') DEST(DEST.Q) USERDATA('ud')")[
            0
        ].code
        == "AMQ8094I"
    )
    run(qm, "DEFINE SUB(MANAGED.SUB) TOPICSTR('news/+') DESTCLAS(MANAGED)")
    qm.publish("price/IBM", msg("1"))
    subs = run(qm, "DISPLAY SUB(*)")
    assert [attrs(r)["SUB"] for r in subs] == ["MANAGED.SUB", "PRICE.SUB"]
    detail = attrs(run(qm, "DISPLAY SUB(PRICE.SUB)")[0])
    assert (
        detail["TOPICSTR"] == "price/#"
        and detail["DEST"] == "DEST.Q"
        and detail["SUBTYPE"] == "ADMIN"
    )
    assert detail["DURABLE"] == "YES" and detail["USERDATA"] == "ud" and len(detail["SUBID"]) == 48
    status = attrs(run(qm, "DISPLAY SBSTATUS(PRICE.SUB)")[0])
    assert status["NUMMSGS"] == "1" and status["DURABLE"] == "YES"
    tp = [attrs(r) for r in run(qm, "DISPLAY TPSTATUS('price/IBM') TYPE(SUB)")]
    assert [r["SUBID"] for r in tp] == [detail["SUBID"]]
    assert attrs(run(qm, "DISPLAY TPSTATUS('price/IBM') TYPE(PUB)")[0])["NUMPUBS"] == "1"
    run(qm, f"DELETE SUB SUBID({detail['SUBID']})")
    assert fail(qm, "DISPLAY SUB(PRICE.SUB)").code == "AMQ8147E"
    assert fail(qm, "DEFINE SUB(X) TOPICSTR('a') DEST(NO.SUCH.Q)").code == "AMQ8147E"


def test_alter_qmgr_is_journaled(qm: QueueManager, journal: RecordingJournal) -> None:
    run(qm, "DEFINE QLOCAL(MY.DLQ)")
    run(qm, "ALTER QMGR DEADQ(MY.DLQ) DESCR('test qmgr')")
    a = attrs(run(qm, "DISPLAY QMGR")[0])
    assert a["QMNAME"] == "QM1" and a["DEADQ"] == "MY.DLQ" and a["DESCR"] == "test qmgr"
    assert journal.objects[("qmgr", "attrs")]["deadq"] == "MY.DLQ"
    assert attrs(run(qm, "DISPLAY PUBSUB")[0])["STATUS"] == "ACTIVE"


def test_syntax_error_reports_position_and_changes_nothing(qm: QueueManager) -> None:
    record = fail(qm, "DEFINE QLOCAL(Q) MAXDPTH(5)")
    assert record.code == "AMQ8405E" and "MAXDPTH" in record.text
    assert int(dict(record.attrs)["POSITION"]) == len("DEFINE QLOCAL(Q) ")
    assert "Q" not in qm.queues


def test_unsupported_command_is_an_error(qm: QueueManager) -> None:
    ok, records = execute(qm, "SUSPEND QMGR CLUSTER(C1)")
    assert not ok and records[0].code.endswith("E")
