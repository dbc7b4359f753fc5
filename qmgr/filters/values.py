"""Typed values of the filter language and their .NET-compatible text forms.

Python values stand for the Service Bus types: `str` (String), `bool` (Boolean), `int` (Int64),
`Int32` (Int32, an `int` subclass), `float` (Double), `None` (a present property whose value is
null), `datetime.datetime` (DateTime), `datetime.timedelta` (TimeSpan), `uuid.UUID` (Guid) and
`bytes` (opaque binary). `UNKNOWN` stands for a missing user property.
"""

from __future__ import annotations

import datetime as _dt
import math
import uuid
from decimal import Decimal
from typing import Any, Final

from qmgr.filters.errors import FilterEvaluationError

INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
MAX_STRING: Final = 32767


class Int32(int):
    """Marks an integer property as a .NET Int32 (a plain `int` is an Int64).

    Arithmetic between two Int32 values stays Int32 (overflow-checked); SET keeps the Int32 type
    of an existing property.
    """

    __slots__ = ()

    def __new__(cls, value: Any = 0) -> Int32:
        number = int(value)
        if not INT32_MIN <= number <= INT32_MAX:
            raise OverflowError(f"{number} is outside the Int32 range")
        return super().__new__(cls, number)

    def __repr__(self) -> str:
        return f"Int32({int(self)})"


class _Unknown:
    """The *unknown* value: what a missing user property evaluates to."""

    __slots__ = ()
    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __reduce__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Final = _Unknown()

# Kinds: small ints so the runtime can dispatch quickly.
NULL: Final = 0
BOOL: Final = 1
I32: Final = 2
I64: Final = 3
F64: Final = 4
STR: Final = 5
DATETIME: Final = 6
TIMESPAN: Final = 7
GUID: Final = 8
BYTES: Final = 9
OTHER: Final = 10

NUMERIC: Final = frozenset({I32, I64, F64})

TYPE_NAMES: Final = {
    NULL: "null",
    BOOL: "Boolean",
    I32: "Int32",
    I64: "Int64",
    F64: "Double",
    STR: "String",
    DATETIME: "DateTime",
    TIMESPAN: "TimeSpan",
    GUID: "Guid",
    BYTES: "Byte[]",
    OTHER: "Object",
}

_KINDS: Final[dict[type, int]] = {
    type(None): NULL,
    bool: BOOL,
    Int32: I32,
    int: I64,
    float: F64,
    str: STR,
    _dt.datetime: DATETIME,
    _dt.timedelta: TIMESPAN,
    uuid.UUID: GUID,
    bytes: BYTES,
    bytearray: BYTES,
}


def kind_of(value: Any) -> int:
    """The kind of a (non-UNKNOWN) value; subclasses map to their base kind."""
    kind = _KINDS.get(type(value))
    if kind is not None:
        return kind
    # Order matters: bool before Int32 before int; datetime is not a subclass of date here.
    for base, base_kind in (
        (bool, BOOL),
        (Int32, I32),
        (int, I64),
        (float, F64),
        (str, STR),
        (_dt.datetime, DATETIME),
        (_dt.timedelta, TIMESPAN),
        (uuid.UUID, GUID),
        (bytes, BYTES),
    ):
        if isinstance(value, base):
            return base_kind
    return OTHER


def type_name(value: Any) -> str:
    """The .NET type name used in error messages."""
    if value is UNKNOWN:
        return "unknown"
    return TYPE_NAMES[kind_of(value)]


def normalize_datetime(value: _dt.datetime) -> _dt.datetime:
    """Aware datetimes are compared as UTC wall time; naive ones are taken as they are."""
    if value.tzinfo is not None and value.utcoffset() is not None:
        return value.astimezone(_dt.UTC).replace(tzinfo=None)
    return value


# ---------------------------------------------------------------------------------------------
# .NET invariant ToString()


def format_double(value: float) -> str:
    """`Double.ToString()` with the invariant culture (shortest round-trip, .NET Core 3.0+)."""
    if value != value:
        return "NaN"
    if value == math.inf:
        return "Infinity"
    if value == -math.inf:
        return "-Infinity"
    if value == 0.0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign, digit_tuple, exponent = Decimal(repr(value)).as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    exponent += len(digit_tuple) - len(digits)
    scientific = exponent + len(digits) - 1
    if -5 < scientific < 15:
        if exponent >= 0:
            text = digits + "0" * exponent
        elif scientific >= 0:
            text = digits[: scientific + 1] + "." + digits[scientific + 1 :]
        else:
            text = "0." + "0" * (-scientific - 1) + digits
    else:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        text = f"{mantissa}E{'+' if scientific >= 0 else '-'}{abs(scientific):02d}"
    return ("-" if sign else "") + text


def format_datetime(value: _dt.datetime) -> str:
    """`DateTime.ToString()` with the invariant culture: `MM/dd/yyyy HH:mm:ss`."""
    return (
        f"{value.month:02d}/{value.day:02d}/{value.year:04d} "
        f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    )


def format_timespan(value: _dt.timedelta) -> str:
    """`TimeSpan.ToString()` ("c" format): `[-][d.]hh:mm:ss[.fffffff]`."""
    micros = (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    seconds, micro = divmod(micros, 1_000_000)
    minutes, sec = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    days, hour = divmod(hours, 24)
    text = f"{sign}{f'{days}.' if days else ''}{hour:02d}:{minute:02d}:{sec:02d}"
    if micro:
        text += f".{micro * 10:07d}"
    return text


def to_dotnet_string(value: Any) -> str:
    """The invariant `ToString()` of a value (used by LIKE, string `+` and SET conversions)."""
    kind = kind_of(value)
    if kind == STR:
        return str(value)
    if kind == BOOL:
        return "True" if value else "False"
    if kind in (I32, I64):
        return str(int(value))
    if kind == F64:
        return format_double(float(value))
    if kind == DATETIME:
        return format_datetime(value)
    if kind == TIMESPAN:
        return format_timespan(value)
    if kind == GUID:
        return str(value)
    if kind == NULL:
        return ""
    raise FilterEvaluationError(f"a value of type {TYPE_NAMES[kind]} has no text form")
