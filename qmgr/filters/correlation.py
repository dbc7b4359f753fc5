"""Correlation filters: exact, case-sensitive equality on a few system fields and user properties.

All given fields are AND-ed; a message lacking one of them does not match. The filter is
compiled to one small function (one dictionary lookup and one comparison per field).
"""

from __future__ import annotations

import datetime as _dt
import math
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

from qmgr.filters import ast as a
from qmgr.filters import sysprops
from qmgr.filters import values as v
from qmgr.filters.base import Filter

# keyword argument -> canonical system property name
FIELDS: Final = {
    "correlation_id": "CorrelationId",
    "message_id": "MessageId",
    "to": "To",
    "reply_to": "ReplyTo",
    "label": "Label",
    "subject": "Label",
    "session_id": "SessionId",
    "reply_to_session_id": "ReplyToSessionId",
    "content_type": "ContentType",
}


def _describe(value: object) -> str:
    """A safe description of a caller value for an error message (never calls its __repr__)."""
    return f"of type {type(value).__name__}"


def exact_value(name: str, value: Any) -> Any:
    """`value` as an exact built-in type a correlation filter can hold, or ValueError.

    Subclasses become their base type without running any of their methods: a StrEnum member
    is its string, an IntEnum member its int, a str subclass a plain str (its __repr__,
    __str__ or __eq__ are never called); Int32 stays Int32 and bool stays bool.
    """
    if value is None or type(value) in (str, int, bool, v.Int32):
        return value
    if isinstance(value, v.Int32):
        return v.Int32(int.__int__(value))
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        number = float.__float__(value)
        if math.isnan(number):
            raise ValueError(f"property {name!r} is NaN, which equals nothing")
        return number
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, _dt.datetime):
        return _dt.datetime(
            value.year,
            value.month,
            value.day,
            value.hour,
            value.minute,
            value.second,
            value.microsecond,
            value.tzinfo,
            fold=value.fold,
        )
    if isinstance(value, _dt.timedelta):
        return _dt.timedelta(value.days, value.seconds, value.microseconds)
    if isinstance(value, uuid.UUID):
        return uuid.UUID(int=value.int)
    raise ValueError(
        f"property {name!r} has a value {_describe(value)}; a correlation filter holds str, "
        "bool, int, Int32, float, datetime, timedelta, UUID or None"
    )


def correlation_equal(found: Any, wanted: Any) -> bool:
    """Equality for user properties: numbers compare by value, other types must agree; never raises."""
    if found is v.UNKNOWN:
        return False
    if wanted is None or found is None:
        return found is None and wanted is None
    kf = v.kind_of(found)
    kw = v.kind_of(wanted)
    if kf in v.NUMERIC and kw in v.NUMERIC:
        if kf == v.F64 or kw == v.F64:
            return float(found) == float(wanted)
        return int(found) == int(wanted)
    if kf != kw or kf in (v.BYTES, v.OTHER):
        return False
    if kf == v.DATETIME:
        return v.normalize_datetime(found) == v.normalize_datetime(wanted)
    return bool(found == wanted)


class CorrelationFilter(Filter):
    """`CorrelationFilter(correlation_id="high", label="red", properties={"color": "Red"})`.

    At least one field or property is required (ValueError otherwise). `label` and `subject`
    are two names for the same field. Property names are matched case-insensitively, values
    exactly (strings case-sensitive; numbers by value across Int32/Int64/Double).
    """

    __slots__ = ("fields", "properties", "source", "evaluate", "matches")

    evaluate: Callable[[Mapping[str, Any], Mapping[str, Any]], bool]  # type: ignore[assignment]
    matches: Callable[[Mapping[str, Any], Mapping[str, Any]], bool]  # type: ignore[assignment]

    def __init__(
        self,
        *,
        correlation_id: str | None = None,
        message_id: str | None = None,
        to: str | None = None,
        reply_to: str | None = None,
        label: str | None = None,
        subject: str | None = None,
        session_id: str | None = None,
        reply_to_session_id: str | None = None,
        content_type: str | None = None,
        properties: Mapping[str, Any] | None = None,
    ) -> None:
        given = {
            "correlation_id": correlation_id,
            "message_id": message_id,
            "to": to,
            "reply_to": reply_to,
            "label": label,
            "subject": subject,
            "session_id": session_id,
            "reply_to_session_id": reply_to_session_id,
            "content_type": content_type,
        }
        if label is not None and subject is not None and label != subject:
            raise ValueError("label and subject name the same field and must agree")
        fields: dict[str, str] = {}
        for argument, value in given.items():
            if value is None:
                continue
            if not isinstance(value, str):
                raise ValueError(f"{argument} must be a string, not {type(value).__name__}")
            fields[FIELDS[argument]] = str.__str__(value)
        props: dict[str, Any] = {}
        for name, value in (properties or {}).items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"invalid property name {_describe(name)}")
            props[str.__str__(name)] = exact_value(str.__str__(name), value)
        if not fields and not props:
            raise ValueError("a correlation filter needs at least one field or property")
        self.fields: Mapping[str, str] = fields
        self.properties: Mapping[str, Any] = props
        self.source, function = self._compile()
        # A plain function stored on the instance: calling it costs no method binding.
        self.evaluate = function
        self.matches = function

    def _compile(self) -> tuple[str, Any]:
        # No caller value is written into the source: names and values are closure variables,
        # already coerced to exact built-in types by __init__.
        closure: dict[str, Any] = {
            "_M": v.UNKNOWN,
            "_uci": sysprops.lookup_user_folded,
            "_sci": sysprops.lookup_system_folded,
            "_ceq": correlation_equal,
        }
        body: list[str] = []
        for index, (name, value) in enumerate(self.fields.items()):
            prop = sysprops.resolve(name)
            assert prop is not None
            closure[f"_s{index}"] = value
            body.append(f"t = system.get({prop.name!r}, _M)")
            body.append(f"if t is _M: t = _sci(system, {prop.folded!r})")
            body.append(f"if t != _s{index}: return False")
        for index, (name, value) in enumerate(self.properties.items()):
            closure[f"_n{index}"] = name
            closure[f"_f{index}"] = sysprops.fold(name)
            closure[f"_k{index}"] = value
            body.append(f"t = user.get(_n{index}, _M)")
            body.append(f"if t is _M: t = _uci(user, _f{index})")
            if type(value) is str:
                body.append(f"if t != _k{index}: return False")
            else:
                body.append(f"if not _ceq(t, _k{index}): return False")
        body.append("return True")
        names = sorted(closure)
        source = "\n".join(
            [f"def _factory({', '.join(names)}):", "    def matches(system, user):"]
            + ["        " + line for line in body]
            + ["    return matches", ""]
        )
        namespace: dict[str, Any] = {}
        exec(compile(source, "<qmgr.filters correlation>", "exec"), namespace)
        return source, namespace["_factory"](**closure)

    @property
    def text(self) -> str:
        """The equivalent SQL filter (informative; non-text values are printed as constants)."""
        clauses = [f"sys.{name} = {a.quote_string(value)}" for name, value in self.fields.items()]
        for name, value in self.properties.items():
            clauses.append(f"{a.quote_identifier(name)} = {_sql_constant(value)}")
        return " AND ".join(clauses)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, CorrelationFilter)
            and dict(self.fields) == dict(other.fields)
            and _typed(self.properties) == _typed(other.properties)
        )

    def __hash__(self) -> int:
        return hash((tuple(sorted(self.fields.items())), tuple(sorted(_typed(self.properties)))))

    def __repr__(self) -> str:
        args = [f"{k}={val!r}" for k, val in self.fields.items()]
        if self.properties:
            args.append(f"properties={dict(self.properties)!r}")
        return f"CorrelationFilter({', '.join(args)})"


def _typed(props: Mapping[str, Any]) -> set[tuple[str, str, Any]]:
    return {(k, type(val).__name__, val) for k, val in props.items()}


def _sql_constant(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(int(value)) if isinstance(value, int) else repr(value)
    if isinstance(value, str):
        return a.quote_string(value)
    return a.quote_string(v.to_dotnet_string(value))
