"""Topic strings: levels, validation and the topic-based wildcard scheme (pure).

Rules (reference docs/mq-semantics.md §3.1, §3.5):

- ``/`` separates levels; matching is case-sensitive; ``/a`` and ``a`` are different topics
  (``/a`` has an empty first level). Empty levels (``a//b``) are legal, just discouraged.
- The maximum length is MQ_TOPIC_STR_LENGTH = 10240, counted here in characters.
- In a subscription, ``#`` matches zero or more whole levels and ``+`` exactly one level (an
  empty level is a level, so ``+`` matches it). They are wildcards only when they are a whole
  level on their own; mixed with other characters (``a#``, ``+x``) they are literals.
- A published topic never carries a wildcard: a level that is exactly ``#`` or ``+`` is rejected
  with MQRC_TOPIC_STRING_ERROR (2425).
"""

from __future__ import annotations

from collections.abc import Iterator

MAX_TOPIC_LENGTH = 10240
MQRC_TOPIC_STRING_ERROR = 2425

MULTI_LEVEL = "#"
SINGLE_LEVEL = "+"
WILDCARD_LEVELS = frozenset({MULTI_LEVEL, SINGLE_LEVEL})
SEPARATOR = "/"


class TopicStringError(ValueError):
    """A topic string is not valid; ``reason`` says why, ``reason_code`` is MQ's 2425."""

    reason_code: int = MQRC_TOPIC_STRING_ERROR

    def __init__(self, reason: str, topic: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.topic = topic


def levels(topic: str) -> list[str]:
    """The levels of a topic string: ``'a//b'`` -> ``['a', '', 'b']``, ``'/a'`` -> ``['', 'a']``."""
    return topic.split(SEPARATOR)


def is_wildcard(pattern: str) -> bool:
    """True if any level of ``pattern`` is exactly ``#`` or ``+``."""
    if MULTI_LEVEL not in pattern and SINGLE_LEVEL not in pattern:
        return False
    return any(level in WILDCARD_LEVELS for level in pattern.split(SEPARATOR))


def first_wildcard_index(pattern: str) -> int | None:
    """Index of the first level that is exactly ``#`` or ``+``, or None if there is none."""
    if MULTI_LEVEL not in pattern and SINGLE_LEVEL not in pattern:
        return None
    for index, level in enumerate(pattern.split(SEPARATOR)):
        if level in WILDCARD_LEVELS:
            return index
    return None


def wildcard_prefix(pattern: str) -> str:
    """The part of ``pattern`` before its first wildcard level (the whole string if none).

    ``'Sport/+/Goals'`` -> ``'Sport'``; ``'#'`` -> ``''``; ``'/#'`` -> ``''``.
    """
    index = first_wildcard_index(pattern)
    if index is None:
        return pattern
    return SEPARATOR.join(pattern.split(SEPARATOR)[:index])


def ancestors(topic: str) -> Iterator[str]:
    """``topic`` and every level-prefix of it, nearest first, ending with ``''`` (the root).

    ``'a/b/c'`` -> ``'a/b/c', 'a/b', 'a', ''``; ``'/a'`` -> ``'/a', ''``; ``''`` -> ``''``.
    """
    current = topic
    yield current
    while current:
        cut = current.rfind(SEPARATOR)
        current = current[:cut] if cut >= 0 else ""
        yield current


def is_at_or_above(ancestor: str, topic: str) -> bool:
    """True if ``ancestor`` is a level-prefix of ``topic`` (``''`` is above everything).

    ``Sport`` is above ``Sport/Football`` but not above ``Sports``.
    """
    if ancestor == "":
        return True
    return topic == ancestor or topic.startswith(ancestor + SEPARATOR)


def _check_common(topic: str, what: str) -> None:
    if not isinstance(topic, str):
        raise TopicStringError(f"{what} must be a string, not {type(topic).__name__}")
    if topic == "":
        raise TopicStringError(f"{what} is empty", topic)
    if len(topic) > MAX_TOPIC_LENGTH:
        raise TopicStringError(
            f"{what} is {len(topic)} characters long; the maximum is {MAX_TOPIC_LENGTH}",
            topic,
        )
    if "\x00" in topic:
        raise TopicStringError(f"{what} contains a NUL character", topic)


def validate_publish_topic(topic: str) -> str:
    """Check a topic string that is published on; return it unchanged.

    Non-empty, at most 10240 characters, no NUL, and no level that is exactly ``#`` or ``+``.
    """
    _check_common(topic, "publication topic string")
    index = first_wildcard_index(topic)
    if index is not None:
        level = levels(topic)[index]
        raise TopicStringError(
            f"publication topic string has the wildcard level {level!r} at level {index + 1}; "
            "publications cannot be made on wildcard topics",
            topic,
        )
    return topic


def validate_subscription_topic(topic: str) -> str:
    """Check a subscription topic string (whole-level ``#``/``+`` allowed); return it."""
    _check_common(topic, "subscription topic string")
    return topic


def topic_matches(pattern: str, topic: str) -> bool:
    """True if subscription ``pattern`` matches published ``topic`` (topic-based scheme).

    ``#`` matches zero or more whole levels (also in the middle: ``a/#/b`` matches ``a/b``),
    ``+`` exactly one level; anything else compares literally and case-sensitively.
    """
    if not is_wildcard(pattern):
        return pattern == topic
    pat = pattern.split(SEPARATOR)
    end = len(pat)
    # Simulate the pattern as an automaton over levels: a state is a position in ``pat``.
    states = _closure({0}, pat)
    for level in topic.split(SEPARATOR):
        nxt: set[int] = set()
        for pos in states:
            if pos == end:
                continue
            token = pat[pos]
            if token == MULTI_LEVEL:
                nxt.add(pos)  # '#' absorbs this level and may absorb more
            elif token in (SINGLE_LEVEL, level):
                nxt.add(pos + 1)
        if not nxt:
            return False
        states = _closure(nxt, pat)
    return end in states


def _closure(states: set[int], pat: list[str]) -> set[int]:
    """Add the positions reachable by letting a ``#`` match zero levels."""
    out = set(states)
    stack = list(states)
    end = len(pat)
    while stack:
        pos = stack.pop()
        if pos < end and pat[pos] == MULTI_LEVEL and pos + 1 not in out:
            out.add(pos + 1)
            stack.append(pos + 1)
    return out
