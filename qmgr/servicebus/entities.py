"""Entity properties: queues, topics, subscriptions and rules, with Service Bus's defaults.

One table per kind lists each property under its documented name (the names of the management
API's ``QueueDescription`` and of the emulator's Config.json ``Properties``), its type, default
and allowed range. ``from_dict`` validates a whole mapping (unknown names and bad values are
errors naming the property, and the caller's ``where`` prefix: a JSON path or a CLI option);
``to_dict`` gives the same names back, durations as ISO 8601 (``PT1M``), so a Config.json
export reads like the file it came from.

Times are float seconds; "never" (``TimeSpan.MaxValue``, the default TTL and auto-delete) is
``math.inf`` and is written as .NET writes it, ``P10675199DT2H48M5.4775807S``.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from typing import Any, Self

import isodate

from qmgr.servicebus.errors import bad

MAX_TIMESPAN = "P10675199DT2H48M5.4775807S"
_MAX_SECONDS = 10675199 * 86400.0  # anything this long is "never"
_TIMESPAN = re.compile(r"(?:(\d+)\.)?(\d+):(\d+):(\d+(?:\.\d+)?)")


class Status(Enum):
    ACTIVE = "Active"
    DISABLED = "Disabled"
    SEND_DISABLED = "SendDisabled"
    RECEIVE_DISABLED = "ReceiveDisabled"

    @property
    def can_send(self) -> bool:
        return self in (Status.ACTIVE, Status.RECEIVE_DISABLED)

    @property
    def can_receive(self) -> bool:
        return self in (Status.ACTIVE, Status.SEND_DISABLED)


QUEUE_STATUSES = tuple(Status)
TOPIC_STATUSES = (Status.ACTIVE, Status.DISABLED, Status.SEND_DISABLED)
SUBSCRIPTION_STATUSES = (Status.ACTIVE, Status.DISABLED, Status.RECEIVE_DISABLED)


# ---------------------------------------------------------------------- durations


def parse_duration(value: Any, where: str = "") -> float:
    """ISO 8601 duration (``PT1M``, ``P1DT2H``), a .NET TimeSpan string (``00:01:00``,
    ``1.02:00:00``) or a number of seconds; returns seconds (``inf`` for TimeSpan.MaxValue)."""
    if isinstance(value, bool):
        raise bad(f"not a duration: {value!r}", where=where)
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, dt.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, str):
        seconds = _parse_duration_text(value.strip(), where)
    else:
        raise bad(f"not a duration: {value!r}", where=where)
    if math.isnan(seconds) or seconds < 0:
        raise bad(f"a duration must not be negative: {value!r}", where=where)
    return math.inf if seconds >= _MAX_SECONDS else seconds


def _parse_duration_text(text: str, where: str) -> float:
    if text.upper().startswith("P"):
        try:
            parsed = isodate.parse_duration(text)
        except (isodate.ISO8601Error, ValueError, OverflowError) as exc:
            raise bad(f"not an ISO 8601 duration: {text!r} ({exc})", where=where) from None
        if isinstance(parsed, isodate.Duration):  # years or months: no fixed length
            raise bad(f"a duration in years or months has no fixed length: {text!r}", where=where)
        return float(parsed.total_seconds())
    match = _TIMESPAN.fullmatch(text)
    if match is None:
        raise bad(f"not a duration: {text!r} (ISO 8601 like PT1M, or d.hh:mm:ss)", where=where)
    days, hours, minutes, secs = match.groups()
    return int(days or 0) * 86400.0 + int(hours) * 3600.0 + int(minutes) * 60.0 + float(secs)


def format_duration(seconds: float) -> str:
    """Seconds as ISO 8601, the form Config.json and the management API use."""
    if math.isinf(seconds):
        return MAX_TIMESPAN
    return str(isodate.duration_isoformat(dt.timedelta(seconds=seconds)))


# ---------------------------------------------------------------------- property tables


@dataclass(frozen=True, slots=True)
class _Spec:
    attr: str
    kind: str  # bool | int | duration | str | status
    low: float | None = None
    high: float | None = None
    create_only: bool = False  # cannot be changed after creation (Service Bus refuses)
    statuses: tuple[Status, ...] = ()


def _specs(*items: tuple[str, _Spec]) -> dict[str, _Spec]:
    return dict(items)


_COMMON = _specs(
    ("DefaultMessageTimeToLive", _Spec("default_message_ttl", "duration", 1.0)),
    ("AutoDeleteOnIdle", _Spec("auto_delete_on_idle", "duration", 300.0)),
    ("EnableBatchedOperations", _Spec("enable_batched_operations", "bool")),
    ("UserMetadata", _Spec("user_metadata", "str", 0, 1024)),
)
_RECEIVING = _specs(
    ("LockDuration", _Spec("lock_duration", "duration", 5.0, 300.0)),
    ("MaxDeliveryCount", _Spec("max_delivery_count", "int", 1, 2**31 - 1)),
    ("DeadLetteringOnMessageExpiration", _Spec("dead_lettering_on_expiration", "bool")),
    ("RequiresSession", _Spec("requires_session", "bool", create_only=True)),
    ("ForwardTo", _Spec("forward_to", "str", 0, 260)),
    ("ForwardDeadLetteredMessagesTo", _Spec("forward_dead_lettered_to", "str", 0, 260)),
)
_SENDING = _specs(
    ("MaxSizeInMegabytes", _Spec("max_size_mb", "int", 1, 81920)),
    ("RequiresDuplicateDetection", _Spec("requires_duplicate_detection", "bool", create_only=True)),
    (
        "DuplicateDetectionHistoryTimeWindow",
        _Spec("duplicate_detection_window", "duration", 5.0, 7 * 86400.0),
    ),
    ("EnablePartitioning", _Spec("enable_partitioning", "bool", create_only=True)),
    ("MaxMessageSizeInKilobytes", _Spec("max_message_size_kb", "int", 1, 102400)),
)


class _Props:
    """Shared behaviour of the property dataclasses (each defines ``SPECS``)."""

    SPECS: Mapping[str, _Spec] = {}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, where: str = "") -> Self:
        """Validate ``data`` (documented names, case-insensitive) over the defaults."""
        return cls().with_changes(data or {}, where, creating=True)

    def with_changes(
        self, data: Mapping[str, Any], where: str = "", *, creating: bool = False
    ) -> Self:
        """A copy with ``data`` applied; a property that can only be set at creation and is
        changed here is an error, as in Service Bus."""
        by_lower = {name.lower(): name for name in self.SPECS}
        changes: dict[str, Any] = {}
        for raw_name, value in data.items():
            name = by_lower.get(str(raw_name).lower())
            path = f"{where}.{raw_name}" if where else str(raw_name)
            if name is None:
                known = ", ".join(self.SPECS)
                raise bad(f"unknown property {raw_name!r} (known: {known})", where=where)
            spec = self.SPECS[name]
            converted = _convert(spec, value, path)
            if spec.create_only and not creating and converted != getattr(self, spec.attr):
                raise bad(f"{name} can only be set when the entity is created", where=path)
            changes[spec.attr] = converted
        return replace(self, **changes)  # type: ignore[type-var]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, spec in self.SPECS.items():
            value = getattr(self, spec.attr)
            if spec.kind == "duration":
                value = format_duration(value)
            elif spec.kind == "status":
                value = value.value
            if value is not None:
                out[name] = value
        return out


def _convert(spec: _Spec, value: Any, path: str) -> Any:
    if spec.kind == "bool":
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if not isinstance(value, bool):
            raise bad(f"expected true or false, got {value!r}", where=path)
        return value
    if spec.kind == "int":
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad(f"expected an integer, got {value!r}", where=path)
        _check_range(spec, value, path, str(value))
        return value
    if spec.kind == "duration":
        seconds = parse_duration(value, path)
        _check_range(spec, seconds, path, str(value))
        return seconds
    if spec.kind == "status":
        for status in spec.statuses:
            if isinstance(value, str) and value.lower() == status.value.lower():
                return status
        allowed = ", ".join(s.value for s in spec.statuses)
        raise bad(f"status must be one of {allowed}, got {value!r}", where=path)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise bad(f"expected a string, got {value!r}", where=path)
    if spec.high is not None and len(value) > spec.high:
        raise bad(f"at most {int(spec.high)} characters", where=path)
    return value


def _check_range(spec: _Spec, value: float, path: str, shown: str) -> None:
    if spec.low is not None and value < spec.low:
        low = format_duration(spec.low) if spec.kind == "duration" else int(spec.low)
        raise bad(f"{shown} is below the minimum {low}", where=path)
    if spec.high is not None and value > spec.high:
        high = format_duration(spec.high) if spec.kind == "duration" else int(spec.high)
        raise bad(f"{shown} is above the maximum {high}", where=path)


def _status(statuses: tuple[Status, ...]) -> dict[str, _Spec]:
    return {"Status": _Spec("status", "status", statuses=statuses)}


@dataclass(frozen=True, slots=True)
class QueueProperties(_Props):
    lock_duration: float = 60.0
    max_delivery_count: int = 10
    default_message_ttl: float = math.inf
    dead_lettering_on_expiration: bool = False
    requires_session: bool = False
    requires_duplicate_detection: bool = False
    duplicate_detection_window: float = 600.0
    forward_to: str | None = None
    forward_dead_lettered_to: str | None = None
    max_size_mb: int = 1024
    max_message_size_kb: int = 256
    enable_partitioning: bool = False
    enable_batched_operations: bool = True
    auto_delete_on_idle: float = math.inf
    status: Status = Status.ACTIVE
    user_metadata: str | None = None

    SPECS = {**_RECEIVING, **_SENDING, **_COMMON, **_status(QUEUE_STATUSES)}


@dataclass(frozen=True, slots=True)
class TopicProperties(_Props):
    default_message_ttl: float = math.inf
    requires_duplicate_detection: bool = False
    duplicate_detection_window: float = 600.0
    max_size_mb: int = 1024
    max_message_size_kb: int = 256
    enable_partitioning: bool = False
    support_ordering: bool = True
    enable_batched_operations: bool = True
    auto_delete_on_idle: float = math.inf
    status: Status = Status.ACTIVE
    user_metadata: str | None = None

    SPECS = {
        **_SENDING,
        **_COMMON,
        "SupportOrdering": _Spec("support_ordering", "bool"),
        **_status(TOPIC_STATUSES),
    }


@dataclass(frozen=True, slots=True)
class SubscriptionProperties(_Props):
    lock_duration: float = 60.0
    max_delivery_count: int = 10
    default_message_ttl: float = math.inf
    dead_lettering_on_expiration: bool = False
    dead_lettering_on_filter_exceptions: bool = True
    requires_session: bool = False
    forward_to: str | None = None
    forward_dead_lettered_to: str | None = None
    enable_batched_operations: bool = True
    auto_delete_on_idle: float = math.inf
    status: Status = Status.ACTIVE
    user_metadata: str | None = None

    SPECS = {
        **_RECEIVING,
        "DeadLetteringOnFilterEvaluationExceptions": _Spec(
            "dead_lettering_on_filter_exceptions", "bool"
        ),
        **_COMMON,
        **_status(SUBSCRIPTION_STATUSES),
    }


# ---------------------------------------------------------------------- rules


class FilterType(Enum):
    SQL = "Sql"
    CORRELATION = "Correlation"
    TRUE = "True"
    FALSE = "False"


CORRELATION_FIELDS = (
    "ContentType",
    "CorrelationId",
    "Label",
    "MessageId",
    "ReplyTo",
    "ReplyToSessionId",
    "SessionId",
    "To",
)


@dataclass(frozen=True, slots=True)
class RuleProperties:
    """A rule as defined: a filter (SQL text, correlation fields, true or false) and an optional
    SQL action. ``qmgr.filters`` compiles it; this is only the definition, as stored.

    ``correlation`` holds the system fields by their documented names (``Subject`` is taken as
    ``Label``); ``properties`` the application properties a correlation filter matches."""

    filter_type: FilterType = FilterType.TRUE
    sql: str | None = None
    correlation: Mapping[str, str] = field(default_factory=dict)
    properties: Mapping[str, Any] = field(default_factory=dict)
    action: str | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)  # @name values for SQL

    def to_dict(self) -> dict[str, Any]:
        """The Config.json form: ``{"FilterType": ..., "SqlFilter"|"CorrelationFilter": ...,
        "Action": ...}`` (true/false filters as the SQL texts ``1=1``/``1=0``)."""
        out: dict[str, Any]
        if self.filter_type is FilterType.CORRELATION:
            corr: dict[str, Any] = dict(self.correlation)
            if self.properties:
                corr["Properties"] = dict(self.properties)
            out = {"FilterType": "Correlation", "CorrelationFilter": corr}
        else:
            text = {FilterType.TRUE: "1=1", FilterType.FALSE: "1=0"}.get(self.filter_type)
            out = {"FilterType": "Sql", "SqlFilter": {"SqlExpression": text or self.sql}}
        if self.action:
            out["Action"] = {"SqlExpression": self.action}
        return out

    @staticmethod
    def from_dict(data: Mapping[str, Any], where: str = "") -> RuleProperties:
        """The Config.json form (see ``to_dict``); a misspelt ``FilterType`` or a filter body that
        does not match it is an error naming the path, never a silent TrueFilter."""
        if not isinstance(data, Mapping):
            raise bad(f"a rule's properties must be an object, got {data!r}", where=where)
        known = {"filtertype", "sqlfilter", "correlationfilter", "action"}
        for name in data:
            if str(name).lower() not in known:
                raise bad(
                    f"unknown property {name!r} (known: FilterType, SqlFilter, "
                    "CorrelationFilter, Action)",
                    where=where,
                )
        get = {str(k).lower(): v for k, v in data.items()}
        ftype = get.get("filtertype")
        action = _sql_text(get["action"], f"{where}.Action") if get.get("action") else None
        if isinstance(ftype, str) and ftype.lower() == "sql":
            body = get.get("sqlfilter")
            if body is None:
                raise bad("FilterType Sql needs a SqlFilter", where=where)
            return RuleProperties(
                FilterType.SQL, sql=_sql_text(body, f"{where}.SqlFilter"), action=action
            )
        if isinstance(ftype, str) and ftype.lower() == "correlation":
            body = get.get("correlationfilter")
            if not isinstance(body, Mapping):
                raise bad("FilterType Correlation needs a CorrelationFilter object", where=where)
            corr, props = _correlation(body, f"{where}.CorrelationFilter")
            return RuleProperties(
                FilterType.CORRELATION, correlation=corr, properties=props, action=action
            )
        raise bad(f"FilterType must be 'Sql' or 'Correlation', got {ftype!r}", where=where)


def _sql_text(body: Any, where: str) -> str:
    if isinstance(body, Mapping):
        items = {str(k).lower(): v for k, v in body.items()}
        text = items.get("sqlexpression")
        extra = set(items) - {"sqlexpression", "parameters"}
        if extra:
            raise bad(f"unknown property {sorted(extra)[0]!r} (known: SqlExpression)", where=where)
    else:
        text = body
    if not isinstance(text, str) or not text.strip():
        raise bad("SqlExpression must be a non-empty string", where=where)
    return text


def _correlation(body: Mapping[str, Any], where: str) -> tuple[dict[str, str], dict[str, Any]]:
    names = {f.lower(): f for f in CORRELATION_FIELDS}
    names["subject"] = "Label"
    corr: dict[str, str] = {}
    props: dict[str, Any] = {}
    for raw, value in body.items():
        low = str(raw).lower()
        if low == "properties":
            if not isinstance(value, Mapping):
                raise bad("Properties must be an object", where=f"{where}.Properties")
            props = dict(value)
            continue
        name = names.get(low)
        if name is None:
            known = ", ".join((*CORRELATION_FIELDS, "Properties"))
            raise bad(f"unknown property {raw!r} (known: {known})", where=where)
        if value is None:
            continue
        if not isinstance(value, str):
            raise bad(f"expected a string, got {value!r}", where=f"{where}.{raw}")
        corr[name] = value
    if not corr and not props:
        raise bad("a correlation filter needs at least one property", where=where)
    return corr, props


def field_names(cls: type[_Props]) -> list[str]:
    """The documented property names of a kind (for help texts and the CLI)."""
    attrs = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return [name for name, spec in cls.SPECS.items() if spec.attr in attrs]
