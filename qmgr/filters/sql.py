"""SQL filters: `compile_filter(text, parameters)` -> a compiled, cached `SqlFilter`."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from qmgr.filters import ast as a
from qmgr.filters import params as p
from qmgr.filters.base import Filter
from qmgr.filters.compiler import Matcher, Predicate, compile_condition
from qmgr.filters.parser import parse_filter


class SqlFilter(p.CompiledText, Filter):
    """A compiled SQL filter. Build it with `compile_filter`; instances are immutable."""

    __slots__ = ("_text", "parameters", "tree", "source", "evaluate", "matches")

    evaluate: Predicate  # type: ignore[assignment]
    matches: Matcher  # type: ignore[assignment]

    def __init__(self, text: str, parameters: Mapping[str, Any], tree: a.Condition) -> None:
        self._text = text
        self.parameters = dict(parameters)
        self.tree = tree
        evaluate, matches, self.source = compile_condition(text, tree, self.parameters)
        # Plain functions stored on the instance: calling them costs no method binding.
        self.evaluate = evaluate
        self.matches = matches

    @property
    def canonical_text(self) -> str:
        """The filter as the library prints it (normalised spacing, quoting and parentheses)."""
        return a.to_text(self.tree)


def compile_filter(text: str, parameters: Mapping[str, Any] | None = None) -> SqlFilter:
    """Parse, check and compile a SQL filter; the same text and parameters give the same object.

    Raises FilterSyntaxError when Service Bus would reject the rule at creation.
    """
    return _compile_cached(text, p.bound_key(text, parameters, "filter"))


@lru_cache(maxsize=4096)
def _compile_cached(text: str, key: p.ParamKey) -> SqlFilter:
    bound = p.bound_of(key)
    tree = parse_filter(text)
    p.check_bound([tree], bound, text)
    return SqlFilter(text, bound, tree)
