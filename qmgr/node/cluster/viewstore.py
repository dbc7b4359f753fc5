"""A partial repository's copy of the cluster repository, kept in the node's store record by
record: each change writes the records it changed (one object per member and per topic
definition, journaled with the node's other changes), so keeping the copy costs the same with
10 or 10,000 definitions. At start the records are read back into a snapshot; a store written
by an older node holds the whole copy as one JSON value (``VIEW_KEY``), read once and then
rewritten record by record."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from cluster.records import EventKind, RepoEvent
from cluster.repository import SNAPSHOT_VERSION, ClusterRepository

VIEW_KEY = "cluster.view"  # the whole copy as one JSON value (older stores)
REVISION_KEY = "cluster.view.revision"
MEMBER_KIND = "cluster.member"
TOPIC_KIND = "cluster.topic"


class ViewStore(Protocol):
    def object_saved(self, kind: str, name: str, data: dict[str, Any]) -> None: ...
    def object_deleted(self, kind: str, name: str) -> None: ...
    def set_value(self, key: str, value: str) -> None: ...


def load_view(
    cluster: str, objects: Mapping[str, Mapping[str, dict[str, Any]]], kv: Mapping[str, str]
) -> tuple[dict[str, Any] | None, bool]:
    """The kept copy as a snapshot (None: none kept), and whether it came from an older store
    (then ``save_view`` must be given ``rewrite=True`` once)."""
    members = objects.get(MEMBER_KIND, {})
    topics = objects.get(TOPIC_KIND, {})
    if members or topics:
        snapshot = {
            "v": SNAPSHOT_VERSION,
            "cluster": cluster,
            "revision": int(kv.get(REVISION_KEY) or 0),
            "members": [members[k] for k in sorted(members)],
            "topics": [topics[k] for k in sorted(topics)],
        }
        return snapshot, False
    legacy = kv.get(VIEW_KEY)
    return (json.loads(legacy), True) if legacy else (None, False)


def _topic_name(name: str, qmgr: str) -> str:
    return f"{name} {qmgr}"


def save_view(
    store: ViewStore, events: Iterable[RepoEvent], repo: ClusterRepository, rewrite: bool = False
) -> None:
    """Journal the records ``events`` changed in ``repo`` (``rewrite``: every record, and the
    older single value is emptied)."""
    if rewrite:
        view = repo.view()
        for member in view.members.values():
            store.object_saved(MEMBER_KIND, member.name, member.to_dict())
        for topic in view.topics.values():
            store.object_saved(TOPIC_KIND, _topic_name(topic.name, topic.qmgr), topic.to_dict())
        store.set_value(VIEW_KEY, "")
    else:
        for event in events:
            if event.member is not None:
                if event.kind is EventKind.MEMBER_REMOVED:
                    store.object_deleted(MEMBER_KIND, event.member.name)
                else:
                    store.object_saved(MEMBER_KIND, event.member.name, event.member.to_dict())
            elif event.topic is not None:
                key = _topic_name(event.topic.name, event.topic.qmgr)
                if event.kind is EventKind.TOPIC_DELETED:
                    store.object_deleted(TOPIC_KIND, key)
                else:
                    store.object_saved(TOPIC_KIND, key, event.topic.to_dict())
    store.set_value(REVISION_KEY, str(repo.revision))
