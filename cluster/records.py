"""Frozen records shared by the cluster modules (pure, JSON-friendly).

Every record here converts to and from plain dicts (``to_dict`` / ``from_dict``) made of str,
int, bool, list and dict only, so records can travel in Raft commands, snapshots and gRPC
payloads without pickling. Attribute names inside those dicts are spelt as MQSC spells them
(``CLWLRANK``, ``PUB`` ...); field names are lower case.

- ``Member`` is one CLUSQMGR record: what MQ builds from a queue manager's cluster-receiver
  channel (name, QMID, CONNAME, QMTYPE REPOS/NORMAL, the CLWL attributes, SUSPEND state).
- ``ClusterTopic`` is one clustered topic definition *as hosted by one queue manager*: several
  queue managers may host the same object name (multiple topic hosts), each is its own record.
- ``RepoEvent`` says what one applied repository command changed.
- ``TopicHost`` and ``ChannelStatus`` are what the workload algorithm sees of a host.
- ``ClusterTopology`` is one node's picture of the cluster for proxies and routing: its merged
  topic objects (local objects + the clustered definitions it can see), the hosts of each
  TOPICHOST object and the known members.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from cluster.topics import ResolvedTopic, TopicObject, TopicObjectError, TopicObjects

if TYPE_CHECKING:
    from cluster.repository import ClusterRepository


class Role(StrEnum):
    """QMTYPE of a cluster member: full repository or partial repository."""

    REPOS = "REPOS"
    NORMAL = "NORMAL"


class ClRoute(StrEnum):
    """CLROUTE of a clustered topic."""

    DIRECT = "DIRECT"
    TOPICHOST = "TOPICHOST"


class ClState(StrEnum):
    """CLSTATE of a clustered topic definition (DISPLAY TCLUSTER)."""

    ACTIVE = "ACTIVE"
    PENDING = "PENDING"
    INVALID = "INVALID"
    ERROR = "ERROR"


class ChannelStatus(StrEnum):
    """Status of the cluster-sender channel from this node to a destination (DIS CHSTATUS)."""

    INACTIVE = "INACTIVE"
    RUNNING = "RUNNING"
    BINDING = "BINDING"
    INITIALIZING = "INITIALIZING"
    STARTING = "STARTING"
    STOPPING = "STOPPING"
    RETRYING = "RETRYING"
    REQUESTING = "REQUESTING"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"


WORKLOAD_LIMITS: Mapping[str, tuple[int, int]] = MappingProxyType(
    {"CLWLRANK": (0, 9), "CLWLPRTY": (0, 9), "CLWLWGHT": (1, 99), "NETPRTY": (0, 9)}
)
"""Inclusive ranges MQ allows for the cluster-receiver workload attributes."""


def _frozen(mapping: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(sorted(mapping.items())))


@dataclass(frozen=True)
class WorkloadAttrs:
    """CLWLRANK / CLWLPRTY / CLWLWGHT / NETPRTY of a member's cluster-receiver channel.

    Defaults are MQ's: rank 0, priority 0, weight 50, network priority 0.
    """

    clwlrank: int = 0
    clwlprty: int = 0
    clwlwght: int = 50
    netprty: int = 0

    def problems(self) -> list[str]:
        """Messages for every value outside MQ's range (empty when valid)."""
        out = []
        for key, value in self.to_dict().items():
            low, high = WORKLOAD_LIMITS[key]
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                out.append(f"{key}({value}) is not valid; expected an integer {low}-{high}")
        return out

    def with_changes(self, changes: Mapping[str, int]) -> WorkloadAttrs:
        """A copy with MQSC-named changes applied (unknown names raise KeyError)."""
        values = self.to_dict()
        for key, value in changes.items():
            if key not in WORKLOAD_LIMITS:
                raise KeyError(key)
            values[key] = value
        return WorkloadAttrs.from_dict(values)

    def to_dict(self) -> dict[str, int]:
        return {
            "CLWLRANK": self.clwlrank,
            "CLWLPRTY": self.clwlprty,
            "CLWLWGHT": self.clwlwght,
            "NETPRTY": self.netprty,
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> WorkloadAttrs:
        return WorkloadAttrs(
            clwlrank=data.get("CLWLRANK", 0),
            clwlprty=data.get("CLWLPRTY", 0),
            clwlwght=data.get("CLWLWGHT", 50),
            netprty=data.get("NETPRTY", 0),
        )


@dataclass(frozen=True)
class Member:
    """One cluster member (CLUSQMGR record) as the full repositories hold it.

    ``joined`` and ``last_seen`` are repository revisions (logical stamps: the revision of the
    command that created the record / last refreshed it), never clock readings. ``clusdate_ms``
    is the proposer's wall-clock time carried *inside* the command (for CLUSDATE/CLUSTIME
    display), or None; the repository never reads a clock itself.
    """

    name: str
    qmid: str
    address: str
    role: Role = Role.NORMAL
    workload: WorkloadAttrs = field(default_factory=WorkloadAttrs)
    suspended: bool = False
    joined: int = 0
    last_seen: int = 0
    clusdate_ms: int | None = None

    @property
    def is_full_repository(self) -> bool:
        return self.role is Role.REPOS

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "qmid": self.qmid,
            "address": self.address,
            "role": self.role.value,
            "workload": self.workload.to_dict(),
            "suspended": self.suspended,
            "joined": self.joined,
            "last_seen": self.last_seen,
            "clusdate_ms": self.clusdate_ms,
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Member:
        return Member(
            name=data["name"],
            qmid=data["qmid"],
            address=data["address"],
            role=Role(data.get("role", Role.NORMAL.value)),
            workload=WorkloadAttrs.from_dict(data.get("workload", {})),
            suspended=bool(data.get("suspended", False)),
            joined=int(data.get("joined", 0)),
            last_seen=int(data.get("last_seen", 0)),
            clusdate_ms=data.get("clusdate_ms"),
        )


TopicKey = tuple[str, str]
"""(object name, hosting queue manager name): identifies one clustered definition."""


@dataclass(frozen=True)
class ClusterTopic:
    """One clustered topic definition hosted by (defined on) queue manager ``qmgr``.

    ``attrs`` holds the object's other attributes as MQSC spells them (PUB, PUBSCOPE, SUBSCOPE,
    PROXYSUB, WILDCARD ...), without CLUSTER and CLROUTE, which are fields. ``defined`` and
    ``altered`` are repository revisions.
    """

    name: str
    qmgr: str
    topic_str: str
    cluster: str
    clroute: ClRoute = ClRoute.DIRECT
    attrs: Mapping[str, str] = field(default_factory=dict)
    descr: str = ""
    clstate: ClState = ClState.ACTIVE
    defined: int = 0
    altered: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "attrs", _frozen(self.attrs))

    def __hash__(self) -> int:
        return hash((self.name, self.qmgr, self.topic_str, self.altered))

    @property
    def key(self) -> TopicKey:
        return (self.name, self.qmgr)

    @property
    def pub_enabled(self) -> bool:
        """False only for an explicit PUB(DISABLED).

        PUB(ASPARENT) on a remote host's copy is treated as enabled: the value it inherits is
        resolved on the host, whose topic tree other queue managers cannot see.
        """
        return self.attrs.get("PUB", "ENABLED") != "DISABLED"

    def object_attrs(self) -> dict[str, str]:
        """Every attribute including CLUSTER and CLROUTE (for a ``TopicObject``)."""
        out = dict(self.attrs)
        out["CLUSTER"] = self.cluster
        out["CLROUTE"] = self.clroute.value
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "qmgr": self.qmgr,
            "topic_str": self.topic_str,
            "cluster": self.cluster,
            "clroute": self.clroute.value,
            "attrs": dict(self.attrs),
            "descr": self.descr,
            "clstate": self.clstate.value,
            "defined": self.defined,
            "altered": self.altered,
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> ClusterTopic:
        return ClusterTopic(
            name=data["name"],
            qmgr=data["qmgr"],
            topic_str=data["topic_str"],
            cluster=data["cluster"],
            clroute=ClRoute(data.get("clroute", ClRoute.DIRECT.value)),
            attrs=dict(data.get("attrs", {})),
            descr=data.get("descr", ""),
            clstate=ClState(data.get("clstate", ClState.ACTIVE.value)),
            defined=int(data.get("defined", 0)),
            altered=int(data.get("altered", 0)),
        )


class EventKind(StrEnum):
    """What a repository event reports."""

    MEMBER_JOINED = "member_joined"
    MEMBER_UPDATED = "member_updated"
    MEMBER_REMOVED = "member_removed"
    TOPIC_DEFINED = "topic_defined"
    TOPIC_ALTERED = "topic_altered"
    TOPIC_DELETED = "topic_deleted"


_MEMBER_KINDS = frozenset(
    {EventKind.MEMBER_JOINED, EventKind.MEMBER_UPDATED, EventKind.MEMBER_REMOVED}
)


@dataclass(frozen=True)
class RepoEvent:
    """One change: a member or topic record after the change (before it, for removals)."""

    kind: EventKind
    member: Member | None = None
    topic: ClusterTopic | None = None

    def __post_init__(self) -> None:
        if (self.kind in _MEMBER_KINDS) != (self.member is not None) or (
            (self.member is None) == (self.topic is None)
        ):
            raise ValueError(f"{self.kind} event needs exactly the matching record")

    @property
    def is_removal(self) -> bool:
        return self.kind in (EventKind.MEMBER_REMOVED, EventKind.TOPIC_DELETED)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.value}
        if self.member is not None:
            out["member"] = self.member.to_dict()
        if self.topic is not None:
            out["topic"] = self.topic.to_dict()
        return out

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> RepoEvent:
        member = data.get("member")
        topic = data.get("topic")
        return RepoEvent(
            kind=EventKind(data["kind"]),
            member=Member.from_dict(member) if member is not None else None,
            topic=ClusterTopic.from_dict(topic) if topic is not None else None,
        )


@dataclass(frozen=True)
class TopicHost:
    """A topic host of one clustered object as a routing node sees it."""

    qmgr: str
    pub_enabled: bool = True
    workload: WorkloadAttrs = field(default_factory=WorkloadAttrs)
    suspended: bool = False


@dataclass(frozen=True)
class ClusterTopology:
    """What node ``local`` knows of cluster ``cluster``, for proxies and routing.

    ``objects`` resolves topic strings on this node; ``hosts`` maps each TOPICHOST object name
    to its hosts (PUB(DISABLED) ones included); ``members`` names every member known here.
    Build it with ``ClusterTopology.build`` whenever the repository or local objects change.
    """

    local: str
    cluster: str
    objects: TopicObjects
    hosts: Mapping[str, tuple[TopicHost, ...]] = field(default_factory=dict)
    members: frozenset[str] = frozenset()

    def clustered_point(self, resolved: ResolvedTopic) -> TopicObject | None:
        """The clustered object a resolved topic belongs to, if it is clustered in *this*
        cluster (a topic resolving to another, or a misspelt, cluster name is not)."""
        obj = resolved.cluster_object
        if obj is None or resolved.cluster != self.cluster:
            return None
        return obj

    @staticmethod
    def route_of(point: TopicObject) -> ClRoute:
        return ClRoute(point.value("CLROUTE"))

    def host_names(self, name: str) -> tuple[str, ...]:
        return tuple(h.qmgr for h in self.hosts.get(name, ()))

    def local_host(self, name: str) -> TopicHost | None:
        """This node's own host record for object ``name``, if it is one of its hosts."""
        return next((h for h in self.hosts.get(name, ()) if h.qmgr == self.local), None)

    def destinations(self, point: TopicObject) -> frozenset[str]:
        """Where proxies for a subscription under ``point`` go: its hosts (TOPICHOST) or every
        member (DIRECT); never this node itself."""
        if self.route_of(point) is ClRoute.TOPICHOST:
            names = frozenset(self.host_names(point.name))
        else:
            names = self.members
        return names - {self.local}

    @staticmethod
    def build(
        local: str,
        repository: ClusterRepository,
        local_objects: Iterable[TopicObject] = (),
    ) -> ClusterTopology:
        """Merge this node's own objects with the clustered definitions it can see.

        A locally defined object wins over remote copies of the same name (MQ: "a locally
        defined object on a queue manager always wins"). Among remote copies the one defined
        first (lowest ``defined`` revision, then queue manager name) is used; a copy whose
        TOPICSTR is already taken by another object is skipped. The choice is the same on every
        node, where MQ says each queue manager picks "non-deterministically".
        """
        objects = TopicObjects()
        for obj in local_objects:
            objects.put(obj)
        copies = sorted(repository.topics(), key=lambda t: (t.defined, t.name, t.qmgr))
        for topic in copies:
            if topic.name in objects:
                continue
            try:
                objects.put(
                    TopicObject(topic.name, topic.topic_str, topic.object_attrs(), topic.descr)
                )
            except TopicObjectError:
                continue
        hosts: dict[str, tuple[TopicHost, ...]] = {}
        for obj in objects.all():
            if obj.value("CLUSTER") == repository.cluster and obj.value("CLROUTE") == "TOPICHOST":
                found = repository.topic_hosts(obj.name, obj.topic_str)
                if found:
                    hosts[obj.name] = tuple(found)
        members = frozenset(m.name for m in repository.members()) | {local}
        return ClusterTopology(local, repository.cluster, objects, MappingProxyType(hosts), members)
