"""Tokenizing one MQSC command into keywords with optional parenthesised values.

Rules (runmqsc): blanks and commas separate keywords, parentheses and values, in any number.
A keyword may be followed by a value in parentheses, possibly after separators. Inside the
parentheses a value is either quoted (``'...'``, kept exactly, ``''`` standing for one quote)
or unquoted (folded to upper case). Unquoted values may hold balanced parentheses, so
``CONNAME(host(1414))`` reads as one value. A ``;`` may end the command.
"""

from __future__ import annotations

from dataclasses import dataclass

from qmgr.mqsc.errors import SYNTAX_ERROR, MqscError


@dataclass(frozen=True)
class Item:
    """One value inside parentheses: its text after the quoting rules, and where it starts."""

    text: str
    quoted: bool
    pos: int


@dataclass(frozen=True)
class Group:
    """A parenthesised value: the items between ``(`` at ``open_pos`` and ``)`` at ``close_pos``."""

    items: tuple[Item, ...]
    open_pos: int
    close_pos: int


@dataclass(frozen=True)
class Word:
    """A keyword (upper-cased), where it starts, its raw spelling and its value, if any."""

    keyword: str
    pos: int
    raw: str
    value: Group | None

    @property
    def end(self) -> int:
        return self.pos + len(self.raw)


_SPECIAL = "(),';"


def _is_sep(c: str) -> bool:
    return c == "," or c.isspace()


def _skip_sep(text: str, i: int) -> int:
    n = len(text)
    while i < n and _is_sep(text[i]):
        i += 1
    return i


def _quoted(text: str, i: int) -> tuple[Item, int]:
    """Read the quoted string whose opening quote is at ``i``."""
    n = len(text)
    j = i + 1
    buf: list[str] = []
    while j < n:
        c = text[j]
        if c == "'":
            if j + 1 < n and text[j + 1] == "'":
                buf.append("'")
                j += 2
                continue
            return Item("".join(buf), True, i), j + 1
        buf.append(c)
        j += 1
    raise MqscError(SYNTAX_ERROR, "Unbalanced quotes", i, text)


def _unquoted(text: str, i: int) -> tuple[Item, int]:
    """Read an unquoted value starting at ``i``; nested parentheses must balance."""
    n = len(text)
    start = i
    opened: list[int] = []
    while i < n:
        c = text[i]
        if c == "'":
            break
        if c == "(":
            opened.append(i)
        elif c == ")":
            if not opened:
                break
            opened.pop()
        elif not opened and _is_sep(c):
            break
        i += 1
    if opened:
        raise MqscError(
            SYNTAX_ERROR, "Unbalanced parenthesis: '(' is never closed", opened[-1], text
        )
    return Item(text[start:i].upper(), False, start), i


def _group(text: str, i: int) -> tuple[Group, int]:
    """Read the parenthesised value whose ``(`` is at ``i``."""
    open_pos = i
    items: list[Item] = []
    i += 1
    n = len(text)
    while True:
        i = _skip_sep(text, i)
        if i >= n:
            raise MqscError(
                SYNTAX_ERROR, "Unbalanced parenthesis: '(' is never closed", open_pos, text
            )
        c = text[i]
        if c == ")":
            return Group(tuple(items), open_pos, i), i + 1
        item, i = _quoted(text, i) if c == "'" else _unquoted(text, i)
        items.append(item)


def tokenize(text: str) -> list[Word]:
    """Split one command into words; raises :class:`MqscError` (AMQ8405E) on bad syntax."""
    words: list[Word] = []
    n = len(text)
    i = 0
    while True:
        i = _skip_sep(text, i)
        if i >= n:
            return words
        c = text[i]
        if c == ";":
            if text[i + 1 :].strip():
                raise MqscError(SYNTAX_ERROR, "Unexpected ';': only one command per line", i, text)
            return words
        if c == "'":
            _quoted(text, i)  # an unterminated quote is reported as such
            raise MqscError(SYNTAX_ERROR, "Quoted string must be a value in parentheses", i, text)
        if c == ")":
            raise MqscError(SYNTAX_ERROR, "Unbalanced parenthesis: ')' without '('", i, text)
        if c == "(":
            raise MqscError(SYNTAX_ERROR, "Value in parentheses without a keyword", i, text)
        start = i
        while i < n and text[i] not in _SPECIAL and not _is_sep(text[i]):
            i += 1
        raw = text[start:i]
        value: Group | None = None
        j = _skip_sep(text, i)
        if j < n and text[j] == "(":
            value, i = _group(text, j)
        words.append(Word(raw.upper(), start, raw, value))
