"""LIKE patterns: `%` any run of characters, `_` exactly one, the escape character first.

A pattern is compiled once into a `LikePlan`: the common shapes (exact text, prefix, suffix,
contains, prefix+suffix) become plain string operations; anything else becomes a regular
expression that cannot backtrack more than once. The pattern is split on `%` into
fixed-length segments (literal text with `.` for `_`): the first is anchored at the start, the
last at the end, and each one between them is taken at its leftmost place after the previous
one, inside an atomic group `(?>.*?segment)` so a later failure never retries it. Leftmost is
always the best choice, since a `%` follows, so the answer is that of the plain translation,
and the cost is O(len(pattern) × len(value)) for any pattern. (The plain translation
`.*a.*a.*a…` backtracks exponentially: `'%a%a%a%a%a%a_b'` on 100 characters took seconds.)

Matching is case-sensitive and ordinal; `%` and `_` match any character, including line
breaks; `_` is one code point.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from qmgr.filters.errors import FilterEvaluationError

EXACT: Final = "exact"
PREFIX: Final = "prefix"
SUFFIX: Final = "suffix"
CONTAINS: Final = "contains"
AFFIX: Final = "affix"  # prefix%suffix
ANYTHING: Final = "anything"
REGEX: Final = "regex"  # an atomic-group regular expression (see the module docstring)

_ANY: Final = object()  # '%'
_ONE: Final = object()  # '_'


@dataclass(frozen=True)
class LikePlan:
    shape: str
    first: str = ""
    second: str = ""
    regex: re.Pattern[str] | None = None
    match: Callable[[str], bool] = field(default=lambda text: False, compare=False, repr=False)


def _tokens(pattern: str, escape: str | None) -> list[object]:
    out: list[object] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if escape is not None and ch == escape:  # checked before % and _
            if i + 1 >= len(pattern):
                raise FilterEvaluationError("a LIKE pattern cannot end with its escape character")
            out.append(pattern[i + 1])
            i += 2
            continue
        if ch == "%":
            if not out or out[-1] is not _ANY:
                out.append(_ANY)
        elif ch == "_":
            out.append(_ONE)
        else:
            out.append(ch)
        i += 1
    return out


def _segments(tokens: list[object]) -> list[list[object]]:
    """The fixed-length runs between `%` (a leading or trailing `%` gives an empty one)."""
    segments: list[list[object]] = [[]]
    for token in tokens:
        if token is _ANY:
            segments.append([])
        else:
            segments[-1].append(token)
    return segments


def _regex(segments: list[list[object]]) -> re.Pattern[str]:
    def text(segment: list[object]) -> str:
        return "".join("." if token is _ONE else re.escape(str(token)) for token in segment)

    parts = [text(segments[0])]
    if len(segments) > 1:
        parts.extend(f"(?>.*?{text(segment)})" for segment in segments[1:-1])
        parts.append(".*" + text(segments[-1]))
    return re.compile("".join(parts), re.DOTALL)


def compile_like(pattern: str, escape: str | None) -> LikePlan:
    """Compile a pattern; raises FilterEvaluationError for a bad escape or pattern."""
    if escape is not None and len(escape) != 1:
        raise FilterEvaluationError("the LIKE escape must be a string of exactly one character")
    tokens = _tokens(pattern, escape)
    segments = _segments(tokens)
    if _ONE not in tokens:
        runs = ["".join(str(token) for token in segment) for segment in segments]
        if len(runs) == 1:
            text = runs[0]
            return LikePlan(EXACT, text, match=lambda s: s == text)
        if len(runs) == 2:
            head, tail = runs
            if not head and not tail:
                return LikePlan(ANYTHING, match=lambda s: True)
            if not tail:
                return LikePlan(PREFIX, head, match=lambda s: s.startswith(head))
            if not head:
                return LikePlan(SUFFIX, tail, match=lambda s: s.endswith(tail))
            size = len(head) + len(tail)
            return LikePlan(
                AFFIX,
                head,
                tail,
                match=lambda s: len(s) >= size and s.startswith(head) and s.endswith(tail),
            )
        if len(runs) == 3 and not runs[0] and not runs[2]:
            middle = runs[1]
            return LikePlan(CONTAINS, middle, match=lambda s: middle in s)
    regex = _regex(segments)
    fullmatch = regex.fullmatch
    return LikePlan(REGEX, regex=regex, match=lambda s: fullmatch(s) is not None)


_CACHE: dict[tuple[str, str | None], LikePlan] = {}
_CACHE_LIMIT: Final = 1024


def cached_like(pattern: str, escape: str | None) -> LikePlan:
    """compile_like with a small cache, for patterns computed at run time."""
    key = (pattern, escape)
    plan = _CACHE.get(key)
    if plan is None:
        plan = compile_like(pattern, escape)
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.clear()
        _CACHE[key] = plan
    return plan
