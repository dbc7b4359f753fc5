"""`@parameters` of SQL filters and actions: validation and binding at creation time."""

from __future__ import annotations

import datetime as _dt
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from qmgr.filters import ast as a
from qmgr.filters import sysprops
from qmgr.filters import values as v
from qmgr.filters.errors import FilterSyntaxError

_ALLOWED = (str, bool, int, float, _dt.datetime, _dt.timedelta, uuid.UUID, type(None))

ParamKey = tuple[tuple[str, str, Any], ...]


def normalize(parameters: Mapping[str, Any] | None, text: str) -> dict[str, Any]:
    """Parameter names without '@', folded for case-insensitive binding; values checked."""
    result: dict[str, Any] = {}
    for name, value in (parameters or {}).items():
        if not isinstance(name, str) or not name.lstrip("@"):
            raise FilterSyntaxError(f"invalid parameter name {name!r}", text, 0)
        if not isinstance(value, _ALLOWED):
            raise FilterSyntaxError(
                f"parameter {name} has an unsupported type {type(value).__name__}", text, 0
            )
        if isinstance(value, int) and not v.INT64_MIN <= value <= v.INT64_MAX:
            raise FilterSyntaxError(f"parameter {name} is outside the Int64 range", text, 0)
        folded = sysprops.fold(name.lstrip("@"))
        if folded in result:
            raise FilterSyntaxError(f"parameter {name} is given twice", text, 0)
        result[folded] = value
    return result


def cache_key(parameters: Mapping[str, Any] | None) -> ParamKey:
    """A hashable key that tells True from 1 and Int32(1) from 1."""
    return tuple(
        sorted(
            ((name, type(value).__name__, value) for name, value in (parameters or {}).items()),
            key=lambda item: (item[0], item[1]),
        )
    )


def bound_key(text: Any, parameters: Mapping[str, Any] | None, what: str) -> ParamKey:
    """The cache key of ``text`` compiled with ``parameters`` (normalised and checked);
    FilterSyntaxError when ``text`` (of a ``what``: filter or action) is not a string."""
    if not isinstance(text, str):
        raise FilterSyntaxError(f"the {what} text must be a string", "", 0)
    return cache_key(normalize(parameters, text))


def bound_of(key: ParamKey) -> dict[str, Any]:
    """The parameters a cache key was made of."""
    return {name: value for name, _type, value in key}


class CompiledText:
    """A filter or action compiled from ``text`` with ``parameters``: equal (and hashed) by
    its kind, its text and its parameters' values and types."""

    __slots__ = ()
    _text: str
    parameters: dict[str, Any]

    @property
    def text(self) -> str:
        return self._text

    def _identity(self) -> tuple[str, ParamKey]:
        return self.text, cache_key(self.parameters)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.text!r})"


def check_bound(
    nodes: Iterable[a.Node | a.Statement], parameters: Mapping[str, Any], text: str
) -> None:
    """Every @name used in the tree must have a value."""
    stack: list[a.Node | a.Statement] = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, a.Parameter) and sysprops.fold(node.name) not in parameters:
            raise FilterSyntaxError(f"parameter @{node.name} has no value", text, node.pos)
        stack.extend(a.children(node))
