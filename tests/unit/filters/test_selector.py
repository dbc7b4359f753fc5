"""MQ message selectors (JMS SQL92 grammar and semantics) in qmgr.filters.selector."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qmgr.filters import FilterEvaluationError, FilterSyntaxError
from qmgr.filters.selector import MAX_SELECTOR_LENGTH, compile_selector

T, F, U = True, False, None


@pytest.mark.parametrize(
    ("text", "props", "expected"),
    [
        ("a = 1", {"a": 1}, T),
        ("a = 1", {"a": 1.0}, T),  # exact and approximate numbers compare
        ("a = 1", {}, U),  # missing property is NULL
        ("a = 1", {"a": None}, U),
        ("a = 1", {"A": 1}, U),  # identifiers are case-sensitive
        ("a = 1", {"a": "1"}, F),  # different types: FALSE, not an error
        ("a <> 'x'", {"a": 1}, F),
        ("a = 'x'", {"a": "x"}, T),
        ("a <> 'x'", {"a": "y"}, T),
        ("a > 'x'", {"a": "y"}, F),  # strings only support = and <>
        ("a = TRUE", {"a": True}, T),
        ("a = TRUE", {"a": 1}, F),
        ("a > TRUE", {"a": True}, F),
        ("a", {"a": True}, T),  # a boolean property alone is a condition
        ("a", {"a": "true"}, F),
        ("NOT a", {}, U),
        ("a >= 2.5e0 AND a < 3", {"a": 2.5}, T),
        ("a BETWEEN 1 AND 3", {"a": 3}, T),
        ("a BETWEEN 1 AND 3", {"a": 4}, F),
        ("a NOT BETWEEN 1 AND 3", {"a": 4}, T),
        ("a NOT BETWEEN 1 AND 3", {"a": 2}, F),
        ("a NOT BETWEEN 1 AND 3", {}, U),
        ("a BETWEEN 1 AND 3 AND b = 1", {"a": 2, "b": 1}, T),
        ("a IN ('x', 'y')", {"a": "y"}, T),
        ("a NOT IN ('x', 'y')", {"a": "y"}, F),
        ("a NOT IN ('x', 'y')", {"a": "z"}, T),
        ("a IN ('x')", {}, U),
        ("a IN ('1')", {"a": 1}, F),
        ("a LIKE 'ab%'", {"a": "abc"}, T),
        ("a LIKE 'a_c'", {"a": "abc"}, T),
        ("a NOT LIKE 'a_c'", {"a": "abc"}, F),
        ("a LIKE '%\\_%' ESCAPE '\\'", {"a": "x_y"}, T),
        ("a LIKE '%\\_%' ESCAPE '\\'", {"a": "xy"}, F),
        ("a LIKE 'x'", {"a": 1}, F),
        ("a LIKE 'x'", {}, U),
        ("a IS NULL", {}, T),
        ("a IS NULL", {"a": None}, T),
        ("a IS NOT NULL", {"a": 0}, T),
        ("a + b * 2 = 7", {"a": 1, "b": 3}, T),
        ("-a = -1", {"a": 1}, T),
        ("a / 2 = 3", {"a": 7}, T),  # integer division truncates
        ("a / 2 = -3", {"a": -7}, T),  # toward zero
        ("a / 2 = 3.5", {"a": 7.0}, T),
        ("a + 1 = 2", {}, U),
        ("a = 1 OR b = 1", {"b": 1}, T),
        ("a = 1 OR b = 1", {"b": 2}, U),
        ("a = 1 AND b = 1", {"b": 2}, F),
        ("(a = 1 OR b = 1) AND c = 1", {"a": 1, "c": 1}, T),
        ("exists = 1 AND set = 2", {"exists": 1, "set": 2}, T),  # not reserved here
        ("$x_1 = 1", {"$x_1": 1}, T),
        ("JMSPriority = 1", {"JMSPriority": 1}, U),  # header fields come from the fields map
        ("and_not = 1", {"and_not": 1}, T),
        ("a = 1 or b = 1", {"a": 1}, T),  # keywords are case-insensitive
    ],
)
def test_selector_semantics(text: str, props: dict[str, Any], expected: bool | None) -> None:
    selector = compile_selector(text)
    assert selector.evaluate(props) is expected
    assert selector.matches(props) is (expected is True)


@pytest.mark.parametrize(
    ("text", "props"),
    [("a / b = 1", {"a": 1, "b": 0}), ("a + 1 = 2", {"a": "1"}), ("-a = 1", {"a": True})],
)
def test_evaluation_errors_do_not_select(text: str, props: dict[str, Any]) -> None:
    selector = compile_selector(text)
    with pytest.raises(FilterEvaluationError):
        selector.evaluate(props)
    assert selector.matches(props) is False


def test_header_fields() -> None:
    selector = compile_selector("JMSPriority > 4 AND JMSCorrelationID = 'ID:ab'")
    assert selector.header_fields == {"JMSPriority", "JMSCorrelationID"}
    assert selector.matches({}, {"JMSPriority": 5, "JMSCorrelationID": "ID:ab"})
    assert not selector.matches({"JMSPriority": 9}, {"JMSPriority": 1, "JMSCorrelationID": "ID:ab"})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a = ", "expected a value"),
        ("a != 1", "write '<>'"),
        ("[a] = 1", "bracketed names"),
        ('"a" = 1', "quoted names"),
        ("a = @p", "no parameters"),
        ("a % 2 = 1", "no '%' operator"),
        ("sys.Label = 'x'", "cannot contain '.'"),
        ("EXISTS(a)", "no functions"),
        ("a = NULL", "IS NULL"),
        ("a LIKE b", "string literal"),
        ("a LIKE 'x!' ESCAPE '!'", "cannot end with its escape"),
        ("a LIKE 'x' ESCAPE '!!'", "exactly one character"),
        ("a IN (1, 2)", "IN lists hold strings"),
        ("1 + 1 LIKE 'x'", "LIKE applies to a property"),
        ("a BETWEEN 1", "AND (BETWEEN low AND high)"),
        ("a + 1", "must be a condition"),
        ("a = 1 AND", "expected a value"),
        ("'unterminated", "unterminated string"),
        ("a = 1; b = 2", "single condition"),
        ("a = 1 b", "expected end of input"),
        ("NOT = 1", "expected a value"),
        ("AND = 1", "reserved"),
    ],
)
def test_syntax_errors(text: str, message: str) -> None:
    with pytest.raises(FilterSyntaxError, match=message.replace("(", r"\(").replace(")", r"\)")):
        compile_selector(text)


def test_long_or_chain_is_accepted() -> None:
    text = " OR ".join(f"a = {i}" for i in range(500))
    assert len(text) < MAX_SELECTOR_LENGTH
    selector = compile_selector(text)
    assert selector.matches({"a": 499})
    assert not selector.matches({"a": 500})


def test_length_limit_is_mq_s() -> None:
    with pytest.raises(FilterSyntaxError, match="longer than 10240"):
        compile_selector("a = '" + "x" * MAX_SELECTOR_LENGTH + "'")


@given(
    st.one_of(
        st.none(), st.integers(-5, 5), st.floats(-5, 5, allow_nan=False), st.text(max_size=2)
    ),
    st.integers(-3, 3),
    st.integers(-3, 3),
)
def test_between_is_the_two_comparisons(value: Any, low: int, high: int) -> None:
    props = {} if value is None else {"x": value}
    between = compile_selector(f"x BETWEEN {low} AND {high}").evaluate(props)
    spelled = compile_selector(f"x >= {low} AND x <= {high}").evaluate(props)
    assert between is spelled
    outside = compile_selector(f"x NOT BETWEEN {low} AND {high}").evaluate(props)
    # JMS defines NOT BETWEEN as the two strict comparisons (not as NOT of BETWEEN: a string
    # compared with numbers is FALSE both ways).
    assert outside is compile_selector(f"x < {low} OR x > {high}").evaluate(props)
