"""Text forms and SET conversions that mirror .NET's invariant culture."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from qmgr.filters import FilterEvaluationError, Int32
from qmgr.filters import values as v
from qmgr.filters.convert import convert_to, parse_datetime, parse_timespan

pytestmark = pytest.mark.filterwarnings("error")


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (0.0, "0"),
        (-0.0, "-0"),
        (1.0, "1"),
        (-2.5, "-2.5"),
        (0.1, "0.1"),
        (1 / 3, "0.3333333333333333"),
        (123456789012345.0, "123456789012345"),
        (1e15, "1E+15"),
        (1.5e300, "1.5E+300"),
        (0.0001, "0.0001"),
        (0.00001, "1E-05"),
        (-1.25e-10, "-1.25E-10"),
        (5e-324, "5E-324"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
        (math.nan, "NaN"),
    ],
)
def test_double_text(number: float, text: str) -> None:
    assert v.format_double(number) == text


@pytest.mark.parametrize(
    ("span", "text"),
    [
        (dt.timedelta(0), "00:00:00"),
        (dt.timedelta(hours=1, minutes=2, seconds=3), "01:02:03"),
        (dt.timedelta(days=2, microseconds=1), "2.00:00:00.0000010"),
        (-dt.timedelta(days=1, minutes=1), "-1.00:01:00"),
    ],
)
def test_timespan_text_round_trips(span: dt.timedelta, text: str) -> None:
    assert v.format_timespan(span) == text
    assert parse_timespan(text) == span


def test_datetime_parsing() -> None:
    assert parse_datetime("01/15/2024 13:45:30") == dt.datetime(2024, 1, 15, 13, 45, 30)
    assert parse_datetime("2024-01-15") == dt.datetime(2024, 1, 15)
    with pytest.raises(FilterEvaluationError):
        parse_datetime("13/45/2024")


@pytest.mark.parametrize(
    ("value", "kind", "expected"),
    [
        (2.5, v.I64, 2),
        (-2.5, v.I64, -2),
        (1.5, v.I32, Int32(2)),
        (True, v.I64, 1),
        ("-12", v.I32, Int32(-12)),
        ("1e3", v.F64, 1000.0),
        ("Infinity", v.F64, math.inf),
        (0.0, v.BOOL, False),
        (" False ", v.BOOL, False),
        (Int32(3), v.STR, "3"),
        (None, v.I64, None),
    ],
)
def test_conversions(value: object, kind: int, expected: object) -> None:
    result = convert_to(value, kind)
    assert type(result) is type(expected) and result == expected


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (math.nan, v.I64),
        (1e19, v.I64),
        ("1.5", v.I64),
        ("1_000", v.I64),
        ("yes", v.BOOL),
        (1, v.DATETIME),
    ],
)
def test_failed_conversions(value: object, kind: int) -> None:
    with pytest.raises(FilterEvaluationError):
        convert_to(value, kind)
