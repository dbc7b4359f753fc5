"""DEFINE/ALTER/DELETE SUB, DISPLAY SUB and SBSTATUS."""

from __future__ import annotations

from typing import Any

from qmgr.core import selection
from qmgr.core.admin.queues import name_matches
from qmgr.core.admin.records import Record, date_time, select, yes_no
from qmgr.core.errors import MQError
from qmgr.core.qmgr import QueueManager
from qmgr.core.subscription import Subscription
from qmgr.mqsc import MqscCommand

_SUB_ATTRS = {
    "DESTQMGR": "dest_qmgr",
    "SUBSCOPE": "subscope",
    "USERDATA": "userdata",
    "SELECTOR": "selector",
    "PUBPRTY": "pubprty",
    "DESTCORL": "destcorl",
    "PSPROP": "psprop",
    "SUBUSER": "subuser",
    "WSCHEMA": "wschema",
}
_ALTERABLE = {"USERDATA", "PUBPRTY", "DESTCORL", "PSPROP", "SUBUSER", "DEST", "DESTQMGR", "EXPIRY"}


def _full_topic(qm: QueueManager, cmd: MqscCommand) -> tuple[str, str]:
    obj_name = cmd.params.get("TOPICOBJ") or ""
    topic = cmd.params.get("TOPICSTR") or ""
    if obj_name:
        obj = qm.topics.get(obj_name)
        if obj is None:
            raise MQError("MQRC_UNKNOWN_OBJECT_NAME", f"topic object {obj_name} does not exist")
        topic = f"{obj.topic_str}/{topic}" if topic and obj.topic_str else (topic or obj.topic_str)
    return topic, obj_name


def define_sub(qm: QueueManager, cmd: MqscCommand) -> list[Record]:
    name = cmd.name or ""
    topic, obj_name = _full_topic(qm, cmd)
    replace = "REPLACE" in cmd.params
    if cmd.params.get("SELECTOR"):
        selection.parse(cmd.params["SELECTOR"] or "")  # MQRC_SELECTOR_SYNTAX_ERROR, nothing made
    if name in qm.pubsub.subs:
        if not replace:
            raise MQError("MQRC_SUB_ALREADY_EXISTS", f"subscription {name} exists")
        return alter_sub(qm, cmd)
    extra: dict[str, Any] = {
        attr: cmd.params[key] or "" for key, attr in _SUB_ATTRS.items() if key in cmd.params
    }
    dest = cmd.params.get("DEST") or ""
    if cmd.params.get("DESTCLAS") == "MANAGED":
        dest = ""
    elif not dest:
        raise MQError("MQRC_UNKNOWN_OBJECT_NAME", "DEST is required unless DESTCLAS(MANAGED)")
    qm.subscribe(
        topic, name=name, durable=True, dest=dest, subtype="ADMIN", topic_obj=obj_name, **extra
    )
    return [Record("AMQ8094I", "IBM MQ subscription created.")]


def _find(qm: QueueManager, cmd: MqscCommand) -> Subscription:
    sub_id = cmd.params.get("SUBID")
    sub = qm.subscription_by_id(sub_id) if sub_id else qm.pubsub.subs.get(cmd.name or "")
    if sub is None:
        raise MQError("MQRC_NO_SUBSCRIPTION", f"subscription {cmd.name or sub_id} does not exist")
    return sub


def alter_sub(qm: QueueManager, cmd: MqscCommand) -> list[Record]:
    sub = _find(qm, cmd)
    if "SELECTOR" in cmd.params:  # DEFINE SUB REPLACE (ALTER SUB rejects SELECTOR outright)
        selector = cmd.params["SELECTOR"] or ""
        if selector:
            selection.parse(selector)
        if selector != sub.selector:
            raise MQError(
                "MQRC_SELECTOR_NOT_ALTERABLE",
                f"SELECTOR of subscription {sub.name} cannot be altered "
                f"(it is {sub.selector!r}); delete and define it again",
            )
    changes: dict[str, str] = {}
    for key, value in cmd.params.items():
        if key in ("TOPICSTR", "TOPICOBJ") and value is not None:
            topic, _ = _full_topic(qm, cmd)
            if topic != sub.topic_str:
                raise MQError("MQRC_OPTIONS_ERROR", "TOPICSTR of a subscription cannot be altered")
        elif key in _SUB_ATTRS and key in _ALTERABLE:
            changes[_SUB_ATTRS[key]] = value or ""
        elif key == "DEST" and value:
            qm.queue(value)
            changes["dest"] = value
    qm.pubsub.replace(sub.altered_with(altered=qm.clock.now(), **changes))
    return [Record("AMQ8095I", "IBM MQ subscription changed.")]


def delete_sub(qm: QueueManager, cmd: MqscCommand) -> list[Record]:
    qm.unsubscribe(_find(qm, cmd).name)
    return [Record("AMQ8097I", "IBM MQ subscription deleted.")]


def sub_attrs(sub: Subscription) -> list[tuple[str, str]]:
    crdate, crtime = date_time(sub.created)
    altdate, alttime = date_time(sub.altered)
    return [
        ("SUB", sub.name),
        ("SUBID", sub.sub_id),
        ("SUBTYPE", sub.subtype),
        ("TOPICSTR", sub.topic_str),
        ("DEST", sub.dest),
        ("DESTQMGR", sub.dest_qmgr),
        ("DESTCORL", sub.correl_id.hex().upper()),
        ("DURABLE", yes_no(sub.durable)),
        ("ALTDATE", altdate),
        ("ALTTIME", alttime),
        ("CRDATE", crdate),
        ("CRTIME", crtime),
        ("DESTCLAS", "MANAGED" if sub.managed else "PROVIDED"),
        ("EXPIRY", "UNLIMITED"),
        ("PSPROP", sub.psprop),
        ("PUBPRTY", sub.pubprty),
        ("SELECTOR", sub.selector),
        ("SELTYPE", selection.seltype(sub.selector)),
        ("SUBSCOPE", sub.subscope),
        ("SUBUSER", sub.subuser),
        ("TOPICOBJ", sub.topic_obj),
        ("USERDATA", sub.userdata),
        ("WSCHEMA", sub.wschema),
    ]


def _selected(qm: QueueManager, cmd: MqscCommand) -> list[Subscription]:
    if cmd.params.get("SUBID"):
        return [_find(qm, cmd)]
    pattern = cmd.name or "*"
    subtype = cmd.params.get("SUBTYPE") or "USER"
    durable = cmd.params.get("DURABLE") or "ALL"
    out = []
    for sub in sorted(qm.pubsub.subs.values(), key=lambda s: s.name):
        if not name_matches(pattern, sub.name):
            continue
        if subtype == "USER" and sub.subtype == "PROXY":
            continue
        if subtype not in ("USER", "ALL") and sub.subtype != subtype:
            continue
        if durable != "ALL" and yes_no(sub.durable) != durable:
            continue
        out.append(sub)
    if not out and not pattern.endswith("*"):
        raise MQError("MQRC_NO_SUBSCRIPTION", f"subscription {pattern} does not exist")
    return out


def display_sub(qm: QueueManager, cmd: MqscCommand) -> list[Record]:
    show_all = "ALL" in cmd.params or not (cmd.generic or cmd.requested)
    summary = ("SUBID", "SUBTYPE", "TOPICSTR", "DEST", "DESTQMGR", "DURABLE", *cmd.requested)
    return [
        Record(
            "AMQ8096I", "IBM MQ subscription inquired.", select(sub_attrs(s), 1, summary, show_all)
        )
        for s in _selected(qm, cmd)
    ]


def display_sbstatus(qm: QueueManager, cmd: MqscCommand) -> list[Record]:
    out = []
    for sub in _selected(qm, cmd):
        stats = qm.pubsub.stats.get(sub.name)
        lmsg = date_time(stats.last_msg) if stats and stats.last_msg else ("", "")
        resm = date_time(stats.resumed) if stats else ("", "")
        depth = qm.queues[sub.dest].depth if sub.dest in qm.queues else 0
        out.append(
            Record(
                "AMQ8099I",
                "IBM MQ subscription status inquired.",
                [
                    ("SUB", sub.name),
                    ("SUBID", sub.sub_id),
                    ("ACTCONN", "1" if stats and stats.active_connections else ""),
                    ("DURABLE", yes_no(sub.durable)),
                    ("LMSGDATE", lmsg[0]),
                    ("LMSGTIME", lmsg[1]),
                    ("NUMMSGS", str(stats.num_msgs if stats else 0)),
                    ("RESMDATE", resm[0]),
                    ("RESMTIME", resm[1]),
                    ("SUBTYPE", sub.subtype),
                    ("SUBUSER", sub.subuser),
                    ("TOPICSTR", sub.topic_str),
                    ("CURDEPTH", str(depth)),
                ],
            )
        )
    return out
