"""TopicMatcher with deep and wildcard-heavy patterns: same answers as the reference matchers,
and pathological subscriptions (``#/#/#/…``, ``#/+/#/+/…``) answered correctly.

Timing is measured in bench/bench_topics.py, never asserted here.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.topics import TopicMatcher, topic_matches
from tests.unit.test_topics import ref_match, regex_match

LEVELS = st.sampled_from(["a", "b", "#", "#", "+", ""])
TOPIC_LEVELS = st.sampled_from(["a", "b", "c", ""])
deep_patterns = st.lists(LEVELS, min_size=1, max_size=12).map("/".join)
deep_topics = st.lists(TOPIC_LEVELS, min_size=1, max_size=14).map("/".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(deep_patterns, min_size=1, max_size=12), st.lists(deep_topics, max_size=8))
def test_deep_wildcard_patterns_match_like_the_reference(
    pattern_list: list[str], topic_list: list[str]
) -> None:
    m: TopicMatcher[int] = TopicMatcher()
    for key, pattern in enumerate(pattern_list):
        m.add(pattern, key)
    for topic in topic_list:
        expected = {k for k, p in enumerate(pattern_list) if ref_match(p, topic)}
        assert {k for k, p in enumerate(pattern_list) if regex_match(p, topic)} == expected
        assert m.match(topic) == expected
        # Matching twice gives the same answer (no state is kept between matches).
        assert m.match(topic) == expected


@settings(max_examples=400, deadline=None)
@given(
    st.lists(deep_patterns, min_size=1, max_size=12),
    st.lists(deep_topics, max_size=8),
    st.integers(min_value=0, max_value=4),
)
def test_patterns_matched_one_by_one_agree_with_the_reference(
    pattern_list: list[str], topic_list: list[str], deep_levels: int
) -> None:
    # A low threshold sends most patterns to the greedy per-pattern matcher.
    m: TopicMatcher[int] = TopicMatcher(deep_levels=deep_levels)
    for key, pattern in enumerate(pattern_list):
        m.add(pattern, key)
    for topic in topic_list:
        assert m.match(topic) == {k for k, p in enumerate(pattern_list) if ref_match(p, topic)}
    for key, pattern in enumerate(pattern_list):
        m.discard(pattern, key)
    assert len(m) == 0 and m.node_count() == 1
    assert all(m.match(topic) == set() for topic in topic_list)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(deep_patterns, min_size=1, max_size=10),
    st.lists(st.integers(min_value=0, max_value=9), max_size=6),
    st.lists(deep_topics, min_size=1, max_size=5),
)
def test_matching_after_discards_follows_the_reference(
    pattern_list: list[str], removed: list[int], topic_list: list[str]
) -> None:
    m: TopicMatcher[int] = TopicMatcher()
    live = dict(enumerate(pattern_list))
    for key, pattern in live.items():
        m.add(pattern, key)
    for key in removed:
        if key in live:
            m.discard(live.pop(key), key)
    for topic in topic_list:
        assert m.match(topic) == {k for k, p in live.items() if ref_match(p, topic)}


def _deep(levels: list[str]) -> str:
    return "/".join(levels)


def test_pathological_hash_chain_subscription() -> None:
    m: TopicMatcher[str] = TopicMatcher()
    m.add(_deep(["#"] * 5000), "hashes")
    m.add(_deep(["#", "+"] * 2500), "hash-plus")
    m.add(_deep(["a", "#"] * 2500), "a-hash")
    m.add(_deep(["#"] * 4000 + ["z"]), "ends-z")
    m.add("a/+/b", "small")
    deep_topic = _deep(["a"] * 5000)
    assert m.match(deep_topic) == {"hashes", "hash-plus", "a-hash"}
    assert m.match(_deep(["a"] * 2499)) == {"hashes"}  # the others need 2,500 levels
    assert m.match("a/x/b") == {"hashes", "small"}
    assert m.match(_deep(["a"] * 4999 + ["z"])) == {"hashes", "hash-plus", "a-hash", "ends-z"}
    assert m.match("z") == {"hashes", "ends-z"}
    assert topic_matches(_deep(["#", "+"] * 50), _deep(["q"] * 60))


def test_pathological_literal_runs_after_a_hash() -> None:
    m: TopicMatcher[str] = TopicMatcher()
    m.add(_deep(["#"] + ["a"] * 5000), "a-run")
    m.add(_deep(["#"] + ["a", "+"] * 2500 + ["b"]), "a-plus-b")
    m.add(_deep(["#", "a", "#"] * 1000 + ["b"]), "hash-a-b")
    assert m.match(_deep(["a"] * 5000)) == {"a-run"}
    assert m.match(_deep(["a"] * 4999)) == set()
    assert m.match(_deep(["x"] + ["a"] * 5000)) == {"a-run"}
    assert m.match(_deep(["a"] * 5001 + ["b"])) == {"a-plus-b", "hash-a-b"}
    assert m.match(_deep(["a"] * 5000 + ["b"])) == {"a-plus-b", "hash-a-b"}
    assert m.match(_deep(["a"] * 4999 + ["b"])) == {"hash-a-b"}  # a-plus-b needs 5,001 levels
    assert m.match(_deep(["a"] * 999 + ["b"])) == set()


def test_hash_with_a_pattern_ending_midway_is_not_dropped() -> None:
    # 'a' ends at a node inside a '#' chain's ancestry: that node must stay live.
    m: TopicMatcher[str] = TopicMatcher()
    m.add("#/a", "x")
    m.add("#/a/#/b", "y")
    assert m.match("a") == {"x"}
    assert m.match("q/a/r/b") == {"y"}
    assert m.match("q/a") == {"x"}
    assert m.match("a/b") == {"y"}


def test_long_patterns_with_a_late_hash_stay_in_the_trie() -> None:
    m: TopicMatcher[str] = TopicMatcher()
    prefix = [f"l{i}" for i in range(40)]
    m.add(_deep([*prefix, "#"]), "late-hash")  # 40 fixed levels, then '#'
    m.add(_deep(["#", *prefix]), "early-hash")  # 40 levels after '#': matched on its own
    assert m.node_count() == 1 + 41
    assert m.match(_deep(prefix)) == {"late-hash", "early-hash"}
    assert m.match(_deep([*prefix, "x", "y"])) == {"late-hash"}
    assert m.match(_deep(["x", *prefix])) == {"early-hash"}
    assert m.discard(_deep(["#", *prefix]), "early-hash")
    assert m.match(_deep(prefix)) == {"late-hash"}
