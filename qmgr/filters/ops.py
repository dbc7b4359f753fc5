"""Operators with Service Bus semantics (C# operator binding over the modelled types).

Every function takes already-evaluated operands, where `UNKNOWN` is a missing user property and
`None` a present null value. Comparisons return True/False/None (None = unknown); arithmetic
returns a value or UNKNOWN. Type mismatches, integer division by zero and overflow raise
`FilterEvaluationError`. Both the compiled filters and the reference interpreter use these.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

from qmgr.filters import values as v
from qmgr.filters.errors import FilterEvaluationError
from qmgr.filters.like import cached_like

UNKNOWN = v.UNKNOWN
_kind = v.kind_of


def _mismatch(op: str, left: Any, right: Any) -> FilterEvaluationError:
    return FilterEvaluationError(
        f"operator '{op}' cannot be applied to operands of type "
        f"'{v.type_name(left)}' and '{v.type_name(right)}'"
    )


# ---------------------------------------------------------------------------------------------
# Comparison


def eq(left: Any, right: Any) -> bool | None:
    """`=`: unknown if either side is unknown; null equals only null; numbers promote."""
    if left is UNKNOWN or right is UNKNOWN:
        return None
    if left is None or right is None:
        return left is None and right is None
    kl = _kind(left)
    kr = _kind(right)
    if kl in v.NUMERIC and kr in v.NUMERIC:
        if kl == v.F64 or kr == v.F64:
            return float(left) == float(right)
        return int(left) == int(right)
    if kl == kr:
        if kl in (v.STR, v.BOOL, v.TIMESPAN, v.GUID):
            return bool(left == right)
        if kl == v.DATETIME:
            return v.normalize_datetime(left) == v.normalize_datetime(right)
    raise _mismatch("=", left, right)


def ne(left: Any, right: Any) -> bool | None:
    result = eq(left, right)
    return None if result is None else not result


def _ordering(op: str, compare: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool | None]:
    def ordered(left: Any, right: Any) -> bool | None:
        if left is UNKNOWN or right is UNKNOWN:
            return None
        if left is None or right is None:
            return False  # lifted C# comparison with null
        kl = _kind(left)
        kr = _kind(right)
        if kl in v.NUMERIC and kr in v.NUMERIC:
            if kl == v.F64 or kr == v.F64:
                return compare(float(left), float(right))
            return compare(int(left), int(right))
        if kl == kr == v.TIMESPAN:
            return compare(left, right)
        if kl == kr == v.DATETIME:
            return compare(v.normalize_datetime(left), v.normalize_datetime(right))
        raise _mismatch(op, left, right)

    ordered.__name__ = f"ordering_{compare.__name__}"
    return ordered


lt = _ordering("<", operator.lt)
le = _ordering("<=", operator.le)
gt = _ordering(">", operator.gt)
ge = _ordering(">=", operator.ge)

COMPARE: dict[str, Callable[[Any, Any], bool | None]] = {
    "=": eq,
    "<>": ne,
    "<": lt,
    "<=": le,
    ">": gt,
    ">=": ge,
}


# ---------------------------------------------------------------------------------------------
# Arithmetic


def _checked(result: int, kl: int, kr: int) -> int:
    if kl == v.I32 and kr == v.I32:
        if not v.INT32_MIN <= result <= v.INT32_MAX:
            raise FilterEvaluationError("arithmetic operation resulted in an overflow (Int32)")
        return v.Int32(result)
    if not v.INT64_MIN <= result <= v.INT64_MAX:
        raise FilterEvaluationError("arithmetic operation resulted in an overflow (Int64)")
    return result


def _null_operand(op: str, left: Any, right: Any) -> Any:
    """C# lifted operators: null with a number, DateTime or TimeSpan gives null."""
    other = right if left is None else left
    if other is None:
        raise FilterEvaluationError(f"operator '{op}' is ambiguous on two null operands")
    if _kind(other) in v.NUMERIC or _kind(other) in (v.DATETIME, v.TIMESPAN):
        return None
    raise _mismatch(op, left, right)


def add(left: Any, right: Any) -> Any:
    if left is UNKNOWN or right is UNKNOWN:
        return UNKNOWN
    kl = v.NULL if left is None else _kind(left)
    kr = v.NULL if right is None else _kind(right)
    if kl == v.STR or kr == v.STR:
        if kl in (v.BYTES, v.OTHER) or kr in (v.BYTES, v.OTHER):
            raise _mismatch("+", left, right)
        result = v.to_dotnet_string(left) + v.to_dotnet_string(right)
        if len(result) > v.MAX_STRING:
            raise FilterEvaluationError(f"string result is longer than {v.MAX_STRING} characters")
        return result
    if left is None or right is None:
        return _null_operand("+", left, right)
    if kl in v.NUMERIC and kr in v.NUMERIC:
        if kl == v.F64 or kr == v.F64:
            return float(left) + float(right)
        return _checked(int(left) + int(right), kl, kr)
    try:
        if (
            kl == v.DATETIME
            and kr == v.TIMESPAN
            or kl == v.TIMESPAN
            and kr in (v.DATETIME, v.TIMESPAN)
        ):
            return left + right
    except OverflowError:
        raise FilterEvaluationError(
            "the added or subtracted value results in an un-representable DateTime or TimeSpan"
        ) from None
    raise _mismatch("+", left, right)


def sub(left: Any, right: Any) -> Any:
    if left is UNKNOWN or right is UNKNOWN:
        return UNKNOWN
    if left is None or right is None:
        return _null_operand("-", left, right)
    kl = _kind(left)
    kr = _kind(right)
    if kl in v.NUMERIC and kr in v.NUMERIC:
        if kl == v.F64 or kr == v.F64:
            return float(left) - float(right)
        return _checked(int(left) - int(right), kl, kr)
    try:
        if kl == kr == v.DATETIME:
            return v.normalize_datetime(left) - v.normalize_datetime(right)
        if kl in (v.DATETIME, v.TIMESPAN) and kr == v.TIMESPAN:
            return left - right
    except OverflowError:
        raise FilterEvaluationError(
            "the added or subtracted value results in an un-representable DateTime or TimeSpan"
        ) from None
    raise _mismatch("-", left, right)


def mul(left: Any, right: Any) -> Any:
    if left is UNKNOWN or right is UNKNOWN:
        return UNKNOWN
    if left is None or right is None:
        return _null_numeric("*", left, right)
    kl = _kind(left)
    kr = _kind(right)
    if kl in v.NUMERIC and kr in v.NUMERIC:
        if kl == v.F64 or kr == v.F64:
            return float(left) * float(right)
        return _checked(int(left) * int(right), kl, kr)
    raise _mismatch("*", left, right)


def _null_numeric(op: str, left: Any, right: Any) -> Any:
    other = right if left is None else left
    if other is None:
        raise FilterEvaluationError(f"operator '{op}' is ambiguous on two null operands")
    if _kind(other) in v.NUMERIC:
        return None
    raise _mismatch(op, left, right)


def _float_div(left: float, right: float) -> float:
    if right == 0.0:
        if left == 0.0 or math.isnan(left):
            return math.nan
        return math.copysign(math.inf, left) * math.copysign(1.0, right)
    return left / right


def div(left: Any, right: Any) -> Any:
    if left is UNKNOWN or right is UNKNOWN:
        return UNKNOWN
    if left is None or right is None:
        return _null_numeric("/", left, right)
    kl = _kind(left)
    kr = _kind(right)
    if kl in v.NUMERIC and kr in v.NUMERIC:
        if kl == v.F64 or kr == v.F64:
            return _float_div(float(left), float(right))
        a = int(left)
        b = int(right)
        if b == 0:
            raise FilterEvaluationError("attempted to divide by zero")
        quotient = abs(a) // abs(b)
        return _checked(-quotient if (a < 0) != (b < 0) else quotient, kl, kr)
    raise _mismatch("/", left, right)


def mod(left: Any, right: Any) -> Any:
    if left is UNKNOWN or right is UNKNOWN:
        return UNKNOWN
    if left is None or right is None:
        return _null_numeric("%", left, right)
    kl = _kind(left)
    kr = _kind(right)
    if kl in v.NUMERIC and kr in v.NUMERIC:
        if kl == v.F64 or kr == v.F64:
            a = float(left)
            b = float(right)
            if b == 0.0 or math.isinf(a) or math.isnan(a) or math.isnan(b):
                return math.nan
            return math.fmod(a, b)
        x = int(left)
        y = int(right)
        if y == 0:
            raise FilterEvaluationError("attempted to divide by zero")
        if y == -1:
            _checked(-x, kl, kr)  # MinValue % -1 overflows in .NET, like MinValue / -1
        remainder = abs(x) % abs(y)
        return _checked(-remainder if x < 0 else remainder, kl, kr)
    raise _mismatch("%", left, right)


def neg(operand: Any) -> Any:
    if operand is UNKNOWN or operand is None:
        return operand
    kind = _kind(operand)
    if kind == v.F64:
        return -float(operand)
    if kind in (v.I32, v.I64):
        return _checked(-int(operand), kind, kind)
    if kind == v.TIMESPAN:
        try:
            return -operand
        except OverflowError:
            raise FilterEvaluationError(
                "negating the minimum value of a TimeSpan is invalid"
            ) from None
    raise FilterEvaluationError(
        f"operator '-' cannot be applied to an operand of type '{v.type_name(operand)}'"
    )


def pos(operand: Any) -> Any:
    if operand is UNKNOWN or operand is None:
        return operand
    if _kind(operand) in v.NUMERIC or _kind(operand) == v.TIMESPAN:
        return operand
    raise FilterEvaluationError(
        f"operator '+' cannot be applied to an operand of type '{v.type_name(operand)}'"
    )


ARITHMETIC: dict[str, Callable[[Any, Any], Any]] = {
    "+": add,
    "-": sub,
    "*": mul,
    "/": div,
    "%": mod,
}
UNARY: dict[str, Callable[[Any], Any]] = {"+": pos, "-": neg}


# ---------------------------------------------------------------------------------------------
# LIKE, IN, property()


def like_text(value: Any) -> str:
    """The text LIKE tests: the invariant ToString() of the value."""
    kind = _kind(value)
    if kind in (v.BYTES, v.OTHER):
        raise FilterEvaluationError(
            f"LIKE cannot be applied to a value of type '{v.type_name(value)}'"
        )
    return v.to_dotnet_string(value)


def like_with(value: Any, matcher: Callable[[str], bool], negated: bool) -> bool | None:
    """LIKE against a pattern compiled once; `value` is any evaluated operand."""
    if value is UNKNOWN or value is None:
        return None
    result = matcher(value if type(value) is str else like_text(value))
    return not result if negated else result


def in_values(value: Any, items: tuple[Any, ...], negated: bool) -> bool | None:
    """[NOT] IN over already-evaluated items (unknown items never match)."""
    if value is UNKNOWN:
        return None
    for item in items:
        if item is not UNKNOWN and eq(value, item):
            return not negated
    return negated


def property_name(name: Any) -> str | None:
    """The name given to property(): None when it is unknown or null."""
    if name is UNKNOWN or name is None:
        return None
    if _kind(name) != v.STR:
        raise FilterEvaluationError(f"property() needs a String name, not '{v.type_name(name)}'")
    return str(name)


def like_dynamic(
    value: Any, pattern: Any, escape: Any, has_escape: bool, negated: bool
) -> bool | None:
    """LIKE with a pattern (and escape) computed for this message."""
    if value is UNKNOWN or pattern is UNKNOWN or escape is UNKNOWN:
        return None
    if value is None or pattern is None or (has_escape and escape is None):
        return None
    plan = cached_like(like_text(pattern), like_text(escape) if has_escape else None)
    result = plan.match(like_text(value))
    return not result if negated else result
