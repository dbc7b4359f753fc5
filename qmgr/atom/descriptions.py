"""ATOM entries and feeds of the Service Bus management API, as azure-servicebus 7.15.0's
``ServiceBusAdministrationClient`` writes and reads them.

Requests: ``PUT /<entity>`` carries ``<entry><content><QueueDescription>…`` (or Topic,
Subscription, Rule description) in the namespace
``http://schemas.microsoft.com/netservices/2010/10/servicebus/connect``, holding only the
properties the caller set; an update sends back everything a GET returned, read-only counts
included. ``parse_*`` return the settable properties under their documented names (the names
of ``qmgr.servicebus.entities``, which validates the values), skip the read-only ones and refuse
anything else, so a misspelt element is a 400 and not a silent default.

Parsing is strict: the body must be UTF-8 XML without a document type declaration (no DTD, so no
entity expansion of any kind; refusing ``<!DOCTYPE`` outright is all that the ``defusedxml``
package would add here, so it is not a dependency), the root must be an ATOM ``entry``
with one description of the expected kind.

Responses are written as text (so the prefixes the SDK's key/value workaround reads, ``d6p1:int``
and the ``i:type`` of filters and actions, are exactly as Service Bus writes them): entries,
feeds with a ``next`` link when ``$top`` cut the list, and ``<Error><Code/><Detail/></Error>``.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import urlparse
from xml.etree import ElementTree as ET
from xml.sax.saxutils import escape, quoteattr

from qmgr.servicebus.entities import (
    CORRELATION_FIELDS,
    FilterType,
    QueueProperties,
    RuleProperties,
    SubscriptionProperties,
    TopicProperties,
)
from qmgr.servicebus.namespace import QueueInfo, RuleInfo, SubscriptionInfo, TopicInfo

ATOM_NS = "http://www.w3.org/2005/Atom"
SB_NS = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"
SB_COUNTS_NS = "http://schemas.microsoft.com/netservices/2011/06/servicebus"
XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"
XSD_NS = "http://www.w3.org/2001/XMLSchema"
NEVER = "0001-01-01T00:00:00Z"  # how Service Bus writes a time that has not happened
MAX_BODY = 1024 * 1024

_XSI_TYPE = f"{{{XSI_NS}}}type"
_SB = f"{{{SB_NS}}}"

# Elements a GET returns that a PUT may send back and that cannot be set (counts, times,
# features this emulator does not have): skipped when read.
_READ_ONLY = {
    "SizeInBytes",
    "MessageCount",
    "CountDetails",
    "CreatedAt",
    "UpdatedAt",
    "AccessedAt",
    "IsAnonymousAccessible",
    "AuthorizationRules",
    "EntityAvailabilityStatus",
    "EnableExpress",
    "SubscriptionCount",
    "SqlFilterCount",
    "CorrelationFilterCount",
    "FilteringMessagesBeforePublishing",
    "EnableSubscriptionPartitioning",
}
_QUEUE_READ_ONLY = _READ_ONLY | {"SupportOrdering"}

# The order in which Service Bus writes each description (its data contract's order).
_QUEUE_ORDER = (
    "LockDuration",
    "MaxSizeInMegabytes",
    "RequiresDuplicateDetection",
    "RequiresSession",
    "DefaultMessageTimeToLive",
    "DeadLetteringOnMessageExpiration",
    "DuplicateDetectionHistoryTimeWindow",
    "MaxDeliveryCount",
    "EnableBatchedOperations",
    "SizeInBytes",
    "MessageCount",
    "IsAnonymousAccessible",
    "Status",
    "ForwardTo",
    "UserMetadata",
    "CreatedAt",
    "UpdatedAt",
    "AccessedAt",
    "SupportOrdering",
    "CountDetails",
    "AutoDeleteOnIdle",
    "EnablePartitioning",
    "EntityAvailabilityStatus",
    "ForwardDeadLetteredMessagesTo",
    "EnableExpress",
    "MaxMessageSizeInKilobytes",
)
_TOPIC_ORDER = (
    "DefaultMessageTimeToLive",
    "MaxSizeInMegabytes",
    "RequiresDuplicateDetection",
    "DuplicateDetectionHistoryTimeWindow",
    "EnableBatchedOperations",
    "SizeInBytes",
    "FilteringMessagesBeforePublishing",
    "IsAnonymousAccessible",
    "Status",
    "UserMetadata",
    "CreatedAt",
    "UpdatedAt",
    "AccessedAt",
    "SupportOrdering",
    "CountDetails",
    "SubscriptionCount",
    "AutoDeleteOnIdle",
    "EnablePartitioning",
    "EntityAvailabilityStatus",
    "EnableSubscriptionPartitioning",
    "EnableExpress",
    "MaxMessageSizeInKilobytes",
)
_SUBSCRIPTION_ORDER = (
    "LockDuration",
    "RequiresSession",
    "DefaultMessageTimeToLive",
    "DeadLetteringOnMessageExpiration",
    "DeadLetteringOnFilterEvaluationExceptions",
    "MessageCount",
    "MaxDeliveryCount",
    "EnableBatchedOperations",
    "Status",
    "ForwardTo",
    "CreatedAt",
    "UpdatedAt",
    "AccessedAt",
    "CountDetails",
    "UserMetadata",
    "ForwardDeadLetteredMessagesTo",
    "AutoDeleteOnIdle",
    "EntityAvailabilityStatus",
)


class AtomError(Exception):
    """A request body that is not a description this API accepts (HTTP 400)."""


# ---------------------------------------------------------------------- reading


def _load(body: bytes) -> ET.Element:
    if len(body) > MAX_BODY:
        raise AtomError(f"the request body is larger than {MAX_BODY} bytes")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AtomError(
            f"the request body is not UTF-8: {exc.reason} at byte {exc.start}"
        ) from None
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        raise AtomError("a document type declaration (DTD) is not allowed")
    try:
        return ET.fromstring(text)
    except ET.ParseError as exc:
        line, column = exc.position
        raise AtomError(
            f"the request body is not well-formed XML (line {line}, column {column})"
        ) from None


def _description(body: bytes, kind: str) -> ET.Element:
    root = _load(body)
    if root.tag != f"{{{ATOM_NS}}}entry":
        raise AtomError(f"expected an ATOM <entry>, got <{_local(root.tag)}>")
    content = root.find(f"{{{ATOM_NS}}}content")
    if content is None:
        raise AtomError("the <entry> has no <content>")
    found = list(content)
    if len(found) != 1 or found[0].tag != _SB + kind:
        got = ", ".join(f"<{_local(e.tag)}>" for e in found) or "nothing"
        raise AtomError(f"the <content> must hold one <{kind}>, got {got}")
    return found[0]


def description_kind(body: bytes) -> str:
    """The kind of description an entry holds (``QueueDescription``, ...), checked strictly."""
    root = _load(body)
    content = root.find(f"{{{ATOM_NS}}}content") if root.tag == f"{{{ATOM_NS}}}entry" else None
    found = list(content) if content is not None else []
    if len(found) != 1 or not found[0].tag.startswith(_SB):
        raise AtomError("expected an ATOM <entry> whose <content> holds one description")
    return _local(found[0].tag)


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _nil(element: ET.Element) -> bool:
    return element.get(f"{{{XSI_NS}}}nil", "").lower() == "true"


def _children(element: ET.Element, what: str) -> Iterator[tuple[str, ET.Element]]:
    """``element``'s children with their local names; each must be in the Service Bus
    namespace (``what`` names the element in the error)."""
    for child in element:
        if not child.tag.startswith(_SB):
            raise AtomError(f"unexpected element {child.tag!r} in <{what}>")
        yield _local(child.tag), child


def _fields(
    description: ET.Element, settable: Iterable[str], read_only: set[str], extra: Iterable[str] = ()
) -> tuple[dict[str, str], dict[str, ET.Element]]:
    names = set(settable)
    special = set(extra)
    values: dict[str, str] = {}
    others: dict[str, ET.Element] = {}
    for name, child in _children(description, _local(description.tag)):
        if name in values or name in others:
            raise AtomError(f"<{name}> is given twice")
        if name in special:
            others[name] = child
        elif name in names:
            if not _nil(child):
                values[name] = _text(child, name)
        elif name not in read_only:
            raise AtomError(f"unknown element <{name}> in <{_local(description.tag)}>")
    return values, others


def _text(element: ET.Element, name: str) -> str:
    if len(element):
        raise AtomError(f"<{name}> must hold text, not elements")
    text = (element.text or "").strip()
    if name in ("ForwardTo", "ForwardDeadLetteredMessagesTo") and "://" in text:
        text = urlparse(text).path.strip("/")  # sb://host/name: the SDK sends a full address
    return text


def parse_queue(body: bytes) -> dict[str, str]:
    """The properties a QueueDescription sets (names of ``QueueProperties.SPECS``)."""
    values, _ = _fields(
        _description(body, "QueueDescription"), QueueProperties.SPECS, _QUEUE_READ_ONLY
    )
    return values


def parse_topic(body: bytes) -> dict[str, str]:
    values, _ = _fields(_description(body, "TopicDescription"), TopicProperties.SPECS, _READ_ONLY)
    return values


def parse_subscription(
    body: bytes,
) -> tuple[dict[str, str], tuple[str | None, RuleProperties] | None]:
    """The properties a SubscriptionDescription sets and its DefaultRuleDescription, if any."""
    values, others = _fields(
        _description(body, "SubscriptionDescription"),
        SubscriptionProperties.SPECS,
        _READ_ONLY,
        ("DefaultRuleDescription",),
    )
    rule = others.get("DefaultRuleDescription")
    return values, (None if rule is None else _rule(rule))


def parse_rule(body: bytes) -> tuple[str | None, RuleProperties]:
    """The rule a RuleDescription defines, and the ``<Name>`` it gives (None if none)."""
    return _rule(_description(body, "RuleDescription"))


def _rule(description: ET.Element) -> tuple[str | None, RuleProperties]:
    _, parts = _fields(description, (), {"CreatedAt"}, ("Filter", "Action", "Name"))
    name_el = parts.get("Name")
    name = _text(name_el, "Name") if name_el is not None and not _nil(name_el) else None
    filter_el = parts.get("Filter")
    action_el = parts.get("Action")
    action, action_params = _action(action_el) if action_el is not None else (None, {})
    if filter_el is None or _nil(filter_el):
        return name, RuleProperties(FilterType.TRUE, action=action, parameters=action_params)
    ftype = _xsi_type(filter_el, "Filter")
    if ftype == "CorrelationFilter":
        corr, props = _correlation(filter_el)
        if not corr and not props:
            raise AtomError("a CorrelationFilter needs at least one property")
        return name, RuleProperties(
            FilterType.CORRELATION,
            correlation=corr,
            properties=props,
            action=action,
            parameters=action_params,
        )
    if ftype in ("SqlFilter", "TrueFilter", "FalseFilter"):
        sql, params = _sql(filter_el, "Filter")
        if ftype == "TrueFilter":
            kind = FilterType.TRUE
        elif ftype == "FalseFilter":
            kind = FilterType.FALSE
        else:
            kind = FilterType.SQL
            if not sql:
                raise AtomError("a SqlFilter needs a non-empty <SqlExpression>")
        clash = {k for k in params.keys() & action_params.keys() if params[k] != action_params[k]}
        if clash:
            raise AtomError(
                f"parameter {sorted(clash)[0]} has different values in filter and action"
            )
        return name, RuleProperties(
            kind,
            sql=sql if kind is FilterType.SQL else None,
            action=action,
            parameters={**params, **action_params},
        )
    raise AtomError(
        f"unknown filter type {ftype!r} (SqlFilter, CorrelationFilter, TrueFilter, FalseFilter)"
    )


def _xsi_type(element: ET.Element, what: str) -> str:
    value = element.get(_XSI_TYPE)
    if not value:
        raise AtomError(f"<{what}> needs an xsi:type")
    return value.rsplit(":", 1)[-1]


def _action(element: ET.Element) -> tuple[str | None, dict[str, Any]]:
    if _nil(element):
        return None, {}
    atype = _xsi_type(element, "Action")
    if atype == "EmptyRuleAction":
        if len(element):
            raise AtomError("an EmptyRuleAction holds nothing")
        return None, {}
    if atype != "SqlRuleAction":
        raise AtomError(f"unknown action type {atype!r} (SqlRuleAction, EmptyRuleAction)")
    sql, params = _sql(element, "Action")
    if not sql:
        raise AtomError("a SqlRuleAction needs a non-empty <SqlExpression>")
    return sql, params


def _sql(element: ET.Element, what: str) -> tuple[str | None, dict[str, Any]]:
    sql: str | None = None
    params: dict[str, Any] = {}
    for name, child in _children(element, what):
        if name == "SqlExpression":
            sql = (child.text or "").strip() or None
        elif name == "Parameters":
            params = _key_values(child)
        elif name not in ("CompatibilityLevel", "RequiresPreprocessing"):
            raise AtomError(f"unknown element <{name}> in <{what}>")
    return sql, params


def _correlation(element: ET.Element) -> tuple[dict[str, str], dict[str, Any]]:
    corr: dict[str, str] = {}
    props: dict[str, Any] = {}
    for name, child in _children(element, "Filter"):
        if name == "Properties":
            props = _key_values(child)
        elif name in CORRELATION_FIELDS:
            if not _nil(child):
                corr[name] = child.text or ""
        else:
            raise AtomError(f"unknown element <{name}> in a CorrelationFilter")
    return corr, props


def _key_values(element: ET.Element) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in element:
        if item.tag not in (_SB + "KeyValueOfstringanyType", _SB + "KeyValueOfObjectType"):
            raise AtomError(f"unexpected element <{_local(item.tag)}> in <{_local(element.tag)}>")
        key_el = item.find(_SB + "Key")
        value_el = item.find(_SB + "Value")
        if key_el is None or value_el is None or not key_el.text:
            raise AtomError("a key/value pair needs a <Key> and a <Value>")
        out[key_el.text] = _typed(value_el)
    return out


def _typed(element: ET.Element) -> Any:
    vtype = element.get(_XSI_TYPE, "string").rsplit(":", 1)[-1]
    text = element.text or ""
    try:
        if vtype in (
            "int",
            "long",
            "short",
            "byte",
            "unsignedInt",
            "unsignedShort",
            "unsignedByte",
        ):
            return int(text)
        if vtype in ("double", "float", "decimal"):
            return float(text)
    except ValueError:
        raise AtomError(f"{text!r} is not a valid {vtype}") from None
    if vtype == "boolean":
        if text.strip().lower() not in ("true", "false"):
            raise AtomError(f"{text!r} is not a valid boolean")
        return text.strip().lower() == "true"
    if vtype == "string":
        return text
    raise AtomError(
        f"values of type {vtype!r} are not supported (string, int, long, double, boolean)"
    )


# ---------------------------------------------------------------------- writing


def timestamp(seconds: float) -> str:
    """Epoch seconds as Service Bus writes a time (``NEVER`` for 0)."""
    if seconds <= 0:
        return NEVER
    when = dt.datetime.fromtimestamp(seconds, dt.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond:06d}0Z"


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _elements(order: Iterable[str], values: Mapping[str, Any]) -> str:
    parts = []
    for name in order:
        if name in values and values[name] is not None:
            value = values[name]
            if name == "CountDetails":
                parts.append(value)  # already an element, with its own namespace
            else:
                parts.append(f"<{name}>{escape(_value(value))}</{name}>")
    return "".join(parts)


def _count_details(active: int, dead: int, scheduled: int, transfer: int) -> str:
    items = (
        ("ActiveMessageCount", active),
        ("DeadLetterMessageCount", dead),
        ("ScheduledMessageCount", scheduled),
        ("TransferMessageCount", transfer),
        ("TransferDeadLetterMessageCount", 0),
    )
    inner = "".join(f"<d2p1:{n}>{v}</d2p1:{n}>" for n, v in items)
    return f'<CountDetails xmlns:d2p1="{SB_COUNTS_NS}">{inner}</CountDetails>'


def _times(info: QueueInfo | TopicInfo | SubscriptionInfo) -> dict[str, Any]:
    return {
        "CreatedAt": timestamp(info.created_at),
        "UpdatedAt": timestamp(info.updated_at),
        "AccessedAt": timestamp(info.accessed_at),
        "EntityAvailabilityStatus": "Available",
    }


def queue_description(info: QueueInfo) -> str:
    values = {**info.properties.to_dict(), **_times(info)}
    values.update(
        SizeInBytes=info.size_bytes,
        MessageCount=info.total,
        IsAnonymousAccessible=False,
        SupportOrdering=True,
        EnableExpress=False,
        CountDetails=_count_details(info.active, info.dead_lettered, info.scheduled, info.transfer),
    )
    return _wrap("QueueDescription", _elements(_QUEUE_ORDER, values))


def topic_description(info: TopicInfo) -> str:
    values = {**info.properties.to_dict(), **_times(info)}
    values.update(
        SizeInBytes=info.size_bytes,
        FilteringMessagesBeforePublishing=False,
        IsAnonymousAccessible=False,
        SubscriptionCount=info.subscription_count,
        EnableSubscriptionPartitioning=False,
        EnableExpress=False,
        CountDetails=_count_details(0, 0, info.scheduled, info.transfer),
    )
    return _wrap("TopicDescription", _elements(_TOPIC_ORDER, values))


def subscription_description(info: SubscriptionInfo) -> str:
    values = {**info.properties.to_dict(), **_times(info)}
    values.update(
        MessageCount=info.total,
        CountDetails=_count_details(info.active, info.dead_lettered, info.scheduled, info.transfer),
    )
    return _wrap("SubscriptionDescription", _elements(_SUBSCRIPTION_ORDER, values))


def rule_description(info: RuleInfo) -> str:
    rule = info.properties
    filter_xml = _filter_xml(rule)
    if rule.action:
        action_xml = (
            f'<Action i:type="SqlRuleAction"><SqlExpression>{escape(rule.action)}</SqlExpression>'
            "<CompatibilityLevel>20</CompatibilityLevel></Action>"
        )
    else:
        action_xml = '<Action i:type="EmptyRuleAction"/>'
    body = (
        f"{filter_xml}{action_xml}<CreatedAt>{timestamp(info.created_at)}</CreatedAt>"
        f"<Name>{escape(info.name)}</Name>"
    )
    return _wrap("RuleDescription", body)


def _filter_xml(rule: RuleProperties) -> str:
    if rule.filter_type is FilterType.CORRELATION:
        order = (
            "CorrelationId",
            "MessageId",
            "To",
            "ReplyTo",
            "Label",
            "SessionId",
            "ReplyToSessionId",
            "ContentType",
        )
        fields = "".join(
            f"<{n}>{escape(rule.correlation[n])}</{n}>" for n in order if n in rule.correlation
        )
        props = _key_values_xml(rule.properties)
        return (
            f'<Filter i:type="CorrelationFilter">{fields}<Properties>{props}</Properties></Filter>'
        )
    ftype, sql = {
        FilterType.TRUE: ("TrueFilter", "1=1"),
        FilterType.FALSE: ("FalseFilter", "1=0"),
    }.get(rule.filter_type, ("SqlFilter", rule.sql or ""))
    params = _key_values_xml(rule.parameters) if rule.parameters else ""
    params_xml = f"<Parameters>{params}</Parameters>" if params else ""
    return (
        f'<Filter i:type="{ftype}"><SqlExpression>{escape(sql)}</SqlExpression>'
        f"<CompatibilityLevel>20</CompatibilityLevel>{params_xml}</Filter>"
    )


def _key_values_xml(values: Mapping[str, Any]) -> str:
    parts = []
    for key, value in values.items():
        if isinstance(value, bool):
            vtype = "boolean"
        elif isinstance(value, int):
            vtype = "int" if -(2**31) <= value < 2**31 else "long"
        elif isinstance(value, float):
            vtype = "double"
            value = repr(value) if math.isfinite(value) else ("INF" if value > 0 else "-INF")
        else:
            vtype = "string"
        parts.append(
            f"<KeyValueOfstringanyType><Key>{escape(str(key))}</Key>"
            f'<Value i:type="d6p1:{vtype}" xmlns:d6p1="{XSD_NS}">{escape(_value(value))}</Value>'
            "</KeyValueOfstringanyType>"
        )
    return "".join(parts)


def namespace_info(name: str) -> str:
    """What ``GET /$namespaceinfo`` describes: a Standard messaging namespace."""
    body = (
        f"<MessagingSKU>Standard</MessagingSKU><Name>{escape(name)}</Name>"
        "<NamespaceType>Messaging</NamespaceType>"
    )
    return _wrap("NamespaceInfo", body)


def _wrap(kind: str, inner: str) -> str:
    return f'<{kind} xmlns="{SB_NS}" xmlns:i="{XSI_NS}">{inner}</{kind}>'


def entry(url: str, title: str, description: str, published: float, updated: float) -> str:
    """An ATOM ``<entry>`` (without XML declaration) around a description."""
    return (
        f'<entry xmlns="{ATOM_NS}"><id>{escape(url)}</id><title type="text">{escape(title)}</title>'
        f"<published>{timestamp(published)}</published><updated>{timestamp(updated)}</updated>"
        f'<link rel="self" href={quoteattr(url)}/>'
        f'<content type="application/xml">{description}</content></entry>'
    )


def document(text: str) -> bytes:
    return ('<?xml version="1.0" encoding="utf-8"?>' + text).encode()


def feed(url: str, title: str, entries: Iterable[str], updated: float, next_url: str | None) -> str:
    """An ATOM ``<feed>``; ``next_url`` adds the link the SDK follows for the next page."""
    links = f'<link rel="self" href={quoteattr(url)}/>'
    if next_url:
        links += f'<link rel="next" href={quoteattr(next_url)}/>'
    return (
        f'<feed xmlns="{ATOM_NS}"><title type="text">{escape(title)}</title><id>{escape(url)}</id>'
        f"<updated>{timestamp(updated)}</updated>{links}{''.join(entries)}</feed>"
    )


def error(status: int, detail: str) -> bytes:
    """The body of a failed request: ``<Error><Code>404</Code><Detail>…</Detail></Error>``."""
    return document(f"<Error><Code>{status}</Code><Detail>{escape(detail)}</Detail></Error>")
