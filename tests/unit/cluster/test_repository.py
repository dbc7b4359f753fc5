"""The replicated cluster repository (reference docs/mq-semantics.md §1, §2, §4)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.records import ClRoute, ClState, EventKind, Member, RepoEvent, Role
from cluster.repository import ClusterRepository, Cmd, ErrorCode, remote_refusal

C = "DEMO"


def repo_with(*names: str, fr: tuple[str, ...] = ("FR1", "FR2")) -> ClusterRepository:
    repo = ClusterRepository(C)
    for name in fr:
        assert repo.apply(Cmd.join_member(name, f"{name}_1", f"h:{name}", Role.REPOS)).ok
    for name in names:
        assert repo.apply(Cmd.join_member(name, f"{name}_1", f"h:{name}")).ok
    return repo


def member(repo: ClusterRepository, name: str) -> Member:
    found = repo.member(name)
    assert found is not None
    return found


def kinds(result: Any) -> list[str]:
    return [e.kind.value for e in result.events]


# ------------------------------------------------------------------ members


def test_join_then_update_member() -> None:
    repo = ClusterRepository(C)
    first = repo.apply(Cmd.join_member("QM1", "QM1_1", "h:1", workload={"CLWLWGHT": 20}))
    assert kinds(first) == ["member_joined"]
    member = repo.member("QM1")
    assert member is not None and member.workload.clwlwght == 20 and member.role is Role.NORMAL
    again = repo.apply(Cmd.join_member("QM1", "QM1_1", "h:2", Role.REPOS))
    assert kinds(again) == ["member_updated"]
    member = repo.member("QM1")
    assert member is not None
    assert (member.address, member.role, member.workload.clwlwght) == ("h:2", Role.REPOS, 20)
    assert member.joined == 1 and member.last_seen == 2


def test_rejoin_with_same_details_only_refreshes_last_seen() -> None:
    repo = repo_with("QM1")
    result = repo.apply(Cmd.join_member("QM1", "QM1_1", "h:QM1"))
    assert result.ok and result.events == ()
    assert member(repo, "QM1").last_seen == repo.revision


def test_touch_records_logical_stamp_and_proposer_time_without_events() -> None:
    repo = repo_with("QM1")
    result = repo.apply(Cmd.touch_member("QM1", at=1_700_000_000_000))
    assert result.ok and result.events == ()
    member = repo.member("QM1")
    assert member is not None
    assert member.last_seen == repo.revision and member.clusdate_ms == 1_700_000_000_000


def test_a_new_qmid_under_a_known_name_is_refused_until_force_remove() -> None:
    repo = repo_with("QM1")
    repo.apply(Cmd.define_topic("T1", "QM1", "a", C, "TOPICHOST"))
    before = repo.to_snapshot()
    result = repo.apply(Cmd.join_member("QM1", "QM1_2", "h:QM1"))
    assert result.error is not None
    assert result.error.code is ErrorCode.OBJECT_ALREADY_EXISTS
    assert "QM1 is already in cluster" in result.error.message
    assert "FORCEREMOVE" in result.error.message
    assert repo.to_snapshot() == before
    removed = repo.apply(Cmd.force_remove(qmname="QM1"))
    assert removed.ok
    joined = repo.apply(Cmd.join_member("QM1", "QM1_2", "h:QM1"))
    assert kinds(joined) == ["member_joined"]
    assert member(repo, "QM1").qmid == "QM1_2"
    assert repo.topics() == []


def _about(qm: str) -> list[dict[str, Any]]:
    """One command of each kind whose subject is queue manager ``qm``."""
    return [
        Cmd.join_member(qm, f"{qm}_1", "h:1"),
        Cmd.touch_member(qm),
        Cmd.leave_member(qm),
        Cmd.suspend_member(qm),
        Cmd.resume_member(qm),
        Cmd.set_workload(qm, CLWLWGHT=5),
        Cmd.define_topic("T1", qm, "a", C, "TOPICHOST"),
        Cmd.alter_topic("T1", qm, {}),
        Cmd.delete_topic("T1", qm),
    ]


def test_a_member_may_only_propose_changes_about_itself() -> None:
    for cmd in _about("QM1"):
        assert remote_refusal(cmd, "QM1") is None, cmd
    theirs = [*_about("QM2"), {"v": 1, "op": "leave_member", "name": ["QM1"]}]
    for cmd in theirs:
        refusal = remote_refusal(cmd, "QM1")
        assert refusal is not None and "only about itself" in refusal, cmd


def test_force_remove_and_full_repository_joins_are_never_taken_from_a_member() -> None:
    for cmd in (Cmd.force_remove(qmname="QM2"), Cmd.force_remove(qmname="QM1", qmid="QM1_1")):
        refusal = remote_refusal(cmd, "QM1")
        assert refusal is not None and "RESET CLUSTER" in refusal
    refusal = remote_refusal(Cmd.join_member("QM1", "QM1_1", "h:1", Role.REPOS), "QM1")
    assert refusal is not None and "cannot join as a full repository" in refusal
    watch = remote_refusal(Cmd.touch_member("QM1"), "QM1", join=True)
    assert watch is not None and "join_member" in watch
    assert remote_refusal(Cmd.join_member("QM1", "QM1_1", "h:1"), "QM1", join=True) is None
    for qmid in ("QM2_1", "QM1", "QM1_1_2"):  # another's QMID, or not a QMID of QM1
        refusal = remote_refusal(Cmd.join_member("QM1", qmid, "h:1"), "QM1", join=True)
        assert refusal is not None and "cannot join with QMID" in refusal, qmid


def test_force_remove_by_qmid_or_name_removes_member_and_its_definitions() -> None:
    repo = repo_with("QM1", "QM2")
    repo.apply(Cmd.define_topic("T1", "QM1", "a", C, "TOPICHOST"))
    repo.apply(Cmd.define_topic("T1", "QM2", "a", C, "TOPICHOST"))
    result = repo.apply(Cmd.force_remove(qmid="QM1_1"))
    assert kinds(result) == ["topic_deleted", "member_removed"]
    assert repo.hosts("T1") == ["QM2"]
    assert repo.apply(Cmd.force_remove(qmname="QM2")).ok
    assert [m.name for m in repo.members()] == ["FR1", "FR2"]


def test_force_remove_errors() -> None:
    repo = repo_with("QM1", "QM2")
    missing = repo.apply(Cmd.force_remove()).error
    assert missing is not None and missing.code is ErrorCode.PARM_MISSING
    unknown = repo.apply(Cmd.force_remove(qmid="nope")).error
    assert unknown is not None and unknown.code is ErrorCode.UNKNOWN_Q_MGR
    mismatch = repo.apply(Cmd.force_remove(qmname="QM1", qmid="QM2_1")).error
    assert mismatch is not None and mismatch.code is ErrorCode.PARM_CONFLICT
    assert len(repo.members()) == 4


def test_leave_member() -> None:
    repo = repo_with("QM1")
    assert kinds(repo.apply(Cmd.leave_member("QM1"))) == ["member_removed"]
    assert repo.member("QM1") is None


def test_suspend_and_resume() -> None:
    repo = repo_with("QM1")
    assert kinds(repo.apply(Cmd.suspend_member("QM1"))) == ["member_updated"]
    assert member(repo, "QM1").suspended
    assert repo.apply(Cmd.suspend_member("QM1")).events == ()
    assert kinds(repo.apply(Cmd.resume_member("QM1"))) == ["member_updated"]
    assert not member(repo, "QM1").suspended
    error = repo.apply(Cmd.suspend_member("QMX")).error
    assert error is not None and error.code is ErrorCode.UNKNOWN_Q_MGR and error.reason == 4006


def test_set_workload_validates_mq_ranges() -> None:
    repo = repo_with("QM1")
    ok = repo.apply(Cmd.set_workload("QM1", CLWLRANK=9, CLWLPRTY=3, CLWLWGHT=99, NETPRTY=1))
    assert kinds(ok) == ["member_updated"]
    w = member(repo, "QM1").workload
    assert (w.clwlrank, w.clwlprty, w.clwlwght, w.netprty) == (9, 3, 99, 1)
    for bad in ({"CLWLWGHT": 0}, {"CLWLWGHT": 100}, {"CLWLRANK": 10}, {"CLWLPRTY": -1}):
        error = repo.apply(Cmd.set_workload("QM1", **bad)).error
        assert error is not None and error.code is ErrorCode.ATTR_VALUE_ERROR
    unknown = repo.apply(Cmd.set_workload("QM1", CLWLFOO=1)).error
    assert unknown is not None and unknown.code is ErrorCode.PARM_VALUE_ERROR


# ------------------------------------------------------------------ topics


def test_define_topic_and_query_hosts() -> None:
    repo = repo_with("H1", "H2", "P")
    result = repo.apply(Cmd.define_topic("T1", "H1", "Sport", C, "TOPICHOST", {"PUB": "DISABLED"}))
    assert kinds(result) == ["topic_defined"]
    topic = result.events[0].topic
    assert topic is not None and topic.clstate is ClState.ACTIVE and not topic.pub_enabled
    repo.apply(Cmd.define_topic("T1", "H2", "Sport", C, "TOPICHOST"))
    assert repo.hosts("T1") == ["H1", "H2"]
    assert [h.pub_enabled for h in repo.topic_hosts("T1")] == [False, True]
    assert [t.qmgr for t in repo.definitions("T1")] == ["H1", "H2"]


def test_conflicting_clroute_for_one_object_name_is_rejected() -> None:
    repo = repo_with("H1", "H2")
    repo.apply(Cmd.define_topic("T1", "H1", "Sport", C, "TOPICHOST"))
    before = repo.to_snapshot()
    result = repo.apply(Cmd.define_topic("T1", "H2", "Sport", C, "DIRECT"))
    assert result.error is not None
    assert result.error.code is ErrorCode.CLUSTER_TOPIC_CONFLICT and result.error.reason == 3368
    assert result.events == ()
    assert repo.to_snapshot() == before


def test_clroute_cannot_change_while_cluster_is_set() -> None:
    repo = repo_with("H1")
    repo.apply(Cmd.define_topic("T1", "H1", "Sport", C, "TOPICHOST"))
    for cmd in (
        Cmd.alter_topic("T1", "H1", clroute="DIRECT"),
        Cmd.alter_topic("T1", "H1", {"CLROUTE": "DIRECT"}),
        Cmd.define_topic("T1", "H1", "Sport", C, "DIRECT", replace=True),
    ):
        error = repo.apply(cmd).error
        assert error is not None
        assert error.code is ErrorCode.CLROUTE_NOT_ALTERABLE and error.reason == 3367
    # Blank CLUSTER first (withdrawal), then define again with the other route.
    withdraw = repo.apply(Cmd.alter_topic("T1", "H1", cluster=""))
    assert kinds(withdraw) == ["topic_deleted"]
    assert repo.apply(Cmd.define_topic("T1", "H1", "Sport", C, "DIRECT")).ok
    redefined = repo.definition("T1", "H1")
    assert redefined is not None and redefined.clroute is ClRoute.DIRECT


def test_alter_topic_attributes() -> None:
    repo = repo_with("H1")
    repo.apply(Cmd.define_topic("T1", "H1", "Sport", C, "TOPICHOST", {"PUB": "DISABLED"}))
    result = repo.apply(Cmd.alter_topic("T1", "H1", {"PUB": "ENABLED"}, descr="now on"))
    assert kinds(result) == ["topic_altered"]
    topic = repo.definition("T1", "H1")
    assert topic is not None and topic.pub_enabled and topic.descr == "now on"
    assert topic.defined < topic.altered
    fixed = repo.apply(Cmd.alter_topic("T1", "H1", topic_str="Other")).error
    assert fixed is not None and fixed.code is ErrorCode.ATTR_VALUE_FIXED
    bad = repo.apply(Cmd.alter_topic("T1", "H1", {"PUB": "MAYBE"})).error
    assert bad is not None and bad.code is ErrorCode.ATTR_VALUE_ERROR
    missing = repo.apply(Cmd.alter_topic("T9", "H1", {"PUB": "ENABLED"})).error
    assert missing is not None and missing.code is ErrorCode.UNKNOWN_OBJECT_NAME


def test_define_existing_needs_replace() -> None:
    repo = repo_with("H1")
    repo.apply(Cmd.define_topic("T1", "H1", "Sport", C, "TOPICHOST"))
    error = repo.apply(Cmd.define_topic("T1", "H1", "Sport", C, "TOPICHOST")).error
    assert error is not None and error.code is ErrorCode.OBJECT_ALREADY_EXISTS
    replaced = repo.apply(
        Cmd.define_topic("T1", "H1", "Sport", C, "TOPICHOST", {"PUB": "DISABLED"}, replace=True)
    )
    assert kinds(replaced) == ["topic_altered"]


def test_define_validation() -> None:
    repo = repo_with("H1")
    cases = {
        ErrorCode.UNKNOWN_Q_MGR: Cmd.define_topic("T1", "NOPE", "a", C),
        ErrorCode.CLUSTER_NAME_CONFLICT: Cmd.define_topic("T1", "H1", "a", "OTHER"),
        ErrorCode.ATTR_VALUE_ERROR: Cmd.define_topic("T1", "H1", "a/", C),
        ErrorCode.PARM_VALUE_ERROR: Cmd.define_topic("bad name!", "H1", "a", C),
    }
    for code, cmd in cases.items():
        error = repo.apply(cmd).error
        assert error is not None and error.code is code, (code, error)
    assert repo.apply(Cmd.define_topic("T1", "H1", "a/#", C)).error is not None
    assert repo.apply(Cmd.define_topic("T1", "H1", "a", C, "SIDEWAYS")).error is not None
    repo.apply(Cmd.define_topic("T1", "H1", "a", C))
    same_str = repo.apply(Cmd.define_topic("T2", "H1", "a", C)).error
    assert same_str is not None and same_str.code is ErrorCode.TOPICSTR_ALREADY_EXISTS


def test_mismatched_copies_are_accepted_with_a_warning() -> None:
    repo = repo_with("H1", "H2")
    repo.apply(Cmd.define_topic("T1", "H1", "Sport", C, "TOPICHOST", {"SUBSCOPE": "QMGR"}))
    result = repo.apply(Cmd.define_topic("T1", "H2", "Sport", C, "TOPICHOST"))
    assert result.ok and result.warnings


def test_delete_topic() -> None:
    repo = repo_with("H1")
    repo.apply(Cmd.define_topic("T1", "H1", "Sport", C, "TOPICHOST"))
    assert kinds(repo.apply(Cmd.delete_topic("T1", "H1"))) == ["topic_deleted"]
    assert repo.hosts("T1") == []
    error = repo.apply(Cmd.delete_topic("T1", "H1")).error
    assert error is not None and error.code is ErrorCode.UNKNOWN_OBJECT_NAME


def test_bad_commands_are_errors_not_exceptions() -> None:
    repo = repo_with()
    rev = repo.revision
    bad: list[Any] = [
        {"v": 2, "op": "join_member"},
        {"v": 1, "op": "explode"},
        {"v": 1},
        {"v": 1, "op": "join_member", "name": "QM1"},
        {"v": 1, "op": "join_member", "name": "QM1", "qmid": 5, "address": "x"},
        {"v": 1, "op": "join_member", "name": "QM1", "qmid": "q", "address": "x", "role": "X"},
        [],
    ]
    for cmd in bad:
        result = repo.apply(cmd)
        assert result.error is not None and result.events == ()
    assert repo.revision == rev


# ------------------------------------------------------------------ partial repositories


def test_partial_view_under_topic_host_routing() -> None:
    repo = repo_with("H1", "S1", "S2", "P")
    repo.apply(Cmd.define_topic("T1", "H1", "Sport", C, "TOPICHOST"))
    view = repo.partial_view("S1")
    assert sorted(view.members) == ["FR1", "FR2", "H1", "S1"]
    assert list(view.topics) == [("T1", "H1")]
    assert sorted(repo.partial_view("H1", interests=["S2"]).members) == ["FR1", "FR2", "H1", "S2"]


def test_partial_view_under_direct_routing_holds_every_member() -> None:
    repo = repo_with("H1", "S1", "S2", "P")
    repo.apply(Cmd.define_topic("T1", "H1", "Sport", C, "TOPICHOST"))
    repo.apply(Cmd.define_topic("T2", "P", "News", C, "DIRECT"))
    assert sorted(repo.partial_view("S1").members) == ["FR1", "FR2", "H1", "P", "S1", "S2"]


def test_partial_replica_follows_pushed_events() -> None:
    repo = repo_with("H1", "H2", "S1", "S2")
    repo.apply(Cmd.define_topic("T1", "H1", "Sport", C, "TOPICHOST"))
    replica = ClusterRepository.from_snapshot(json.loads(json.dumps(repo.partial_snapshot("S1"))))
    old = repo.partial_view("S1")
    for cmd in (
        Cmd.define_topic("T1", "H2", "Sport", C, "TOPICHOST"),
        Cmd.set_workload("H2", CLWLWGHT=10),
        Cmd.suspend_member("H1"),
        Cmd.join_member("S3", "S3_1", "h:S3"),
        Cmd.touch_member("H1"),
        Cmd.force_remove(qmname="H1"),
    ):
        assert repo.apply(cmd).ok
        new = repo.partial_view("S1")
        for event in old.diff(new):
            replica.apply_event(RepoEvent.from_dict(json.loads(json.dumps(event.to_dict()))))
        old = new
    assert sorted(m.name for m in replica.members()) == ["FR1", "FR2", "H2", "S1"]
    assert replica.hosts("T1") == ["H2"]
    assert replica.topic_hosts("T1")[0].workload.clwlwght == 10
    assert [t.to_dict() for t in replica.topics()] == [t.to_dict() for t in repo.topics()]


def test_view_diff_orders_member_records_around_topic_changes() -> None:
    repo = repo_with()
    before = repo.partial_view("S1")
    repo.apply(Cmd.join_member("H1", "H1_1", "h"))
    repo.apply(Cmd.define_topic("T1", "H1", "a", C, "TOPICHOST"))
    events = before.diff(repo.partial_view("S1"))
    assert [e.kind for e in events] == [EventKind.MEMBER_JOINED, EventKind.TOPIC_DEFINED]
    mid = repo.partial_view("S1")
    repo.apply(Cmd.leave_member("H1"))
    events = mid.diff(repo.partial_view("S1"))
    assert [e.kind for e in events] == [EventKind.TOPIC_DELETED, EventKind.MEMBER_REMOVED]


def test_display_clusqmgr_lists_members_by_name_and_full_repositories() -> None:
    repo = repo_with("QM2", "QM1")
    assert [m.name for m in repo.members()] == ["FR1", "FR2", "QM1", "QM2"]
    assert [m.name for m in repo.full_repositories()] == ["FR1", "FR2"]


# ------------------------------------------------------------------ determinism and snapshots

NAMES = ["QM1", "QM2", "QM3", "FR1"]
TOPICS = [("T1", "a"), ("T2", "a/b"), ("T3", "c")]


def command_strategy() -> st.SearchStrategy[dict[str, Any]]:
    name = st.sampled_from(NAMES)
    topic = st.sampled_from(TOPICS)
    route = st.sampled_from(["DIRECT", "TOPICHOST"])
    pub = st.sampled_from([{}, {"PUB": "DISABLED"}, {"PUB": "ENABLED"}])
    return st.one_of(
        st.builds(
            lambda n, q, r: Cmd.join_member(n, f"{n}_{q}", f"h:{n}", r),
            name,
            st.integers(1, 2),
            st.sampled_from(["REPOS", "NORMAL"]),
        ),
        st.builds(Cmd.touch_member, name, st.none() | st.integers(0, 10**12)),
        st.builds(Cmd.leave_member, name),
        st.builds(lambda n: Cmd.force_remove(qmname=n), name),
        st.builds(lambda n, q: Cmd.force_remove(qmid=f"{n}_{q}"), name, st.integers(1, 2)),
        st.builds(Cmd.suspend_member, name),
        st.builds(Cmd.resume_member, name),
        st.builds(lambda n, w: Cmd.set_workload(n, CLWLWGHT=w), name, st.integers(0, 100)),
        st.builds(
            lambda t, n, r, a, rep: Cmd.define_topic(t[0], n, t[1], C, r, a, replace=rep),
            topic,
            name,
            route,
            pub,
            st.booleans(),
        ),
        st.builds(lambda t, n, a: Cmd.alter_topic(t[0], n, a), topic, name, pub),
        st.builds(lambda t, n: Cmd.alter_topic(t[0], n, cluster=""), topic, name),
        st.builds(lambda t, n: Cmd.delete_topic(t[0], n), topic, name),
    )


@settings(max_examples=60, deadline=None)
@given(commands=st.lists(command_strategy(), max_size=40), cut=st.integers(0, 40))
def test_same_commands_give_same_state_everywhere(commands: list[dict[str, Any]], cut: int) -> None:
    """Two replicas, one fed JSON-round-tripped commands and restored from a JSON snapshot
    half-way (log compaction), end with the same state, snapshot and events."""
    a = ClusterRepository(C)
    b = ClusterRepository(C)
    events_a = []
    events_b = []
    for index, cmd in enumerate(commands):
        if index == cut:
            b = ClusterRepository.from_snapshot(json.loads(json.dumps(b.to_snapshot())))
        ra = a.apply(cmd)
        rb = b.apply(json.loads(json.dumps(cmd)))
        assert ra.error == rb.error
        events_a.append([e.to_dict() for e in ra.events])
        events_b.append([e.to_dict() for e in rb.events])
    assert events_a == events_b
    assert a.to_snapshot() == b.to_snapshot()
    assert a == b
    restored = ClusterRepository.from_snapshot(json.loads(json.dumps(a.to_snapshot())))
    assert restored.to_snapshot() == a.to_snapshot()
    # invariants: one CLROUTE per object name; every definition's host is a member
    for name in {t.name for t in a.topics()}:
        assert len({t.clroute for t in a.definitions(name)}) == 1
    assert all(a.member(t.qmgr) is not None for t in a.topics())


def test_snapshot_is_json_and_canonical() -> None:
    repo = repo_with("QM2", "QM1")
    repo.apply(Cmd.define_topic("T1", "QM2", "a", C, "TOPICHOST", {"PUB": "DISABLED"}))
    snap = repo.to_snapshot()
    assert json.loads(json.dumps(snap)) == snap
    assert [m["name"] for m in snap["members"]] == ["FR1", "FR2", "QM1", "QM2"]
    assert snap["v"] == 1 and snap["cluster"] == C and snap["revision"] == repo.revision
    assert ClusterRepository.from_snapshot(snap) == repo


def test_events_round_trip_as_json() -> None:
    repo = repo_with("QM1")
    result = repo.apply(Cmd.define_topic("T1", "QM1", "a", C, "TOPICHOST"))
    for event in result.events:
        assert RepoEvent.from_dict(json.loads(json.dumps(event.to_dict()))) == event


JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 200)
    | st.sampled_from(["", "QM1", "QM1_1", "a", "T1", C, "TOPICHOST", "REPOS", "PUB"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=6,
)
OPS = [
    "join_member", "touch_member", "leave_member", "force_remove", "suspend_member",
    "resume_member", "set_workload", "define_topic", "alter_topic", "delete_topic",
]  # fmt: skip
FIELDS = [
    "name", "qmid", "address", "role", "workload", "at", "qmname", "qmgr", "topic_str",
    "cluster", "clroute", "attrs", "descr", "replace",
]  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    op=st.sampled_from(OPS),
    fields=st.dictionaries(st.sampled_from(FIELDS), JSONISH, max_size=8),
)
def test_malformed_commands_never_raise(op: str, fields: dict[str, Any]) -> None:
    repo = repo_with("QM1")
    repo.apply(Cmd.define_topic("T1", "QM1", "a", C, "TOPICHOST"))
    before = repo.to_snapshot()
    result = repo.apply({"v": 1, "op": op, **fields})
    if not result.ok:
        assert repo.to_snapshot() == before
