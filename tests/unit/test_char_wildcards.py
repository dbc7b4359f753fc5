"""The character-based wildcard scheme (WSCHEMA(CHAR), MQSO_WILDCARD_CHAR) as IBM MQ documents it:
matched against the full topic string, ``*`` any characters including ``/``, ``?`` exactly one
character, ``%`` escapes."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from cluster.char_wildcards import (
    char_as_topic_pattern,
    char_literal_prefix,
    char_matches,
    has_char_wildcard,
)
from cluster.topics import topic_matches


def oracle(pattern: str, topic: str) -> bool:
    """Test oracle only: translate to a regular expression with re.escape."""
    out: list[str] = []
    chars = iter(pattern)
    for char in chars:
        if char == "%":
            nxt = next(chars, None)
            out.append(re.escape("%" if nxt is None else nxt))
        elif char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        else:
            out.append(re.escape(char))
    return re.fullmatch("".join(out), topic, re.DOTALL) is not None


def test_documented_examples() -> None:
    assert char_matches("IBM/*ware/Results", "IBM/Software/Results")
    assert char_matches("IBM/*/Results", "IBM/Patents/Software/Results")  # * crosses levels
    assert char_matches("Prices*Apples", "Prices/Fruit/Apples")
    assert char_matches("Pr?ces/Fruit/Apples", "Prices/Fruit/Apples")
    assert char_matches("Pr?ces/*", "Prices/Fruit/Apples")
    assert not char_matches("Prices*Apples", "Prices/Fruit/Pears")
    assert not char_matches("Pr?ces/Fruit/Apples", "Prces/Fruit/Apples")  # ? is exactly one
    assert not char_matches("Pr?ces/Fruit/Apples", "Priices/Fruit/Apples")
    assert char_matches("a?b", "a/b")  # ? is any one character, ``/`` too
    assert char_matches("*", "") and char_matches("*", "any/thing")


def test_escapes_and_topic_scheme_characters_are_literal() -> None:
    assert char_matches("a%*b", "a*b") and not char_matches("a%*b", "axb")
    assert char_matches("a%?b", "a?b") and not char_matches("a%?b", "axb")
    assert char_matches("100%%", "100%")
    assert char_matches("a%", "a%")  # a trailing % stands for itself
    assert char_matches("Sport/#", "Sport/#") and not char_matches("Sport/#", "Sport/Football")
    assert char_matches("a/+/b", "a/+/b") and not char_matches("a/+/b", "a/x/b")
    assert not has_char_wildcard("a%*b/%?") and has_char_wildcard("a%%*")
    assert char_literal_prefix("Pr%*x?y") == "Pr*x"


def test_covering_topic_pattern_is_mqs_proxy_rule() -> None:
    assert char_as_topic_pattern("/aaa/bbb/c*d") == "/aaa/bbb/#"
    assert char_as_topic_pattern("Prices/Fr?it/Apples") == "Prices/#"
    assert char_as_topic_pattern("Prices*Apples") == "#"
    assert char_as_topic_pattern("Prices/Fruit") == "Prices/Fruit"
    assert char_as_topic_pattern("a%/b*") == "a/#"  # an escaped ``/`` still separates levels
    assert char_as_topic_pattern("100%%/x") == "100%/x"


_ALPHABET = st.sampled_from(list("ab/%*?#+"))
_TOPIC_ALPHABET = st.sampled_from(list("ab/%*?#+"))


@given(st.text(_ALPHABET, max_size=10), st.text(_TOPIC_ALPHABET, max_size=12))
def test_matches_the_oracle(pattern: str, topic: str) -> None:
    assert char_matches(pattern, topic) == oracle(pattern, topic)


@given(st.text(_ALPHABET, max_size=8), st.data())
def test_matches_the_topics_it_was_built_from(pattern: str, data: st.DataObject) -> None:
    """Expand each wildcard at random: the resulting topic always matches."""
    out: list[str] = []
    chars = iter(pattern)
    for char in chars:
        if char == "%":
            out.append(next(chars, "%"))
        elif char == "*":
            out.append(data.draw(st.text(_TOPIC_ALPHABET, max_size=4)))
        elif char == "?":
            out.append(data.draw(_TOPIC_ALPHABET))
        else:
            out.append(char)
    assert char_matches(pattern, "".join(out))


@given(st.text(_ALPHABET, max_size=10), st.text(st.sampled_from(list("ab/")), max_size=12))
def test_covering_pattern_covers_every_match(pattern: str, topic: str) -> None:
    """A proxy made from the covering pattern never misses a publication the subscription
    wants (it may bring extra ones, filtered on arrival)."""
    if topic and char_matches(pattern, topic) and has_char_wildcard(pattern):
        assert topic_matches(char_as_topic_pattern(pattern), topic)
