"""The cluster repository: a deterministic state machine replicated on the full repositories.

Every full repository (FR) applies the same sequence of commands (the Raft log) to a
``ClusterRepository`` and so holds the same state: the members (CLUSQMGR records) and the
clustered topic definitions, one per (object name, hosting queue manager). Partial repositories
(PRs) hold a ``ClusterRepository`` too, loaded from ``partial_snapshot`` and kept current with
``apply_event``; the queries below answer the same way on both.

Commands are our own versioned records: plain JSON-serialisable dicts ``{"v": 1, "op": ...}``
(build them with ``Cmd``), never pickled objects. ``apply(command)`` never raises for a bad
command: it returns ``ApplyResult(events, error, warnings)`` and leaves the state untouched on
error. Nothing reads a clock or depends on dict/set iteration order: the same commands give the
same state, snapshot and events everywhere. ``revision`` counts applied commands; records carry
revisions (``joined``, ``last_seen``, ``defined``, ``altered``) as logical stamps. A proposer may
put its wall-clock time in a command (``at``, milliseconds); it is stored as data only.

Ops (version 1):

- ``join_member`` name qmid address [role REPOS|NORMAL] [workload {CLWLRANK..}] [at]: join or
  update (upsert by name). Workload attributes left out keep their current values.
- ``touch_member`` name [at]: refresh ``last_seen`` (no event).
- ``leave_member`` name / ``force_remove`` qmname and/or qmid (RESET CLUSTER
  ACTION(FORCEREMOVE)): remove the member and every topic definition it hosts.
- ``suspend_member`` / ``resume_member`` name (SUSPEND/RESUME QMGR CLUSTER).
- ``set_workload`` name workload {CLWLRANK 0-9, CLWLPRTY 0-9, CLWLWGHT 1-99, NETPRTY 0-9}.
- ``define_topic`` name qmgr topic_str cluster [clroute] [attrs] [descr] [replace].
- ``alter_topic`` name qmgr [attrs] [descr] [clroute] [cluster] [topic_str].
- ``delete_topic`` name qmgr.

Rules (reference docs/mq-semantics.md §1, §2):

- All clustered definitions of one object name must have the same CLROUTE; a define that
  disagrees with an existing copy on another queue manager is rejected with
  MQRCCF_CLUSTER_TOPIC_CONFLICT (3368). Raft orders near-simultaneous defines, so the loser is
  rejected rather than kept as CLSTATE(INVALID): the defining node shows its own local object as
  INVALID when its define is rejected (PENDING while in flight). Definitions held here are
  therefore always CLSTATE(ACTIVE).
- CLROUTE cannot change while CLUSTER is set: every definition here has CLUSTER set, so an alter
  (or DEFINE REPLACE) changing CLROUTE is rejected with MQRCCF_CLROUTE_NOT_ALTERABLE (3367). The
  node withdraws the definition first (alter with a blank/other ``cluster`` = withdrawal, same as
  ``delete_topic``) and defines it again.
- TOPICSTR cannot change (MQRCCF_ATTR_VALUE_FIXED, 3213). One queue manager cannot host two
  objects at the same TOPICSTR (MQRCCF_TOPICSTR_ALREADY_EXISTS, 3300).
- Copies of one object name on several queue managers whose other attributes (or TOPICSTR)
  differ are accepted with a warning, as MQ does.

Commands from a member over the network (``remote_refusal``): a member proposes changes about
itself only (its own join, touch, leave, suspend/resume, workload; topics it hosts); a join
there names the member's own QMID (``cluster.channel.qmid_of``) and cannot claim role REPOS (full repositories join through Raft, locally); ``force_remove``
(RESET CLUSTER) runs on a full repository only, never on a member's request.

Choices where MQ leaves it open:

- Members are keyed by name. A join with a known name but a new QMID (a re-created queue
  manager, or another one using its name) is rejected with MQRCCF_OBJECT_ALREADY_EXISTS, as MQ
  refuses a second queue manager of that name: an administrator removes the old one with RESET
  CLUSTER ACTION(FORCEREMOVE) QMNAME/QMID, after which the new one joins. FORCEREMOVE accepts
  the name, the QMID or both.
- Removing a member (leave or FORCEREMOVE) also removes the topic definitions it hosts: a
  removed queue manager must stop being a routing candidate at once.
- MQ's 10-second "ignore rejoin after FORCEREMOVE" window and its record expiry (30/60/90
  days) need a clock, so they are not rules here; the node applies neither: a record stays
  until its member leaves or is removed.
- A PR must see (``partial_view``): every topic definition, its own record, every FR, the member
  record of every queue manager hosting a definition, and any members it asked about
  (``interests``, e.g. subscribers that sent a host proxies). If any DIRECT definition exists,
  every member (MQ: the first direct clustered topic makes the FRs push every CLUSQMGR record to
  every PR).
- ``RepositoryView.diff`` ignores changes to ``last_seen``/``clusdate_ms`` alone, so heartbeats
  do not fan out to every partial repository.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from cluster.channel import qmid_of
from cluster.records import (
    WORKLOAD_LIMITS,
    ClRoute,
    ClState,
    ClusterTopic,
    EventKind,
    Member,
    RepoEvent,
    Role,
    TopicHost,
    TopicKey,
    WorkloadAttrs,
)
from cluster.topic_attrs import valid_object_name
from cluster.topics import TopicObject, TopicObjectError

COMMAND_VERSION = 1
SNAPSHOT_VERSION = 1


class ErrorCode(StrEnum):
    """MQ reason names used for rejected commands (``REASONS`` gives the numbers)."""

    CLUSTER_TOPIC_CONFLICT = "MQRCCF_CLUSTER_TOPIC_CONFLICT"
    CLROUTE_NOT_ALTERABLE = "MQRCCF_CLROUTE_NOT_ALTERABLE"
    OBJECT_ALREADY_EXISTS = "MQRCCF_OBJECT_ALREADY_EXISTS"
    UNKNOWN_OBJECT_NAME = "MQRCCF_UNKNOWN_OBJECT_NAME"
    UNKNOWN_Q_MGR = "MQRCCF_UNKNOWN_Q_MGR"
    ATTR_VALUE_ERROR = "MQRCCF_ATTR_VALUE_ERROR"
    ATTR_VALUE_FIXED = "MQRCCF_ATTR_VALUE_FIXED"
    TOPICSTR_ALREADY_EXISTS = "MQRCCF_TOPICSTR_ALREADY_EXISTS"
    CLUSTER_NAME_CONFLICT = "MQRCCF_CLUSTER_NAME_CONFLICT"
    PARM_MISSING = "MQRCCF_PARM_MISSING"
    PARM_VALUE_ERROR = "MQRCCF_PARM_VALUE_ERROR"
    PARM_CONFLICT = "MQRCCF_PARM_CONFLICT"
    COMMAND_FAILED = "MQRCCF_COMMAND_FAILED"
    # not a rejection: no full repository could take the change now (none reachable, or no
    # Raft quorum); the change is kept and sent again (``ApplyResult.unavailable``)
    REPOS_UNAVAILABLE = "MQRC_CLUSTER_RESOURCE_ERROR"


REASONS: Mapping[ErrorCode, int] = MappingProxyType(
    {
        ErrorCode.CLUSTER_TOPIC_CONFLICT: 3368,
        ErrorCode.CLROUTE_NOT_ALTERABLE: 3367,
        ErrorCode.OBJECT_ALREADY_EXISTS: 4001,
        ErrorCode.UNKNOWN_OBJECT_NAME: 3312,
        ErrorCode.UNKNOWN_Q_MGR: 4006,
        ErrorCode.ATTR_VALUE_ERROR: 4005,
        ErrorCode.ATTR_VALUE_FIXED: 3213,
        ErrorCode.TOPICSTR_ALREADY_EXISTS: 3300,
        ErrorCode.CLUSTER_NAME_CONFLICT: 3088,
        ErrorCode.PARM_MISSING: 3228,
        ErrorCode.PARM_VALUE_ERROR: 3229,
        ErrorCode.PARM_CONFLICT: 3203,
        ErrorCode.COMMAND_FAILED: 3008,
        ErrorCode.REPOS_UNAVAILABLE: 2189,
    }
)


@dataclass(frozen=True)
class RepoError:
    """Why a command was rejected."""

    code: ErrorCode
    message: str

    @property
    def reason(self) -> int:
        return REASONS[self.code]

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code.value, "reason": self.reason, "message": self.message}


class _Rejected(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = RepoError(code, message)


@dataclass(frozen=True)
class ApplyResult:
    """Outcome of one command: the events it caused, or the error that rejected it."""

    events: tuple[RepoEvent, ...] = ()
    error: RepoError | None = None
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def unavailable(self) -> bool:
        """The repository could not take the command now: not a rejection."""
        return self.error is not None and self.error.code is ErrorCode.REPOS_UNAVAILABLE


def _command(op: str, **fields: Any) -> dict[str, Any]:
    """A version-1 command ``op`` with ``fields``; a field given as None is left out."""
    cmd: dict[str, Any] = {"v": COMMAND_VERSION, "op": op}
    cmd.update((key, value) for key, value in fields.items() if value is not None)
    return cmd


def _topic_command(op: str, name: str, qmgr: str, **fields: Any) -> dict[str, Any]:
    """A command about topic definition ``name`` of queue manager ``qmgr`` (its key)."""
    return _command(op, name=name, qmgr=qmgr, **fields)


class Cmd:
    """Builders for version-1 commands (plain dicts; ``apply`` accepts hand-made ones too)."""

    @staticmethod
    def join_member(
        name: str,
        qmid: str,
        address: str,
        role: Role | str = Role.NORMAL,
        workload: Mapping[str, int] | None = None,
        at: int | None = None,
    ) -> dict[str, Any]:
        return _command(
            "join_member",
            name=name,
            qmid=qmid,
            address=address,
            role=str(role),
            workload=None if workload is None else dict(workload),
            at=at,
        )

    @staticmethod
    def touch_member(name: str, at: int | None = None) -> dict[str, Any]:
        return _command("touch_member", name=name, at=at)

    @staticmethod
    def leave_member(name: str) -> dict[str, Any]:
        return _command("leave_member", name=name)

    @staticmethod
    def force_remove(qmname: str | None = None, qmid: str | None = None) -> dict[str, Any]:
        return _command("force_remove", qmname=qmname, qmid=qmid)

    @staticmethod
    def suspend_member(name: str) -> dict[str, Any]:
        return _command("suspend_member", name=name)

    @staticmethod
    def resume_member(name: str) -> dict[str, Any]:
        return _command("resume_member", name=name)

    @staticmethod
    def set_workload(name: str, **attrs: int) -> dict[str, Any]:
        """``Cmd.set_workload("QM1", CLWLWGHT=20, CLWLPRTY=3)``."""
        return _command("set_workload", name=name, workload=attrs)

    @staticmethod
    def define_topic(
        name: str,
        qmgr: str,
        topic_str: str,
        cluster: str,
        clroute: ClRoute | str = ClRoute.DIRECT,
        attrs: Mapping[str, str] | None = None,
        descr: str = "",
        replace: bool = False,
    ) -> dict[str, Any]:
        return _topic_command(
            "define_topic",
            name,
            qmgr,
            topic_str=topic_str,
            cluster=cluster,
            clroute=str(clroute),
            attrs=dict(attrs or {}),
            descr=descr,
            replace=replace,
        )

    @staticmethod
    def alter_topic(
        name: str,
        qmgr: str,
        attrs: Mapping[str, str] | None = None,
        descr: str | None = None,
        clroute: ClRoute | str | None = None,
        cluster: str | None = None,
        topic_str: str | None = None,
    ) -> dict[str, Any]:
        return _topic_command(
            "alter_topic",
            name,
            qmgr,
            attrs=dict(attrs or {}),
            descr=descr,
            clroute=None if clroute is None else str(clroute),
            cluster=cluster,
            topic_str=topic_str,
        )

    @staticmethod
    def delete_topic(name: str, qmgr: str) -> dict[str, Any]:
        return _topic_command("delete_topic", name, qmgr)


def _get(cmd: Mapping[str, Any], key: str, kind: type, default: Any = ...) -> Any:
    if key not in cmd:
        if default is ...:
            raise _Rejected(ErrorCode.PARM_MISSING, f"command {cmd.get('op')!r} needs {key!r}")
        return default
    value = cmd[key]
    if value is None and default is None:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _Rejected(
            ErrorCode.PARM_VALUE_ERROR, f"{key!r} must be {kind.__name__}, not {value!r}"
        )
    return value


def _name(cmd: Mapping[str, Any], key: str) -> str:
    value: str = _get(cmd, key, str)
    if not valid_object_name(value):
        raise _Rejected(
            ErrorCode.PARM_VALUE_ERROR,
            f"{key} {value!r} is not a valid name (1-48 of A-Z a-z 0-9 . / _ %)",
        )
    return value


def _workload_changes(raw: Any) -> dict[str, int]:
    if not isinstance(raw, Mapping):
        raise _Rejected(ErrorCode.PARM_VALUE_ERROR, "'workload' must be an object")
    out: dict[str, int] = {}
    for key in sorted(raw):
        value = raw[key]
        if key not in WORKLOAD_LIMITS:
            raise _Rejected(ErrorCode.PARM_VALUE_ERROR, f"unknown workload attribute {key!r}")
        low, high = WORKLOAD_LIMITS[key]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise _Rejected(
                ErrorCode.ATTR_VALUE_ERROR,
                f"{key}({value}) is not valid; expected an integer {low}-{high}",
            )
        out[key] = value
    return out


def _str_map(raw: Any, what: str) -> dict[str, str]:
    if not isinstance(raw, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        raise _Rejected(ErrorCode.PARM_VALUE_ERROR, f"{what!r} must map names to strings")
    return dict(raw)


_SUBJECT_KEY = {
    "join_member": "name",
    "touch_member": "name",
    "leave_member": "name",
    "suspend_member": "name",
    "resume_member": "name",
    "set_workload": "name",
    "define_topic": "qmgr",
    "alter_topic": "qmgr",
    "delete_topic": "qmgr",
}


def command_subject(command: Mapping[str, Any]) -> str | None:
    """The queue manager a member command is about (None: not a member command)."""
    op = command.get("op")
    key = _SUBJECT_KEY.get(op) if isinstance(op, str) else None
    subject = command.get(key) if key is not None else None
    return subject if isinstance(subject, str) else None


def remote_refusal(command: Mapping[str, Any], member: str, *, join: bool = False) -> str | None:
    """Why queue manager ``member`` may not have ``command`` applied at its request over the
    network (None: it may; the command is then applied and checked as any other). ``join``:
    the command opens a watch, so it must be the member's own join."""
    if not isinstance(command, Mapping):
        return None
    op = command.get("op")
    if op == "force_remove":
        return (
            "RESET CLUSTER ACTION(FORCEREMOVE) runs on a full repository; a member cannot "
            "propose it"
        )
    if join and op != "join_member":
        return f"a watch starts with the member's join_member, not {op!r}"
    if not isinstance(op, str) or op not in _SUBJECT_KEY:
        return None  # an unknown op: rejected by apply
    subject = command.get(_SUBJECT_KEY[op])
    if subject != member:
        return f"{member} cannot {op} for queue manager {subject!r}: only about itself"
    qmid = command.get("qmid")
    if op == "join_member" and not (isinstance(qmid, str) and qmid_of(qmid, member)):
        return f"{member} cannot join with QMID {qmid!r}: a QMID is its own name, '_' and an id"
    if op == "join_member" and command.get("role") == Role.REPOS.value:
        return (
            f"{member} cannot join as a full repository: only queue managers configured "
            "as full repositories act as one"
        )
    return None


@dataclass(frozen=True)
class RepositoryView:
    """A read-only set of records (the whole repository, or what one PR must see)."""

    members: Mapping[str, Member] = field(default_factory=dict)
    topics: Mapping[TopicKey, ClusterTopic] = field(default_factory=dict)

    def diff(self, newer: RepositoryView) -> list[RepoEvent]:
        """Events that turn this view into ``newer``: member joins/updates, topic changes,
        then member removals (so a host's record arrives before its definitions and leaves
        after them). Changes to ``last_seen``/``clusdate_ms`` alone are not reported."""
        events: list[RepoEvent] = []
        for name in sorted(newer.members):
            new = newer.members[name]
            old = self.members.get(name)
            if old is None:
                events.append(RepoEvent(EventKind.MEMBER_JOINED, member=new))
            elif _member_core(old) != _member_core(new):
                events.append(RepoEvent(EventKind.MEMBER_UPDATED, member=new))
        for key in sorted(self.topics):
            if key not in newer.topics:
                events.append(RepoEvent(EventKind.TOPIC_DELETED, topic=self.topics[key]))
        for key in sorted(newer.topics):
            new_topic = newer.topics[key]
            old_topic = self.topics.get(key)
            if old_topic is None:
                events.append(RepoEvent(EventKind.TOPIC_DEFINED, topic=new_topic))
            elif old_topic != new_topic:
                events.append(RepoEvent(EventKind.TOPIC_ALTERED, topic=new_topic))
        for name in sorted(self.members):
            if name not in newer.members:
                events.append(RepoEvent(EventKind.MEMBER_REMOVED, member=self.members[name]))
        return events


def partial_events(
    repo: ClusterRepository,
    qmgr: str,
    events: Iterable[RepoEvent],
    held: Mapping[str, Member],
) -> tuple[list[RepoEvent], dict[str, Member]]:
    """What partial repository ``qmgr``, holding the member records ``held``, must be told of
    ``events`` (just applied to ``repo``), so that it holds ``repo.partial_view(qmgr)``: every
    topic event; the member events about records it holds; the records it must now hold first
    (a new topic host, every member once a DIRECT definition exists), and the removal of those
    it must no longer hold last. Costs O(members + events), whatever the number of topics.
    Returns the events and the member records the partial repository then holds."""
    names = repo.partial_members(qmgr)
    added = sorted(names - held.keys())
    removed = sorted(held.keys() - names)
    out: list[RepoEvent] = []
    now: dict[str, Member] = {}
    for name in names:
        member = repo.member(name)
        assert member is not None  # partial_members names held members only
        now[name] = member
    out += [RepoEvent(EventKind.MEMBER_JOINED, member=now[name]) for name in added]
    kept = held.keys() & names
    for event in events:
        member = event.member  # topic events all; member events about a record kept
        if member is None or (member.name in kept and event.kind is not EventKind.MEMBER_REMOVED):
            out.append(event)
    out += [RepoEvent(EventKind.MEMBER_REMOVED, member=held[name]) for name in removed]
    return out, now


def _member_core(member: Member) -> tuple[object, ...]:
    return (
        member.qmid,
        member.address,
        member.role,
        member.workload,
        member.suspended,
        member.joined,
    )


class ClusterRepository:
    """Members and clustered topic definitions of one cluster (see the module docstring)."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.revision = 0
        self._members: dict[str, Member] = {}
        self._topics: dict[TopicKey, ClusterTopic] = {}
        # indexes, so that a change costs the same with 10 or 10,000 definitions held
        self._by_name: dict[str, dict[str, ClusterTopic]] = {}
        self._by_str: dict[str, dict[TopicKey, ClusterTopic]] = {}
        self._by_host: dict[str, dict[str, ClusterTopic]] = {}
        self._direct = 0  # DIRECT definitions held

    # ----------------------------------------------------------------- applying commands

    def apply(self, command: Mapping[str, Any]) -> ApplyResult:
        """Apply one command; never raises for a bad command (see ``ApplyResult.error``)."""
        try:
            if not isinstance(command, Mapping):
                raise _Rejected(ErrorCode.PARM_VALUE_ERROR, "a command must be an object")
            version = command.get("v")
            if version != COMMAND_VERSION:
                raise _Rejected(
                    ErrorCode.PARM_VALUE_ERROR, f"unsupported command version {version!r}"
                )
            op = command.get("op")
            handler = _HANDLERS.get(op) if isinstance(op, str) else None
            if handler is None:
                raise _Rejected(ErrorCode.PARM_VALUE_ERROR, f"unknown command op {op!r}")
            events: list[RepoEvent] = []
            warnings: list[str] = []
            rev = self.revision + 1
            handler(self, command, rev, events, warnings)
        except _Rejected as rejected:
            return ApplyResult(error=rejected.error)
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            # Malformed input that slipped past validation: rejected the same way on every
            # replica (handlers validate before they mutate), never an exception out of Raft.
            return ApplyResult(error=RepoError(ErrorCode.COMMAND_FAILED, f"bad command: {exc!r}"))
        self.revision = rev
        return ApplyResult(tuple(events), None, tuple(warnings))

    def apply_event(self, event: RepoEvent) -> None:
        """Apply an event pushed by an FR (on a partial repository's copy)."""
        if event.member is not None:
            if event.kind is EventKind.MEMBER_REMOVED:
                self._members.pop(event.member.name, None)
            else:
                self._members[event.member.name] = event.member
        elif event.topic is not None:
            if event.kind is EventKind.TOPIC_DELETED:
                self._drop_topic(event.topic.key)
            else:
                self._put_topic(event.topic)

    def _op_join(
        self, cmd: Mapping[str, Any], rev: int, ev: list[RepoEvent], warn: list[str]
    ) -> None:
        name = _name(cmd, "name")
        qmid: str = _get(cmd, "qmid", str)
        address: str = _get(cmd, "address", str)
        if not qmid:
            raise _Rejected(ErrorCode.PARM_VALUE_ERROR, "qmid cannot be empty")
        role_text: str = _get(cmd, "role", str, Role.NORMAL.value)
        if role_text not in (Role.REPOS.value, Role.NORMAL.value):
            raise _Rejected(ErrorCode.PARM_VALUE_ERROR, f"role {role_text!r} is not REPOS/NORMAL")
        changes = _workload_changes(cmd["workload"]) if "workload" in cmd else {}
        at: int | None = _get(cmd, "at", int, None)
        current = self._members.get(name)
        if current is not None and current.qmid != qmid:
            raise _Rejected(
                ErrorCode.OBJECT_ALREADY_EXISTS,
                f"queue manager {name} is already in cluster {self.cluster} with QMID "
                f"{current.qmid} (this one is {qmid}); RESET CLUSTER ACTION(FORCEREMOVE) "
                f"QMNAME({name}) on a full repository removes the old one",
            )
        base = current.workload if current is not None else WorkloadAttrs()
        member = Member(
            name=name,
            qmid=qmid,
            address=address,
            role=Role(role_text),
            workload=base.with_changes(changes),
            suspended=current.suspended if current is not None else False,
            joined=current.joined if current is not None else rev,
            last_seen=rev,
            clusdate_ms=at if at is not None else (current.clusdate_ms if current else None),
        )
        self._members[name] = member
        if current is None:
            ev.append(RepoEvent(EventKind.MEMBER_JOINED, member=member))
        elif _member_core(current) != _member_core(member):
            ev.append(RepoEvent(EventKind.MEMBER_UPDATED, member=member))

    def _op_touch(
        self, cmd: Mapping[str, Any], rev: int, ev: list[RepoEvent], warn: list[str]
    ) -> None:
        member = self._need_member(_get(cmd, "name", str))
        at: int | None = _get(cmd, "at", int, None)
        self._members[member.name] = _replace_member(
            member, last_seen=rev, clusdate_ms=at if at is not None else member.clusdate_ms
        )

    def _op_leave(
        self, cmd: Mapping[str, Any], rev: int, ev: list[RepoEvent], warn: list[str]
    ) -> None:
        self._remove_member(self._need_member(_get(cmd, "name", str)), ev)

    def _op_force_remove(
        self, cmd: Mapping[str, Any], rev: int, ev: list[RepoEvent], warn: list[str]
    ) -> None:
        qmname: str | None = _get(cmd, "qmname", str, None)
        qmid: str | None = _get(cmd, "qmid", str, None)
        if qmname is None and qmid is None:
            raise _Rejected(ErrorCode.PARM_MISSING, "force_remove needs qmname or qmid")
        by_id = None
        if qmid is not None:
            by_id = next((m for m in self._members.values() if m.qmid == qmid), None)
            if by_id is None:
                raise _Rejected(ErrorCode.UNKNOWN_Q_MGR, f"no cluster member has QMID {qmid}")
        if qmname is not None:
            by_name = self._need_member(qmname)
            if by_id is not None and by_id is not by_name:
                raise _Rejected(
                    ErrorCode.PARM_CONFLICT, f"QMID {qmid} is not queue manager {qmname}"
                )
            by_id = by_name
        assert by_id is not None
        self._remove_member(by_id, ev)

    def _op_suspend(
        self, cmd: Mapping[str, Any], rev: int, ev: list[RepoEvent], warn: list[str]
    ) -> None:
        self._set_suspended(_get(cmd, "name", str), True, ev)

    def _op_resume(
        self, cmd: Mapping[str, Any], rev: int, ev: list[RepoEvent], warn: list[str]
    ) -> None:
        self._set_suspended(_get(cmd, "name", str), False, ev)

    def _op_set_workload(
        self, cmd: Mapping[str, Any], rev: int, ev: list[RepoEvent], warn: list[str]
    ) -> None:
        member = self._need_member(_get(cmd, "name", str))
        changes = _workload_changes(_get(cmd, "workload", Mapping))
        updated = _replace_member(member, workload=member.workload.with_changes(changes))
        if updated != member:
            self._members[member.name] = updated
            ev.append(RepoEvent(EventKind.MEMBER_UPDATED, member=updated))

    def _op_define(
        self, cmd: Mapping[str, Any], rev: int, ev: list[RepoEvent], warn: list[str]
    ) -> None:
        name = _name(cmd, "name")
        qmgr: str = _get(cmd, "qmgr", str)
        self._need_member(qmgr)
        topic_str: str = _get(cmd, "topic_str", str)
        cluster: str = _get(cmd, "cluster", str)
        clroute = self._clroute(_get(cmd, "clroute", str, ClRoute.DIRECT.value))
        attrs = _str_map(_get(cmd, "attrs", Mapping, {}), "attrs")
        descr: str = _get(cmd, "descr", str, "")
        replace: bool = _get(cmd, "replace", bool, False)
        if cluster != self.cluster:
            raise _Rejected(
                ErrorCode.CLUSTER_NAME_CONFLICT,
                f"TOPIC({name}) names cluster {cluster!r}; this repository is {self.cluster!r}",
            )
        current = self._topics.get((name, qmgr))
        if current is not None:
            if not replace:
                raise _Rejected(
                    ErrorCode.OBJECT_ALREADY_EXISTS, f"TOPIC({name}) already defined on {qmgr}"
                )
            if current.topic_str != topic_str:
                raise _Rejected(
                    ErrorCode.ATTR_VALUE_FIXED, f"TOPIC({name}): TOPICSTR cannot be changed"
                )
            if current.clroute is not clroute:
                raise _Rejected(
                    ErrorCode.CLROUTE_NOT_ALTERABLE,
                    f"TOPIC({name}): CLROUTE cannot change while CLUSTER is set",
                )
        topic = ClusterTopic(
            name=name,
            qmgr=qmgr,
            topic_str=topic_str,
            cluster=cluster,
            clroute=clroute,
            attrs=_own_attrs(attrs, cluster, clroute),
            descr=descr,
            clstate=ClState.ACTIVE,
            defined=current.defined if current is not None else rev,
            altered=rev,
        )
        self._check_topic(topic, warn)
        self._put_topic(topic)
        kind = EventKind.TOPIC_DEFINED if current is None else EventKind.TOPIC_ALTERED
        ev.append(RepoEvent(kind, topic=topic))

    def _op_alter(
        self, cmd: Mapping[str, Any], rev: int, ev: list[RepoEvent], warn: list[str]
    ) -> None:
        current = self._defined_topic(cmd)
        name, qmgr = current.name, current.qmgr
        changes = _str_map(_get(cmd, "attrs", Mapping, {}), "attrs")
        topic_str: str = _get(cmd, "topic_str", str, current.topic_str)
        if topic_str != current.topic_str:
            raise _Rejected(
                ErrorCode.ATTR_VALUE_FIXED, f"TOPIC({name}): TOPICSTR cannot be changed"
            )
        cluster: str = _get(cmd, "cluster", str, changes.pop("CLUSTER", current.cluster))
        clroute_text: str = _get(cmd, "clroute", str, changes.pop("CLROUTE", current.clroute))
        clroute = self._clroute(clroute_text)
        if cluster != self.cluster:
            # CLUSTER blanked or moved elsewhere: the definition leaves this cluster.
            self._drop_topic(current.key)
            ev.append(RepoEvent(EventKind.TOPIC_DELETED, topic=current))
            return
        if clroute is not current.clroute:
            raise _Rejected(
                ErrorCode.CLROUTE_NOT_ALTERABLE,
                f"TOPIC({name}): CLROUTE cannot change while CLUSTER is set",
            )
        merged = dict(current.attrs)
        merged.update(changes)
        topic = ClusterTopic(
            name=name,
            qmgr=qmgr,
            topic_str=current.topic_str,
            cluster=cluster,
            clroute=clroute,
            attrs=_own_attrs(merged, cluster, clroute),
            descr=_get(cmd, "descr", str, current.descr),
            clstate=current.clstate,
            defined=current.defined,
            altered=rev,
        )
        self._check_topic(topic, warn)
        self._put_topic(topic)
        ev.append(RepoEvent(EventKind.TOPIC_ALTERED, topic=topic))

    def _op_delete(
        self, cmd: Mapping[str, Any], rev: int, ev: list[RepoEvent], warn: list[str]
    ) -> None:
        current = self._defined_topic(cmd)
        self._drop_topic(current.key)
        ev.append(RepoEvent(EventKind.TOPIC_DELETED, topic=current))

    def _defined_topic(self, cmd: Mapping[str, Any]) -> ClusterTopic:
        """The topic definition ``cmd`` names (its name and queue manager); it must exist."""
        name: str = _get(cmd, "name", str)
        qmgr: str = _get(cmd, "qmgr", str)
        current = self._topics.get((name, qmgr))
        if current is None:
            raise _Rejected(ErrorCode.UNKNOWN_OBJECT_NAME, f"TOPIC({name}) not defined on {qmgr}")
        return current

    # ----------------------------------------------------------------- helpers

    @staticmethod
    def _clroute(text: str) -> ClRoute:
        if text not in (ClRoute.DIRECT.value, ClRoute.TOPICHOST.value):
            raise _Rejected(
                ErrorCode.ATTR_VALUE_ERROR, f"CLROUTE({text}) is not valid; DIRECT or TOPICHOST"
            )
        return ClRoute(text)

    def _need_member(self, name: str) -> Member:
        member = self._members.get(name)
        if member is None:
            raise _Rejected(ErrorCode.UNKNOWN_Q_MGR, f"{name} is not a member of {self.cluster}")
        return member

    def _set_suspended(self, name: str, suspended: bool, ev: list[RepoEvent]) -> None:
        member = self._need_member(name)
        if member.suspended != suspended:
            updated = _replace_member(member, suspended=suspended)
            self._members[name] = updated
            ev.append(RepoEvent(EventKind.MEMBER_UPDATED, member=updated))

    def _remove_member(self, member: Member, ev: list[RepoEvent]) -> None:
        for name in sorted(self._by_host.get(member.name, {})):
            key = (name, member.name)
            ev.append(RepoEvent(EventKind.TOPIC_DELETED, topic=self._topics[key]))
            self._drop_topic(key)
        del self._members[member.name]
        ev.append(RepoEvent(EventKind.MEMBER_REMOVED, member=member))

    def _check_topic(self, topic: ClusterTopic, warn: list[str]) -> None:
        """Validate a definition against the topic rules and its other copies (no mutation)."""
        try:
            TopicObject(topic.name, topic.topic_str, topic.object_attrs(), topic.descr)
        except TopicObjectError as exc:
            raise _Rejected(ErrorCode.ATTR_VALUE_ERROR, exc.reason) from None
        for other in self._by_name.get(topic.name, {}).values():
            if other.qmgr == topic.qmgr:
                continue
            if other.clroute is not topic.clroute:
                raise _Rejected(
                    ErrorCode.CLUSTER_TOPIC_CONFLICT,
                    f"TOPIC({topic.name}) is CLROUTE({other.clroute}) on {other.qmgr}; "
                    f"cannot define it CLROUTE({topic.clroute}) on {topic.qmgr}",
                )
        # the copies of this name and those at this TOPICSTR, by key: the only ones the rules
        # below can be about
        related = {**self._by_str.get(topic.topic_str, {})}
        related.update({t.key: t for t in self._by_name.get(topic.name, {}).values()})
        for key in sorted(related):
            other = related[key]
            if other.qmgr == topic.qmgr and other.name != topic.name:
                if other.topic_str == topic.topic_str:
                    raise _Rejected(
                        ErrorCode.TOPICSTR_ALREADY_EXISTS,
                        f"TOPIC({other.name}) on {topic.qmgr} already has TOPICSTR "
                        f"{topic.topic_str!r}",
                    )
                continue
            if other.qmgr == topic.qmgr:
                continue
            if other.name == topic.name:
                if other.topic_str != topic.topic_str:
                    warn.append(
                        f"TOPIC({topic.name}) has TOPICSTR {topic.topic_str!r} on {topic.qmgr} "
                        f"but {other.topic_str!r} on {other.qmgr}"
                    )
                elif other.attrs != topic.attrs or other.descr != topic.descr:
                    warn.append(
                        f"TOPIC({topic.name}) attributes differ between {topic.qmgr} and "
                        f"{other.qmgr}"
                    )
            elif other.topic_str == topic.topic_str:
                warn.append(
                    f"TOPICSTR {topic.topic_str!r} is clustered as TOPIC({other.name}) on "
                    f"{other.qmgr} and as TOPIC({topic.name}) on {topic.qmgr}"
                )

    def _put_topic(self, topic: ClusterTopic) -> None:
        self._drop_topic(topic.key)
        self._topics[topic.key] = topic
        self._by_name.setdefault(topic.name, {})[topic.qmgr] = topic
        self._by_str.setdefault(topic.topic_str, {})[topic.key] = topic
        self._by_host.setdefault(topic.qmgr, {})[topic.name] = topic
        self._direct += topic.clroute is ClRoute.DIRECT

    def _drop_topic(self, key: TopicKey) -> None:
        topic = self._topics.pop(key, None)
        if topic is None:
            return
        name, qmgr = key
        _unindex(self._by_name, name, qmgr)
        _unindex(self._by_str, topic.topic_str, key)
        _unindex(self._by_host, qmgr, name)
        self._direct -= topic.clroute is ClRoute.DIRECT

    # ----------------------------------------------------------------- queries

    def member(self, name: str) -> Member | None:
        return self._members.get(name)

    def member_by_qmid(self, qmid: str) -> Member | None:
        return next((m for m in self._members.values() if m.qmid == qmid), None)

    def members(self) -> list[Member]:
        """Every member held here, by name (DISPLAY CLUSQMGR: all on an FR, the PR's share on
        a partial repository)."""
        return [self._members[name] for name in sorted(self._members)]

    def full_repositories(self) -> list[Member]:
        return [m for m in self.members() if m.role is Role.REPOS]

    def topics(self) -> list[ClusterTopic]:
        """Every clustered definition, by (name, hosting queue manager) (DISPLAY TCLUSTER)."""
        return [self._topics[key] for key in sorted(self._topics)]

    def definition(self, name: str, qmgr: str) -> ClusterTopic | None:
        return self._topics.get((name, qmgr))

    def definitions(self, name: str) -> list[ClusterTopic]:
        """Every copy of one object name, by hosting queue manager."""
        copies = self._by_name.get(name, {})
        return [copies[qmgr] for qmgr in sorted(copies)]

    def host_definitions(self, name: str, topic_str: str | None = None) -> list[ClusterTopic]:
        """The TOPICHOST copies of ``name`` (optionally only those at ``topic_str``)."""
        return [
            t
            for t in self.definitions(name)
            if t.clroute is ClRoute.TOPICHOST
            and t.clstate is ClState.ACTIVE
            and (topic_str is None or t.topic_str == topic_str)
        ]

    def hosts(self, name: str, topic_str: str | None = None) -> list[str]:
        """Names of the topic hosts of object ``name`` (PUB(DISABLED) ones included)."""
        return [t.qmgr for t in self.host_definitions(name, topic_str)]

    def topic_hosts(self, name: str, topic_str: str | None = None) -> list[TopicHost]:
        """The hosts of ``name`` joined with their member records, for the workload algorithm."""
        out = []
        for topic in self.host_definitions(name, topic_str):
            member = self._members.get(topic.qmgr)
            out.append(
                TopicHost(
                    qmgr=topic.qmgr,
                    pub_enabled=topic.pub_enabled,
                    workload=member.workload if member is not None else WorkloadAttrs(),
                    suspended=member.suspended if member is not None else False,
                )
            )
        return out

    def hosted_by(self, qmgr: str) -> list[ClusterTopic]:
        """The definitions queue manager ``qmgr`` hosts, by name."""
        own = self._by_host.get(qmgr, {})
        return [own[name] for name in sorted(own)]

    def at_topic_str(self, topic_str: str) -> list[ClusterTopic]:
        """The definitions (of any name, on any host) at ``topic_str``, by key."""
        copies = self._by_str.get(topic_str, {})
        return [copies[key] for key in sorted(copies)]

    def host_names(self) -> set[str]:
        """The queue managers hosting at least one definition."""
        return set(self._by_host)

    def has_direct_topics(self) -> bool:
        return self._direct > 0

    def view(self) -> RepositoryView:
        """Everything held here."""
        return RepositoryView(
            MappingProxyType(dict(self._members)), MappingProxyType(dict(self._topics))
        )

    def partial_view(self, qmgr: str, interests: Iterable[str] = ()) -> RepositoryView:
        """What partial repository ``qmgr`` must hold (see the module docstring)."""
        names = self.partial_members(qmgr, interests)
        members = {n: self._members[n] for n in sorted(names)}
        return RepositoryView(MappingProxyType(members), MappingProxyType(dict(self._topics)))

    def partial_members(self, qmgr: str, interests: Iterable[str] = ()) -> set[str]:
        """Names of the member records partial repository ``qmgr`` must hold (it holds every
        topic definition)."""
        if self.has_direct_topics():
            return set(self._members)
        names = {qmgr, *interests}
        names.update(self._by_host)
        names.update(m.name for m in self._members.values() if m.role is Role.REPOS)
        return names & self._members.keys()

    # ----------------------------------------------------------------- snapshots

    def to_snapshot(self) -> dict[str, Any]:
        """The whole state as a JSON-serialisable dict (canonical order)."""
        return _snapshot(self.cluster, self.revision, self.view())

    def partial_snapshot(self, qmgr: str, interests: Iterable[str] = ()) -> dict[str, Any]:
        """A snapshot holding only ``partial_view(qmgr, interests)``, to seed a PR."""
        return _snapshot(self.cluster, self.revision, self.partial_view(qmgr, interests))

    @staticmethod
    def from_snapshot(data: Mapping[str, Any]) -> ClusterRepository:
        """Rebuild a repository from ``to_snapshot``/``partial_snapshot`` output."""
        if data.get("v") != SNAPSHOT_VERSION:
            raise ValueError(f"unsupported repository snapshot version {data.get('v')!r}")
        repo = ClusterRepository(data["cluster"])
        repo.revision = int(data["revision"])
        for raw in data.get("members", []):
            member = Member.from_dict(raw)
            repo._members[member.name] = member
        for raw in data.get("topics", []):
            repo._put_topic(ClusterTopic.from_dict(raw))
        return repo

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ClusterRepository):
            return NotImplemented
        return self.to_snapshot() == other.to_snapshot()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"ClusterRepository({self.cluster!r}, revision={self.revision}, "
            f"{len(self._members)} members, {len(self._topics)} topic definitions)"
        )


def _unindex(index: dict[Any, dict[Any, ClusterTopic]], outer: Any, inner: Any) -> None:
    copies = index[outer]
    del copies[inner]
    if not copies:
        del index[outer]


def _snapshot(cluster: str, revision: int, view: RepositoryView) -> dict[str, Any]:
    return {
        "v": SNAPSHOT_VERSION,
        "cluster": cluster,
        "revision": revision,
        "members": [view.members[n].to_dict() for n in sorted(view.members)],
        "topics": [view.topics[k].to_dict() for k in sorted(view.topics)],
    }


def _own_attrs(attrs: Mapping[str, str], cluster: str, clroute: ClRoute) -> dict[str, str]:
    """``attrs`` without CLUSTER/CLROUTE, which must agree with the fields if present."""
    out = dict(attrs)
    for key, expected in (("CLUSTER", cluster), ("CLROUTE", clroute.value)):
        given = out.pop(key, None)
        if given is not None and given != expected:
            raise _Rejected(
                ErrorCode.PARM_CONFLICT, f"attrs {key}({given}) disagrees with {expected!r}"
            )
    return out


def _replace_member(member: Member, **changes: Any) -> Member:
    return replace(member, **changes)


_HANDLERS = {
    "join_member": ClusterRepository._op_join,
    "touch_member": ClusterRepository._op_touch,
    "leave_member": ClusterRepository._op_leave,
    "force_remove": ClusterRepository._op_force_remove,
    "suspend_member": ClusterRepository._op_suspend,
    "resume_member": ClusterRepository._op_resume,
    "set_workload": ClusterRepository._op_set_workload,
    "define_topic": ClusterRepository._op_define,
    "alter_topic": ClusterRepository._op_alter,
    "delete_topic": ClusterRepository._op_delete,
}
