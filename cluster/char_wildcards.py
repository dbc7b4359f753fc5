"""Character-based wildcard scheme (WSCHEMA(CHAR), MQSO_WILDCARD_CHAR), pure.

IBM MQ (reference docs/mq-semantics.md §3.5): a character-wildcard subscription is matched
against the full topic string, character by character, not level by level:

- ``*`` matches zero or more characters, ``/`` included (``IBM/*/Results`` matches
  ``IBM/Patents/Software/Results``; ``Prices*Apples`` matches ``Prices/Fruit/Apples``);
- ``?`` matches exactly one character;
- ``%`` escapes the next character (``%*``, ``%?``, ``%%`` are the literal characters); a ``%``
  at the very end of the pattern stands for itself;
- ``#`` and ``+`` are ordinary characters in this scheme.

``char_matches`` runs the classic glob algorithm (one remembered ``*`` to backtrack to), so a
match costs O(len(pattern) * len(topic)) at worst and usually one pass.
"""

from __future__ import annotations

from collections.abc import Sequence

STAR = 0
ONE = 1
Token = int | str
"""``STAR`` (``*``), ``ONE`` (``?``) or a literal character (a str never equals an int)."""


def parse_char_pattern(pattern: str) -> tuple[Token, ...]:
    """The tokens of a character-wildcard pattern (escapes removed; ``**`` kept as one ``*``)."""
    out: list[Token] = []
    escaped = False
    for char in pattern:
        if escaped:
            out.append(char)
            escaped = False
        elif char == "%":
            escaped = True
        elif char == "*":
            if not out or out[-1] != STAR:
                out.append(STAR)
        elif char == "?":
            out.append(ONE)
        else:
            out.append(char)
    if escaped:
        out.append("%")
    return tuple(out)


def has_char_wildcard(pattern: str) -> bool:
    """True if ``pattern`` holds an unescaped ``*`` or ``?``."""
    return any(not isinstance(t, str) for t in parse_char_pattern(pattern))


def char_literal_prefix(pattern: str) -> str:
    """The characters before the first unescaped wildcard (escapes removed)."""
    out: list[str] = []
    for token in parse_char_pattern(pattern):
        if not isinstance(token, str):
            break
        out.append(token)
    return "".join(out)


def tokens_match(tokens: Sequence[Token], topic: str) -> bool:
    """True if the parsed pattern ``tokens`` matches the whole of ``topic``."""
    p = t = 0
    star_p = -1
    star_t = 0
    n_p, n_t = len(tokens), len(topic)
    while t < n_t:
        if p < n_p:
            token = tokens[p]
            if token == STAR:
                star_p, star_t = p, t
                p += 1
                continue
            if token == ONE or token == topic[t]:
                p += 1
                t += 1
                continue
        if star_p < 0:
            return False
        star_t += 1  # let the last ``*`` swallow one more character and retry
        p, t = star_p + 1, star_t
    while p < n_p and tokens[p] == STAR:
        p += 1
    return p == n_p


def char_matches(pattern: str, topic: str) -> bool:
    """True if the WSCHEMA(CHAR) subscription ``pattern`` matches publication ``topic``."""
    return tokens_match(parse_char_pattern(pattern), topic)


def char_as_topic_pattern(pattern: str) -> str:
    """The topic-scheme pattern covering every topic ``pattern`` can match: the level holding
    the first unescaped ``*``/``?`` and everything after it become ``#`` (MQ's proxy rule,
    ``/aaa/bbb/c*d`` -> ``/aaa/bbb/#``). Without a wildcard, the topic it names (escapes
    removed). Levels are cut on the unescaped text, so ``a%/b*`` -> ``a/#``."""
    tokens = parse_char_pattern(pattern)
    if all(isinstance(t, str) for t in tokens):
        return "".join(str(t) for t in tokens)
    parts = char_literal_prefix(pattern).split("/")
    return "/".join([*parts[:-1], "#"])
