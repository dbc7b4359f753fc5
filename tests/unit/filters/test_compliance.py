"""Runs the data-driven compliance suite against the compiled filters and the interpreter."""

from __future__ import annotations

import copy
import math
import uuid
from collections import Counter
from typing import Any

import pytest

from qmgr.filters import (
    CorrelationFilter,
    FilterEvaluationError,
    FilterSyntaxError,
    Int32,
    compile_action,
    compile_filter,
)
from qmgr.filters import ast as a
from qmgr.filters.interpreter import Interpreter
from qmgr.filters.parser import parse_filter

from .compliance_data import (
    ACTION_CASES,
    CORRELATION_CASES,
    EVAL,
    FALSE,
    FILTER_CASES,
    INVALID,
    SYNTAX,
    TRUE,
    UNKNOWN,
    VALUE_CASES,
    ActionCase,
    CorrelationCase,
    FilterCase,
    ValueCase,
)

pytestmark = pytest.mark.filterwarnings("error")

_RESULTS = {TRUE: True, FALSE: False, UNKNOWN: None}


def _is_syntax(expected: Any) -> bool:
    return expected == SYNTAX or (isinstance(expected, tuple) and expected[0] == SYNTAX)


def _evaluators(case: FilterCase) -> list[tuple[str, Any]]:
    compiled = compile_filter(case.text, case.params)
    interpreter = Interpreter(compiled.parameters)
    canonical = compile_filter(compiled.canonical_text, case.params)
    return [
        ("compiled", compiled.evaluate),
        ("interpreter", lambda s, u: interpreter.condition(compiled.tree, s, u)),
        ("canonical-text", canonical.evaluate),
    ]


def test_case_ids_are_unique() -> None:
    for cases in (FILTER_CASES, VALUE_CASES, ACTION_CASES, CORRELATION_CASES):
        counts = Counter(case.id for case in cases)
        assert [name for name, n in counts.items() if n > 1] == []


@pytest.mark.parametrize("case", FILTER_CASES, ids=lambda case: case.id)
def test_filter_case(case: FilterCase) -> None:
    if _is_syntax(case.expected):
        with pytest.raises(FilterSyntaxError) as info:
            compile_filter(case.text, case.params)
        if isinstance(case.expected, tuple):
            assert info.value.position == case.expected[1], str(info.value)
        return
    user = copy.deepcopy(case.user)
    system = copy.deepcopy(case.system)
    for name, evaluate in _evaluators(case):
        if case.expected == EVAL:
            with pytest.raises(FilterEvaluationError):
                evaluate(system, user)
        else:
            assert evaluate(system, user) is _RESULTS[case.expected], name
    matches = compile_filter(case.text, case.params).matches
    if case.expected == EVAL:
        with pytest.raises(FilterEvaluationError):
            matches(system, user)
    else:
        assert matches(system, user) is (case.expected == TRUE)
    assert user == case.user and system == case.system  # evaluation never changes its inputs


def _same_typed(actual: Any, expected: Any) -> bool:
    if type(actual) is not type(expected):
        return False
    if isinstance(expected, float) and math.isnan(expected):
        return math.isnan(actual)
    return bool(actual == expected)


@pytest.mark.parametrize("case", VALUE_CASES, ids=lambda case: case.id)
def test_value_case(case: ValueCase) -> None:
    text = f"SET r = {case.expression}"
    if case.expected == SYNTAX:
        with pytest.raises(FilterSyntaxError):
            compile_action(text)
        return
    action = compile_action(text)
    if case.expected == EVAL:
        with pytest.raises(FilterEvaluationError):
            action.apply({}, case.user)
        return
    _system, user = action.apply({}, case.user)
    if case.expected == "str-guid":
        assert isinstance(user["r"], str) and uuid.UUID(user["r"])
    else:
        assert _same_typed(user["r"], case.expected), (user["r"], case.expected)


@pytest.mark.parametrize("case", ACTION_CASES, ids=lambda case: case.id)
def test_action_case(case: ActionCase) -> None:
    if case.expected == SYNTAX:
        with pytest.raises(FilterSyntaxError):
            compile_action(case.action, case.params)
        return
    action = compile_action(case.action, case.params)
    system = copy.deepcopy(case.system)
    user = copy.deepcopy(case.user)
    if case.expected == EVAL:
        with pytest.raises(FilterEvaluationError):
            action.apply(system, user)
        return
    new_system, new_user = action.apply(system, user)
    assert system == case.system and user == case.user  # applied to a copy
    if case.expected == "new-guid":
        assert uuid.UUID(new_system["MessageId"]) and new_system["MessageId"] != "old"
        return
    expected_system, expected_user = case.expected
    assert new_system.keys() == expected_system.keys()
    assert new_user.keys() == expected_user.keys()
    for key, value in expected_system.items():
        assert _same_typed(new_system[key], value), (key, new_system[key], value)
    for key, value in expected_user.items():
        assert _same_typed(new_user[key], value), (key, new_user[key], value)


# ---- the suite covers every production of the grammar -------------------------------------------


def _features(node: a.Node | a.Statement) -> set[str]:
    found: set[str] = set()
    stack: list[a.Node | a.Statement] = [node]
    while stack:
        item = stack.pop()
        name = type(item).__name__
        found.add(name)
        if isinstance(item, (a.Binary, a.Compare, a.Unary)):
            found.add(f"{name}{item.op}")
        if isinstance(item, (a.Like, a.In, a.IsNull)):
            found.add(f"{name}-negated={item.negated}")
        if isinstance(item, a.Like) and item.escape is not None:
            found.add("Like-escape")
        if isinstance(item, a.Literal):
            found.add(f"Literal-{item.kind}")
        if isinstance(item, a.Property):
            found.add(f"Property-{item.scope}")
        stack.extend(a.children(item))
    return found


def test_suite_covers_every_production() -> None:
    seen: set[str] = set()
    for case in FILTER_CASES:
        if not _is_syntax(case.expected):
            seen |= _features(parse_filter(case.text))
    required = {
        "Literal-int", "Literal-float", "Literal-str", "Literal-bool", "Literal-null",
        "Property-user", "Property-sys", "Parameter", "PropertyCall", "NewId",
        "Unary+", "Unary-", "Binary+", "Binary-", "Binary*", "Binary/", "Binary%",
        "Compare=", "Compare<>", "Compare<", "Compare>", "Compare<=", "Compare>=",
        "Like-negated=False", "Like-negated=True", "Like-escape",
        "In-negated=False", "In-negated=True", "IsNull-negated=False", "IsNull-negated=True",
        "Exists", "Not", "And", "Or",
    }  # fmt: skip
    assert required - seen == set()


def test_suite_covers_every_operand_type() -> None:
    kinds: set[type] = set()
    for case in FILTER_CASES:
        kinds |= {type(value) for value in (*case.user.values(), *case.system.values())}
        kinds |= {type(value) for value in (case.params or {}).values()}
    import datetime as dt

    assert {
        str,
        bool,
        int,
        Int32,
        float,
        type(None),
        bytes,
        dt.datetime,
        dt.timedelta,
        uuid.UUID,
    } <= kinds


@pytest.mark.parametrize("case", CORRELATION_CASES, ids=lambda case: case.id)
def test_correlation_case(case: CorrelationCase) -> None:
    if case.expected == INVALID:
        with pytest.raises(ValueError):
            CorrelationFilter(**case.fields)
        return
    correlation = CorrelationFilter(**case.fields)
    assert correlation.matches(case.system, case.user) is case.expected
    assert correlation.evaluate(case.system, case.user) is case.expected
    # The SQL text it documents as equivalent gives the same answer where SQL can express it.
    if all(isinstance(value, str) for value in correlation.properties.values()):
        assert compile_filter(correlation.text).matches(case.system, case.user) is case.expected
