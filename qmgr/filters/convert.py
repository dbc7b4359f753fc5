"""Implicit conversion used by SET: a new value takes the type of the property it replaces.

Mirrors .NET `Convert.ChangeType` with the invariant culture for the types we model: numbers
round half to even when narrowed, out-of-range values fail, strings are parsed.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
import uuid
from typing import Any

from qmgr.filters import values as v
from qmgr.filters.errors import FilterEvaluationError

_INT_TEXT = re.compile(r"\s*[+-]?[0-9]+\s*\Z")
_FLOAT_TEXT = re.compile(r"\s*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\s*\Z")
_SPECIAL_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_TIMESPAN_TEXT = re.compile(
    r"\s*(?P<sign>-)?(?:(?P<days>[0-9]+)\.)?(?P<h>[0-9]{1,2}):(?P<m>[0-9]{1,2})"
    r"(?::(?P<s>[0-9]{1,2})(?:\.(?P<f>[0-9]{1,7}))?)?\s*\Z"
)
_TIMESPAN_DAYS = re.compile(r"\s*(?P<sign>-)?(?P<days>[0-9]+)\s*\Z")
_US_DATETIME = re.compile(
    r"\s*(?P<mo>[0-9]{1,2})/(?P<d>[0-9]{1,2})/(?P<y>[0-9]{4})"
    r"(?:\s+(?P<h>[0-9]{1,2}):(?P<mi>[0-9]{2})(?::(?P<s>[0-9]{2}))?)?\s*\Z"
)


def _fail(value: Any, target: int) -> FilterEvaluationError:
    return FilterEvaluationError(
        f"cannot convert a value of type {v.type_name(value)} to {v.TYPE_NAMES[target]}"
    )


def _to_integer(value: Any, target: int) -> int:
    kind = v.kind_of(value)
    if kind == v.BOOL:
        number = 1 if value else 0
    elif kind in (v.I32, v.I64):
        number = int(value)
    elif kind == v.F64:
        if math.isnan(value) or math.isinf(value):
            raise FilterEvaluationError(
                f"value was either too large or too small for an {v.TYPE_NAMES[target]}"
            )
        number = round(value)  # round half to even, like Convert.ToInt64(double)
    elif kind == v.STR:
        if not _INT_TEXT.match(value):
            raise FilterEvaluationError(f"input string {value!r} was not in a correct format")
        number = int(value)
    else:
        raise _fail(value, target)
    low, high = (v.INT32_MIN, v.INT32_MAX) if target == v.I32 else (v.INT64_MIN, v.INT64_MAX)
    if not low <= number <= high:
        raise FilterEvaluationError(
            f"value was either too large or too small for an {v.TYPE_NAMES[target]}"
        )
    return v.Int32(number) if target == v.I32 else number


def _to_double(value: Any) -> float:
    kind = v.kind_of(value)
    if kind == v.BOOL:
        return 1.0 if value else 0.0
    if kind in (v.I32, v.I64, v.F64):
        return float(value)
    if kind == v.STR:
        text = value.strip()
        if text in _SPECIAL_FLOATS:
            return _SPECIAL_FLOATS[text]
        if not _FLOAT_TEXT.match(value):
            raise FilterEvaluationError(f"input string {value!r} was not in a correct format")
        result = float(text)
        if math.isinf(result):
            raise FilterEvaluationError("value was either too large or too small for a Double")
        return result
    raise _fail(value, v.F64)


def _to_bool(value: Any) -> bool:
    kind = v.kind_of(value)
    if kind == v.BOOL:
        return bool(value)
    if kind in (v.I32, v.I64, v.F64):
        return bool(value != 0)
    if kind == v.STR:
        text = value.strip().lower()
        if text in ("true", "false"):
            return text == "true"
        raise FilterEvaluationError(f"string {value!r} was not recognized as a valid Boolean")
    raise _fail(value, v.BOOL)


def parse_timespan(text: str) -> _dt.timedelta:
    """`TimeSpan.Parse` (invariant): `[-][d.]hh:mm[:ss[.fffffff]]` or `[-]d`."""
    try:
        return _parse_timespan(text)
    except OverflowError:
        raise FilterEvaluationError(f"TimeSpan {text!r} is too large") from None


def _parse_timespan(text: str) -> _dt.timedelta:
    days_only = _TIMESPAN_DAYS.match(text)
    if days_only:
        result = _dt.timedelta(days=int(days_only["days"]))
        return -result if days_only["sign"] else result
    match = _TIMESPAN_TEXT.match(text)
    if not match or int(match["h"]) > 23 or int(match["m"]) > 59 or int(match["s"] or 0) > 59:
        raise FilterEvaluationError(f"string {text!r} was not recognized as a valid TimeSpan")
    fraction = (match["f"] or "").ljust(7, "0")
    result = _dt.timedelta(
        days=int(match["days"] or 0),
        hours=int(match["h"]),
        minutes=int(match["m"]),
        seconds=int(match["s"] or 0),
        microseconds=int(fraction) // 10,
    )
    return -result if match["sign"] else result


def parse_datetime(text: str) -> _dt.datetime:
    """`DateTime.Parse` (invariant) for ISO 8601 and `MM/dd/yyyy[ HH:mm[:ss]]` forms."""
    us = _US_DATETIME.match(text)
    try:
        if us:
            return _dt.datetime(
                int(us["y"]),
                int(us["mo"]),
                int(us["d"]),
                int(us["h"] or 0),
                int(us["mi"] or 0),
                int(us["s"] or 0),
            )
        return _dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise FilterEvaluationError(
            f"string {text!r} was not recognized as a valid DateTime"
        ) from None


def convert_to(value: Any, target: int) -> Any:
    """Convert `value` to the kind `target` as SET does; None stays None."""
    if value is None or value is v.UNKNOWN:
        return None
    kind = v.kind_of(value)
    if kind == target or target in (v.NULL, v.OTHER):
        return value
    if target == v.STR:
        return v.to_dotnet_string(value)
    if target in (v.I32, v.I64):
        return _to_integer(value, target)
    if target == v.F64:
        return _to_double(value)
    if target == v.BOOL:
        return _to_bool(value)
    if kind == v.STR:
        if target == v.DATETIME:
            return parse_datetime(value)
        if target == v.TIMESPAN:
            return parse_timespan(value)
        if target == v.GUID:
            try:
                return uuid.UUID(value.strip())
            except ValueError:
                raise FilterEvaluationError(f"string {value!r} is not a valid Guid") from None
    raise _fail(value, target)
