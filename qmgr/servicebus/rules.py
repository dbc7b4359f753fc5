"""Subscription rules and the fan-out of a topic's messages to its subscriptions.

A rule is a filter and an optional action (``qmgr.filters``). For each subscription, as
Service Bus documents:

- every matching rule without an action selects the message once: all of them together give
  at most one unchanged copy;
- every matching rule with an action gives its own copy, the action applied, with the
  application property ``RuleName`` set to the rule's name;
- no matching rule: the subscription gets nothing.

Correlation filters are found through an index, so their number barely matters: each
correlation rule is filed under one of its fields (``CorrelationId`` first, then the other
system fields, then an application property) and its value. A message looks up its own value
of each indexed field and evaluates only the rules found there. SQL filters are evaluated one
by one; true filters cost nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from qmgr.filters import (
    Action,
    CorrelationFilter,
    FalseFilter,
    Filter,
    FilterEvaluationError,
    FilterSyntaxError,
    TrueFilter,
    compile_action,
    compile_filter,
)
from qmgr.filters.sysprops import fold
from qmgr.servicebus.entities import FilterType, RuleProperties
from qmgr.servicebus.errors import bad
from qmgr.servicebus.message import SbMessage

# documented correlation field -> (CorrelationFilter keyword, SbMessage attribute)
_CORRELATION_FIELDS: dict[str, tuple[str, str]] = {
    "CorrelationId": ("correlation_id", "correlation_id"),
    "Label": ("label", "subject"),
    "To": ("to", "to"),
    "MessageId": ("message_id", "message_id"),
    "SessionId": ("session_id", "session_id"),
    "ReplyTo": ("reply_to", "reply_to"),
    "ReplyToSessionId": ("reply_to_session_id", "reply_to_session_id"),
    "ContentType": ("content_type", "content_type"),
}
_INDEX_ORDER = tuple(_CORRELATION_FIELDS)  # the field a rule is filed under, in preference

RULE_NAME_PROPERTY = "RuleName"


@dataclass(slots=True, eq=False)
class CompiledRule:
    """A rule as defined (``properties``) with its compiled filter and action."""

    name: str
    properties: RuleProperties
    filter: Filter
    action: Action | None
    created_at: float
    updated_at: float = 0.0
    #: "true", "false", "sql" or "correlation" (how the router treats it)
    kind: str = field(default="sql")

    @property
    def counts_as_sql(self) -> bool:
        """Quotas count true, false and SQL filters as SQL rules."""
        return self.kind != "correlation"


def compile_rule(name: str, rule: RuleProperties, now: float, where: str = "") -> CompiledRule:
    """Compile a rule definition; a syntax error is ``BadArgument`` with ``where`` naming the
    filter or action and ``position`` the character where it went wrong."""
    if not isinstance(rule, RuleProperties):
        raise bad(f"a rule must be RuleProperties, got {type(rule).__name__}", where=where)
    params = dict(rule.parameters) if rule.parameters else None
    filt: Filter
    kind: str
    try:
        if rule.filter_type is FilterType.TRUE:
            filt, kind = TrueFilter(), "true"
        elif rule.filter_type is FilterType.FALSE:
            filt, kind = FalseFilter(), "false"
        elif rule.filter_type is FilterType.SQL:
            if not rule.sql or not rule.sql.strip():
                raise bad("a SQL filter needs an expression", where=_join(where, "filter"))
            filt, kind = compile_filter(rule.sql, params), "sql"
            filt, kind = _simplify(filt, kind)
        else:
            filt, kind = _correlation_filter(rule, _join(where, "filter")), "correlation"
    except FilterSyntaxError as exc:
        raise bad(
            f"SQL filter: {exc}", where=_join(where, "filter"), position=exc.position
        ) from None
    action: Action | None = None
    if rule.action is not None and rule.action.strip():
        try:
            action = compile_action(rule.action, params)
        except FilterSyntaxError as exc:
            raise bad(
                f"SQL action: {exc}", where=_join(where, "action"), position=exc.position
            ) from None
    return CompiledRule(name, rule, filt, action, now, now, kind)


def _join(where: str, part: str) -> str:
    return f"{where}.{part}" if where else part


def _simplify(filt: Filter, kind: str) -> tuple[Filter, str]:
    """``1=1`` and ``1=0`` are the true and false filters (and cost nothing)."""
    text = "".join(filt.text.split())
    if text == "1=1":
        return TrueFilter(), "true"
    if text == "1=0":
        return FalseFilter(), "false"
    return filt, kind


def _correlation_filter(rule: RuleProperties, where: str) -> CorrelationFilter:
    kwargs: dict[str, Any] = {}
    for name, value in rule.correlation.items():
        spec = _CORRELATION_FIELDS.get("Label" if name == "Subject" else name)
        if spec is None:
            raise bad(f"unknown correlation field {name!r}", where=where)
        kwargs[spec[0]] = value
    try:
        return CorrelationFilter(**kwargs, properties=dict(rule.properties) or None)
    except ValueError as exc:
        raise bad(f"correlation filter: {exc}", where=where) from None


# ---------------------------------------------------------------------- fan-out


def _utc(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).replace(tzinfo=None)


def system_view(
    msg: SbMessage, sequence_number: int = 0, enqueued_time: float | None = None
) -> dict[str, Any]:
    """The system properties a filter sees (absent ones are null)."""
    out: dict[str, Any] = {}
    if sequence_number:
        out["SequenceNumber"] = sequence_number
        out["EnqueuedSequenceNumber"] = sequence_number
    if enqueued_time is not None:
        out["EnqueuedTimeUtc"] = _utc(enqueued_time)
    for name, (_, attr) in _CORRELATION_FIELDS.items():
        value = getattr(msg, attr)
        if value is not None:
            out[name] = value
    if msg.partition_key is not None:
        out["PartitionKey"] = msg.partition_key
    if msg.time_to_live is not None:
        out["TimeToLive"] = dt.timedelta(seconds=msg.time_to_live)
    if msg.scheduled_enqueue_time is not None:
        out["ScheduledEnqueueTimeUtc"] = _utc(msg.scheduled_enqueue_time)
    out["Size"] = msg.size
    return out


def apply_action(
    action: Action, rule_name: str, msg: SbMessage, system: Mapping[str, Any]
) -> SbMessage:
    """A copy of ``msg`` with the action applied and ``RuleName`` set (may raise
    ``FilterEvaluationError``)."""
    new_system, new_user = action.apply(system, msg.properties)
    new_user[RULE_NAME_PROPERTY] = rule_name
    copy = SbMessage(
        body=msg.body,
        body_type=msg.body_type,
        properties=new_user,
        extra=msg.extra,
        partition_key=msg.partition_key,
        time_to_live=msg.time_to_live,
        scheduled_enqueue_time=msg.scheduled_enqueue_time,
    )
    for name, (_, attr) in _CORRELATION_FIELDS.items():
        value = new_system.get(name, new_system.get("Subject") if name == "Label" else None)
        setattr(copy, attr, None if value is None else str(value))
    if "PartitionKey" in new_system:
        pk = new_system["PartitionKey"]
        copy.partition_key = None if pk is None else str(pk)
    ttl = new_system.get("TimeToLive")
    if isinstance(ttl, dt.timedelta):
        copy.time_to_live = ttl.total_seconds()
    when = new_system.get("ScheduledEnqueueTimeUtc")
    if isinstance(when, dt.datetime):
        aware = when if when.tzinfo else when.replace(tzinfo=dt.UTC)
        copy.scheduled_enqueue_time = aware.timestamp()
    return copy


def _index_key(value: Any) -> Any:
    """The hashable key a correlation value is filed under, or None if it is not indexable
    (numbers of every kind share keys by value: ``1``, ``1.0`` and ``Int32(1)`` meet)."""
    kind = type(value)
    if kind is str:
        return ("s", value)
    if kind is bool:
        return ("b", value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return ("n", float(value))
    return None


@dataclass(slots=True, eq=False)
class _Entry:
    sub: Any  # the subscription (opaque to the router)
    rule: CompiledRule
    slot: list[_Entry] | None = None  # the list it is filed in


class Router:
    """The rules of all the subscriptions of one topic, arranged for fan-out. Adding or
    removing a rule costs about the number of rules filed with it, not all of them."""

    def __init__(self) -> None:
        self._subs: dict[str, Any] = {}  # subscription key -> subscription, in creation order
        self._entries: dict[str, dict[str, _Entry]] = {}  # sub key -> rule key -> entry
        self._position: dict[int, int] = {}  # id(sub) -> creation position (delivery order)
        self._next_position = 0
        self._scan: list[_Entry] = []  # rules evaluated for every message (SQL, true, ...)
        # system field -> value key -> entries
        self._sys_index: dict[str, dict[Any, list[_Entry]]] = {}
        # folded user property name -> value key -> entries
        self._user_index: dict[str, dict[Any, list[_Entry]]] = {}
        self._not_plain: set[str] = set()  # subs that are not one action-less true rule

    # ------------------------------------------------------------------ changes

    def add_subscription(self, key: str, sub: Any) -> None:
        self._subs[key] = sub
        self._entries[key] = {}
        self._position[id(sub)] = self._next_position
        self._next_position += 1
        self._not_plain.add(key)

    def remove_subscription(self, key: str) -> None:
        sub = self._subs.pop(key, None)
        for entry in self._entries.pop(key, {}).values():
            self._unfile(entry)
        if sub is not None:
            self._position.pop(id(sub), None)
        self._not_plain.discard(key)

    def add_rule(self, key: str, rule_key: str, rule: CompiledRule) -> None:
        """Add (or replace) one rule of subscription ``key``."""
        entries = self._entries[key]
        old = entries.pop(rule_key, None)
        if old is not None:
            self._unfile(old)
        entry = _Entry(self._subs[key], rule)
        entries[rule_key] = entry
        if rule.kind != "false" and not (rule.kind == "correlation" and self._file(entry)):
            entry.slot = self._scan
            self._scan.append(entry)
        self._check_plain(key)

    def remove_rule(self, key: str, rule_key: str) -> None:
        entry = self._entries[key].pop(rule_key, None)
        if entry is not None:
            self._unfile(entry)
        self._check_plain(key)

    def _check_plain(self, key: str) -> None:
        entries = self._entries[key]
        if len(entries) == 1:
            (entry,) = entries.values()
            if entry.rule.kind == "true" and entry.rule.action is None:
                self._not_plain.discard(key)
                return
        self._not_plain.add(key)

    @staticmethod
    def _unfile(entry: _Entry) -> None:
        if entry.slot is not None:
            entry.slot.remove(entry)
            entry.slot = None

    def _file(self, entry: _Entry) -> bool:
        filt = entry.rule.filter
        assert isinstance(filt, CorrelationFilter)
        slot: list[_Entry] | None = None
        for name in _INDEX_ORDER:
            if name in filt.fields:
                slot = self._sys_index.setdefault(name, {}).setdefault(("s", filt.fields[name]), [])
                break
        else:
            for name, value in filt.properties.items():
                vkey = _index_key(value)
                if vkey is not None:
                    slot = self._user_index.setdefault(fold(name), {}).setdefault(vkey, [])
                    break
        if slot is None:
            return False
        slot.append(entry)
        entry.slot = slot
        return True

    @property
    def subscriptions(self) -> list[Any]:
        return list(self._subs.values())

    def route(
        self, msg: SbMessage, sequence_number: int = 0, enqueued_time: float | None = None
    ) -> list[tuple[Any, SbMessage | FilterEvaluationError]]:
        """Where ``msg`` goes: (subscription, message) pairs in subscription order, the
        message being ``msg`` itself (an unchanged copy) or a new one made by an action, or
        (subscription, error) when a filter or action failed on it. ``sequence_number`` and
        ``enqueued_time`` are the topic's, for filters on ``sys.SequenceNumber`` and
        ``sys.EnqueuedTimeUtc``."""
        if not self._not_plain:
            return [(sub, msg) for sub in self._subs.values()]
        system = system_view(msg, sequence_number, enqueued_time)
        user = msg.properties
        candidates: list[_Entry] = list(self._scan)
        if self._sys_index:
            for name, slot in self._sys_index.items():
                value = system.get(name)
                if value is not None:
                    found = slot.get(("s", value))
                    if found:
                        candidates.extend(found)
        if self._user_index and user:
            for pname, pvalue in user.items():
                slot2 = self._user_index.get(fold(pname)) if type(pname) is str else None
                if slot2:
                    vkey = _index_key(pvalue)
                    found = slot2.get(vkey) if vkey is not None else None
                    if found:
                        candidates.extend(found)
        if len(candidates) > 1 and (self._sys_index or self._user_index):
            order = self._position
            candidates.sort(key=lambda e: order[id(e.sub)])
        out: list[tuple[Any, SbMessage | FilterEvaluationError]] = []
        plain: set[int] = set()  # subscriptions that already have their unchanged copy
        failed: set[int] = set()
        for entry in candidates:
            sid = id(entry.sub)
            rule = entry.rule
            if sid in failed or (rule.action is None and sid in plain):
                continue
            try:
                if rule.kind != "true" and not rule.filter.matches(system, user):
                    continue
                if rule.action is None:
                    plain.add(sid)
                    out.append((entry.sub, msg))
                else:
                    out.append((entry.sub, apply_action(rule.action, rule.name, msg, system)))
            except FilterEvaluationError as exc:
                failed.add(sid)
                out.append((entry.sub, exc))
        return out
