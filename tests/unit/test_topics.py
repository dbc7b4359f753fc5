"""Topic strings, validation and '#'/'+' matching (docs/mq-semantics.md §3.1, §3.5)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.topics import (
    MAX_TOPIC_LENGTH,
    TopicMatcher,
    TopicStringError,
    ancestors,
    is_at_or_above,
    is_wildcard,
    levels,
    topic_matches,
    validate_publish_topic,
    validate_subscription_topic,
    wildcard_prefix,
)

# --- reference matchers written independently of the implementation -----------------------


def ref_match_levels(pat: list[str], top: list[str]) -> bool:
    """Straight recursion on the definition: '#' = zero or more levels, '+' = one level."""
    if not pat:
        return not top
    head = pat[0]
    if head == "#":
        return ref_match_levels(pat[1:], top) or (bool(top) and ref_match_levels(pat, top[1:]))
    if not top:
        return False
    if head == "+" or head == top[0]:
        return ref_match_levels(pat[1:], top[1:])
    return False


def ref_match(pattern: str, topic: str) -> bool:
    return ref_match_levels(pattern.split("/"), topic.split("/"))


END = "\x01"  # every level is written followed by END, so '/' never needs special handling


def regex_match(pattern: str, topic: str) -> bool:
    parts = []
    for level in pattern.split("/"):
        if level == "#":
            parts.append(f"(?:[^{END}]*{END})*")
        elif level == "+":
            parts.append(f"[^{END}]*{END}")
        else:
            parts.append(re.escape(level) + END)
    encoded = "".join(level + END for level in topic.split("/"))
    return re.fullmatch("".join(parts), encoded) is not None


# --- levels and helpers -------------------------------------------------------------------


def test_levels_split_on_slash_keeping_empty_levels() -> None:
    assert levels("a/b/c") == ["a", "b", "c"]
    assert levels("a//b") == ["a", "", "b"]
    assert levels("/a") == ["", "a"]
    assert levels("a/") == ["a", ""]
    assert levels("a") == ["a"]


def test_is_wildcard_only_for_whole_levels() -> None:
    assert is_wildcard("#")
    assert is_wildcard("+")
    assert is_wildcard("a/+/b")
    assert is_wildcard("a/#")
    assert not is_wildcard("a#")
    assert not is_wildcard("+x")
    assert not is_wildcard("a/b#c/+d")
    assert not is_wildcard("Sport/Football")


def test_wildcard_prefix_is_the_part_before_the_first_wildcard_level() -> None:
    assert wildcard_prefix("Sport/+/Goals") == "Sport"
    assert wildcard_prefix("Sport/Football/#") == "Sport/Football"
    assert wildcard_prefix("#") == ""
    assert wildcard_prefix("/#") == ""
    assert wildcard_prefix("a#/b") == "a#/b"


def test_ancestors_walk_level_prefixes_up_to_the_root() -> None:
    assert list(ancestors("a/b/c")) == ["a/b/c", "a/b", "a", ""]
    assert list(ancestors("/a")) == ["/a", ""]
    assert list(ancestors("")) == [""]


def test_at_or_above_is_level_prefix_not_string_prefix() -> None:
    assert is_at_or_above("Sport", "Sport/Football")
    assert is_at_or_above("Sport", "Sport")
    assert not is_at_or_above("Sport", "Sports")
    assert not is_at_or_above("Sport/Football", "Sport")
    assert is_at_or_above("", "anything/at/all")
    assert not is_at_or_above("a", "/a")


# --- documented matching examples ---------------------------------------------------------


@pytest.mark.parametrize("topic", ["USA", "USA/Alaska", "USA/Alaska/Juneau"])
def test_hash_matches_zero_or_more_levels(topic: str) -> None:
    assert topic_matches("USA/#", topic)


def test_hash_does_not_match_a_different_first_level() -> None:
    assert not topic_matches("USA/#", "USAF")
    assert not topic_matches("USA/#", "Canada/USA")


def test_plus_matches_exactly_one_level() -> None:
    assert topic_matches("IBM/+/Results", "IBM/Software/Results")
    assert not topic_matches("IBM/+/Results", "IBM/a/b/Results")
    assert not topic_matches("IBM/+/Results", "IBM/Results")


def test_wildcard_characters_mixed_into_a_level_are_literal() -> None:
    assert topic_matches("a#", "a#")
    assert not topic_matches("a#", "a")
    assert not topic_matches("a#", "a/b")
    assert topic_matches("+x", "+x")
    assert not topic_matches("+x", "ax")
    assert topic_matches("a/b#/+", "a/b#/c")
    assert not topic_matches("a/b#/+", "a/bc/c")


def test_matching_is_case_sensitive() -> None:
    assert not topic_matches("Sport/Football", "sport/football")
    assert not topic_matches("Sport/#", "SPORT/Football")
    assert topic_matches("Sport/+", "Sport/FOOTBALL")


def test_leading_slash_makes_a_different_topic() -> None:
    assert not topic_matches("a", "/a")
    assert not topic_matches("/a", "a")
    assert topic_matches("/a", "/a")
    assert topic_matches("+/a", "/a")  # the empty first level is a level
    assert not topic_matches("+", "/a")
    assert topic_matches("/#", "/a/b")
    assert not topic_matches("/#", "a/b")


def test_hash_alone_matches_everything() -> None:
    for topic in ["a", "a/b/c", "/a", "a//b", "#x"]:
        assert topic_matches("#", topic)


def test_plus_plus_matches_exactly_two_levels() -> None:
    assert topic_matches("+/+", "a/b")
    assert topic_matches("+/+", "/b")
    assert topic_matches("+/+", "a/")
    assert not topic_matches("+/+", "a")
    assert not topic_matches("+/+", "a/b/c")


def test_hash_in_the_middle() -> None:
    assert topic_matches("a/#/b", "a/b")
    assert topic_matches("a/#/b", "a/x/b")
    assert topic_matches("a/#/b", "a/x/y/b")
    assert not topic_matches("a/#/b", "a/x/y")
    assert not topic_matches("a/#/b", "b/a/b")
    assert topic_matches("#/b", "b")
    assert topic_matches("#/b", "x/y/b")
    assert topic_matches("a/#/#", "a")


def test_empty_levels_match_literally() -> None:
    assert topic_matches("a//b", "a//b")
    assert not topic_matches("a//b", "a/b")
    assert topic_matches("a/+/b", "a//b")


# --- validation ---------------------------------------------------------------------------


def test_valid_topics_are_returned_unchanged() -> None:
    assert validate_publish_topic("Sport/Football") == "Sport/Football"
    assert validate_publish_topic("a#/+x/ü/ /") == "a#/+x/ü/ /"
    assert validate_subscription_topic("Sport/#") == "Sport/#"
    assert validate_subscription_topic("+/+") == "+/+"
    assert validate_publish_topic("x" * MAX_TOPIC_LENGTH) == "x" * MAX_TOPIC_LENGTH


@pytest.mark.parametrize("validate", [validate_publish_topic, validate_subscription_topic])
def test_empty_topic_is_rejected(validate) -> None:
    with pytest.raises(TopicStringError) as info:
        validate("")
    assert info.value.reason_code == 2425
    assert "empty" in info.value.reason


@pytest.mark.parametrize("validate", [validate_publish_topic, validate_subscription_topic])
def test_too_long_topic_is_rejected(validate) -> None:
    with pytest.raises(TopicStringError) as info:
        validate("x" * (MAX_TOPIC_LENGTH + 1))
    assert info.value.reason_code == 2425
    assert "10240" in info.value.reason and "10241" in info.value.reason


@pytest.mark.parametrize("validate", [validate_publish_topic, validate_subscription_topic])
def test_nul_is_rejected(validate) -> None:
    with pytest.raises(TopicStringError) as info:
        validate("a/b\x00c")
    assert "NUL" in info.value.reason


@pytest.mark.parametrize("topic", ["#", "+", "a/#", "a/+/b", "/+"])
def test_publication_topics_cannot_carry_wildcards(topic: str) -> None:
    with pytest.raises(TopicStringError) as info:
        validate_publish_topic(topic)
    assert "wildcard" in info.value.reason
    assert isinstance(info.value, ValueError)
    assert str(info.value) == info.value.reason
    assert info.value.topic == topic


# --- TopicMatcher -------------------------------------------------------------------------


def test_matcher_basic_add_match_discard() -> None:
    m: TopicMatcher[str] = TopicMatcher()
    m.add("USA/#", "s1")
    m.add("IBM/+/Results", "s2")
    m.add("IBM/Software/Results", "s3")
    m.add("IBM/Software/Results", "s4")  # two keys share a pattern
    m.add("#", "s1")  # one key under two patterns
    assert len(m) == 5
    assert m.match("USA/Alaska/Juneau") == {"s1"}
    assert m.match("IBM/Software/Results") == {"s1", "s2", "s3", "s4"}
    assert m.match("IBM/Results") == {"s1"}
    assert m.patterns() == {"USA/#", "IBM/+/Results", "IBM/Software/Results", "#"}
    assert m.discard("IBM/Software/Results", "s3")
    assert not m.discard("IBM/Software/Results", "s3")
    assert not m.discard("nope", "s1")
    assert m.match("IBM/Software/Results") == {"s1", "s2", "s4"}
    assert len(m) == 4


def test_matcher_add_is_idempotent() -> None:
    m: TopicMatcher[int] = TopicMatcher()
    m.add("a/b", 1)
    m.add("a/b", 1)
    assert len(m) == 1
    assert m.discard("a/b", 1)
    assert len(m) == 0
    assert m.match("a/b") == set()


def test_matcher_prunes_empty_nodes() -> None:
    m: TopicMatcher[int] = TopicMatcher()
    m.add("a/b/c/d", 1)
    m.add("a/b", 2)
    assert m.node_count() == 5
    m.discard("a/b/c/d", 1)
    assert m.node_count() == 3  # root, a, a/b stay because a/b has a key
    m.discard("a/b", 2)
    assert m.node_count() == 1
    assert m.patterns() == set()


def test_matcher_documented_examples() -> None:
    m: TopicMatcher[str] = TopicMatcher()
    for pattern in ["USA/#", "IBM/+/Results", "a#", "+x", "#", "+/+", "a/#/b", "/a", "a"]:
        m.add(pattern, pattern)
    assert m.match("USA") == {"USA/#", "#"}
    assert m.match("USA/Alaska") == {"USA/#", "#", "+/+"}
    assert m.match("USA/Alaska/Juneau") == {"USA/#", "#"}
    assert m.match("IBM/a/b/Results") == {"#"}
    assert m.match("a#") == {"a#", "#"}
    assert m.match("+x") == {"+x", "#"}
    assert m.match("a/b") == {"#", "+/+", "a/#/b"}
    assert m.match("/a") == {"/a", "#", "+/+"}
    assert m.match("a") == {"a", "#"}


def test_matcher_with_many_patterns_only_returns_matching_keys() -> None:
    m: TopicMatcher[int] = TopicMatcher()
    for i in range(2000):
        m.add(f"t/{i}/x", i)
    m.add("t/+/x", -1)
    assert m.match("t/1234/x") == {1234, -1}
    assert m.match("t/1234") == set()


# --- property-based: implementation vs the reference matchers ----------------------------

PATTERN_LEVELS = st.sampled_from(["", "a", "b", "#", "+", "a#", "+x"])
TOPIC_LEVELS = st.sampled_from(["", "a", "b", "a#", "+x", "c"])
patterns = st.lists(PATTERN_LEVELS, min_size=1, max_size=6).map("/".join)
topics = st.lists(TOPIC_LEVELS, min_size=1, max_size=6).map("/".join)


@settings(max_examples=400, deadline=None)
@given(patterns, topics)
def test_topic_matches_agrees_with_reference(pattern: str, topic: str) -> None:
    expected = ref_match(pattern, topic)
    assert regex_match(pattern, topic) == expected
    assert topic_matches(pattern, topic) == expected


@settings(max_examples=150, deadline=None)
@given(st.lists(patterns, min_size=0, max_size=25), st.lists(topics, min_size=1, max_size=10))
def test_matcher_match_equals_reference(pattern_list: list[str], topic_list: list[str]) -> None:
    m: TopicMatcher[int] = TopicMatcher()
    for key, pattern in enumerate(pattern_list):
        m.add(pattern, key)
    for topic in topic_list:
        expected = {k for k, p in enumerate(pattern_list) if ref_match(p, topic)}
        assert m.match(topic) == expected


def _prefix_nodes(pattern_set: set[str]) -> int:
    """Trie size the model predicts: root + one node per distinct level-prefix."""
    prefixes = set()
    for pattern in pattern_set:
        parts = pattern.split("/")
        for i in range(1, len(parts) + 1):
            prefixes.add(tuple(parts[:i]))
    return 1 + len(prefixes)


operations = st.lists(
    st.tuples(st.booleans(), patterns, st.integers(min_value=0, max_value=3)), max_size=40
)


@settings(max_examples=150, deadline=None)
@given(operations, st.lists(topics, min_size=1, max_size=5))
def test_add_discard_sequences_follow_a_set_model(ops, topic_list: list[str]) -> None:
    m: TopicMatcher[int] = TopicMatcher()
    model: set[tuple[str, int]] = set()
    for is_add, pattern, key in ops:
        if is_add:
            m.add(pattern, key)
            model.add((pattern, key))
        else:
            assert m.discard(pattern, key) == ((pattern, key) in model)
            model.discard((pattern, key))
        assert len(m) == len(model)
        assert m.patterns() == {p for p, _ in model}
        assert m.has(pattern, key) == ((pattern, key) in model)
        assert m.node_count() == _prefix_nodes({p for p, _ in model})
        for topic in topic_list:
            assert m.match(topic) == {k for p, k in model if ref_match(p, topic)}
    assert sorted(m.pairs()) == sorted(model)
    for pattern, key in sorted(model):
        assert m.discard(pattern, key)
    assert len(m) == 0
    assert m.node_count() == 1
