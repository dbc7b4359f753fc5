"""The public API of qmgr.filters as the Service Bus engine and users see it."""

from __future__ import annotations

import datetime as dt
import uuid
from types import MappingProxyType

import pytest

import qmgr.filters as filters
from qmgr.filters import (
    Action,
    CorrelationFilter,
    FalseFilter,
    Filter,
    FilterError,
    FilterEvaluationError,
    FilterSyntaxError,
    Int32,
    TrueFilter,
    compile_action,
    compile_filter,
)

pytestmark = pytest.mark.filterwarnings("error")


def test_every_filter_kind_has_the_same_interface() -> None:
    system = {"CorrelationId": "high", "Label": "red"}
    user = {"color": "red"}
    kinds: list[Filter] = [
        compile_filter("color = 'red'"),
        CorrelationFilter(correlation_id="high"),
        TrueFilter(),
    ]
    for f in kinds:
        assert isinstance(f, Filter)
        assert f.evaluate(system, user) is True
        assert f.matches(system, user) is True
        assert isinstance(f.text, str)
    assert FalseFilter().evaluate(system, user) is False
    assert FalseFilter().matches(system, user) is False


def test_boolean_filters_are_1_eq_1_and_1_eq_0() -> None:
    assert TrueFilter().text == "1=1" and FalseFilter().text == "1=0"
    assert compile_filter(TrueFilter().text).evaluate({}, {}) is True
    assert compile_filter(FalseFilter().text).evaluate({}, {}) is False
    assert TrueFilter() == TrueFilter() and TrueFilter() != FalseFilter()


def test_unknown_is_none_and_does_not_match() -> None:
    f = compile_filter("color = 'red'")
    assert f.evaluate({}, {}) is None
    assert f.matches({}, {}) is False


def test_compiled_filters_are_cached_by_text_and_parameters() -> None:
    assert compile_filter("a = 1") is compile_filter("a = 1")
    assert compile_filter("a = @v", {"@v": 1}) is compile_filter("a = @v", {"v": 1})
    assert compile_filter("a = @v", {"@v": 1}) is not compile_filter("a = @v", {"@v": True})
    assert compile_filter("a = @v", {"@v": 1}) is not compile_filter("a = @v", {"@v": Int32(1)})
    assert compile_filter("a = 1") == compile_filter("a = 1")
    assert compile_action("SET a = 1") is compile_action("SET a = 1")


def test_filters_accept_any_mapping_and_leave_it_alone() -> None:
    f = compile_filter("sys.Label = 'x' AND p('n') = 1")
    system = MappingProxyType({"Label": "x"})
    user = MappingProxyType({"N": 1})
    assert f.matches(system, user) is True


def test_parameters_are_checked() -> None:
    with pytest.raises(FilterSyntaxError, match="unsupported type"):
        compile_filter("a = @v", {"@v": [1]})
    with pytest.raises(FilterSyntaxError, match="given twice"):
        compile_filter("a = @v", {"@v": 1, "V": 2})
    with pytest.raises(FilterSyntaxError, match="Int64"):
        compile_filter("a = @v", {"@v": 2**63})
    with pytest.raises(FilterSyntaxError, match="has no value"):
        compile_action("SET a = @v")
    assert compile_action("SET a = @v", {"@v": dt.timedelta(1)}).apply({}, {})[1] == {
        "a": dt.timedelta(1)
    }


def test_errors_share_a_base_class() -> None:
    assert issubclass(FilterSyntaxError, FilterError)
    assert issubclass(FilterEvaluationError, FilterError)
    with pytest.raises(FilterError):
        compile_filter(None)  # type: ignore[arg-type]


def test_evaluation_errors_name_the_types() -> None:
    with pytest.raises(FilterEvaluationError, match="'String' and 'Int64'"):
        compile_filter("x = 1").evaluate({}, {"x": "1"})
    with pytest.raises(FilterEvaluationError, match="divide by zero"):
        compile_filter("x / 0 = 1").evaluate({}, {"x": 1})


def test_int32_marker() -> None:
    value = Int32(5)
    assert isinstance(value, int) and value == 5 and repr(value) == "Int32(5)"
    with pytest.raises(OverflowError):
        Int32(2**31)
    assert filters.UNKNOWN is not None and repr(filters.UNKNOWN) == "UNKNOWN"


def test_actions_apply_to_copies() -> None:
    action = compile_action("SET a = 1; REMOVE b; SET sys.To = 'q'")
    assert isinstance(action, Action)
    system = {"To": "x", "MessageId": "m"}
    user = {"b": 2, "c": 3}
    new_system, new_user = action.apply(system, user)
    assert (new_system, new_user) == ({"To": "q", "MessageId": "m"}, {"a": 1, "c": 3})
    assert system == {"To": "x", "MessageId": "m"} and user == {"b": 2, "c": 3}
    assert new_system is not system and new_user is not user


def test_newid_in_an_action_is_fresh_each_time() -> None:
    action = compile_action("SET sys.MessageId = newid()")
    first = action.apply({}, {})[0]["MessageId"]
    second = action.apply({}, {})[0]["MessageId"]
    assert first != second
    assert uuid.UUID(first) and uuid.UUID(second)


def test_correlation_filter_exposes_its_fields_for_indexing() -> None:
    f = CorrelationFilter(subject="red", correlation_id="high", properties={"color": "Red", "n": 1})
    assert dict(f.fields) == {"Label": "red", "CorrelationId": "high"}
    assert dict(f.properties) == {"color": "Red", "n": 1}
    assert f.text == "sys.CorrelationId = 'high' AND sys.Label = 'red' AND color = 'Red' AND n = 1"
    assert f == CorrelationFilter(
        label="red", correlation_id="high", properties={"n": 1, "color": "Red"}
    )
    assert f != CorrelationFilter(
        label="red", correlation_id="high", properties={"n": True, "color": "Red"}
    )
    assert hash(f) == hash(
        CorrelationFilter(label="red", correlation_id="high", properties={"n": 1, "color": "Red"})
    )
    assert "CorrelationFilter(" in repr(f)


def test_sql_filter_keeps_its_text_tree_and_canonical_form() -> None:
    f = compile_filter("user.color='red'")
    assert f.text == "user.color='red'"
    assert f.canonical_text == "color = 'red'"
    assert "def evaluate" in f.source


def test_package_exports() -> None:
    for name in (
        "compile_filter",
        "compile_action",
        "CorrelationFilter",
        "TrueFilter",
        "FalseFilter",
        "FilterSyntaxError",
        "FilterEvaluationError",
        "Int32",
    ):
        assert name in filters.__all__
    assert filters.__doc__ and "compile_filter" in filters.__doc__


def test_text_must_be_a_string() -> None:
    with pytest.raises(FilterSyntaxError):
        compile_filter(["a = 1"])  # type: ignore[arg-type]
    with pytest.raises(FilterSyntaxError):
        compile_action(b"SET a = 1")  # type: ignore[arg-type]


def test_non_string_keys_are_ignored_by_name_lookup() -> None:
    f = compile_filter("A = 1 AND sys.label = 'x'")
    assert f.evaluate({1: "y", "label": "x"}, {2: 3, "a": 1}) is True  # type: ignore[dict-item]


def test_filters_and_actions_take_keyword_arguments() -> None:
    kinds: list[Filter] = [
        compile_filter("a = 1"),
        CorrelationFilter(properties={"a": 1}),
        TrueFilter(),
    ]
    for f in kinds:
        assert f.evaluate(system={}, user={"a": 1}) is True
        assert f.matches(system={}, user={"a": 1}) is True
    assert compile_action("SET b = 2").apply(system={}, user={}) == ({}, {"b": 2})
