"""The official Service Bus emulator's ``Config.json``: read, check, apply and write.

The schema is the emulator's (``UserConfig.Namespaces[].Queues[] / Topics[].Subscriptions[].
Rules[]``, each with ``Name`` and ``Properties``, and ``UserConfig.Logging``), with the emulator's
caps lifted: any number of entities, the Service Bus ranges instead of the emulator's (a TTL
above one hour, up to 2,000 subscriptions per topic), and every documented entity property
accepted, not only the emulator's nine. A property left out takes Service Bus's default, as an
entity created through the management API does (``MaxDeliveryCount`` 10, ``LockDuration`` one
minute, no TTL).

``loads(text)`` / ``parse(data)`` check the whole document before anything is created. Every
problem is a ``ServiceBusError`` (``BadArgument``) whose ``where`` is the JSON path of the
offending value, such as ``UserConfig.Namespaces[0].Topics[2].Subscriptions[0].Rules[1].
Properties.FilterType``; a misspelt key or ``FilterType`` is an error, never ignored. SQL filter
and action texts are compiled when the file is read, so a syntax error names its path and its
``position`` in the expression.

``apply(namespace, config)`` makes the namespace hold what the file defines: it creates what is
missing and updates what differs (an existing entity keeps the properties the file does not
name), and leaves alone entities and rules the file does not name (rules that applications add
at run time survive a restart). Applying the same file twice changes nothing the second time.
The whole file is first applied to a copy of the definitions it can touch, so a file that the
namespace refuses (a forwarding destination that does not exist, a create-only property
changed, a quota) changes nothing. A subscription without ``Rules`` (or with ``[]``) gets
``$Default``, the true filter. The namespace ``Name`` in the file is not compared here.

Applying a file is an administrator's act, with every right: at start (``--servicebus-config``,
a file the node's operator gives) or through the Admin service (``qmgr sb import``, which takes
the node's users, ``--auth``, and needs group ``mqm``). Service Bus keys play no part, so the
forwarding a file sets is not checked against them; the holder of a key reaches neither path
(the Service Bus port has no import, and the Admin service takes no SAS token).

``export(namespace)`` writes the namespace's definitions in the same schema (``parse`` and
``apply`` of an export re-create the same definitions); ``for_emulator(document)`` keeps only
the properties the official emulator's schema knows.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from qmgr.core.clock import ManualClock
from qmgr.filters import FilterSyntaxError, compile_action, compile_filter
from qmgr.filters.correlation import exact_value
from qmgr.servicebus.entities import (
    MAX_TIMESPAN,
    FilterType,
    QueueProperties,
    RuleProperties,
    SubscriptionProperties,
    TopicProperties,
)
from qmgr.servicebus.errors import Code, ServiceBusError, bad
from qmgr.servicebus.management import RuleInfo
from qmgr.servicebus.names import (
    DEFAULT_RULE,
    SUBSCRIPTIONS,
    check_entity_name,
    check_rule_name,
    check_subscription_name,
    key,
)
from qmgr.servicebus.namespace import Namespace

_P = TypeVar("_P", QueueProperties, TopicProperties, SubscriptionProperties)
_T = TypeVar("_T")

DEFAULT_NAMESPACE = "sbemulatorns"
LOGGING_TYPES = ("File", "Console", "File,Console", "Console,File")

_NAMESPACE_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,48}[A-Za-z0-9])?\Z")


# ---------------------------------------------------------------------- definitions


@dataclass(frozen=True, slots=True)
class RuleDef:
    name: str
    rule: RuleProperties
    where: str = ""


@dataclass(frozen=True, slots=True)
class SubscriptionDef:
    name: str
    properties: SubscriptionProperties
    # None: no Rules given, the $Default TrueFilter; () (only in a copy of a namespace): none
    rules: tuple[RuleDef, ...] | None = None
    where: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict)  # the Properties as the file gives them


@dataclass(frozen=True, slots=True)
class TopicDef:
    name: str
    properties: TopicProperties
    subscriptions: tuple[SubscriptionDef, ...] = ()
    where: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class QueueDef:
    name: str
    properties: QueueProperties
    where: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NamespaceDef:
    name: str
    queues: tuple[QueueDef, ...] = ()
    topics: tuple[TopicDef, ...] = ()
    where: str = ""


@dataclass(frozen=True, slots=True)
class Config:
    """A checked Config.json: one namespace (a node hosts one) and the logging type."""

    namespace: NamespaceDef
    logging: str | None = None
    entity_count: int = field(default=0, compare=False)


# ---------------------------------------------------------------------- reading


def loads(text: str) -> Config:
    """Parse and check the text of a Config.json file."""
    try:
        data = json.loads(text, object_pairs_hook=_JsonObject.of)
    except json.JSONDecodeError as exc:
        raise bad(
            f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            where="Config.json",
            position=exc.pos,
        ) from None
    return parse(data)


def parse(data: Any) -> Config:
    """Check a decoded Config.json document and return its definitions."""
    top = _object(data, "", {"UserConfig"}, required={"UserConfig"}, extra_ok=_dollar)
    user = _object(
        top["UserConfig"], "UserConfig", {"Namespaces", "Logging"}, required={"Namespaces"}
    )
    spaces = _array(user["Namespaces"], "UserConfig.Namespaces")
    if len(spaces) != 1:
        raise bad(
            f"exactly one namespace is expected (a node hosts one), got {len(spaces)}",
            where="UserConfig.Namespaces",
        )
    namespace = _namespace(spaces[0], "UserConfig.Namespaces[0]")
    logging = None
    if "Logging" in user:
        where = "UserConfig.Logging"
        log = _object(user["Logging"], where, {"Type"}, required={"Type"})
        logging = _choice(log["Type"], LOGGING_TYPES, f"{where}.Type")
    count = len(namespace.queues) + len(namespace.topics)
    return Config(namespace, logging, count)


def _namespace(data: Any, where: str) -> NamespaceDef:
    obj = _object(data, where, {"Name", "Queues", "Topics"}, required={"Name"})
    name = obj["Name"]
    if not isinstance(name, str) or not _NAMESPACE_NAME.match(name):
        raise bad(
            f"invalid namespace name {name!r}: 1-50 letters, digits, '.', '-' and '_', "
            "starting and ending with a letter or digit",
            where=f"{where}.Name",
        )
    seen: dict[str, str] = {}
    queues = tuple(
        _queue(item, f"{where}.Queues[{i}]", seen)
        for i, item in enumerate(_array(obj.get("Queues", []), f"{where}.Queues"))
    )
    topics = tuple(
        _topic(item, f"{where}.Topics[{i}]", seen)
        for i, item in enumerate(_array(obj.get("Topics", []), f"{where}.Topics"))
    )
    for queue in queues:
        _check_forwarding(queue.properties, queue.where, key(queue.name))
    for sub in (s for t in topics for s in t.subscriptions):
        _check_forwarding(sub.properties, sub.where, None)
    return NamespaceDef(name, queues, topics, where)


def _queue(data: Any, where: str, seen: dict[str, str]) -> QueueDef:
    obj = _object(data, where, {"Name", "Properties"}, required={"Name"})
    name = _name(obj["Name"], f"{where}.Name", lambda n: check_entity_name(n, "queue"))
    _unique(seen, name, f"{where}.Name", "a queue or topic")
    props, raw = _props(QueueProperties, obj.get("Properties"), f"{where}.Properties")
    return QueueDef(name, props, where, raw)


def _topic(data: Any, where: str, seen: dict[str, str]) -> TopicDef:
    obj = _object(data, where, {"Name", "Properties", "Subscriptions"}, required={"Name"})
    name = _name(obj["Name"], f"{where}.Name", lambda n: check_entity_name(n, "topic"))
    _unique(seen, name, f"{where}.Name", "a queue or topic")
    props, raw = _props(TopicProperties, obj.get("Properties"), f"{where}.Properties")
    subs_seen: dict[str, str] = {}
    items = _array(obj.get("Subscriptions", []), f"{where}.Subscriptions")
    subs = tuple(
        _subscription(item, f"{where}.Subscriptions[{i}]", subs_seen)
        for i, item in enumerate(items)
    )
    return TopicDef(name, props, subs, where, raw)


def _subscription(data: Any, where: str, seen: dict[str, str]) -> SubscriptionDef:
    obj = _object(data, where, {"Name", "Properties", "Rules"}, required={"Name"})
    name = _name(obj["Name"], f"{where}.Name", check_subscription_name)
    _unique(seen, name, f"{where}.Name", "a subscription of this topic")
    props, raw = _props(SubscriptionProperties, obj.get("Properties"), f"{where}.Properties")
    rules: tuple[RuleDef, ...] | None = None
    if obj.get("Rules"):
        rules_seen: dict[str, str] = {}
        items = _array(obj["Rules"], f"{where}.Rules")
        rules = tuple(
            _rule(item, f"{where}.Rules[{i}]", rules_seen) for i, item in enumerate(items)
        )
    elif "Rules" in obj:
        _array(obj["Rules"], f"{where}.Rules")  # [] (or null): the $Default rule, as no Rules
    return SubscriptionDef(name, props, rules, where, raw)


def _rule(data: Any, where: str, seen: dict[str, str]) -> RuleDef:
    obj = _object(data, where, {"Name", "Properties"}, required={"Name", "Properties"})
    name = _name(obj["Name"], f"{where}.Name", check_rule_name)
    _unique(seen, name, f"{where}.Name", "a rule of this subscription")
    pwhere = f"{where}.Properties"
    props = _object(
        obj["Properties"],
        pwhere,
        {"FilterType", "SqlFilter", "CorrelationFilter", "Action"},
        required={"FilterType"},
    )
    ftype = _choice(props["FilterType"], ("Sql", "Correlation"), f"{pwhere}.FilterType")
    body, other = ("SqlFilter", "CorrelationFilter")
    if ftype == "Correlation":
        body, other = other, body
    if props.get(body) is None:
        raise bad(f"FilterType {ftype} needs a {body}", where=pwhere)
    if props.get(other) is not None:
        raise bad(f"{other} does not go with FilterType {ftype} (use {body})", where=pwhere)
    if ftype == "Sql":
        _object(props[body], f"{pwhere}.{body}", {"SqlExpression"}, required={"SqlExpression"})
    if props.get("Action") is not None:
        _object(props["Action"], f"{pwhere}.Action", {"SqlExpression"}, required={"SqlExpression"})
    clean = {k: v for k, v in props.items() if v is not None}
    rule = RuleProperties.from_dict({**clean, "FilterType": ftype}, pwhere)
    check_rule(rule, pwhere)
    return RuleDef(name, rule, where)


def check_rule(rule: RuleProperties, where: str) -> None:
    """Compile the rule's filter and action as the namespace will, so that a syntax error is
    reported with the path of the text and its position in it."""
    if rule.filter_type is FilterType.SQL and rule.sql is not None:
        _compile(compile_filter, rule.sql, rule.parameters, f"{where}.SqlFilter.SqlExpression")
    if rule.filter_type is FilterType.CORRELATION:
        for name, value in rule.properties.items():
            try:
                exact_value(name, value)
            except ValueError as exc:
                raise bad(str(exc), where=f"{where}.CorrelationFilter.Properties") from None
    if rule.action is not None:
        _compile(compile_action, rule.action, rule.parameters, f"{where}.Action.SqlExpression")


def _compile(
    compile_: Callable[[str, Mapping[str, Any] | None], object],
    text: str,
    parameters: Mapping[str, Any],
    where: str,
) -> None:
    try:
        compile_(text, dict(parameters) or None)
    except FilterSyntaxError as exc:
        raise bad(str(exc), where=where, position=exc.position) from None


def _check_forwarding(
    props: QueueProperties | SubscriptionProperties, where: str, own: str | None
) -> None:
    """What can be told from the file alone: no forwarding from a session-enabled entity, no
    queue forwarding to itself. (Whether a destination the file does not define exists is
    the namespace's to say, when the file is applied.)"""
    for name, target in (
        ("ForwardTo", props.forward_to),
        ("ForwardDeadLetteredMessagesTo", props.forward_dead_lettered_to),
    ):
        if target is None:
            continue
        path = f"{where}.Properties.{name}"
        if name == "ForwardTo" and props.requires_session:
            raise bad("auto-forwarding is not supported on a session-enabled entity", where=path)
        if own is not None and key(target) == own:
            raise bad(f"the entity forwards to itself ({target!r})", where=path)


# ---------------------------------------------------------------------- applying

_FORWARDING = ("forward_to", "forward_dead_lettered_to")
_FALSE_SQL = RuleProperties(FilterType.SQL, sql="1=0")


def apply(namespace: Namespace, config: Config) -> list[str]:
    """Make ``namespace`` hold what ``config`` defines (create what is missing, update what
    differs, leave the rest); returns one line per change, empty when nothing changed.

    The file is first applied to a copy of the namespace's definitions: if the namespace
    refuses any of it, the error (with the JSON path) is raised and nothing is changed."""
    _Applier(_copy(namespace, config.namespace), config.namespace).run()
    return _Applier(namespace, config.namespace).run()


def _copy(namespace: Namespace, touched: NamespaceDef) -> Namespace:
    """A namespace with the same definitions (no messages, no journal) where ``touched`` (the
    file) can change them: its queues and topics with their subscriptions and rules; the other
    entities only by name (forwarding destinations, names taken). A forwarding destination that
    was deleted after the forwarding was set is re-created for the copy and deleted again, so
    the copy refuses what the original would."""
    scratch = Namespace(namespace.name, clock=ManualClock(), limits=namespace.limits)
    named = {key(q.name) for q in touched.queues} | {key(t.name) for t in touched.topics}
    spec = _definitions(namespace, named)
    names = {key(q.name) for q in spec.queues} | {key(t.name) for t in spec.topics}
    sources: list[Any] = [*spec.queues, *(s for t in spec.topics for s in t.subscriptions)]
    gone = {
        key(target): target
        for source in sources
        for target in (source.properties.forward_to, source.properties.forward_dead_lettered_to)
        if target and key(target) not in names
    }
    for name in gone.values():
        scratch.create_queue(name)
    _Applier(scratch, spec).run()
    for name in gone.values():
        scratch.delete_queue(name)
    return scratch


class _Applier:
    """One pass of ``apply``: entities in the file's order, forwarding set as soon as its
    destination exists (a destination defined later in the file is set at the end)."""

    def __init__(self, namespace: Namespace, spec: NamespaceDef) -> None:
        self.ns = namespace
        self.spec = spec
        self.changes: list[str] = []
        self.later: list[Callable[[], None]] = []

    def run(self) -> list[str]:
        for queue in self.spec.queues:
            self._queue(queue)
        for topic in self.spec.topics:
            self._topic(topic)
        for step in self.later:
            step()
        return self.changes

    def _exists(self, name: str | None) -> bool:
        if not name:
            return True
        found = _get(lambda: self.ns.get_queue(name)) or _get(lambda: self.ns.get_topic(name))
        return found is not None

    def _split(self, wanted: _P, current: _P | None) -> tuple[_P, bool]:
        """``wanted`` with a forwarding destination that does not exist yet replaced by the
        current value; True when something was held back for later."""
        held: dict[str, Any] = {
            attr: getattr(current, attr) if current is not None else None
            for attr in _FORWARDING
            if not self._exists(getattr(wanted, attr))
        }
        return replace(wanted, **held), bool(held)

    def _queue(self, spec: QueueDef) -> None:
        what = f"queue '{spec.name}'"
        current = _get(lambda: self.ns.get_queue(spec.name))
        wanted = _wanted(spec.properties, spec.raw, current, spec.where)
        now, held = self._split(wanted, current.properties if current else None)
        if current is None:
            self._do(spec.where, lambda: self.ns.create_queue(spec.name, now))
            self.changes.append(f"created {what}")
        elif _differs(current.properties, now):
            self._do(spec.where, lambda: self.ns.update_queue(current.name, now))
            self.changes.append(f"updated {what}: {_diff(current.properties, now)}")
        if held:
            self.later.append(
                lambda: self._forward(
                    what, spec.where, now, wanted, self.ns.update_queue, spec.name
                )
            )

    def _topic(self, spec: TopicDef) -> None:
        what = f"topic '{spec.name}'"
        current = _get(lambda: self.ns.get_topic(spec.name))
        wanted = _wanted(spec.properties, spec.raw, current, spec.where)
        if current is None:
            self._do(spec.where, lambda: self.ns.create_topic(spec.name, wanted))
            self.changes.append(f"created {what}")
            name = spec.name
        else:
            name = current.name
            if _differs(current.properties, wanted):
                self._do(spec.where, lambda: self.ns.update_topic(name, wanted))
                self.changes.append(f"updated {what}: {_diff(current.properties, wanted)}")
        for sub in spec.subscriptions:
            self._subscription(name, sub)

    def _subscription(self, topic: str, spec: SubscriptionDef) -> None:
        what = f"subscription '{topic}/{SUBSCRIPTIONS}/{spec.name}'"
        current = _get(lambda: self.ns.get_subscription(topic, spec.name))
        wanted = _wanted(spec.properties, spec.raw, current, spec.where)
        now, held = self._split(wanted, current.properties if current else None)
        rules = list(spec.rules or ())
        if current is None:
            first = (rules[0].name, rules[0].rule) if rules else None
            rule_where = f"{rules[0].where}.Properties" if rules else None
            self._do(
                spec.where,
                lambda: self.ns.create_subscription(topic, spec.name, now, first),
                rule_where,
            )
            self.changes.append(f"created {what}" + (f" with rule '{first[0]}'" if first else ""))
            if spec.rules == ():  # a copy of a subscription that has no rule at all
                self.ns.delete_rule(topic, spec.name, DEFAULT_RULE)
            rules = rules[1:]
            name = spec.name
        else:
            name = current.name
            if _differs(current.properties, now):
                self._do(spec.where, lambda: self.ns.update_subscription(topic, name, now))
                self.changes.append(f"updated {what}: {_diff(current.properties, now)}")
        if held:

            def update(sub: str, props: SubscriptionProperties) -> object:
                return self.ns.update_subscription(topic, sub, props)

            self.later.append(lambda: self._forward(what, spec.where, now, wanted, update, name))
        existing = {key(r.name): r for r in self.ns.list_rules(topic, name)}
        for rule in rules:
            self._rule(topic, name, rule, existing.get(key(rule.name)))
        default = existing.get(key(DEFAULT_RULE))
        if (
            current is not None
            and spec.rules
            and all(key(r.name) != key(DEFAULT_RULE) for r in spec.rules)
            and default is not None
            and _canonical(default.properties) == _canonical(RuleProperties())
        ):
            # the file now gives the subscription its rules: as a subscription created with
            # them, it has no catch-all $Default (which would make every rule pointless)
            self._do(spec.where, lambda: self.ns.delete_rule(topic, name, default.name))
            self.changes.append(
                f"deleted rule '{default.name}' of {what} (the file gives its rules)"
            )

    def _rule(self, topic: str, sub: str, spec: RuleDef, current: RuleInfo | None) -> None:
        what = f"rule '{spec.name}' of '{topic}/{SUBSCRIPTIONS}/{sub}'"
        where = f"{spec.where}.Properties"
        if current is None:
            call = lambda: self.ns.create_rule(topic, sub, spec.name, spec.rule)  # noqa: E731
            self._do(spec.where, call, where)
            self.changes.append(f"created {what}")
        elif _canonical(current.properties) != _canonical(spec.rule):
            name = current.name
            self._do(spec.where, lambda: self.ns.update_rule(topic, sub, name, spec.rule), where)
            self.changes.append(f"updated {what}")

    def _forward(
        self,
        what: str,
        where: str,
        now: _P,
        wanted: _P,
        update: Callable[[str, Any], object],
        name: str,
    ) -> None:
        if _differs(now, wanted):
            self._do(where, lambda: update(name, wanted))
            self.changes.append(f"updated {what}: {_diff(now, wanted)}")

    @staticmethod
    def _do(where: str, call: Callable[[], object], rule_where: str | None = None) -> None:
        """Run one namespace call; its error gets the JSON path of what caused it: the
        property it names, else the rule (``rule_where``) or the entity."""
        try:
            call()
        except ServiceBusError as exc:
            if exc.where.startswith("rule ") and rule_where is not None:
                path = rule_where
            elif exc.where and " " not in exc.where:
                path = f"{where}.Properties.{exc.where}"
            else:
                path = where
            raise ServiceBusError(exc.code, exc.text, where=path, position=exc.position) from None


def _get(call: Callable[[], _T]) -> _T | None:
    """What ``call`` returns, or None if the entity does not exist."""
    try:
        return call()
    except ServiceBusError as exc:
        if exc.code is Code.ENTITY_NOT_FOUND:
            return None
        raise


def _wanted(props: _P, raw: Mapping[str, Any], current: Any, where: str) -> _P:
    """A new entity gets the file's properties (defaults for the rest); an existing one keeps
    what the file does not name, and a create-only property that differs is an error."""
    if current is None:
        return props
    changed: _P = current.properties.with_changes(raw, f"{where}.Properties")
    return changed


def _normal(props: Any) -> Any:
    """As the namespace stores it: a forwarding source never auto-deletes."""
    if getattr(props, "forward_to", None):
        return replace(props, auto_delete_on_idle=math.inf)
    return props


def _differs(old: Any, new: Any) -> bool:
    return bool(_normal(old) != _normal(new))


def _diff(old: Any, new: Any) -> str:
    before, after = _normal(old).to_dict(), _normal(new).to_dict()
    names = [n for n in {**before, **after} if before.get(n) != after.get(n)]
    return ", ".join(f"{n} {before.get(n)!r} -> {after.get(n)!r}" for n in names)


def _canonical(rule: RuleProperties) -> RuleProperties:
    """True and false filters compare equal to their SQL texts ``1=1`` and ``1=0``."""
    text = {FilterType.TRUE: "1=1", FilterType.FALSE: "1=0"}.get(rule.filter_type)
    if text is None and rule.filter_type is FilterType.SQL and rule.sql is not None:
        text = rule.sql
        squeezed = "".join(text.split())
        text = squeezed if squeezed in ("1=1", "1=0") else text
        return replace(rule, sql=text)
    if text is not None:
        return replace(rule, filter_type=FilterType.SQL, sql=text)
    return rule


# ---------------------------------------------------------------------- exporting


def _definitions(namespace: Namespace, only: set[str] | None = None) -> NamespaceDef:
    """The namespace's definitions, as if read from a file (every property given); with
    ``only``, the queues and topics not named there are bare names (default properties, no
    subscriptions)."""
    queues = tuple(
        QueueDef(q.name, q.properties, raw=q.properties.to_dict())
        if only is None or key(q.name) in only
        else QueueDef(q.name, QueueProperties())
        for q in namespace.list_queues()
    )
    topics = []
    for t in namespace.list_topics():
        if only is not None and key(t.name) not in only:
            topics.append(TopicDef(t.name, TopicProperties()))
            continue
        subs = []
        for s in namespace.list_subscriptions(t.name):
            rules = tuple(
                RuleDef(r.name, r.properties) for r in namespace.list_rules(t.name, s.name)
            )
            subs.append(SubscriptionDef(s.name, s.properties, rules, raw=s.properties.to_dict()))
        topics.append(TopicDef(t.name, t.properties, tuple(subs), raw=t.properties.to_dict()))
    return NamespaceDef(namespace.name, queues, tuple(topics))


def export(namespace: Namespace, *, logging: str = "Console") -> dict[str, Any]:
    """The namespace's queues, topics, subscriptions and rules as a Config.json document.

    Every property is written (durations ISO 8601); a subscription whose only rule is the
    ``$Default`` true filter is written without ``Rules``, as the emulator's sample does."""
    spec = _definitions(namespace)
    topics = []
    for t in spec.topics:
        subs = []
        for s in t.subscriptions:
            sub: dict[str, Any] = {"Name": s.name, "Properties": s.properties.to_dict()}
            rules = s.rules or (RuleDef(DEFAULT_RULE, _FALSE_SQL),)  # no rule: gets nothing
            only_default = (
                len(rules) == 1
                and key(rules[0].name) == key(DEFAULT_RULE)
                and _canonical(rules[0].rule) == _canonical(RuleProperties())
            )
            if not only_default:
                sub["Rules"] = [{"Name": r.name, "Properties": r.rule.to_dict()} for r in rules]
            subs.append(sub)
        topics.append({"Name": t.name, "Properties": t.properties.to_dict(), "Subscriptions": subs})
    queues = [{"Name": q.name, "Properties": q.properties.to_dict()} for q in spec.queues]
    ns = {"Name": spec.name, "Queues": queues, "Topics": topics}
    return {"UserConfig": {"Namespaces": [ns], "Logging": {"Type": logging}}}


# The properties the official emulator's schema knows, per kind.
EMULATOR_PROPERTIES = {
    "Queues": (
        "DeadLetteringOnMessageExpiration",
        "DefaultMessageTimeToLive",
        "DuplicateDetectionHistoryTimeWindow",
        "ForwardDeadLetteredMessagesTo",
        "ForwardTo",
        "LockDuration",
        "MaxDeliveryCount",
        "RequiresDuplicateDetection",
        "RequiresSession",
    ),
    "Topics": (
        "DefaultMessageTimeToLive",
        "DuplicateDetectionHistoryTimeWindow",
        "RequiresDuplicateDetection",
    ),
    "Subscriptions": (
        "DeadLetteringOnMessageExpiration",
        "DefaultMessageTimeToLive",
        "LockDuration",
        "MaxDeliveryCount",
        "ForwardDeadLetteredMessagesTo",
        "ForwardTo",
        "RequiresSession",
    ),
}


def for_emulator(document: Mapping[str, Any]) -> dict[str, Any]:
    """An exported document with only the properties the official emulator's schema knows
    (``"never"`` durations left out: the emulator has no such value). The emulator's own caps
    (50 entities, a TTL of at most one hour, ...) are not applied: it says what it refuses."""

    def keep(kind: str, entity: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(entity)
        props = entity.get("Properties") or {}
        out["Properties"] = {
            name: value
            for name, value in props.items()
            if name in EMULATOR_PROPERTIES[kind] and value != MAX_TIMESPAN
        }
        return out

    doc = json.loads(json.dumps(document))
    for ns in doc["UserConfig"]["Namespaces"]:
        ns["Queues"] = [keep("Queues", q) for q in ns.get("Queues", [])]
        topics = []
        for t in ns.get("Topics", []):
            topic = keep("Topics", t)
            topic["Subscriptions"] = [keep("Subscriptions", s) for s in t.get("Subscriptions", [])]
            topics.append(topic)
        ns["Topics"] = topics
    return dict(doc)


# ---------------------------------------------------------------------- JSON helpers


class _JsonObject(dict[str, Any]):
    """A decoded JSON object that remembers the keys the text gave more than once (JSON keeps
    the last silently; here it is an error naming the object's path)."""

    repeated: tuple[str, ...] = ()

    @classmethod
    def of(cls, pairs: list[tuple[str, Any]]) -> _JsonObject:
        out = cls(pairs)
        if len(out) != len(pairs):
            keys = [k for k, _ in pairs]
            out.repeated = tuple(k for i, k in enumerate(keys) if k in keys[:i])
        return out


def _no_repeats(data: Mapping[str, Any], where: str) -> None:
    """A key given twice (in any case) is an error: which one was meant?"""
    seen: dict[str, str] = {}
    for raw in (*data, *getattr(data, "repeated", ())):
        low = str(raw).lower()
        if low in seen:
            raise bad(f"key {raw!r} is given twice", where=where)
        seen[low] = str(raw)


def _dollar(name: str) -> bool:
    return name.startswith("$")  # "$schema" and the like


def _object(
    data: Any,
    where: str,
    known: set[str],
    *,
    required: Iterable[str] = (),
    extra_ok: Callable[[str], bool] | None = None,
) -> dict[str, Any]:
    """A JSON object with keys matched to ``known`` case-insensitively (returned under their
    documented spelling); an unknown key or a missing required one is an error."""
    shown = where or "the document"
    if not isinstance(data, Mapping):
        raise bad(f"expected an object, got {_kind(data)}", where=shown)
    _no_repeats(data, shown)
    by_lower = {k.lower(): k for k in known}
    out: dict[str, Any] = {}
    for raw, value in data.items():
        name = by_lower.get(str(raw).lower())
        if name is None:
            if extra_ok is not None and extra_ok(str(raw)):
                continue
            expected = ", ".join(sorted(known))
            hint = _suggest(str(raw), known)
            raise bad(f"unknown key {raw!r}{hint} (expected: {expected})", where=shown)
        out[name] = value
    for name in required:
        if name not in out:
            raise bad(f"{name} is required", where=shown)
    return out


def _array(data: Any, where: str) -> list[Any]:
    if data is None:
        return []
    if not isinstance(data, list):
        raise bad(f"expected an array, got {_kind(data)}", where=where)
    return data


def _choice(value: Any, allowed: tuple[str, ...], where: str) -> str:
    if isinstance(value, str):
        for choice in allowed:
            if value.lower() == choice.lower():
                return choice
    shown = " or ".join(repr(a) for a in allowed)
    hint = _suggest(value, allowed) if isinstance(value, str) else ""
    raise bad(f"must be {shown}, got {value!r}{hint}", where=where)


def _name(value: Any, where: str, check: Callable[[str], str]) -> str:
    if not isinstance(value, str):
        raise bad(f"a name must be a string, got {_kind(value)}", where=where)
    try:
        return check(value)
    except ServiceBusError as exc:
        raise bad(exc.text, where=where) from None


def _unique(seen: dict[str, str], name: str, where: str, what: str) -> None:
    first = seen.get(key(name))
    if first is not None:
        raise bad(f"{name!r} is already defined as {what} at {first}", where=where)
    seen[key(name)] = where


def _props(cls: type[_P], data: Any, where: str) -> tuple[_P, dict[str, Any]]:
    if data is None:
        return cls(), {}
    if not isinstance(data, Mapping):
        raise bad(f"expected an object, got {_kind(data)}", where=where)
    _no_repeats(data, where)
    for raw in data:
        if str(raw).lower() not in {n.lower() for n in cls.SPECS}:
            hint = _suggest(str(raw), cls.SPECS)
            known = ", ".join(cls.SPECS)
            raise bad(f"unknown property {raw!r}{hint} (known: {known})", where=where)
    return cls.from_dict(data, where), dict(data)


def _suggest(word: str, choices: Iterable[str]) -> str:
    """``; did you mean 'X'?`` for a near miss, else nothing."""
    by_lower = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    if not close:
        for low, choice in by_lower.items():  # "SqlFilter" for "Sql": a longer spelling
            if word.lower().startswith(low) or low.startswith(word.lower()):
                return f"; did you mean {choice!r}?"
        return ""
    return f"; did you mean {by_lower[close[0]]!r}?"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    names = {bool: "a boolean", str: "a string", int: "a number", float: "a number"}
    if isinstance(value, list):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return names.get(type(value), type(value).__name__)


__all__ = [
    "DEFAULT_NAMESPACE",
    "DEFAULT_RULE",
    "Config",
    "NamespaceDef",
    "QueueDef",
    "RuleDef",
    "SubscriptionDef",
    "TopicDef",
    "apply",
    "check_rule",
    "export",
    "for_emulator",
    "loads",
    "parse",
]
