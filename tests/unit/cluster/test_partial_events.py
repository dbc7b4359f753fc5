"""``partial_events``: a partial repository told only the events it must see, worked out from
each change, holds exactly ``partial_view`` after every command (the full repository's watch
never compares whole views)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.records import Member
from cluster.repository import ClusterRepository, Cmd, partial_events

QMGRS = ["FR1", "FR2", "QM1", "QM2", "QM3", "PR"]
NAMES = ["T1", "T2", "T3"]
STRINGS = ["A", "A/B", "C"]


def commands() -> st.SearchStrategy[dict[str, Any]]:
    qmgr = st.sampled_from(QMGRS)
    name = st.sampled_from(NAMES)
    return st.one_of(
        st.builds(
            lambda q, role: Cmd.join_member(q, f"{q}_1", f"127.0.0.1:{len(q)}", role),
            qmgr,
            st.sampled_from(["REPOS", "NORMAL"]),
        ),
        st.builds(
            lambda n, q, s, route: Cmd.define_topic(n, q, s, "CL", route, {}, "", True),
            name,
            qmgr,
            st.sampled_from(STRINGS),
            st.sampled_from(["DIRECT", "TOPICHOST"]),
        ),
        st.builds(lambda n, q, d: Cmd.alter_topic(n, q, {}, d), name, qmgr, st.text(max_size=3)),
        st.builds(Cmd.delete_topic, name, qmgr),
        st.builds(Cmd.leave_member, st.sampled_from(QMGRS[2:])),
        st.builds(Cmd.suspend_member, qmgr),
        st.builds(lambda q: Cmd.set_workload(q, CLWLWGHT=7), qmgr),
    )


def held(repo: ClusterRepository) -> dict[str, Member]:
    return {m.name: m for m in repo.members()}


@settings(max_examples=300, deadline=None)
@given(st.lists(commands(), max_size=40))
def test_a_partial_repository_told_partial_events_holds_its_partial_view(
    cmds: list[dict[str, Any]],
) -> None:
    full = ClusterRepository("CL")
    full.apply(Cmd.join_member("FR1", "FR1_1", "127.0.0.1:1", "REPOS"))
    full.apply(Cmd.join_member("PR", "PR_1", "127.0.0.1:2"))
    partial = ClusterRepository.from_snapshot(full.partial_snapshot("PR"))
    records = held(partial)
    for cmd in cmds:
        result = full.apply(cmd)
        events, records = partial_events(full, "PR", result.events, records)
        for event in events:
            partial.apply_event(event)
        # the same records (heartbeat stamps aside, which are never sent: RepositoryView.diff)
        assert partial.view().diff(full.partial_view("PR")) == [], cmd
        assert records.keys() == held(partial).keys()


def test_a_new_topic_host_arrives_before_its_definition_and_leaves_after_it() -> None:
    full = ClusterRepository("CL")
    for cmd in (
        Cmd.join_member("FR1", "FR1_1", "a:1", "REPOS"),
        Cmd.join_member("PR", "PR_1", "a:2"),
        Cmd.join_member("HOST", "HOST_1", "a:3"),
    ):
        full.apply(cmd)
    records = {m.name: m for m in full.partial_view("PR").members.values()}
    assert "HOST" not in records
    defined = full.apply(Cmd.define_topic("T", "HOST", "A", "CL", "TOPICHOST"))
    events, records = partial_events(full, "PR", defined.events, records)
    assert [
        (e.kind.value, e.member.name if e.member else e.topic and e.topic.name) for e in events
    ] == [
        ("member_joined", "HOST"),
        ("topic_defined", "T"),
    ]
    deleted = full.apply(Cmd.delete_topic("T", "HOST"))
    events, records = partial_events(full, "PR", deleted.events, records)
    assert [e.kind.value for e in events] == ["topic_deleted", "member_removed"]
    assert "HOST" not in records
