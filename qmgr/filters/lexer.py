"""Tokens of the Service Bus SQL filter and action language."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from qmgr.filters.errors import FilterSyntaxError

# Token kinds.
IDENT: Final = "identifier"  # regular identifier
DELIMITED: Final = "delimited identifier"  # [bracketed] or "quoted"
KEYWORD: Final = "keyword"
INTEGER: Final = "integer"
DECIMAL: Final = "number"
STRING: Final = "string"
PARAMETER: Final = "parameter"
OP: Final = "operator"
EOF: Final = "end of input"

KEYWORDS: Final = frozenset(
    {
        "AND",
        "OR",
        "NOT",
        "LIKE",
        "ESCAPE",
        "IN",
        "IS",
        "NULL",
        "TRUE",
        "FALSE",
        "EXISTS",
        "SET",
        "REMOVE",
    }
)

_OPERATORS: Final = (
    "<>",
    "!=",
    "<=",
    ">=",
    "=",
    "<",
    ">",
    "+",
    "-",
    "*",
    "/",
    "%",
    "(",
    ")",
    ",",
    ".",
    ";",
)
# MQ message selectors (the JMS grammar, `selector.py`): their own reserved words (EXISTS, SET
# and REMOVE are ordinary names there), no '%', '!=', ';' or '.', no [ ] / " " / @ forms.
SELECTOR_KEYWORDS: Final = frozenset(
    {"AND", "OR", "NOT", "LIKE", "ESCAPE", "IN", "IS", "NULL", "TRUE", "FALSE", "BETWEEN"}
)
_SELECTOR_OPERATORS: Final = tuple(op for op in _OPERATORS if op not in ("!=", "%", ";", "."))
_SELECTOR_HINTS: Final = {
    "[": "bracketed names are not part of the selector grammar",
    '"': "quoted names are not part of the selector grammar; strings use single quotes",
    "@": "selectors have no parameters",
    "%": "selectors have no '%' operator",
    ".": "property names in selectors cannot contain '.'",
    ";": "a selector is a single condition",
    "!=": "write '<>' for 'not equal'",
}
_NUMBER = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    value: object  # str for names/operators/keywords (keywords upper-case), int/float/str literals
    pos: int
    end: int

    def is_op(self, *ops: str) -> bool:
        return self.kind == OP and self.value in ops

    def is_keyword(self, *words: str) -> bool:
        return self.kind == KEYWORD and self.value in words

    def describe(self) -> str:
        if self.kind == EOF:
            return "end of input"
        if self.kind in (OP, KEYWORD):
            return f"'{self.value}'"
        return f"{self.kind} {self.value!r}"


def is_ident_start(ch: str) -> bool:
    return ch.isalpha()


def is_ident_part(ch: str) -> bool:
    return ch.isalpha() or ch.isdecimal() or ch == "_"


def is_regular_identifier(name: str) -> bool:
    """True when `name` can be written without brackets (and is not a keyword)."""
    return (
        bool(name)
        and is_ident_start(name[0])
        and all(is_ident_part(ch) for ch in name[1:])
        and not is_keyword(name)
    )


def is_keyword(name: str) -> bool:
    return name.isascii() and name.upper() in KEYWORDS


def is_selector_ident_start(ch: str) -> bool:
    """A Java identifier start, as JMS selectors use (letters, '_' and '$')."""
    return ch.isalpha() or ch in "_$"


def is_selector_ident_part(ch: str) -> bool:
    return ch.isalpha() or ch.isdecimal() or ch in "_$"


@dataclass(frozen=True, slots=True)
class _Dialect:
    ident_start: Callable[[str], bool]
    ident_part: Callable[[str], bool]
    keywords: frozenset[str]
    operators: tuple[str, ...]
    names_and_parameters: bool  # [name], "name" and @parameter
    hints: dict[str, str]


_SERVICE_BUS: Final = _Dialect(is_ident_start, is_ident_part, KEYWORDS, _OPERATORS, True, {})
_SELECTOR: Final = _Dialect(
    is_selector_ident_start,
    is_selector_ident_part,
    SELECTOR_KEYWORDS,
    _SELECTOR_OPERATORS,
    False,
    _SELECTOR_HINTS,
)


def tokenize(text: str, *, selector: bool = False) -> list[Token]:
    """Split `text` into tokens; raises FilterSyntaxError at the first invalid character.

    `selector=True` reads the MQ message selector dialect (see `selector.py`).
    """
    dialect = _SELECTOR if selector else _SERVICE_BUS
    tokens: list[Token] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        start = i
        if ch == "'":
            value, i = _quoted(text, i, "'", "string constant")
            tokens.append(Token(STRING, value, start, i))
        elif dialect.names_and_parameters and ch in '["@':
            tokens.append(_name_or_parameter(text, i))
            i = tokens[-1].end
        elif (
            ch.isdigit()
            and ch.isascii()
            or (ch == "." and i + 1 < n and text[i + 1] in "0123456789")
        ):
            tokens.append(_number(text, i, dialect.ident_part))
            i = tokens[-1].end
        elif dialect.ident_start(ch):
            while i < n and dialect.ident_part(text[i]):
                i += 1
            name = text[start:i]
            if name.isascii() and name.upper() in dialect.keywords:
                tokens.append(Token(KEYWORD, name.upper(), start, i))
            else:
                tokens.append(Token(IDENT, name, start, i))
        else:
            for op in dialect.operators:
                if text.startswith(op, i):
                    tokens.append(Token(OP, op, start, i + len(op)))
                    i += len(op)
                    break
            else:
                hint = dialect.hints.get(text[i : i + 2]) or dialect.hints.get(ch)
                message = f"unexpected character {ch!r}" + (f" ({hint})" if hint else "")
                raise FilterSyntaxError(message, text, start)
    tokens.append(Token(EOF, None, n, n))
    return tokens


def _name_or_parameter(text: str, start: int) -> Token:
    """A [delimited] or "quoted" identifier, or an @parameter (Service Bus only)."""
    ch = text[start]
    if ch == "@":
        i = start + 1
        while i < len(text) and is_ident_part(text[i]):
            i += 1
        if i == start + 1:
            raise FilterSyntaxError("a parameter name must follow '@'", text, start)
        return Token(PARAMETER, text[start + 1 : i], start, i)
    if ch == "[":
        value, i = _quoted(text, start, "]", "delimited identifier")
        what = "delimited"
    else:
        value, i = _quoted(text, start, '"', "quoted identifier")
        what = "quoted"
    if not value:
        raise FilterSyntaxError(f"empty {what} identifier", text, start)
    return Token(DELIMITED, value, start, i)


def _quoted(text: str, start: int, close: str, what: str) -> tuple[str, int]:
    """Read a quoted run starting at `start`; a doubled closing character stands for itself."""
    parts: list[str] = []
    i = start + 1
    n = len(text)
    while True:
        j = text.find(close, i)
        if j < 0:
            raise FilterSyntaxError(f"unterminated {what}", text, start)
        parts.append(text[i:j])
        if j + 1 < n and text[j + 1] == close:
            parts.append(close)
            i = j + 2
            continue
        return "".join(parts), j + 1


def _number(text: str, start: int, ident_part: Callable[[str], bool] = is_ident_part) -> Token:
    match = _NUMBER.match(text, start)
    assert match is not None
    end = match.end()
    if end < len(text) and (ident_part(text[end]) or text[end] == "."):
        raise FilterSyntaxError("invalid number", text, start)
    literal = match.group()
    if "." in literal or "e" in literal or "E" in literal:
        number = float(literal)
        if number in (float("inf"), float("-inf")):
            raise FilterSyntaxError("number is outside the range of a Double", text, start)
        return Token(DECIMAL, number, start, end)
    if len(literal) > 25:  # far beyond Int64; also keeps int() away from huge digit strings
        raise FilterSyntaxError("integer constant is outside the range of an Int64", text, start)
    return Token(INTEGER, int(literal), start, end)
