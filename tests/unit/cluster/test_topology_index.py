"""``TopologyIndex``: the topology kept current name by name is the one ``ClusterTopology.build``
makes from scratch, after every change of the repository or of the node's own objects."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.proxies import ProxyPlanner
from cluster.records import ClusterTopology
from cluster.repository import ClusterRepository, Cmd, partial_events
from cluster.topics import TopicObject
from cluster.topology import TopologyIndex

QMGRS = ["LOCAL", "QM1", "QM2", "QM3"]
NAMES = ["T1", "T2", "T3", "T4"]
STRINGS = ["A", "A/B", "C", "D"]
SUBSCRIPTIONS = ["A/#", "A/B", "A/B/x", "C", "#", "D/+", "E"]


def members_repo() -> ClusterRepository:
    repo = ClusterRepository("CL")
    for q in QMGRS:
        repo.apply(Cmd.join_member(q, f"{q}_1", "a:1"))
    return repo


class Applied:
    """An index over ``repo`` told of each command applied to it."""

    def __init__(self, repo: ClusterRepository) -> None:
        self.repo = repo
        self.index = TopologyIndex("LOCAL", repo, [])

    def __call__(self, cmd: dict[str, Any]) -> set[str]:
        names, members = self.index.changed_names(self.repo.apply(cmd).events)
        self.index.update(names, members)
        return names


def repo_commands() -> st.SearchStrategy[dict[str, Any]]:
    name, qmgr = st.sampled_from(NAMES), st.sampled_from(QMGRS[1:])
    return st.one_of(
        st.builds(
            lambda n, q, s, r, p: Cmd.define_topic(n, q, s, "CL", r, {"PUB": p}, "", True),
            name,
            qmgr,
            st.sampled_from(STRINGS),
            st.sampled_from(["DIRECT", "TOPICHOST"]),
            st.sampled_from(["ENABLED", "DISABLED"]),
        ),
        st.builds(lambda n, q, d: Cmd.alter_topic(n, q, {}, d), name, qmgr, st.text(max_size=2)),
        st.builds(Cmd.delete_topic, name, qmgr),
        st.builds(Cmd.leave_member, qmgr),
        st.builds(lambda q: Cmd.join_member(q, f"{q}_1", "a:1"), qmgr),
        st.builds(Cmd.suspend_member, qmgr),
        st.builds(lambda q, w: Cmd.set_workload(q, CLWLWGHT=w), qmgr, st.integers(1, 99)),
        st.builds(
            lambda n, q, s: Cmd.define_topic(n, q, s, "CL", "DIRECT", {"PROXYSUB": "FORCE"}),
            name,
            qmgr,
            st.sampled_from(STRINGS),
        ),
    )


def local_changes() -> st.SearchStrategy[tuple[str, str | None]]:
    """(name, TOPICSTR) defines or replaces a local object; (name, None) deletes it."""
    return st.tuples(st.sampled_from(NAMES), st.one_of(st.none(), st.sampled_from(STRINGS)))


def shape(topology: ClusterTopology) -> tuple[Any, ...]:
    objects = {
        (o.name, o.topic_str, tuple(sorted(o.attrs.items())), o.descr)
        for o in topology.objects.all()
    }
    return objects, dict(topology.hosts), topology.members


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(repo_commands(), local_changes()), max_size=30))
def test_the_index_kept_current_is_the_topology_built_from_scratch(changes: list[Any]) -> None:
    repo = members_repo()
    local: dict[str, TopicObject] = {}
    index = TopologyIndex("LOCAL", repo, local.values())
    planner = ProxyPlanner(index.topology)
    for sub in SUBSCRIPTIONS:
        planner.subscribe(sub, sub)
    for change in changes:
        members = False
        if isinstance(change, dict):
            result = repo.apply(change)
            names, members = index.changed_names(result.events)
        else:
            name, topic_str = change
            if topic_str is None:
                local.pop(name, None)
            elif any(o.topic_str == topic_str and o.name != name for o in local.values()):
                continue  # a node's own objects never share a TOPICSTR
            else:
                old = local.get(name)
                if old is not None and old.topic_str != topic_str:
                    continue  # TOPICSTR cannot change
                local[name] = TopicObject(name, topic_str, {"CLUSTER": "CL"})
            index.set_local({name}, local)
            names = {name}
        changed, touched = index.update(names, members)
        strs = touched | {o.topic_str for n in changed if (o := index.objects.get(n))}
        planner.update_topology(index.topology, changed, strs, members)
        built = ClusterTopology.build("LOCAL", repo, local.values())
        assert shape(index.topology) == shape(built), change
        fresh = ProxyPlanner(built)
        for sub in SUBSCRIPTIONS:
            fresh.subscribe(sub, sub)
        assert planner.full_set() == fresh.full_set(), change


def test_a_name_blocked_at_its_topicstr_takes_it_when_the_earlier_one_leaves() -> None:
    repo = members_repo()
    apply = Applied(repo)
    index = apply.index

    apply(Cmd.define_topic("T1", "QM1", "S", "CL", "TOPICHOST"))
    apply(Cmd.define_topic("T2", "QM2", "S", "CL", "TOPICHOST"))
    assert index.objects.at("S").name == "T1"  # type: ignore[union-attr]
    assert index.objects.get("T2") is None
    apply(Cmd.define_topic("T2", "QM3", "R", "CL", "TOPICHOST"))
    apply(Cmd.delete_topic("T1", "QM1"))
    assert index.objects.at("S").name == "T2"  # type: ignore[union-attr]
    # a local object takes the TOPICSTR from any remote copy, which falls back on its next
    index.set_local({"L"}, {"L": TopicObject("L", "S", {})})
    index.update({"L"})
    assert index.objects.at("S").name == "L"  # type: ignore[union-attr]
    assert index.objects.get("T2").topic_str == "R"  # type: ignore[union-attr]
    assert shape(index.topology) == shape(
        ClusterTopology.build("LOCAL", repo, [TopicObject("L", "S", {})])
    )


def test_a_name_whose_earliest_copy_leaves_gives_its_topicstr_to_an_earlier_name() -> None:
    """T2 keeps 'D' by its first copy (QM3's); T1, defined after that but before QM2's copy of
    T2, waits. When QM3 leaves, T2's object is unchanged (QM2's copy is the same definition),
    but it now comes after T1, which takes 'D'."""
    repo = members_repo()
    apply = Applied(repo)
    index = apply.index

    apply(Cmd.define_topic("T2", "QM3", "D", "CL", "DIRECT", {"PROXYSUB": "FORCE"}))
    apply(Cmd.define_topic("T1", "QM1", "D", "CL", "DIRECT"))
    apply(Cmd.define_topic("T2", "QM2", "D", "CL", "DIRECT", {"PROXYSUB": "FORCE"}))
    assert index.objects.at("D").name == "T2"  # type: ignore[union-attr]
    apply(Cmd.leave_member("QM3"))
    assert index.objects.at("D").name == "T1"  # type: ignore[union-attr]
    assert index.objects.get("T2") is None
    assert shape(index.topology) == shape(ClusterTopology.build("LOCAL", repo, []))


@settings(max_examples=300, deadline=None)
@given(st.lists(repo_commands(), max_size=30))
def test_a_partial_copy_kept_by_events_gives_the_topology_built_from_scratch(
    commands: list[dict[str, Any]],
) -> None:
    """On a partial repository the member records come and go with the topics they host
    (``partial_events``): a host whose last definition goes is removed from the copy, and the
    index, told of that removal, still holds what a build from scratch holds."""
    full = members_repo()
    copy = ClusterRepository.from_snapshot(full.partial_snapshot("LOCAL"))
    held = {m.name: m for m in copy.members()}
    index = TopologyIndex("LOCAL", copy, [])
    for command in commands:
        events, held = partial_events(full, "LOCAL", full.apply(command).events, held)
        for event in events:
            copy.apply_event(event)
        names, members = index.changed_names(events)
        index.update(names, members)
        built = ClusterTopology.build("LOCAL", copy, [])
        assert shape(index.topology) == shape(built), command


def test_a_member_leaving_a_partial_copy_touches_only_what_it_hosted() -> None:
    """The removal of a member's record (its last definition deleted) is worked out from the
    names it hosted, not from every name known."""
    repo = members_repo()
    for i in range(50):
        repo.apply(Cmd.define_topic(f"F{i}", "QM1", f"F/{i}", "CL", "TOPICHOST"))
    apply = Applied(repo)
    index = apply.index

    assert apply(Cmd.define_topic("ONE", "QM2", "One", "CL", "TOPICHOST")) == {"ONE"}
    assert index.topology.hosts["ONE"][0].qmgr == "QM2"
    assert apply(Cmd.leave_member("QM2")) == {"ONE"}
    assert "ONE" not in index.topology.hosts
    assert apply(Cmd.leave_member("QM3")) == set()
    assert len(apply(Cmd.leave_member("QM1"))) == 50
    assert not index.topology.hosts
