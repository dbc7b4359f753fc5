"""ATOM bodies against azure-servicebus 7.15.0's own models: what its admin client serializes is
parsed into the engine's properties, and what we write is deserialized by the client into the
values we meant."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from typing import Any
from xml.etree import ElementTree as ET

import pytest

pytest.importorskip("azure.servicebus")

import requests  # noqa: E402
from azure.core.pipeline.transport import HttpTransport  # noqa: E402
from azure.core.pipeline.transport._requests_basic import RequestsTransportResponse  # noqa: E402
from azure.servicebus.management import (  # noqa: E402
    CorrelationRuleFilter,
    QueueRuntimeProperties,
    ServiceBusAdministrationClient,  # noqa: E402
    SqlRuleAction,
    SqlRuleFilter,
    TrueRuleFilter,
)
from azure.servicebus.management import (
    QueueProperties as SdkQueue,
)
from azure.servicebus.management import (
    RuleProperties as SdkRule,
)
from azure.servicebus.management import (
    SubscriptionProperties as SdkSubscription,
)
from azure.servicebus.management import (
    TopicProperties as SdkTopic,
)
from azure.servicebus.management._generated.models import (  # noqa: E402
    QueueDescriptionEntry,
    QueueDescriptionFeed,
    RuleDescriptionEntry,
    SubscriptionDescriptionEntry,
    TopicDescriptionEntry,
)
from azure.servicebus.management._utils import deserialize_rule_key_values  # noqa: E402

from qmgr.atom import descriptions as atom  # noqa: E402
from qmgr.core.clock import ManualClock  # noqa: E402
from qmgr.servicebus.entities import (  # noqa: E402
    FilterType,
    QueueProperties,
    RuleProperties,
    SubscriptionProperties,
    TopicProperties,
)
from qmgr.servicebus.namespace import Namespace  # noqa: E402

CONN = (
    "Endpoint=sb://localhost:5672;SharedAccessKeyName=RootManageSharedAccessKey;"
    "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"
)


class _Recorder(HttpTransport):  # type: ignore[misc]
    """A transport that keeps the bodies the admin client sends and echoes them back."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def __enter__(self) -> _Recorder:
        return self

    def __exit__(self, *args: Any) -> None:
        pass

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def send(self, request: Any, **kwargs: Any) -> Any:
        body = request.body or b""
        body = body.encode() if isinstance(body, str) else bytes(body)
        self.bodies.append(body)
        response = requests.Response()
        response.status_code = 201 if request.method == "PUT" else 200
        response._content = body
        response.headers["Content-Type"] = "application/atom+xml"
        return RequestsTransportResponse(request, response)


def _sent(call: Callable[[ServiceBusAdministrationClient], Any]) -> bytes:
    """The body the real admin client sends for ``call``."""
    recorder = _Recorder()
    client = ServiceBusAdministrationClient.from_connection_string(CONN, transport=recorder)
    call(client)
    return recorder.bodies[-1]


@pytest.fixture
def ns() -> Namespace:
    clock = ManualClock(1_800_000_000.0)
    return Namespace("ns", clock=clock)


def test_queue_body_from_the_sdk_sets_the_engine_properties() -> None:
    body = _sent(
        lambda c: c.create_queue(
            "q",
            lock_duration=dt.timedelta(seconds=30),
            max_delivery_count=5,
            requires_session=True,
            default_message_time_to_live=dt.timedelta(days=1),
            user_metadata="meta",
            status="SendDisabled",
            max_message_size_in_kilobytes=1024,
        )
    )
    values = atom.parse_queue(body)
    props = QueueProperties.from_dict(values)
    assert props.lock_duration == 30.0
    assert props.max_delivery_count == 5
    assert props.requires_session is True
    assert props.default_message_ttl == 86400.0
    assert props.user_metadata == "meta"
    assert props.status.value == "SendDisabled"
    assert props.max_message_size_kb == 1024


def test_forward_to_address_becomes_the_entity_name() -> None:
    values = atom.parse_queue(_sent(lambda c: c.create_queue("q", forward_to="target")))
    assert values["ForwardTo"] == "target"


def test_queue_entry_reads_back_in_the_sdk(ns: Namespace) -> None:
    info = ns.create_queue(
        "orders",
        QueueProperties.from_dict({"LockDuration": "PT45S", "RequiresDuplicateDetection": True}),
    )
    text = atom.entry("https://x/orders", "orders", atom.queue_description(info), 1.0, 2.0)
    element = ET.fromstring(text)
    parsed = QueueDescriptionEntry.deserialize(element)
    props = SdkQueue._from_internal_entity("orders", parsed.content.queue_description)
    assert props.lock_duration == dt.timedelta(seconds=45)
    assert props.requires_duplicate_detection is True
    assert props.max_delivery_count == 10
    assert props.status == "Active"
    assert props.default_message_time_to_live > dt.timedelta(days=10000)
    runtime = QueueRuntimeProperties._from_internal_entity(
        "orders", parsed.content.queue_description
    )
    assert runtime.active_message_count == 0
    assert runtime.total_message_count == 0
    assert runtime.created_at_utc is not None


def test_an_sdk_update_of_what_we_returned_is_accepted(ns: Namespace) -> None:
    """update_queue sends back every element a GET returned, read-only counts included."""
    info = ns.create_queue("orders")
    element = ET.fromstring(atom.entry("u", "orders", atom.queue_description(info), 1.0, 1.0))
    parsed = QueueDescriptionEntry.deserialize(element)
    sdk = SdkQueue._from_internal_entity("orders", parsed.content.queue_description)
    sdk.max_delivery_count = 3
    values = atom.parse_queue(_sent(lambda c: c.update_queue(sdk)))
    updated = info.properties.with_changes(values)
    assert updated.max_delivery_count == 3
    assert updated == QueueProperties().with_changes({"MaxDeliveryCount": 3})


def test_topic_and_subscription_round_trip(ns: Namespace) -> None:
    body = _sent(lambda c: c.create_topic("t", default_message_time_to_live=dt.timedelta(hours=2)))
    props = TopicProperties.from_dict(atom.parse_topic(body))
    assert props.default_message_ttl == 7200.0
    tinfo = ns.create_topic("t", props)
    parsed = TopicDescriptionEntry.deserialize(
        ET.fromstring(atom.entry("u", "t", atom.topic_description(tinfo), 1.0, 1.0))
    )
    back = SdkTopic._from_internal_entity("t", parsed.content.topic_description)
    assert back.default_message_time_to_live == dt.timedelta(hours=2)

    body = _sent(
        lambda c: c.create_subscription(
            "t", "s", dead_lettering_on_filter_evaluation_exceptions=False, max_delivery_count=2
        )
    )
    values, rule = atom.parse_subscription(body)
    assert rule is None
    sprops = SubscriptionProperties.from_dict(values)
    assert sprops.dead_lettering_on_filter_exceptions is False
    sinfo = ns.create_subscription("t", "s", sprops)
    parsed_sub = SubscriptionDescriptionEntry.deserialize(
        ET.fromstring(atom.entry("u", "s", atom.subscription_description(sinfo), 1.0, 1.0))
    )
    back_sub = SdkSubscription._from_internal_entity(
        "s", parsed_sub.content.subscription_description
    )
    assert back_sub.max_delivery_count == 2
    assert back_sub.dead_lettering_on_filter_evaluation_exceptions is False


@pytest.mark.parametrize(
    ("sdk_rule", "expected"),
    [
        (
            dict(
                filter=SqlRuleFilter("a = @p AND EXISTS(b)", parameters={"@p": 5}),
                action=SqlRuleAction("SET sys.SessionId = user.x"),
            ),
            RuleProperties(
                FilterType.SQL,
                sql="a = @p AND EXISTS(b)",
                action="SET sys.SessionId = user.x",
                parameters={"@p": 5},
            ),
        ),
        (
            dict(
                filter=CorrelationRuleFilter(
                    correlation_id="c", label="lab", properties={"k": "v", "n": 3, "b": True}
                )
            ),
            RuleProperties(
                FilterType.CORRELATION,
                correlation={"CorrelationId": "c", "Label": "lab"},
                properties={"k": "v", "n": 3, "b": True},
            ),
        ),
        (dict(filter=TrueRuleFilter()), RuleProperties(FilterType.TRUE)),
    ],
)
def test_rule_bodies_from_the_sdk(
    ns: Namespace, sdk_rule: dict[str, Any], expected: RuleProperties
) -> None:
    name, rule = atom.parse_rule(_sent(lambda c: c.create_rule("t", "s", "r", **sdk_rule)))
    assert name == "r"
    assert rule == expected
    ns.create_topic("t")
    ns.create_subscription("t", "s")
    info = ns.create_rule("t", "s", "r", rule)
    element = ET.fromstring(atom.entry("u", "r", atom.rule_description(info), 1.0, 1.0))
    parsed = RuleDescriptionEntry.deserialize(element)
    back = SdkRule._from_internal_entity("r", parsed.content.rule_description)
    deserialize_rule_key_values(element, back)
    assert type(back.filter) is type(sdk_rule["filter"])
    if isinstance(sdk_rule["filter"], SqlRuleFilter):
        assert back.filter.sql_expression == sdk_rule["filter"].sql_expression
    if "action" in sdk_rule:
        assert back.action.sql_expression == sdk_rule["action"].sql_expression
    if isinstance(sdk_rule["filter"], CorrelationRuleFilter):
        assert back.filter.correlation_id == "c"
        assert back.filter.label == "lab"
        assert dict(back.filter.properties) == {"k": "v", "n": 3, "b": True}


def test_feed_with_next_link_is_paged_by_the_sdk(ns: Namespace) -> None:
    entries = [
        atom.entry(f"u/{n}", n, atom.queue_description(ns.create_queue(n)), 1.0, 1.0)
        for n in ("a", "b")
    ]
    text = atom.feed("u", "Queues", entries, 1.0, "https://h/$Resources/queues?$skip=2&$top=2")
    feed = QueueDescriptionFeed.deserialize(ET.fromstring(text))
    assert [e.title for e in feed.entry] == ["a", "b"]
    assert feed.link[1].href.endswith("$skip=2&$top=2")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"<entry", "not well-formed"),
        (b"\xff\xfe<", "not UTF-8"),
        (
            b'<?xml version="1.0"?><!DOCTYPE e [<!ENTITY x "y">]><entry xmlns="http://www.w3.org/2005/Atom"/>',
            "DTD",
        ),
        (b'<feed xmlns="http://www.w3.org/2005/Atom"/>', "expected an ATOM <entry>"),
        (b'<entry xmlns="http://www.w3.org/2005/Atom"/>', "no <content>"),
        (
            b'<entry xmlns="http://www.w3.org/2005/Atom"><content><TopicDescription xmlns="'
            + atom.SB_NS.encode()
            + b'"/></content></entry>',
            "must hold one <QueueDescription>",
        ),
        (
            b'<entry xmlns="http://www.w3.org/2005/Atom"><content><QueueDescription xmlns="'
            + atom.SB_NS.encode()
            + b'"><LockDurationn>PT1M</LockDurationn></QueueDescription></content></entry>',
            "unknown element <LockDurationn>",
        ),
    ],
)
def test_bad_bodies_are_refused_with_a_reason(body: bytes, message: str) -> None:
    with pytest.raises(atom.AtomError, match=message):
        atom.parse_queue(body)


def test_bad_rule_bodies() -> None:
    def rule(inner: str) -> bytes:
        return (
            f'<entry xmlns="{atom.ATOM_NS}"><content><RuleDescription xmlns="{atom.SB_NS}" '
            f'xmlns:i="{atom.XSI_NS}">{inner}</RuleDescription></content></entry>'
        ).encode()

    with pytest.raises(atom.AtomError, match="unknown filter type"):
        atom.parse_rule(
            rule('<Filter i:type="SqlFiltr"><SqlExpression>1=1</SqlExpression></Filter>')
        )
    with pytest.raises(atom.AtomError, match="non-empty"):
        atom.parse_rule(rule('<Filter i:type="SqlFilter"><SqlExpression/></Filter>'))
    with pytest.raises(atom.AtomError, match="at least one"):
        atom.parse_rule(rule('<Filter i:type="CorrelationFilter"/>'))


def test_timestamps() -> None:
    assert atom.timestamp(0) == atom.NEVER
    assert atom.timestamp(1.5) == "1970-01-01T00:00:01.5000000Z"
    assert math.isinf(
        QueueProperties.from_dict(
            {"DefaultMessageTimeToLive": "P10675199DT2H48M5.4775807S"}
        ).default_message_ttl
    )
