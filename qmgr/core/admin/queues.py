"""DEFINE/ALTER/DELETE/CLEAR QLOCAL, DEFINE/ALTER/DELETE/DISPLAY QMODEL,
DISPLAY QLOCAL/QUEUE/QSTATUS."""

from __future__ import annotations

from typing import Any

from qmgr.core.admin.records import Record, date_time, enabled, select, yes_no
from qmgr.core.errors import MQError
from qmgr.core.qmgr import QueueManager
from qmgr.core.queue import LocalQueue, QueueDef
from qmgr.mqsc import MqscCommand

_INT = {"MAXDEPTH": "maxdepth", "MAXMSGL": "maxmsgl", "DEFPRTY": "defprty", "BOTHRESH": "bothresh"}
_STR = {"DESCR": "descr", "BOQNAME": "boqname", "USAGE": "usage"}
_DEFTYPE = "DEFTYPE"  # of a model queue, kept in QueueDef.extra
_FLAG = {
    "DEFPSIST": ("defpsist", "YES"),
    "GET": ("get_enabled", "ENABLED"),
    "PUT": ("put_enabled", "ENABLED"),
}


def name_matches(pattern: str, name: str) -> bool:
    return name.startswith(pattern[:-1]) if pattern.endswith("*") else name == pattern


def queue_changes(params: Any) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    for key, value in params.items():
        if key in _INT:
            changes[_INT[key]] = int(value)
        elif key in _STR:
            changes[_STR[key]] = value or ""
        elif key in _FLAG:
            field, true_value = _FLAG[key]
            changes[field] = value == true_value
    return changes


def model_changes(base: QueueDef, params: Any) -> dict[str, Any]:
    changes = queue_changes(params)
    if _DEFTYPE in params:
        changes["extra"] = {**base.extra, _DEFTYPE: params[_DEFTYPE]}
    return changes


def define_qlocal(qm: QueueManager, cmd: MqscCommand) -> list[Record]:
    name = cmd.name or ""
    base = QueueDef(name)
    like = cmd.params.get("LIKE")
    if like:
        base = qm.queue(like).definition.altered_with(name=name, managed=False, temporary=False)
    definition = base.altered_with(**queue_changes(cmd.params))
    qm.define_queue(definition, replace="REPLACE" in cmd.params)
    return [Record("AMQ8006I", "IBM MQ queue created.")]


def alter_qlocal(qm: QueueManager, cmd: MqscCommand) -> list[Record]:
    qm.alter_queue(cmd.name or "", **queue_changes(cmd.params))
    return [Record("AMQ8008I", "IBM MQ queue changed.")]


def delete_qlocal(qm: QueueManager, cmd: MqscCommand) -> list[Record]:
    qm.delete_queue(cmd.name or "", purge="PURGE" in cmd.params)
    return [Record("AMQ8007I", "IBM MQ queue deleted.")]


def clear_qlocal(qm: QueueManager, cmd: MqscCommand) -> list[Record]:
    qm.queue(cmd.name or "").clear()
    return [Record("AMQ8022I", "IBM MQ queue cleared.")]


def define_qmodel(qm: QueueManager, cmd: MqscCommand) -> list[Record]:
    name = cmd.name or ""
    base = QueueDef(name, extra={_DEFTYPE: "PERMDYN"})
    like = cmd.params.get("LIKE")
    if like:
        base = qm.model(like).altered_with(name=name)
    qm.define_model(
        base.altered_with(**model_changes(base, cmd.params)), replace="REPLACE" in cmd.params
    )
    return [Record("AMQ8006I", "IBM MQ queue created.")]


def alter_qmodel(qm: QueueManager, cmd: MqscCommand) -> list[Record]:
    name = cmd.name or ""
    qm.alter_model(name, **model_changes(qm.model(name), cmd.params))
    return [Record("AMQ8008I", "IBM MQ queue changed.")]


def delete_qmodel(qm: QueueManager, cmd: MqscCommand) -> list[Record]:
    qm.delete_model(cmd.name or "")
    return [Record("AMQ8007I", "IBM MQ queue deleted.")]


def _matching(qm: QueueManager, cmd: MqscCommand) -> list[LocalQueue]:
    pattern = cmd.name or "*"
    found = [q for n, q in sorted(qm.queues.items()) if name_matches(pattern, n)]
    if not found and not pattern.endswith("*"):
        raise MQError("MQRC_UNKNOWN_OBJECT_NAME", f"queue {pattern} does not exist")
    return found


def _matching_models(qm: QueueManager, pattern: str) -> list[QueueDef]:
    return [d for n, d in sorted(qm.models.items()) if name_matches(pattern, n)]


def definition_attrs(d: QueueDef, qtype: str) -> list[tuple[str, str]]:
    crdate, crtime = date_time(d.created)
    altdate, alttime = date_time(d.altered)
    attrs = [
        ("QUEUE", d.name),
        ("TYPE", qtype),
        ("ALTDATE", altdate),
        ("ALTTIME", alttime),
        ("BOQNAME", d.boqname),
        ("BOTHRESH", str(d.bothresh)),
        ("CRDATE", crdate),
        ("CRTIME", crtime),
        ("DEFPRTY", str(d.defprty)),
        ("DEFPSIST", yes_no(d.defpsist)),
        ("DESCR", d.descr),
        ("GET", enabled(d.get_enabled)),
        ("MAXDEPTH", str(d.maxdepth)),
        ("MAXMSGL", str(d.maxmsgl)),
        ("PUT", enabled(d.put_enabled)),
        ("USAGE", d.usage),
    ]
    if qtype == "QMODEL":
        attrs.append(("DEFTYPE", d.extra.get(_DEFTYPE, "PERMDYN")))
    return attrs


def queue_attrs(q: LocalQueue) -> list[tuple[str, str]]:
    return [
        *definition_attrs(q.definition, "QLOCAL"),
        ("CURDEPTH", str(q.depth)),
        ("IPPROCS", "0"),
        ("OPPROCS", "0"),
    ]


def _display(cmd: MqscCommand, attrs: list[list[tuple[str, str]]]) -> list[Record]:
    show_all = "ALL" in cmd.params or not (cmd.generic or cmd.requested)
    return [
        Record("AMQ8409I", "Display Queue details.", select(a, 2, cmd.requested, show_all))
        for a in attrs
    ]


def display_queue(qm: QueueManager, cmd: MqscCommand) -> list[Record]:
    """DISPLAY QLOCAL, DISPLAY QMODEL, or DISPLAY QUEUE with TYPE QLOCAL, QMODEL or ALL (the
    default)."""
    qtype = cmd.obj if cmd.obj in ("QLOCAL", "QMODEL") else cmd.params.get("TYPE") or "ALL"
    pattern = cmd.name or "*"
    found: list[list[tuple[str, str]]] = []
    if qtype in ("ALL", "QLOCAL"):
        found += [queue_attrs(q) for n, q in sorted(qm.queues.items()) if name_matches(pattern, n)]
    if qtype in ("ALL", "QMODEL"):
        found += [definition_attrs(d, "QMODEL") for d in _matching_models(qm, pattern)]
    if not found and not pattern.endswith("*"):
        what = "model queue" if cmd.obj == "QMODEL" else "queue"
        raise MQError("MQRC_UNKNOWN_OBJECT_NAME", f"{what} {pattern} does not exist")
    return _display(cmd, found)


display_qmodel = display_queue


def display_qstatus(qm: QueueManager, cmd: MqscCommand) -> list[Record]:
    out = []
    now = qm.clock.now()
    for q in _matching(qm, cmd):
        oldest = q.oldest_put_time()
        attrs = [
            ("QUEUE", q.name),
            ("TYPE", "QUEUE"),
            ("CURDEPTH", str(q.depth)),
            ("IPPROCS", "0"),
            ("OPPROCS", "0"),
            ("UNCOM", str(q.uncommitted) if q.uncommitted else "NO"),
            ("MSGAGE", str(int(now - oldest)) if oldest is not None else ""),
            ("LGETDATE", date_time(q.last_get)[0] if q.last_get else ""),
            ("LGETTIME", date_time(q.last_get)[1] if q.last_get else ""),
            ("LPUTDATE", date_time(q.last_put)[0] if q.last_put else ""),
            ("LPUTTIME", date_time(q.last_put)[1] if q.last_put else ""),
        ]
        out.append(Record("AMQ8450I", "Display queue status details.", attrs))
    return out
