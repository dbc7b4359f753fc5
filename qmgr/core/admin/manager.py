"""DISPLAY/ALTER QMGR and DISPLAY PUBSUB."""

from __future__ import annotations

from dataclasses import asdict

from qmgr.core.admin.records import Record, date_time, select
from qmgr.core.admin.topics import topic_nodes
from qmgr.core.qmgr import QueueManager
from qmgr.mqsc import MqscCommand

_INT = {"TREELIFE": "treelife", "CLWLMRUC": "clwlmruc", "MAXMSGL": "maxmsgl"}
_STR = {
    "DESCR": "descr",
    "DEADQ": "deadq",
    "PSMODE": "psmode",
    "PSCLUS": "psclus",
    "CLWLUSEQ": "clwluseq",
    "DEFCLXQ": "defclxq",
    "REPOS": "repos",
}


def qmgr_attrs(qm: QueueManager) -> list[tuple[str, str]]:
    a = qm.attrs
    crdate, crtime = date_time(qm.started)
    return [
        ("QMNAME", qm.name),
        ("QMID", qm.qmid),
        ("CLWLMRUC", str(a.clwlmruc)),
        ("CLWLUSEQ", a.clwluseq),
        ("CRDATE", crdate),
        ("CRTIME", crtime),
        ("DEADQ", a.deadq),
        ("DEFCLXQ", a.defclxq),
        ("DESCR", a.descr),
        ("MAXMSGL", str(a.maxmsgl)),
        ("PSCLUS", a.psclus),
        ("PSMODE", a.psmode),
        ("REPOS", a.repos),
        ("REPOSNL", ""),
        ("TREELIFE", str(a.treelife)),
    ]


def display_qmgr(qm: QueueManager, cmd: MqscCommand) -> list[Record]:
    show_all = "ALL" in cmd.params or not cmd.requested
    return [
        Record(
            "AMQ8408I",
            "Display Queue Manager details.",
            select(qmgr_attrs(qm), 1, cmd.requested, show_all),
        )
    ]


def alter_qmgr(qm: QueueManager, cmd: MqscCommand) -> list[Record]:
    for key, value in cmd.params.items():
        if key in _INT:
            setattr(qm.attrs, _INT[key], int(value or 0))
        elif key in _STR:
            setattr(qm.attrs, _STR[key], value or "")
    qm.journal.object_saved(
        "qmgr", "attrs", {k: v for k, v in asdict(qm.attrs).items() if k != "extra"}
    )
    return [Record("AMQ8005I", "IBM MQ queue manager changed.")]


def display_pubsub(qm: QueueManager, cmd: MqscCommand) -> list[Record]:
    return [
        Record(
            "AMQ8723I",
            "Display pub/sub status details.",
            [
                ("TYPE", "LOCAL"),
                ("QMNAME", qm.name),
                ("STATUS", "ACTIVE" if qm.attrs.psmode == "ENABLED" else "INACTIVE"),
                ("SUBCOUNT", str(len(qm.pubsub.subs))),
                ("TPCOUNT", str(len(topic_nodes(qm)))),
            ],
        )
    ]
