"""Proxy subscriptions (reference docs/mq-semantics.md §2.1, §2.2, §3.3-§3.5)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.proxies import (
    ProxyDiff,
    ProxyPlanner,
    ProxyTable,
    may_match_at_or_below,
    proxy_topic,
)
from cluster.records import ClusterTopology, Role
from cluster.repository import ClusterRepository, Cmd
from cluster.topics import TopicObject, topic_matches

C = "DEMO"


def repository(*defs: tuple[str, str, str, str, dict[str, str]]) -> ClusterRepository:
    repo = ClusterRepository(C)
    repo.apply(Cmd.join_member("FR1", "FR1_1", "h", Role.REPOS))
    for name in ("H1", "H2", "S", "P", "Q"):
        repo.apply(Cmd.join_member(name, f"{name}_1", "h"))
    for obj, qmgr, topic_str, route, attrs in defs:
        result = repo.apply(Cmd.define_topic(obj, qmgr, topic_str, C, route, attrs))
        assert result.ok, result.error
    return repo


def planner_for(repo: ClusterRepository, local: str = "S", *objs: TopicObject) -> ProxyPlanner:
    return ProxyPlanner(ClusterTopology.build(local, repo, objs))


def sport_on_h1_h2() -> ClusterRepository:
    return repository(
        ("T1", "H1", "Sport", "TOPICHOST", {}),
        ("T1", "H2", "Sport", "TOPICHOST", {}),
    )


# ------------------------------------------------------------------ aggregation


def test_two_local_subscriptions_on_one_string_make_one_proxy_withdrawn_with_the_last() -> None:
    planner = planner_for(repository(("T1", "H1", "Sport", "TOPICHOST", {})))
    assert planner.subscribe("a", "Sport/Goals") == ProxyDiff(add=(("H1", "Sport/Goals"),))
    assert not planner.subscribe("b", "Sport/Goals")
    assert not planner.unsubscribe("a")
    assert planner.full_set() == [("H1", "Sport/Goals")]
    assert planner.unsubscribe("b") == ProxyDiff(remove=(("H1", "Sport/Goals"),))
    assert planner.full_set() == []
    assert not planner.unsubscribe("never")


def test_resubscribing_with_another_topic_moves_the_proxy() -> None:
    planner = planner_for(repository(("T1", "H1", "Sport", "TOPICHOST", {})))
    planner.subscribe("a", "Sport/Goals")
    diff = planner.subscribe("a", "Sport/Fouls")
    assert diff == ProxyDiff(add=(("H1", "Sport/Fouls"),), remove=(("H1", "Sport/Goals"),))
    assert not planner.subscribe("a", "Sport/Fouls")


@settings(max_examples=80, deadline=None)
@given(
    ops=st.lists(
        st.tuples(
            st.booleans(),
            st.integers(0, 5),
            st.sampled_from(["Sport/a", "Sport/b", "Sport/#", "News/x", "Sport/+/c"]),
            st.booleans(),
        ),
        max_size=40,
    )
)
def test_aggregation_matches_a_set_model(ops: list[tuple[bool, int, str, bool]]) -> None:
    """Whatever the order of (un)subscribes, the proxies are exactly one per distinct topic of
    the live non-QMGR-scoped subscriptions per host, and the diffs add up to that set."""
    planner = planner_for(sport_on_h1_h2())
    model: dict[int, tuple[str, bool]] = {}
    applied: set[tuple[str, str]] = set()
    for subscribe, sub_id, topic, scope_qmgr in ops:
        if subscribe:
            diff = planner.subscribe(sub_id, topic, scope_qmgr=scope_qmgr)
            model[sub_id] = (topic, scope_qmgr)
        else:
            diff = planner.unsubscribe(sub_id)
            model.pop(sub_id, None)
        assert not set(diff.add) & applied
        assert set(diff.remove) <= applied
        applied = (applied - set(diff.remove)) | set(diff.add)
        topics = {t for t, local in model.values() if not local and t.startswith("Sport/")}
        expected = {(h, t) for t in topics for h in ("H1", "H2")}
        assert set(planner.full_set()) == expected == applied


# ------------------------------------------------------------------ destinations


def test_topic_host_routing_sends_proxies_to_the_hosts_only() -> None:
    planner = planner_for(sport_on_h1_h2())
    diff = planner.subscribe("a", "Sport/Goals")
    assert diff.add == (("H1", "Sport/Goals"), ("H2", "Sport/Goals"))
    assert planner.for_peer("H2") == {"Sport/Goals"}
    assert planner.for_peer("P") == frozenset()


def test_direct_routing_sends_proxies_to_every_other_member() -> None:
    planner = planner_for(repository(("T1", "H1", "News", "DIRECT", {})))
    diff = planner.subscribe("a", "News/World")
    assert [peer for peer, _ in diff.add] == ["FR1", "H1", "H2", "P", "Q"]


def test_a_host_subscribing_sends_proxies_to_the_other_hosts_not_itself() -> None:
    repo = sport_on_h1_h2()
    own = TopicObject("T1", "Sport", {"CLUSTER": C, "CLROUTE": "TOPICHOST"})
    planner = planner_for(repo, "H1", own)
    assert planner.subscribe("a", "Sport/#").add == (("H2", "Sport/#"),)


def test_no_proxy_for_subscope_qmgr_on_the_subscription_or_the_topic() -> None:
    planner = planner_for(sport_on_h1_h2())
    assert not planner.subscribe("a", "Sport/Goals", scope_qmgr=True)
    repo = repository(("T1", "H1", "Sport", "TOPICHOST", {"SUBSCOPE": "QMGR"}))
    assert not planner_for(repo).subscribe("a", "Sport/Goals")


def test_no_proxy_for_non_clustered_topics_or_another_clusters_topics() -> None:
    planner = planner_for(sport_on_h1_h2())
    assert not planner.subscribe("a", "Weather/Rain")
    other = TopicObject("X", "Weather", {"CLUSTER": "OTHER", "CLROUTE": "TOPICHOST"})
    planner = planner_for(sport_on_h1_h2(), "S", other)
    assert not planner.subscribe("a", "Weather/Rain")


def test_wildcards_above_every_clustered_point_send_no_proxy() -> None:
    repo = repository(
        ("FOOT", "H1", "Sport/Football", "TOPICHOST", {}),
        ("TENNIS", "H2", "Sport/Tennis", "TOPICHOST", {}),
    )
    planner = planner_for(repo)
    for pattern in ("#", "Sport/#", "Sport/+", "+/Football/#", "Sport/+/Goal"):
        assert not planner.subscribe(pattern, pattern), pattern
    assert planner.subscribe("f", "Sport/Football/#").add == (("H1", "Sport/Football/#"),)
    assert planner.subscribe("t", "Sport/Tennis/+").add == (("H2", "Sport/Tennis/+"),)


def test_wildcard_under_a_point_also_reaches_nested_clustered_points() -> None:
    repo = repository(
        ("SPORT", "H1", "Sport", "TOPICHOST", {}),
        ("FOOT", "H2", "Sport/Football", "TOPICHOST", {}),
    )
    planner = planner_for(repo)
    assert planner.subscribe("all", "Sport/#").add == (("H1", "Sport/#"), ("H2", "Sport/#"))
    assert planner.subscribe("tennis", "Sport/Tennis/#").add == (("H1", "Sport/Tennis/#"),)


def test_char_wildcard_subscriptions_are_proxied_as_topic_wildcards() -> None:
    assert proxy_topic("/aaa/bbb/c*d", char_wildcard=True) == "/aaa/bbb/#"
    assert proxy_topic("Sport/Foot?all/x", char_wildcard=True) == "Sport/#"
    # no unescaped wildcard: the one topic it names, escapes removed
    assert proxy_topic("Sport/100%*/x", char_wildcard=True) == "Sport/100*/x"
    assert proxy_topic("Sport/c*d") == "Sport/c*d"
    planner = planner_for(sport_on_h1_h2())
    assert planner.subscribe("a", "Sport/G*", char_wildcard=True).add == (
        ("H1", "Sport/#"),
        ("H2", "Sport/#"),
    )
    assert not planner.subscribe("b", "Sport/*", char_wildcard=True)  # same proxy topic
    assert not planner.subscribe("c", "Spo*", char_wildcard=True)  # above the point


def test_proxysub_force_sends_a_wildcard_proxy_and_suppresses_covered_ones() -> None:
    repo = repository(("T1", "H1", "Sport", "TOPICHOST", {"PROXYSUB": "FORCE"}))
    planner = planner_for(repo)
    assert planner.full_set() == [("H1", "Sport/#")]
    assert not planner.subscribe("a", "Sport/Goals")
    assert not planner.unsubscribe("a")
    assert planner.full_set() == [("H1", "Sport/#")]


# ------------------------------------------------------------------ topology changes


def test_a_new_host_learns_the_existing_proxies_and_a_removed_one_loses_them() -> None:
    repo = repository(("T1", "H1", "Sport", "TOPICHOST", {}))
    planner = planner_for(repo)
    planner.subscribe("a", "Sport/Goals")
    planner.subscribe("b", "Sport/#")
    planner.subscribe("c", "News")
    repo.apply(Cmd.define_topic("T1", "H2", "Sport", C, "TOPICHOST", {"PUB": "DISABLED"}))
    diff = planner.set_topology(ClusterTopology.build("S", repo))
    assert diff == ProxyDiff(add=(("H2", "Sport/#"), ("H2", "Sport/Goals")))
    repo.apply(Cmd.delete_topic("T1", "H1"))
    diff = planner.set_topology(ClusterTopology.build("S", repo))
    assert diff == ProxyDiff(remove=(("H1", "Sport/#"), ("H1", "Sport/Goals")))
    assert planner.full_set() == [("H2", "Sport/#"), ("H2", "Sport/Goals")]


def test_defining_a_cluster_topic_later_creates_proxies_for_existing_subscriptions() -> None:
    repo = repository()
    planner = planner_for(repo)
    assert not planner.subscribe("a", "Sport/Goals")
    repo.apply(Cmd.define_topic("T1", "H1", "Sport", C, "TOPICHOST"))
    assert planner.set_topology(ClusterTopology.build("S", repo)).add == (("H1", "Sport/Goals"),)
    assert planner.set_topology(ClusterTopology.build("S", repo)) == ProxyDiff()


def test_a_local_non_clustered_object_wins_over_the_cluster_definition() -> None:
    repo = sport_on_h1_h2()
    local = TopicObject("T1", "Sport", {})
    planner = planner_for(repo, "S", local)
    assert not planner.subscribe("a", "Sport/Goals")


# ------------------------------------------------------------------ receiving side


def test_proxy_table_add_remove_and_match() -> None:
    table = ProxyTable()
    assert table.add("S1", "Sport/#")
    assert not table.add("S1", "Sport/#")
    table.add("S2", "Sport/Goals")
    table.add("S2", "Sport/+")
    assert table.match("Sport/Goals") == {"S1", "S2"}
    assert table.match("Sport") == {"S1"}
    assert table.match("News") == set()
    assert len(table) == 3
    assert table.entries() == [("S1", "Sport/#"), ("S2", "Sport/+"), ("S2", "Sport/Goals")]
    assert table.remove("S2", "Sport/Goals") and not table.remove("S2", "Sport/Goals")
    assert table.match("Sport/Goals") == {"S1", "S2"}
    assert table.drop_peer("S2") == {"Sport/+"}
    assert table.match("Sport/Goals") == {"S1"} and table.peers() == ["S1"]


def test_replace_all_reports_what_changed() -> None:
    table = ProxyTable()
    table.add("S1", "a")
    table.add("S1", "b")
    diff = table.replace_all("S1", ["b", "c"])
    assert diff == ProxyDiff(add=(("S1", "c"),), remove=(("S1", "a"),))
    assert table.topics("S1") == {"b", "c"}
    assert table.replace_all("S1", []) == ProxyDiff(remove=(("S1", "b"), ("S1", "c")))
    assert table.peers() == []


LEVEL = st.sampled_from(["a", "b", "+", "#"])
PATTERN = st.lists(LEVEL, min_size=1, max_size=3).map("/".join)
TOPIC = st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=4).map("/".join)


@settings(max_examples=80, deadline=None)
@given(
    entries=st.lists(st.tuples(st.sampled_from(["P1", "P2", "P3"]), PATTERN), max_size=12),
    topic=TOPIC,
)
def test_proxy_table_match_equals_brute_force(entries: list[tuple[str, str]], topic: str) -> None:
    table = ProxyTable()
    for peer, pattern in entries:
        table.add(peer, pattern)
    expected = {peer for peer, pattern in entries if topic_matches(pattern, topic)}
    assert table.match(topic) == expected


@given(pattern=PATTERN, topic=TOPIC, suffix=TOPIC)
def test_may_match_at_or_below(pattern: str, topic: str, suffix: str) -> None:
    if topic_matches(pattern, topic) or topic_matches(pattern, f"{topic}/{suffix}"):
        assert may_match_at_or_below(pattern, topic)
