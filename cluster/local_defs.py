"""A member's own clustered topic definitions against what the repository holds of them.

A queue manager keeps its clustered topic objects locally; the repository holds the copy every
other member sees. ``changes_to_send`` lists the commands that make the repository's copies
hosted by ``qmgr`` match the local objects (deletes first, then defines and alters, by name).
A name with a change still to send is shown CLSTATE(PENDING) on this queue manager; one whose
change the repository refused when it was retried later is CLSTATE(INVALID) (``local_clstate``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cluster.records import ClState, ClusterTopic
from cluster.repository import Cmd
from cluster.topics import TopicObject

HIDDEN = ("CLUSTER", "CLROUTE")  # carried by the definition itself, not in its attrs


@dataclass(frozen=True)
class Change:
    """One command to send for the local definition ``name``."""

    name: str
    command: dict[str, Any]
    delete: bool = False


def changes_to_send(
    qmgr: str,
    cluster: str,
    desired: Mapping[str, TopicObject],
    held: Iterable[ClusterTopic],
) -> list[Change]:
    """Commands that make the definitions hosted by ``qmgr`` in the repository (``held``, any
    hosts: others are ignored) match ``desired`` (the local objects with CLUSTER(cluster))."""
    mine = {t.name: t for t in held if t.qmgr == qmgr}
    out = [
        Change(name, Cmd.delete_topic(name, qmgr), delete=True)
        for name in sorted(mine.keys() - desired.keys())
    ]
    for name, obj in sorted(desired.items()):
        attrs = {k: v for k, v in obj.attrs.items() if k not in HIDDEN}
        clroute = obj.attrs.get("CLROUTE", "DIRECT") or "DIRECT"
        current = mine.get(name)
        if current is None:
            cmd = Cmd.define_topic(
                name, qmgr, obj.topic_str, cluster, clroute, attrs, obj.descr, True
            )
        elif (
            dict(current.attrs) != attrs
            or current.descr != obj.descr
            or current.clroute.value != clroute
        ):
            cmd = Cmd.alter_topic(name, qmgr, attrs, obj.descr, clroute)
        else:
            continue
        out.append(Change(name, cmd))
    return out


def clroute_change(before: TopicObject | None, after: TopicObject | None, cluster: str) -> str:
    """Why changing ``before`` into ``after`` is refused locally, whatever the repository's
    state: CLROUTE cannot change while the object stays in ``cluster``
    (MQRCCF_CLROUTE_NOT_ALTERABLE). Empty when allowed."""
    if before is None or after is None:
        return ""
    if before.attrs.get("CLUSTER") != cluster or after.attrs.get("CLUSTER") != cluster:
        return ""
    old = before.attrs.get("CLROUTE") or "DIRECT"
    new = after.attrs.get("CLROUTE") or "DIRECT"
    if old == new:
        return ""
    return (
        f"CLROUTE of TOPIC({after.name}) cannot change from {old} to {new} while it is in "
        f"cluster {cluster}: remove it from the cluster first"
    )


def local_clstate(name: str, unsent: Collection[str], invalid: Collection[str]) -> ClState:
    """CLSTATE of this queue manager's own definition ``name``: INVALID when the repository
    refused its last change, PENDING while a change is still to be sent, else ACTIVE."""
    if name in invalid:
        return ClState.INVALID
    if name in unsent:
        return ClState.PENDING
    return ClState.ACTIVE
