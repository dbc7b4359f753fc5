"""DEFINE/ALTER/DELETE TOPIC, DISPLAY TOPIC and TPSTATUS, CLEAR TOPICSTR."""

from __future__ import annotations

from cluster.topics import (
    BASE_DEFAULTS,
    TOPIC_ATTRS,
    TopicObject,
    TopicObjectError,
    TopicStringError,
    ancestors,
    is_wildcard,
    topic_matches,
    wildcard_prefix,
)
from qmgr.core.admin.queues import name_matches
from qmgr.core.admin.records import Record, select
from qmgr.core.errors import MQError
from qmgr.core.qmgr import QueueManager
from qmgr.mqsc import MqscCommand


def _attr_changes(cmd: MqscCommand) -> dict[str, str]:
    return {k: v or "" for k, v in cmd.params.items() if k in TOPIC_ATTRS}


def define_topic(qm: QueueManager, cmd: MqscCommand) -> list[Record]:
    name = cmd.name or ""
    attrs: dict[str, str] = {}
    descr = ""
    like = cmd.params.get("LIKE")
    if like:
        src = qm.topics.get(like)
        if src is None:
            raise MQError("MQRC_UNKNOWN_OBJECT_NAME", f"topic object {like} does not exist")
        attrs, descr = dict(src.attrs), src.descr
    attrs.update(_attr_changes(cmd))
    descr = cmd.params.get("DESCR") or descr
    try:
        obj = TopicObject(name, cmd.params.get("TOPICSTR") or "", attrs, descr)
    except (TopicObjectError, TopicStringError) as exc:
        raise MQError("MQRC_TOPIC_STRING_ERROR", str(exc)) from exc
    qm.define_topic(obj, replace="REPLACE" in cmd.params)
    return [Record("AMQ8690I", "IBM MQ topic created.")]


def alter_topic(qm: QueueManager, cmd: MqscCommand) -> list[Record]:
    obj = qm.topics.get(cmd.name or "")
    if obj is None:
        raise MQError("MQRC_UNKNOWN_OBJECT_NAME", f"topic object {cmd.name} does not exist")
    try:
        new = obj.altered(_attr_changes(cmd), descr=cmd.params.get("DESCR"))
    except (TopicObjectError, TopicStringError) as exc:
        raise MQError("MQRC_TOPIC_STRING_ERROR", str(exc)) from exc
    qm.define_topic(new, replace=True)
    return [Record("AMQ8691I", "IBM MQ topic changed.")]


def delete_topic(qm: QueueManager, cmd: MqscCommand) -> list[Record]:
    qm.delete_topic(cmd.name or "")
    return [Record("AMQ8692I", "IBM MQ topic deleted.")]


def topic_attrs(obj: TopicObject) -> list[tuple[str, str]]:
    attrs = [
        ("TOPIC", obj.name),
        ("TYPE", "LOCAL"),
        ("TOPICSTR", obj.topic_str),
        ("DESCR", obj.descr),
    ]
    attrs += [(k, obj.value(k)) for k in sorted(TOPIC_ATTRS)]
    return attrs


def display_topic(qm: QueueManager, cmd: MqscCommand) -> list[Record]:
    pattern = cmd.name or "*"
    found = [
        o for o in sorted(qm.topics.all(), key=lambda o: o.name) if name_matches(pattern, o.name)
    ]
    if not found and not pattern.endswith("*"):
        raise MQError("MQRC_UNKNOWN_OBJECT_NAME", f"topic object {pattern} does not exist")
    show_all = "ALL" in cmd.params or not (cmd.generic or cmd.requested)
    return [
        Record(
            "AMQ8633I", "Display topic details.", select(topic_attrs(o), 2, cmd.requested, show_all)
        )
        for o in found
    ]


def topic_nodes(qm: QueueManager) -> set[str]:
    """The nodes of the queue manager's topic tree, as DISPLAY PUBSUB TPCOUNT counts them and
    DISPLAY TPSTATUS('#') lists them: the topic strings of administered topic objects
    (SYSTEM.BASE.TOPIC's is the root node ``''``, clustered objects of other queue managers
    included) and the topic strings in use by subscriptions (proxies included), publishers and
    retained publications, with every level above each of them (a topic tree has a node per
    level). A wildcard subscription is held at the node before its first wildcard level."""
    used = {o.topic_str for o in qm.pubsub.topics.all()}
    used |= {wildcard_prefix(s.topic_str) for s in qm.pubsub.subs.values()}
    used |= set(qm.pubsub.retained) | set(qm.pubsub.pub_counts)
    return {node for topic in used for node in ancestors(topic)}


def _status_topics(qm: QueueManager, pattern: str) -> list[str]:
    """Topic nodes (see :func:`topic_nodes`) that match ``pattern`` (wildcards allowed, as
    DISPLAY TPSTATUS does)."""
    if not is_wildcard(pattern):
        return [pattern]
    return sorted(t for t in topic_nodes(qm) if topic_matches(pattern, t))


def display_tpstatus(qm: QueueManager, cmd: MqscCommand) -> list[Record]:
    pattern = cmd.name or ""
    kind = cmd.params.get("TYPE") or "TOPIC"
    out: list[Record] = []
    for topic in _status_topics(qm, pattern):
        if kind == "TOPIC":
            out.append(
                Record("AMQ8754I", "Display topic status details.", _topic_status(qm, topic))
            )
        elif kind == "SUB":
            for sub in qm.pubsub.matching(topic) if not is_wildcard(topic) else []:
                stats = qm.pubsub.stats.get(sub.name)
                out.append(
                    Record(
                        "AMQ8754I",
                        "Display topic status details.",
                        [
                            ("TOPICSTR", topic),
                            ("SUBID", sub.sub_id),
                            ("SUBUSER", sub.subuser),
                            ("DURABLE", "YES" if sub.durable else "NO"),
                            ("SUBTYPE", sub.subtype),
                            ("ACTCONN", "1" if stats and stats.active_connections else ""),
                            ("NUMMSGS", str(stats.num_msgs if stats else 0)),
                        ],
                    )
                )
        else:
            out.append(
                Record(
                    "AMQ8754I",
                    "Display topic status details.",
                    [
                        ("TOPICSTR", topic),
                        ("NUMPUBS", str(qm.pubsub.pub_counts.get(topic, 0))),
                    ],
                )
            )
    return out


def _topic_status(qm: QueueManager, topic: str) -> list[tuple[str, str]]:
    r = qm.pubsub.topics.resolve(topic)
    subs = qm.pubsub.matching(topic) if not is_wildcard(topic) else []
    # MQ: ADMIN names the topic object whose TOPICSTR is this node (an admin node), blank for a
    # node no object defines; values inherited from an object above do not make it an admin node
    admin = qm.pubsub.topics.at(topic)
    attrs = [("TOPICSTR", topic), ("ADMIN", admin.name if admin is not None else "")]
    for key in sorted(BASE_DEFAULTS):
        if key not in ("PROXYSUB", "WILDCARD", "CUSTOM"):
            attrs.append((key, r[key]))
    attrs += [
        ("PUBCOUNT", "0"),
        ("SUBCOUNT", str(len(subs))),
        ("RETAINED", "YES" if topic in qm.pubsub.retained else "NO"),
    ]
    return attrs


def clear_topicstr(qm: QueueManager, cmd: MqscCommand) -> list[Record]:
    topic = cmd.name or ""
    if not qm.clear_retained(topic):
        raise MQError("MQRC_UNKNOWN_OBJECT_NAME", f"no retained publication on '{topic}'")
    return [Record("AMQ8896I", "IBM MQ topic string cleared.")]
