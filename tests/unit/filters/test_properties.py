"""Property-based tests: parser robustness, print/parse round trip, compiled == interpreted."""

from __future__ import annotations

import datetime as dt
import os
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from qmgr.filters import (
    FilterEvaluationError,
    FilterSyntaxError,
    Int32,
    compile_action,
    compile_filter,
)
from qmgr.filters import ast as a
from qmgr.filters.interpreter import Interpreter
from qmgr.filters.lexer import KEYWORDS
from qmgr.filters.parser import parse_action, parse_filter
from qmgr.filters.sysprops import SYSTEM_PROPERTIES

pytestmark = pytest.mark.filterwarnings("error")

# QMGR_FILTER_EXAMPLES raises the example count for a longer local run.
SETTINGS = settings(
    max_examples=int(os.environ.get("QMGR_FILTER_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

# ---- arbitrary input never breaks the parser ----------------------------------------------------

_VOCABULARY = [
    "AND", "OR", "NOT", "LIKE", "ESCAPE", "IN", "IS", "NULL", "TRUE", "FALSE", "EXISTS",
    "SET", "REMOVE", "BETWEEN", "sys", "user", ".", "sys.Label", "user.x", "x", "[a.b]", "[a]]",
    '"q"', "'s'", "'it''s'", "'", '"', "[", "]", "(", ")", ",", ";", "=", "<>", "!=", "<", ">",
    "<=", ">=", "+", "-", "*", "/", "%", "1", "1.5", ".5", "1e5", "1e", "9223372036854775808",
    "@p", "@", "newid()", "p(", "property", "'%a_'", "'\\'", "\n", " ", "sys.Nope", "&", "!",
]  # fmt: skip

_TEXTS = st.one_of(
    st.text(max_size=60),
    st.lists(st.sampled_from(_VOCABULARY), max_size=25).map(" ".join),
    st.lists(st.sampled_from(_VOCABULARY), max_size=25).map("".join),
)


def _check_rejection(text: str, compile_fn: Any) -> None:
    try:
        compile_fn(text, {"p": 1})
    except FilterSyntaxError as error:
        assert 0 <= error.position <= len(text)
        assert error.text == text
        assert "^" in str(error) or not text


@SETTINGS
@given(_TEXTS)
def test_filter_parser_raises_only_syntax_errors(text: str) -> None:
    _check_rejection(text, compile_filter)


@SETTINGS
@given(_TEXTS)
def test_action_parser_raises_only_syntax_errors(text: str) -> None:
    _check_rejection(text, compile_action)


@settings(max_examples=50, deadline=None)
@given(
    st.sampled_from(["(", "NOT ", "-", "+", "p(", "x IN (", "-(", "EXISTS("]), st.integers(30, 600)
)
def test_deep_nesting_is_a_syntax_error_not_a_crash(prefix: str, count: int) -> None:
    text = (prefix * count)[:1024]
    with pytest.raises(FilterSyntaxError) as info:
        compile_filter(text)
    assert 0 <= info.value.position <= len(text)


# ---- ASTs -----------------------------------------------------------------------------------

_NO_SURROGATES = st.characters(exclude_categories=["Cs"])
_REGULAR = st.from_regex(r"[A-Za-zÀ-ÿ][A-Za-z0-9_]{0,6}", fullmatch=True).filter(
    lambda name: name.upper() not in KEYWORDS
)
_ANY_NAME = st.text(_NO_SURROGATES, min_size=1, max_size=8)
_SYS_NAMES = st.sampled_from([name for prop in SYSTEM_PROPERTIES for name in prop.names]).flatmap(
    lambda name: st.sampled_from([name, name.lower(), name.upper()])
)

_LITERALS = st.one_of(
    st.integers(-(2**63), 2**63 - 1).map(lambda n: a.Literal(n, "int")),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda f: a.Literal(f, "float")),
    st.text(_NO_SURROGATES, max_size=6).map(lambda s: a.Literal(s, "str")),
    st.booleans().map(lambda b: a.Literal(b, "bool")),
    st.just(a.Literal(None, "null")),
)
_PROPERTIES = st.one_of(
    st.builds(a.Property, st.just("user"), st.one_of(_REGULAR, _ANY_NAME)),
    st.builds(a.Property, st.just("sys"), _SYS_NAMES),
)


def _values(leaves: st.SearchStrategy[a.Expr]) -> st.SearchStrategy[a.Expr]:
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.builds(a.Unary, st.sampled_from("+-"), inner),
            st.builds(a.Binary, st.sampled_from("+-*/%"), inner, inner),
            st.builds(a.PropertyCall, inner),
        ),
        max_leaves=5,
    )


def _conditions(values: st.SearchStrategy[a.Expr]) -> st.SearchStrategy[a.Condition]:
    refs = st.one_of(_PROPERTIES, st.builds(a.PropertyCall, values))
    base = st.one_of(
        st.builds(a.Compare, st.sampled_from(["=", "<>", "<", ">", "<=", ">="]), values, values),
        st.builds(a.Like, values, values, st.none() | values, st.booleans()),
        st.builds(a.In, values, st.lists(values, min_size=1, max_size=3).map(tuple), st.booleans()),
        st.builds(a.IsNull, refs, st.booleans()),
        st.builds(a.Exists, refs),
    )
    return st.recursive(
        base,
        lambda inner: st.one_of(
            st.builds(a.Not, inner), st.builds(a.And, inner, inner), st.builds(a.Or, inner, inner)
        ),
        max_leaves=6,
    )


_PRINTABLE_VALUES = _values(
    st.one_of(
        _LITERALS,
        _PROPERTIES,
        st.builds(a.Parameter, st.from_regex(r"[A-Za-z0-9_]{1,6}", fullmatch=True)),
        st.just(a.NewId()),
    )
)


@SETTINGS
@given(_conditions(_PRINTABLE_VALUES))
def test_print_then_parse_gives_the_same_tree(tree: a.Condition) -> None:
    text = a.to_text(tree)
    assume(len(text) <= 1024)
    parsed = parse_filter(text)
    assert parsed == tree, text
    assert a.to_text(parsed) == text


@SETTINGS
@given(
    st.lists(
        st.one_of(
            st.builds(
                a.SetStatement, st.builds(a.Property, st.just("user"), _ANY_NAME), _PRINTABLE_VALUES
            ),
            st.builds(a.RemoveStatement, st.builds(a.Property, st.just("user"), _ANY_NAME)),
            st.builds(
                a.SetStatement,
                st.builds(
                    a.Property, st.just("sys"), st.sampled_from(["Label", "to", "SESSIONID"])
                ),
                _PRINTABLE_VALUES,
            ),
        ),
        min_size=1,
        max_size=4,
    ).map(tuple)
)
def test_print_then_parse_action_gives_the_same_statements(
    statements: tuple[a.Statement, ...],
) -> None:
    text = a.action_to_text(statements)
    assume(len(text) <= 1024)
    assert parse_action(text) == statements


# ---- the compiled code agrees with the reference interpreter ------------------------------------

_MESSAGE_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**31), 2**31 - 1).map(Int32),
    st.sampled_from([0, 1, -1, 2, 7, 2**31 - 1, -(2**63)]),
    st.floats(),
    st.sampled_from(["", "a", "ab", "a%", "abc", "A", "x_y", "1"]),
    st.text(max_size=4),
    st.datetimes(min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2030, 1, 1)),
    st.timedeltas(min_value=dt.timedelta(days=-3), max_value=dt.timedelta(days=3)),
    st.just(uuid.UUID(int=7)),
    st.just(b"\x01"),
)
_SMALL_LITERALS = st.one_of(
    st.sampled_from([0, 1, 2, -1, 10, 2**62]).map(lambda n: a.Literal(n, "int")),
    st.sampled_from([0.0, 0.5, -2.5, 1e300]).map(lambda f: a.Literal(f, "float")),
    st.sampled_from(["", "a", "a%", "%b%", "_", "1", "abc", "!"]).map(
        lambda s: a.Literal(s, "str")
    ),
    st.booleans().map(lambda b: a.Literal(b, "bool")),
    st.just(a.Literal(None, "null")),
)
_NAMED = st.one_of(
    st.builds(a.Property, st.just("user"), st.sampled_from(["a", "B", "c", "missing"])),
    st.builds(a.Property, st.just("sys"), st.sampled_from(["Label", "SequenceNumber", "To"])),
    st.builds(a.Parameter, st.sampled_from(["p", "q"])),
)
_EVAL_VALUES = _values(st.one_of(_SMALL_LITERALS, _NAMED))


def _outcome(function: Any, system: dict[str, Any], user: dict[str, Any]) -> Any:
    try:
        return ("ok", function(system, user))
    except FilterEvaluationError:
        return ("error", None)


@SETTINGS
@given(
    _conditions(_EVAL_VALUES),
    st.fixed_dictionaries(
        {}, optional={"a": _MESSAGE_VALUES, "b": _MESSAGE_VALUES, "C": _MESSAGE_VALUES}
    ),
    st.fixed_dictionaries(
        {}, optional={"Label": _MESSAGE_VALUES, "SequenceNumber": _MESSAGE_VALUES}
    ),
    _MESSAGE_VALUES,
    _MESSAGE_VALUES,
)
def test_compiled_filter_agrees_with_interpreter(
    tree: a.Condition, user: dict[str, Any], system: dict[str, Any], p: Any, q: Any
) -> None:
    assume(not isinstance(p, bytes) and not isinstance(q, bytes))
    text = a.to_text(tree)
    assume(len(text) <= 1024)
    try:
        compiled = compile_filter(text, {"p": p, "q": q})
    except FilterSyntaxError:
        assume(False)
        return
    interpreter = Interpreter(compiled.parameters)
    expected = _outcome(lambda s, u: interpreter.condition(compiled.tree, s, u), system, user)
    assert _outcome(compiled.evaluate, system, user) == expected, compiled.source
    matched = _outcome(compiled.matches, system, user)
    assert matched == (expected if expected[0] == "error" else ("ok", expected[1] is True))
