"""CorrelationFilter takes caller values as data: subclasses are coerced, never turned into code."""

from __future__ import annotations

import datetime as dt
import enum
import uuid
from typing import Any

import pytest

from qmgr.filters import CorrelationFilter, Int32


class Colour(enum.StrEnum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 9


CALLS: list[str] = []


class Evil(str):
    """A str subclass whose methods would run code if the filter called them."""

    def __repr__(self) -> str:
        CALLS.append("repr")
        return "__import__('os').system('echo pwned') or 'x'"

    def __str__(self) -> str:
        CALLS.append("str")
        return "not-the-value"

    def __eq__(self, other: object) -> bool:
        CALLS.append("eq")
        return True

    def __ne__(self, other: object) -> bool:
        CALLS.append("ne")
        return False

    __hash__ = str.__hash__


def test_strenum_value_works_as_its_string() -> None:
    f = CorrelationFilter(label=Colour.RED, properties={"colour": Colour.BLUE})
    assert f.matches({"Label": "red"}, {"colour": "blue"})
    assert not f.matches({"Label": "red"}, {"colour": "red"})
    assert type(f.fields["Label"]) is str
    assert type(f.properties["colour"]) is str
    assert f == CorrelationFilter(label="red", properties={"colour": "blue"})


def test_intenum_value_works_as_its_int() -> None:
    f = CorrelationFilter(properties={"level": Level.HIGH})
    assert f.matches({}, {"level": 9})
    assert f.matches({}, {"level": 9.0})
    assert f.matches({}, {"level": Int32(9)})
    assert not f.matches({}, {"level": 1})
    assert type(f.properties["level"]) is int
    assert "Level" not in repr(f)


def test_int32_and_bool_keep_their_type() -> None:
    f = CorrelationFilter(properties={"a": Int32(5), "b": True})
    assert type(f.properties["a"]) is Int32
    assert f.properties["b"] is True
    assert f.matches({}, {"a": 5, "b": True})
    assert not f.matches({}, {"a": 5, "b": 1})


def test_crafted_str_subclass_runs_nothing() -> None:
    CALLS.clear()
    evil = Evil("x")
    f = CorrelationFilter(correlation_id=evil, properties={evil: evil, "other": Evil("y")})
    assert CALLS == []
    assert "pwned" not in f.source and "import" not in f.source
    assert f.matches({"CorrelationId": "x"}, {"x": "x", "other": "y"})
    assert not f.matches({"CorrelationId": "x"}, {"x": "z", "other": "y"})
    assert not f.matches({"CorrelationId": "not-the-value"}, {"x": "x", "other": "y"})
    repr(f)
    _ = f.text
    assert CALLS == []
    assert type(f.fields["CorrelationId"]) is str


def test_subclasses_of_datetime_timedelta_uuid_float_are_coerced() -> None:
    class When(dt.datetime):
        pass

    class Span(dt.timedelta):
        pass

    class Id(uuid.UUID):
        pass

    class Num(float):
        pass

    when = When(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    ident = Id(int=7)
    f = CorrelationFilter(properties={"w": when, "s": Span(seconds=3), "i": ident, "n": Num(1.5)})
    assert [type(x) for x in f.properties.values()] == [
        dt.datetime,
        dt.timedelta,
        uuid.UUID,
        float,
    ]
    assert f.matches(
        {},
        {
            "w": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
            "s": dt.timedelta(seconds=3),
            "i": uuid.UUID(int=7),
            "n": 1.5,
        },
    )


@pytest.mark.parametrize("value", [b"bytes", [1], {"a": 1}, object(), float("nan"), 1 + 2j, Colour])
def test_values_a_correlation_filter_cannot_hold_are_rejected(value: Any) -> None:
    with pytest.raises(ValueError, match="property 'p'"):
        CorrelationFilter(properties={"p": value})


def test_non_string_system_field_is_rejected() -> None:
    with pytest.raises(ValueError, match="correlation_id must be a string"):
        CorrelationFilter(correlation_id=Level.LOW)  # type: ignore[arg-type]


def test_bad_property_name_is_rejected_without_calling_it() -> None:
    class Name:
        def __repr__(self) -> str:
            raise AssertionError("repr called")

    with pytest.raises(ValueError, match="invalid property name"):
        CorrelationFilter(properties={Name(): 1})  # type: ignore[dict-item]
