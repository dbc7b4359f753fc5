"""LIKE patterns: `%` any run of characters, `_` exactly one, the escape character first.

A pattern is compiled once into a `LikePlan`: the common shapes (exact text, prefix, suffix,
contains, prefix+suffix) become plain string operations; anything else becomes a list of
fixed-length segments (the parts between `%`), each a few literal pieces at fixed offsets with
`_` in between. Such a pattern is matched without backtracking: the first segment anchored at
the start, the last at the end, and every segment between them at its leftmost place after the
previous one (leftmost is always the best choice, since a `%` follows). The cost is bounded by
O(len(pattern) × len(value)), in practice close to a few `str.find` calls, whatever the
pattern; a regular expression could backtrack exponentially (`'%a%a%a%a%a%a_b'`).

Matching is case-sensitive and ordinal; `%` and `_` match any character, including line
breaks; `_` is one code point.
"""

from __future__ import annotations

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
GENERAL: Final = "general"  # segments with '_' (or several '%'): `match_segments`

_ANY: Final = object()  # '%'
_ONE: Final = object()  # '_'


@dataclass(frozen=True, slots=True)
class Segment:
    """A fixed-length run of the pattern between two `%`: literal pieces at fixed offsets.

    `anchor` is the index in `pieces` of the longest piece, the one searched for with
    `str.find` when the segment floats.
    """

    length: int
    pieces: tuple[tuple[int, str], ...]
    anchor: int

    def at(self, text: str, pos: int) -> bool:
        """True if the segment matches `text` at `pos` (the caller checked the length)."""
        return all(text.startswith(piece, pos + offset) for offset, piece in self.pieces)

    def find(self, text: str, pos: int, end: int) -> int:
        """The leftmost p >= pos with the segment matching text[p:p+length], p+length <= end."""
        last_start = end - self.length
        if last_start < pos:
            return -1
        if not self.pieces:
            return pos
        offset, piece = self.pieces[self.anchor]
        stop = last_start + offset + len(piece)
        while True:
            found = text.find(piece, pos + offset, stop)
            if found < 0:
                return -1
            start = found - offset
            if self.at(text, start):
                return start
            pos = start + 1


@dataclass(frozen=True)
class LikePlan:
    shape: str
    first: str = ""
    second: str = ""
    segments: tuple[Segment, ...] = ()
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


def _segment(tokens: list[object]) -> Segment:
    pieces: list[tuple[int, str]] = []
    run: list[str] = []
    for offset, token in enumerate(tokens):
        if token is _ONE:
            if run:
                pieces.append((offset - len(run), "".join(run)))
                run = []
        else:
            assert isinstance(token, str)
            run.append(token)
    if run:
        pieces.append((len(tokens) - len(run), "".join(run)))
    anchor = max(range(len(pieces)), key=lambda k: len(pieces[k][1]), default=0)
    return Segment(len(tokens), tuple(pieces), anchor)


def _split(tokens: list[object]) -> tuple[Segment, ...]:
    """The segments between `%` (a leading or trailing `%` gives an empty first/last one)."""
    segments: list[Segment] = []
    current: list[object] = []
    for token in tokens:
        if token is _ANY:
            segments.append(_segment(current))
            current = []
        else:
            current.append(token)
    segments.append(_segment(current))
    return tuple(segments)


def match_segments(segments: tuple[Segment, ...], text: str) -> bool:
    """Match `text` against segments separated by `%` (see the module docstring)."""
    first = segments[0]
    if len(segments) == 1:
        return len(text) == first.length and first.at(text, 0)
    last = segments[-1]
    end = len(text) - last.length  # where the last segment must start
    if end < first.length or not first.at(text, 0):
        return False
    pos = first.length
    for segment in segments[1:-1]:
        start = segment.find(text, pos, end)
        if start < 0:
            return False
        pos = start + segment.length
    return last.at(text, end)


def compile_like(pattern: str, escape: str | None) -> LikePlan:
    """Compile a pattern; raises FilterEvaluationError for a bad escape or pattern."""
    if escape is not None and len(escape) != 1:
        raise FilterEvaluationError("the LIKE escape must be a string of exactly one character")
    tokens = _tokens(pattern, escape)
    segments = _split(tokens)
    if _ONE not in tokens:
        runs = ["".join(piece for _, piece in segment.pieces) for segment in segments]
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
    return LikePlan(GENERAL, segments=segments, match=lambda s: match_segments(segments, s))


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
