"""MQ's cluster workload algorithm applied to topic hosts (reference docs/mq-semantics.md §2.3)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cluster.records import ChannelStatus, TopicHost, WorkloadAttrs
from cluster.workload import (
    HostCandidate,
    QueuedPublication,
    SendState,
    WorkloadBalancer,
    channel_class,
    redrive,
    shortlist,
)

S = ChannelStatus


def picks(balancer: WorkloadBalancer, cands: list[HostCandidate], n: int) -> list[str]:
    out = []
    for _ in range(n):
        chosen = balancer.choose(cands)
        assert chosen is not None
        out.append(chosen.name)
    return out


def test_pub_disabled_hosts_are_never_chosen() -> None:
    cands = [HostCandidate("A", pub_enabled=False), HostCandidate("B")]
    assert set(picks(WorkloadBalancer(), cands, 5)) == {"B"}


def test_all_pub_disabled_gives_none() -> None:
    assert WorkloadBalancer().choose([HostCandidate("A", pub_enabled=False)]) is None
    assert WorkloadBalancer().choose([]) is None


def test_highest_rank_wins_even_when_its_channel_is_down() -> None:
    cands = [HostCandidate("A", rank=1, channel=S.STOPPED), HostCandidate("B", rank=0)]
    assert picks(WorkloadBalancer(), cands, 3) == ["A", "A", "A"]


def test_resumed_hosts_are_preferred_over_suspended() -> None:
    cands = [HostCandidate("A", suspended=True), HostCandidate("B")]
    assert picks(WorkloadBalancer(), cands, 3) == ["B", "B", "B"]
    both = [HostCandidate("A", suspended=True), HostCandidate("B", suspended=True)]
    assert picks(WorkloadBalancer(), both, 4) == ["A", "B", "A", "B"]


def test_suspension_applies_after_rank() -> None:
    cands = [HostCandidate("A", rank=2, suspended=True), HostCandidate("B", rank=1)]
    assert picks(WorkloadBalancer(), cands, 2) == ["A", "A"]


@pytest.mark.parametrize(
    ("better", "worse"),
    [
        (S.RUNNING, S.STARTING),
        (S.INACTIVE, S.BINDING),
        (S.STOPPING, S.RETRYING),
        (S.INITIALIZING, S.RETRYING),
        (S.RETRYING, S.STOPPED),
        (S.RETRYING, S.PAUSED),
        (S.RETRYING, S.REQUESTING),
    ],
)
def test_channel_state_classes(better: ChannelStatus, worse: ChannelStatus) -> None:
    cands = [HostCandidate("A", channel=worse), HostCandidate("B", channel=better)]
    assert picks(WorkloadBalancer(), cands, 3) == ["B", "B", "B"]


@pytest.mark.parametrize(
    "group",
    [
        (S.INACTIVE, S.RUNNING),
        (S.BINDING, S.INITIALIZING, S.STARTING, S.STOPPING),
        (S.REQUESTING, S.PAUSED, S.STOPPED),
    ],
)
def test_states_within_one_class_are_equal(group: tuple[ChannelStatus, ...]) -> None:
    assert len({channel_class(s) for s in group}) == 1
    cands = [HostCandidate(f"H{i}", channel=s) for i, s in enumerate(group)]
    assert sorted(picks(WorkloadBalancer(), cands, len(group))) == [c.name for c in cands]


def test_priority_after_status_gives_failover_and_failback() -> None:
    balancer = WorkloadBalancer()
    primary = HostCandidate("A", priority=5)
    backup = HostCandidate("B", priority=0)
    assert picks(balancer, [primary, backup], 3) == ["A", "A", "A"]
    down = HostCandidate("A", priority=5, channel=S.RETRYING)
    assert picks(balancer, [down, backup], 2) == ["B", "B"]
    assert picks(balancer, [primary, backup], 2) == ["A", "A"]


def test_netprty_comes_before_clwlprty() -> None:
    cands = [HostCandidate("A", netprty=1, priority=0), HostCandidate("B", priority=9)]
    assert picks(WorkloadBalancer(), cands, 2) == ["A", "A"]


def test_rank_comes_before_priority() -> None:
    cands = [HostCandidate("A", rank=1), HostCandidate("B", priority=9)]
    assert picks(WorkloadBalancer(), cands, 2) == ["A", "A"]


def test_weights_one_to_two_split_one_to_two() -> None:
    cands = [HostCandidate("A", weight=1), HostCandidate("B", weight=2)]
    got = picks(WorkloadBalancer(), cands, 300)
    assert Counter(got) == {"A": 100, "B": 200}
    # and it interleaves rather than sending runs
    assert got[:6] == ["A", "B", "B", "A", "B", "B"]


def test_weights_proportional_for_default_and_uneven_weights() -> None:
    cands = [HostCandidate("A", weight=50), HostCandidate("B", weight=25)]
    assert Counter(picks(WorkloadBalancer(), cands, 90)) == {"A": 60, "B": 30}


@given(n=st.integers(1, 6), rounds=st.integers(1, 8), weight=st.integers(1, 99))
def test_equal_weights_give_exact_round_robin(n: int, rounds: int, weight: int) -> None:
    cands = [HostCandidate(f"H{i}", weight=weight) for i in range(n)]
    got = picks(WorkloadBalancer(), cands, n * rounds)
    assert got == [c.name for c in cands] * rounds


@given(weights=st.lists(st.integers(1, 99), min_size=1, max_size=5), cycles=st.integers(1, 3))
def test_shares_follow_weights_exactly_over_whole_cycles(weights: list[int], cycles: int) -> None:
    """After cycles * sum(weights) choices each host was chosen cycles * weight times."""
    cands = [HostCandidate(f"H{i}", weight=w) for i, w in enumerate(weights)]
    counts = Counter(picks(WorkloadBalancer(), cands, cycles * sum(weights)))
    assert counts == {c.name: cycles * c.weight for c in cands}


def test_groups_keep_independent_rotations() -> None:
    balancer = WorkloadBalancer()
    ab = [HostCandidate("A"), HostCandidate("B")]
    out = []
    for _ in range(2):
        for group in ("T1", "T2"):
            chosen = balancer.choose(ab, group=group)
            assert chosen is not None
            out.append(chosen.name)
    assert out == ["A", "A", "B", "B"]


def test_factors_reset_when_destinations_or_attributes_change() -> None:
    balancer = WorkloadBalancer()
    picks(balancer, [HostCandidate("A"), HostCandidate("B")], 3)
    assert balancer.factors() != {}
    changed = [HostCandidate("A", weight=10), HostCandidate("B")]
    assert balancer.choose(changed) is not None
    assert set(balancer.factors()) == {"A"}  # fresh state: only the one choice made


def test_channel_status_change_does_not_reset_rotation() -> None:
    balancer = WorkloadBalancer()
    assert picks(balancer, [HostCandidate("A"), HostCandidate("B")], 1) == ["A"]
    flapping = [HostCandidate("A", channel=S.RUNNING), HostCandidate("B", channel=S.RUNNING)]
    assert picks(balancer, flapping, 1) == ["B"]


def test_returning_host_rejoins_the_rotation_without_a_burst() -> None:
    balancer = WorkloadBalancer()
    up = [HostCandidate("A"), HostCandidate("B")]
    b_down = [HostCandidate("A"), HostCandidate("B", channel=S.RETRYING)]
    picks(balancer, up, 2)
    assert picks(balancer, b_down, 10) == ["A"] * 10
    assert picks(balancer, up, 4) in (["A", "B", "A", "B"], ["B", "A", "B", "A"])


def test_choice_is_deterministic() -> None:
    cands = [HostCandidate(n, weight=w) for n, w in (("X", 7), ("Y", 13), ("Z", 50))]
    assert picks(WorkloadBalancer(), cands, 200) == picks(WorkloadBalancer(), cands, 200)


def test_candidate_from_topic_host_record() -> None:
    host = TopicHost("H", False, WorkloadAttrs(3, 4, 5, 6), True)
    cand = HostCandidate.from_host(host, S.RETRYING)
    assert (cand.rank, cand.priority, cand.weight, cand.netprty) == (3, 4, 5, 6)
    assert cand.suspended and not cand.pub_enabled and cand.channel is S.RETRYING
    assert shortlist([cand]) == []


# ------------------------------------------------------------------ re-driving on host failure


def queued() -> list[QueuedPublication]:
    return [
        QueuedPublication("p1", "H1", SendState.ACKNOWLEDGED, "T"),
        QueuedPublication("p2", "H1", SendState.IN_DOUBT, "T"),
        QueuedPublication("p3", "H1", SendState.UNSENT, "T"),
        QueuedPublication("p4", "H2", SendState.UNSENT, "T"),
        QueuedPublication("p5", "H1", SendState.UNSENT, "T"),
    ]


def test_redrive_moves_unsent_waits_in_doubt_and_never_resends_acknowledged() -> None:
    hosts = {"T": [HostCandidate("H1", channel=S.RETRYING), HostCandidate("H2")]}
    plan = redrive(queued(), "H1", hosts, WorkloadBalancer())
    assert plan.reassign == {"p3": "H2", "p5": "H2"}
    assert plan.wait == ("p2",)
    assert plan.done == ("p1",)
    assert plan.in_doubt_redriven == frozenset()


def test_redrive_round_robins_over_the_surviving_hosts() -> None:
    hosts = {
        "T": [HostCandidate("H1", channel=S.STOPPED), HostCandidate("H2"), HostCandidate("H3")]
    }
    pubs = [QueuedPublication(f"p{i}", "H1", SendState.UNSENT, "T") for i in range(4)]
    plan = redrive(pubs, "H1", hosts, WorkloadBalancer())
    assert list(plan.reassign.values()) == ["H2", "H3", "H2", "H3"]


def test_redrive_waits_when_the_dead_host_is_the_only_or_highest_ranked_host() -> None:
    only = {"T": [HostCandidate("H1", channel=S.RETRYING)]}
    assert redrive(queued(), "H1", only, WorkloadBalancer()).wait == ("p2", "p3", "p5")
    ranked = {"T": [HostCandidate("H1", rank=5, channel=S.RETRYING), HostCandidate("H2")]}
    plan = redrive(queued(), "H1", ranked, WorkloadBalancer())
    assert plan.reassign == {} and plan.wait == ("p2", "p3", "p5")


def test_in_doubt_is_redriven_only_when_the_host_is_gone_and_flagged() -> None:
    gone = {"T": [HostCandidate("H2")]}
    plan = redrive(queued(), "H1", gone, WorkloadBalancer())
    assert plan.reassign == {"p2": "H2", "p3": "H2", "p5": "H2"}
    assert plan.in_doubt_redriven == frozenset({"p2"})
    assert "p1" not in plan.reassign and plan.done == ("p1",)


@given(
    states=st.lists(st.sampled_from(list(SendState)), max_size=20),
    alive=st.booleans(),
)
def test_redrive_never_reassigns_acknowledged(states: list[SendState], alive: bool) -> None:
    pubs = [QueuedPublication(f"p{i}", "H1", s, "T") for i, s in enumerate(states)]
    hosts = [HostCandidate("H2")] + ([HostCandidate("H1", channel=S.RETRYING)] if alive else [])
    plan = redrive(pubs, "H1", {"T": hosts}, WorkloadBalancer())
    acked = {p.pub_id for p in pubs if p.state is SendState.ACKNOWLEDGED}
    assert not acked & set(plan.reassign)
    assert set(plan.done) == acked
    # every publication gets exactly one outcome
    outcomes = [*plan.reassign, *plan.wait, *plan.done]
    assert sorted(outcomes) == sorted(p.pub_id for p in pubs)
