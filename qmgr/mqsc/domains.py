"""Value domains of MQSC parameters: enumerations, integer ranges, names, strings, hex.

Each domain's ``check(keyword, value)`` returns the canonical value (as a string) or raises
:class:`ValueProblem` with a sentence naming the problem; the parser adds the message id and
the position. Values arrive already case-folded when they were not quoted.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

NAME_CHARS = frozenset(string.ascii_letters + string.digits + "._/%")
_DIGITS = frozenset(string.digits)
_HEX = frozenset(string.hexdigits)
_SHOW = 40


class ValueProblem(Exception):
    """A value outside its domain; ``offset`` is where in the value (None: the whole value)."""

    def __init__(self, message: str, offset: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


def show(value: str) -> str:
    """A value as quoted in a message: shortened when long, quoted when it has blanks."""
    text = value if len(value) <= _SHOW else value[: _SHOW - 3] + "..."
    return f"'{text}'" if (not text or any(c.isspace() for c in text)) else text


@dataclass(frozen=True)
class Choice:
    """One of a fixed set of upper-case keywords; ``aliases`` map synonyms to canonical ones."""

    values: tuple[str, ...]
    aliases: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        return "|".join(self.values)

    def check(self, keyword: str, value: str) -> str:
        if value in self.values:
            return value
        for alias, canonical in self.aliases:
            if value == alias:
                return canonical
        raise ValueProblem(
            f"Value {show(value)} not valid for {keyword}; valid values are {self.describe()}"
        )


@dataclass(frozen=True)
class Number:
    """An integer in ``lo..hi`` (or one of ``also``), or one of the keywords in ``specials``."""

    lo: int
    hi: int
    specials: tuple[str, ...] = ()
    also: tuple[int, ...] = ()

    def range_text(self) -> str:
        extra = "".join(f" or {n}" for n in self.also)
        return f"{self.lo}-{self.hi}{extra}"

    def describe(self) -> str:
        return "|".join((*self.specials, self.range_text()))

    def check(self, keyword: str, value: str) -> str:
        if value in self.specials:
            return value
        if not value or any(c not in _DIGITS for c in value):
            raise ValueProblem(
                f"Value {show(value)} not valid for {keyword}; expected {self.describe()}"
            )
        digits = value.lstrip("0") or "0"
        number = int(digits) if len(digits) <= 12 else None
        if number is None or not (self.lo <= number <= self.hi or number in self.also):
            raise ValueProblem(
                f"Value {show(value)} out of range {self.range_text()} for {keyword}"
            )
        return str(number)


@dataclass(frozen=True)
class Name:
    """An object name.

    With a ``charset`` (MQ object names: A-Z a-z 0-9 . / _ %) trailing blanks are dropped, as
    MQ pads names with blanks, so ``' '`` is the blank name (allowed only when ``blank_ok``).
    Without one (subscription names, topic strings) any character is kept as given.
    ``generic_ok`` allows one trailing ``*`` (DISPLAY's generic names).
    """

    max_len: int = 48
    charset: frozenset[str] | None = NAME_CHARS
    blank_ok: bool = False
    generic_ok: bool = False

    def describe(self) -> str:
        return f"name of up to {self.max_len} characters"

    def check(self, keyword: str, value: str) -> str:
        if self.charset is not None:
            value = value.rstrip(" ")
        if value == "":
            if self.blank_ok:
                return ""
            raise ValueProblem(f"Name for {keyword} must not be blank")
        if len(value) > self.max_len:
            raise ValueProblem(
                f"Name too long for {keyword}: {len(value)} characters (maximum {self.max_len})"
            )
        if self.charset is not None:
            body = value[:-1] if self.generic_ok and value.endswith("*") else value
            for offset, c in enumerate(body):
                if c not in self.charset:
                    raise ValueProblem(
                        f"Character {c!r} not allowed in a name for {keyword}; "
                        "names use A-Z a-z 0-9 . / _ %"
                        + (" and a trailing * in DISPLAY" if self.generic_ok else ""),
                        offset,
                    )
        return value


@dataclass(frozen=True)
class Text:
    """Free text of at most ``max_len`` characters.

    ``nonempty`` rejects ``''``; ``topic`` also rejects a trailing ``/`` (a topic object's
    TOPICSTR).
    """

    max_len: int
    nonempty: bool = False
    topic: bool = False

    def describe(self) -> str:
        return f"string of up to {self.max_len} characters"

    def check(self, keyword: str, value: str) -> str:
        if len(value) > self.max_len:
            raise ValueProblem(
                f"Value too long for {keyword}: {len(value)} characters (maximum {self.max_len})"
            )
        if self.nonempty and value == "":
            raise ValueProblem(f"{keyword} must not be empty")
        if self.topic and value.endswith("/"):
            raise ValueProblem(f"{keyword} must not end with '/'", len(value) - 1)
        return value


@dataclass(frozen=True)
class Hex:
    """Hexadecimal digits (upper-cased), at most ``max_len`` of them."""

    max_len: int

    def describe(self) -> str:
        return f"up to {self.max_len} hexadecimal digits"

    def check(self, keyword: str, value: str) -> str:
        for offset, c in enumerate(value):
            if c not in _HEX:
                raise ValueProblem(f"Value for {keyword} must be hexadecimal", offset)
        if not value:
            raise ValueProblem(f"Value for {keyword} must not be empty")
        if len(value) > self.max_len:
            raise ValueProblem(
                f"Value too long for {keyword}: {len(value)} hexadecimal digits "
                f"(maximum {self.max_len})"
            )
        return value.upper()


Domain = Choice | Number | Name | Text | Hex
