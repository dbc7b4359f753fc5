"""Rule actions: `SET property = expression` and `REMOVE property`, applied to a copy.

Statements run in order, each seeing the changes of the ones before. SET converts the value to
the type of the property it replaces (user properties: the existing value's type; system
properties: the property's declared type); an unknown value is stored as null.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from qmgr.filters import ast as a
from qmgr.filters import params as p
from qmgr.filters import sysprops
from qmgr.filters import values as v
from qmgr.filters.compiler import ValueFn, compile_value
from qmgr.filters.convert import convert_to
from qmgr.filters.errors import FilterEvaluationError
from qmgr.filters.parser import parse_action


@dataclass(frozen=True)
class _Step:
    statement: a.Statement
    system: sysprops.SystemProperty | None  # set for sys. targets
    folded: tuple[str, ...]
    value: ValueFn | None  # None for REMOVE


class Action(p.CompiledText):
    """A compiled rule action. Build it with `compile_action`; instances are immutable."""

    def __init__(
        self, text: str, parameters: Mapping[str, Any], statements: tuple[a.Statement, ...]
    ) -> None:
        self._text = text
        self.parameters = dict(parameters)
        self.statements = statements
        steps = []
        for statement in statements:
            target = statement.target
            prop = sysprops.resolve(target.name) if target.scope == "sys" else None
            folded = prop.folded if prop is not None else (sysprops.fold(target.name),)
            value_fn = None
            if isinstance(statement, a.SetStatement):
                value_fn, _source = compile_value(text, statement.value, self.parameters)
            steps.append(_Step(statement, prop, folded, value_fn))
        self._steps = tuple(steps)

    @property
    def canonical_text(self) -> str:
        return a.action_to_text(self.statements)

    def apply(
        self, system: Mapping[str, Any], user: Mapping[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Return changed copies of (system, user); the arguments are not modified.

        Raises FilterEvaluationError when an expression or a conversion fails.
        """
        new_system = dict(system)
        new_user = dict(user)
        for step in self._steps:
            if step.value is None:
                for key in sysprops.matching_keys(new_user, step.folded):
                    del new_user[key]
                continue
            value = step.value(new_system, new_user)
            if value is v.UNKNOWN:
                value = None
            if step.system is not None:
                _set_system(new_system, step.system, value)
            else:
                _set_user(new_user, step.statement.target.name, step.folded, value)
        return new_system, new_user


def _set_user(user: dict[str, Any], name: str, folded: tuple[str, ...], value: Any) -> None:
    if name in user:
        key = name
    else:
        keys = sysprops.matching_keys(user, folded)
        key = keys[0] if keys else name
    if key in user and user[key] is not None:
        value = convert_to(value, v.kind_of(user[key]))
    user[key] = value


def _set_system(system: dict[str, Any], prop: sysprops.SystemProperty, value: Any) -> None:
    if value is None:
        if prop.kind != v.STR or prop.name == "MessageId":
            raise FilterEvaluationError(f"system property {prop.name} cannot be set to null")
    else:
        value = convert_to(value, prop.kind)
        if prop.max_length is not None and len(value) > prop.max_length:
            raise FilterEvaluationError(
                f"system property {prop.name} is limited to {prop.max_length} characters"
            )
    keys = sysprops.matching_keys(system, prop.folded)
    system[keys[0] if keys else prop.name] = value


def compile_action(text: str, parameters: Mapping[str, Any] | None = None) -> Action:
    """Parse, check and compile a rule action; the same text and parameters give the same object.

    Raises FilterSyntaxError when Service Bus would reject the rule at creation (syntax, more
    than 32 statements, unknown or read-only system properties, REMOVE of a system property).
    """
    return _compile_cached(text, p.bound_key(text, parameters, "action"))


@lru_cache(maxsize=1024)
def _compile_cached(text: str, key: p.ParamKey) -> Action:
    bound = p.bound_of(key)
    statements = parse_action(text)
    p.check_bound(statements, bound, text)
    return Action(text, bound, statements)
