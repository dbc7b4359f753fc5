"""LIKE patterns: `%` any run of characters, `_` exactly one, the escape character first.

A pattern is compiled once into a `LikePlan`: the common shapes (exact text, prefix, suffix,
contains, prefix+suffix) become plain string operations; anything else becomes an anchored
regular expression. Matching is case-sensitive and ordinal; `%` and `_` match any character,
including line breaks.
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
REGEX: Final = "regex"

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


def compile_like(pattern: str, escape: str | None) -> LikePlan:
    """Compile a pattern; raises FilterEvaluationError for a bad escape or pattern."""
    if escape is not None and len(escape) != 1:
        raise FilterEvaluationError("the LIKE escape must be a string of exactly one character")
    tokens = _tokens(pattern, escape)
    if _ONE not in tokens:
        literal_runs: list[str] = []
        current: list[str] = []
        for token in tokens:
            if token is _ANY:
                literal_runs.append("".join(current))
                current = []
            else:
                assert isinstance(token, str)
                current.append(token)
        literal_runs.append("".join(current))
        if len(literal_runs) == 1:
            text = literal_runs[0]
            return LikePlan(EXACT, text, match=lambda s: s == text)
        if len(literal_runs) == 2:
            head, tail = literal_runs
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
        if len(literal_runs) == 3 and not literal_runs[0] and not literal_runs[2]:
            middle = literal_runs[1]
            return LikePlan(CONTAINS, middle, match=lambda s: middle in s)
    parts = []
    for token in tokens:
        if token is _ANY:
            parts.append(".*")
        elif token is _ONE:
            parts.append(".")
        else:
            assert isinstance(token, str)
            parts.append(re.escape(token))
    regex = re.compile("".join(parts), re.DOTALL)
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
