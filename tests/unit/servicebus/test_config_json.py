"""Config.json in the official emulator's schema: reading, checking, applying, exporting."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

from qmgr.core.clock import ManualClock
from qmgr.servicebus import config_json
from qmgr.servicebus.entities import (
    FilterType,
    QueueProperties,
    RuleProperties,
    Status,
    SubscriptionProperties,
)
from qmgr.servicebus.errors import Code, ServiceBusError
from qmgr.servicebus.namespace import Namespace, NamespaceLimits

# The sample Config.json the emulator ships with (ServiceBus-Emulator/Config/Config.json).
EMULATOR_SAMPLE = (Path(__file__).parent / "data" / "emulator-config.json").read_text()


def nsb_forwarding_topology() -> dict[str, Any]:
    """NServiceBus's ForwardingTopology as a Config.json: one input queue per endpoint, the
    ``bundle-1`` topic, one subscription per subscribing endpoint forwarding to its queue, a
    ``$default`` FalseFilter and one LIKE rule per subscribed event type."""

    def like(event: str) -> dict[str, Any]:
        return {
            "Name": event,
            "Properties": {
                "FilterType": "Sql",
                "SqlFilter": {
                    "SqlExpression": f"[NServiceBus.EnclosedMessageTypes] LIKE '%{event}%'"
                },
            },
        }

    def subscription(endpoint: str, events: list[str]) -> dict[str, Any]:
        return {
            "Name": endpoint,
            "Properties": {
                "ForwardTo": endpoint,
                "LockDuration": "PT5M",
                "MaxDeliveryCount": 2147483647,
                "DeadLetteringOnFilterEvaluationExceptions": False,
                "EnableBatchedOperations": True,
                "UserMetadata": endpoint,
            },
            "Rules": [
                {
                    "Name": "$default",
                    "Properties": {"FilterType": "Sql", "SqlFilter": {"SqlExpression": "1=0"}},
                },
                *[like(e) for e in events],
            ],
        }

    return {
        "UserConfig": {
            "Namespaces": [
                {
                    "Name": "sbemulatorns",
                    "Queues": [
                        {"Name": "Sales", "Properties": {"MaxDeliveryCount": 2147483647}},
                        {"Name": "Shipping", "Properties": {"LockDuration": "PT5M"}},
                        {"Name": "Billing"},
                    ],
                    "Topics": [
                        {
                            "Name": "bundle-1",
                            "Subscriptions": [
                                subscription(
                                    "Shipping",
                                    ["Sales.OrderAccepted", "Billing.IOrderBilled"],
                                ),
                                subscription("Billing", ["Sales.OrderAccepted"]),
                            ],
                        }
                    ],
                }
            ],
            "Logging": {"Type": "Console"},
        }
    }


def sample_namespace(data: dict[str, Any]) -> dict[str, Any]:
    """The sample's namespace (at ``NS``)."""
    ns: dict[str, Any] = data["UserConfig"]["Namespaces"][0]
    return ns


def sample() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(EMULATOR_SAMPLE)
    return data


def failure(data: Any) -> ServiceBusError:
    with pytest.raises(ServiceBusError) as info:
        config_json.parse(data)
    assert info.value.code is Code.BAD_ARGUMENT
    return info.value


NS = "UserConfig.Namespaces[0]"
SUB4 = f"{NS}.Topics[0].Subscriptions[3]"


# ---------------------------------------------------------------------- reading


def test_emulator_sample_reads_with_every_value() -> None:
    config = config_json.loads(EMULATOR_SAMPLE)
    ns = config.namespace
    assert ns.name == "sbemulatorns"
    assert config.logging == "File"
    (queue,) = ns.queues
    assert queue.name == "queue.1"
    assert queue.properties.max_delivery_count == 3
    assert queue.properties.lock_duration == 60.0
    assert queue.properties.default_message_ttl == 3600.0
    assert queue.properties.duplicate_detection_window == 20.0
    assert queue.properties.forward_to is None  # "" means no forwarding
    (topic,) = ns.topics
    assert [s.name for s in topic.subscriptions] == [
        "subscription.1",
        "subscription.2",
        "subscription.3",
        "subscription.4",
    ]
    sub1, sub2, sub3, sub4 = topic.subscriptions
    (rule,) = sub1.rules or ()
    assert rule.name == "app-prop-filter-1"
    assert rule.rule.filter_type is FilterType.CORRELATION
    assert rule.rule.correlation["Label"] == "subject1"
    assert rule.rule.correlation["To"] == "xyz"
    assert dict((sub2.rules or ())[0].rule.properties) == {"prop3": "value3"}
    assert sub3.rules is None  # no Rules: the subscription gets $Default
    (sql,) = sub4.rules or ()
    assert sql.rule.filter_type is FilterType.SQL
    assert sql.rule.sql == "sys.MessageId = '123456' AND userProp1 = 'value1'"
    assert sql.rule.action == "SET sys.To = 'Entity'"


def test_missing_properties_take_service_bus_defaults() -> None:
    data = {"UserConfig": {"Namespaces": [{"Name": "ns1", "Queues": [{"Name": "q"}]}]}}
    config = config_json.parse(data)
    props = config.namespace.queues[0].properties
    assert props.max_delivery_count == 10
    assert props.lock_duration == 60.0
    assert math.isinf(props.default_message_ttl)
    assert config.logging is None
    assert config.namespace.topics == ()


def test_emulator_caps_are_lifted() -> None:
    data = sample()
    ns = sample_namespace(data)
    ns["Queues"] = [
        {"Name": f"q{i}", "Properties": {"DefaultMessageTimeToLive": "P14D"}} for i in range(120)
    ]
    ns["Queues"][0]["Properties"]["MaxDeliveryCount"] = 500
    config = config_json.parse(data)
    assert config.entity_count == 121
    assert config.namespace.queues[0].properties.default_message_ttl == 14 * 86400.0


def test_keys_match_case_insensitively_and_schema_key_is_ignored() -> None:
    data = {
        "$schema": "./Config-schema.json",
        "userconfig": {
            "NAMESPACES": [
                {
                    "name": "ns1",
                    "topics": [
                        {
                            "NAME": "t",
                            "subscriptions": [
                                {
                                    "Name": "s",
                                    "rules": [
                                        {
                                            "name": "r",
                                            "properties": {
                                                "filtertype": "sql",
                                                "sqlfilter": {"sqlexpression": "a = 1"},
                                            },
                                        }
                                    ],
                                }
                            ],
                        }
                    ],
                }
            ]
        },
    }
    config = config_json.parse(data)
    rule = (config.namespace.topics[0].subscriptions[0].rules or ())[0]
    assert rule.rule.filter_type is FilterType.SQL
    assert rule.rule.sql == "a = 1"


def test_nservicebus_forwarding_topology_reads() -> None:
    config = config_json.parse(nsb_forwarding_topology())
    (topic,) = config.namespace.topics
    shipping = topic.subscriptions[0]
    assert shipping.properties.forward_to == "Shipping"
    assert shipping.properties.max_delivery_count == 2**31 - 1
    assert shipping.properties.lock_duration == 300.0
    assert shipping.properties.dead_lettering_on_filter_exceptions is False
    rules = shipping.rules or ()
    assert [r.name for r in rules] == ["$default", "Sales.OrderAccepted", "Billing.IOrderBilled"]
    assert rules[0].rule.sql == "1=0"
    assert rules[1].rule.sql == "[NServiceBus.EnclosedMessageTypes] LIKE '%Sales.OrderAccepted%'"


# ---------------------------------------------------------------------- errors with their path


def test_misspelt_filter_type_is_an_error_not_a_default_rule() -> None:
    data = sample()
    rule = sample_namespace(data)["Topics"][0]["Subscriptions"][3]["Rules"][0]
    rule["Properties"]["FilterType"] = "SqlFilter"
    exc = failure(data)
    assert exc.where == f"{SUB4}.Rules[0].Properties.FilterType"
    assert "'Sql' or 'Correlation'" in exc.text and "SqlFilter" in exc.text
    assert "did you mean 'Sql'?" in exc.text


def test_missing_filter_type_and_body_mismatch() -> None:
    data = sample()
    rules = sample_namespace(data)["Topics"][0]["Subscriptions"][3]["Rules"]
    del rules[0]["Properties"]["FilterType"]
    exc = failure(data)
    assert exc.where == f"{SUB4}.Rules[0].Properties"
    assert "FilterType is required" in exc.text

    rules[0]["Properties"]["FilterType"] = "Correlation"
    exc = failure(data)
    assert exc.where == f"{SUB4}.Rules[0].Properties"
    assert "needs a CorrelationFilter" in exc.text

    rules[0]["Properties"]["CorrelationFilter"] = {"To": "x"}
    exc = failure(data)
    assert "SqlFilter does not go with FilterType Correlation" in exc.text


@pytest.mark.parametrize(
    ("part", "expression", "position"),
    [
        ("SqlFilter", "sys.MessageId = '1' AND AND x = 1", 24),
        ("Action", "SET sys.SequenceNumber = 5", 4),
    ],
)
def test_a_syntax_error_names_its_path_and_position(
    part: str, expression: str, position: int
) -> None:
    data = sample()
    rule = sample_namespace(data)["Topics"][0]["Subscriptions"][3]["Rules"][0]
    rule["Properties"][part]["SqlExpression"] = expression
    exc = failure(data)
    assert exc.where == f"{SUB4}.Rules[0].Properties.{part}.SqlExpression"
    assert exc.position == position
    assert "^" in exc.text


def test_empty_correlation_filter_is_an_error() -> None:
    data = sample()
    sub = sample_namespace(data)["Topics"][0]["Subscriptions"][0]
    sub["Rules"][0]["Properties"]["CorrelationFilter"] = {}
    exc = failure(data)
    assert exc.where.startswith(f"{NS}.Topics[0].Subscriptions[0].Rules[0].Properties")
    assert "at least one" in exc.text


def test_correlation_property_values_must_be_scalars() -> None:
    data = sample()
    sub = sample_namespace(data)["Topics"][0]["Subscriptions"][1]
    sub["Rules"][0]["Properties"]["CorrelationFilter"]["Properties"] = {"prop3": [1, 2]}
    exc = failure(data)
    assert exc.where == (
        f"{NS}.Topics[0].Subscriptions[1].Rules[0].Properties.CorrelationFilter.Properties"
    )
    assert "prop3" in exc.text
    sub["Rules"][0]["Properties"]["CorrelationFilter"]["Properties"] = {"n": float("nan")}
    assert "NaN" in failure(data).text


@pytest.mark.parametrize(
    ("change", "where", "words"),
    [
        (lambda q: q["Properties"].update(MaxDeliveryCount=0), "MaxDeliveryCount", "minimum"),
        (lambda q: q["Properties"].update(LockDuration="PT10M"), "LockDuration", "maximum"),
        (lambda q: q["Properties"].update(LockDuration="soon"), "LockDuration", "duration"),
        (lambda q: q["Properties"].update(RequiresSession="yes"), "RequiresSession", "true"),
        (
            lambda q: q["Properties"].update(MaxDeliveryCnt=3),
            "",
            "unknown property 'MaxDeliveryCnt'; did you mean 'MaxDeliveryCount'?",
        ),
    ],
)
def test_bad_queue_property_names_its_path(change: Any, where: str, words: str) -> None:
    data = sample()
    change(sample_namespace(data)["Queues"][0])
    exc = failure(data)
    path = f"{NS}.Queues[0].Properties"
    assert exc.where == (f"{path}.{where}" if where else path)
    assert words in exc.text


@pytest.mark.parametrize(
    ("path", "name", "words"),
    [
        (("Queues", 0), "-queue", "invalid queue name"),
        (("Topics", 0), "a//b", "invalid topic name"),
        (("Topics", 0, "Subscriptions", 0), "with/slash", "invalid subscription name"),
        (("Topics", 0, "Subscriptions", 3, "Rules", 0), "x" * 51, "invalid rule name"),
        (("Queues", 0), 17, "must be a string"),
    ],
)
def test_invalid_names_name_their_path(path: tuple[Any, ...], name: Any, words: str) -> None:
    data = sample()
    node = sample_namespace(data)
    where = NS
    for i in range(0, len(path), 2):
        node = node[path[i]][path[i + 1]]
        where += f".{path[i]}[{path[i + 1]}]"
    node["Name"] = name
    exc = failure(data)
    assert exc.where == f"{where}.Name"
    assert words in exc.text


def test_duplicate_names_are_errors() -> None:
    data = sample()
    ns = sample_namespace(data)
    ns["Topics"][0]["Name"] = "QUEUE.1"  # queues and topics share one set of names
    exc = failure(data)
    assert exc.where == f"{NS}.Topics[0].Name"
    assert f"{NS}.Queues[0]" in exc.text

    data = sample()
    subs = sample_namespace(data)["Topics"][0]["Subscriptions"]
    subs[2]["Name"] = "Subscription.1"
    exc = failure(data)
    assert exc.where == f"{NS}.Topics[0].Subscriptions[2].Name"

    data = sample()
    rules = sample_namespace(data)["Topics"][0]["Subscriptions"][3]["Rules"]
    rules.append(copy.deepcopy(rules[0]))
    exc = failure(data)
    assert exc.where == f"{SUB4}.Rules[1].Name"


@pytest.mark.parametrize(
    ("mutate", "where", "words"),
    [
        (lambda d: d.pop("UserConfig"), "the document", "UserConfig is required"),
        (lambda d: d.update(Extra=1), "the document", "unknown key 'Extra'"),
        (lambda d: d["UserConfig"].pop("Namespaces"), "UserConfig", "Namespaces is required"),
        (lambda d: d["UserConfig"].update(Namespaces={}), "UserConfig.Namespaces", "an array"),
        (
            lambda d: d["UserConfig"]["Namespaces"].append({"Name": "b"}),
            "UserConfig.Namespaces",
            "exactly one namespace",
        ),
        (
            lambda d: d["UserConfig"]["Logging"].update(Type="Syslog"),
            "UserConfig.Logging.Type",
            "'File'",
        ),
        (
            lambda d: d["UserConfig"]["Namespaces"][0].update(Name="bad name"),
            f"{NS}.Name",
            "invalid namespace name",
        ),
        (
            lambda d: d["UserConfig"]["Namespaces"][0]["Topics"][0].update(Subscription=[]),
            f"{NS}.Topics[0]",
            "unknown key 'Subscription'; did you mean 'Subscriptions'?",
        ),
        (
            lambda d: d["UserConfig"]["Namespaces"][0]["Queues"].__setitem__(0, "queue.1"),
            f"{NS}.Queues[0]",
            "expected an object, got a string",
        ),
        (
            lambda d: d["UserConfig"]["Namespaces"][0]["Queues"][0].update(Properties=[]),
            f"{NS}.Queues[0].Properties",
            "expected an object, got an array",
        ),
    ],
)
def test_structure_errors_name_their_path(mutate: Any, where: str, words: str) -> None:
    data = sample()
    mutate(data)
    exc = failure(data)
    assert exc.where == where
    assert words in exc.text


def test_forwarding_that_the_file_alone_shows_wrong() -> None:
    data = sample()
    queue = sample_namespace(data)["Queues"][0]
    queue["Properties"]["ForwardTo"] = "Queue.1"
    exc = failure(data)
    assert exc.where == f"{NS}.Queues[0].Properties.ForwardTo"
    assert "itself" in exc.text

    queue["Properties"].update(ForwardTo="topic.1", RequiresSession=True)
    exc = failure(data)
    assert exc.where == f"{NS}.Queues[0].Properties.ForwardTo"
    assert "session" in exc.text


def test_a_key_given_twice_is_an_error() -> None:
    text = EMULATOR_SAMPLE.replace(
        '"MaxDeliveryCount": 3,', '"MaxDeliveryCount": 3, "MaxDeliveryCount": 30,', 1
    )
    with pytest.raises(ServiceBusError) as info:
        config_json.loads(text)
    assert info.value.where == f"{NS}.Queues[0].Properties"
    assert "'MaxDeliveryCount' is given twice" in info.value.text
    data = sample()
    sample_namespace(data)["Queues"][0]["Properties"]["maxdeliverycount"] = 4
    assert "given twice" in failure(data).text
    data = sample()
    sample_namespace(data)["Queues"][0]["name"] = "other"
    exc = failure(data)
    assert exc.where == f"{NS}.Queues[0]" and "'name' is given twice" in exc.text


def test_invalid_json_reports_line_and_column() -> None:
    with pytest.raises(ServiceBusError) as info:
        config_json.loads('{"UserConfig": {"Namespaces": [}}')
    assert info.value.code is Code.BAD_ARGUMENT
    assert info.value.where == "Config.json"
    assert "line 1, column 32" in info.value.text
    assert info.value.position == 31


def test_error_message_carries_the_code_and_path() -> None:
    data = sample()
    sample_namespace(data)["Queues"][0]["Properties"]["MaxDeliveryCount"] = "x"
    exc = failure(data)
    assert str(exc).startswith(f"BadArgument: {NS}.Queues[0].Properties.MaxDeliveryCount: ")


def test_status_property_is_accepted() -> None:
    data = sample()
    sample_namespace(data)["Queues"][0]["Properties"]["Status"] = "SendDisabled"
    config = config_json.parse(data)
    assert config.namespace.queues[0].properties.status is Status.SEND_DISABLED


# ---------------------------------------------------------------------- applying


def namespace(**limits: int) -> Namespace:
    return Namespace(clock=ManualClock(), limits=NamespaceLimits(**limits))


def definitions(ns: Namespace) -> dict[str, Any]:
    """Everything the namespace defines, for before/after comparisons."""
    out: dict[str, Any] = {}
    for q in ns.list_queues():
        out[q.name] = q.properties
    for t in ns.list_topics():
        out[t.name] = t.properties
        for s in ns.list_subscriptions(t.name):
            out[f"{t.name}/{s.name}"] = s.properties
            for r in ns.list_rules(t.name, s.name):
                out[f"{t.name}/{s.name}/{r.name}"] = r.properties
    return out


def apply_failure(ns: Namespace, data: Any, code: Code = Code.BAD_ARGUMENT) -> ServiceBusError:
    before = definitions(ns)
    with pytest.raises(ServiceBusError) as info:
        config_json.apply(ns, config_json.parse(data))
    assert info.value.code is code
    assert definitions(ns) == before  # nothing changed
    return info.value


def test_apply_emulator_sample_creates_what_it_defines() -> None:
    ns = namespace()
    changes = config_json.apply(ns, config_json.loads(EMULATOR_SAMPLE))
    assert changes[0] == "created queue 'queue.1'"
    assert len(changes) == 6
    queue = ns.get_queue("queue.1").properties
    assert (queue.max_delivery_count, queue.lock_duration) == (3, 60.0)
    assert queue.default_message_ttl == 3600.0
    assert ns.get_topic("topic.1").properties.duplicate_detection_window == 20.0
    assert [s.name for s in ns.list_subscriptions("topic.1")] == [
        "subscription.1",
        "subscription.2",
        "subscription.3",
        "subscription.4",
    ]
    # A subscription defined with rules has those rules instead of $Default ...
    (rule,) = ns.list_rules("topic.1", "subscription.1")
    assert rule.name == "app-prop-filter-1"
    assert rule.properties.filter_type is FilterType.CORRELATION
    assert rule.properties.correlation["ReplyToSessionId"] == "sessionId"
    (sql,) = ns.list_rules("topic.1", "subscription.4")
    assert sql.properties.action == "SET sys.To = 'Entity'"
    # ... and one without gets $Default, the true filter.
    (default,) = ns.list_rules("topic.1", "subscription.3")
    assert default.name == "$Default"
    assert default.properties.filter_type is FilterType.TRUE


def test_applying_the_same_file_again_changes_nothing() -> None:
    ns = namespace()
    config = config_json.loads(EMULATOR_SAMPLE)
    config_json.apply(ns, config)
    updated = {q.name: q.updated_at for q in ns.list_queues()}
    ns.clock.advance(60)  # type: ignore[attr-defined]
    assert config_json.apply(ns, config) == []
    assert {q.name: q.updated_at for q in ns.list_queues()} == updated


def test_apply_updates_what_differs_and_keeps_what_the_file_does_not_name() -> None:
    ns = namespace()
    ns.create_queue(
        "queue.1", QueueProperties(max_delivery_count=5, user_metadata="kept", lock_duration=30)
    )
    changes = config_json.apply(ns, config_json.loads(EMULATOR_SAMPLE))
    assert changes[0].startswith("updated queue 'queue.1': ")
    assert "MaxDeliveryCount 5 -> 3" in changes[0]
    queue = ns.get_queue("queue.1").properties
    assert queue.max_delivery_count == 3
    assert queue.lock_duration == 60.0
    assert queue.user_metadata == "kept"  # not in the file: left as it was


def test_apply_leaves_entities_and_rules_the_file_does_not_name() -> None:
    ns = namespace()
    ns.create_queue("other")
    config = config_json.parse(nsb_forwarding_topology())
    config_json.apply(ns, config)
    # An endpoint subscribes to one more event at run time.
    extra = RuleProperties(FilterType.SQL, sql="[NServiceBus.EnclosedMessageTypes] LIKE '%X%'")
    ns.create_rule("bundle-1", "Billing", "X", extra)
    assert config_json.apply(ns, config) == []
    assert ns.get_rule("bundle-1", "Billing", "X").properties == extra
    assert ns.get_queue("other").name == "other"


def test_apply_updates_a_rule_whose_filter_changed() -> None:
    ns = namespace()
    config_json.apply(ns, config_json.loads(EMULATOR_SAMPLE))
    data = sample()
    rule = sample_namespace(data)["Topics"][0]["Subscriptions"][3]["Rules"][0]
    rule["Properties"]["SqlFilter"]["SqlExpression"] = "userProp1 = 'value2'"
    changes = config_json.apply(ns, config_json.parse(data))
    assert changes == ["updated rule 'sql-filter-1' of 'topic.1/Subscriptions/subscription.4'"]
    assert ns.get_rule("topic.1", "subscription.4", "sql-filter-1").properties.sql == (
        "userProp1 = 'value2'"
    )


def test_nservicebus_forwarding_topology_applies() -> None:
    ns = namespace()
    config_json.apply(ns, config_json.parse(nsb_forwarding_topology()))
    shipping = ns.get_subscription("bundle-1", "Shipping").properties
    assert shipping.forward_to == "Shipping"
    assert shipping.max_delivery_count == 2**31 - 1
    assert shipping.user_metadata == "Shipping"
    rules = {r.name: r.properties for r in ns.list_rules("bundle-1", "Shipping")}
    assert set(rules) == {"$default", "Sales.OrderAccepted", "Billing.IOrderBilled"}
    assert rules["$default"].sql == "1=0"


def test_forwarding_to_an_entity_defined_later_in_the_file() -> None:
    ns = namespace()
    data = {
        "UserConfig": {
            "Namespaces": [
                {
                    "Name": "ns1",
                    "Queues": [
                        {"Name": "first", "Properties": {"ForwardTo": "events"}},
                        {"Name": "dead", "Properties": {"ForwardDeadLetteredMessagesTo": "last"}},
                        {"Name": "last"},
                    ],
                    "Topics": [{"Name": "events"}],
                }
            ]
        }
    }
    changes = config_json.apply(ns, config_json.parse(data))
    assert ns.get_queue("first").properties.forward_to == "events"
    assert ns.get_queue("dead").properties.forward_dead_lettered_to == "last"
    assert "updated queue 'first': ForwardTo None -> 'events'" in changes
    assert config_json.apply(ns, config_json.parse(data)) == []


def test_forwarding_to_an_entity_the_namespace_already_has() -> None:
    ns = namespace()
    ns.create_queue("existing")
    data = sample()
    sample_namespace(data)["Queues"][0]["Properties"]["ForwardTo"] = "existing"
    config_json.apply(ns, config_json.parse(data))
    assert ns.get_queue("queue.1").properties.forward_to == "existing"


def test_forwarding_to_a_missing_entity_fails_with_its_path_and_changes_nothing() -> None:
    ns = namespace()
    data = sample()
    subs = sample_namespace(data)["Topics"][0]["Subscriptions"]
    subs[2]["Properties"]["ForwardTo"] = "nowhere"
    exc = apply_failure(ns, data)
    assert exc.where == f"{NS}.Topics[0].Subscriptions[2].Properties.ForwardTo"
    assert "nowhere" in exc.text and "does not exist" in exc.text
    assert ns.list_queues() == [] and ns.list_topics() == []


def test_changing_a_create_only_property_fails_and_changes_nothing() -> None:
    ns = namespace()
    ns.create_queue("queue.1")
    data = sample()
    sample_namespace(data)["Queues"][0]["Properties"]["RequiresSession"] = True
    exc = apply_failure(ns, data)
    assert exc.where == f"{NS}.Queues[0].Properties.RequiresSession"
    assert "only be set when the entity is created" in exc.text
    assert ns.list_topics() == []  # topic.1, later in the file, was not created either


def test_subscription_quota_fails_with_the_path_and_changes_nothing() -> None:
    ns = namespace(max_subscriptions_per_topic=3)
    exc = apply_failure(ns, sample(), Code.QUOTA_EXCEEDED)
    assert exc.where == f"{NS}.Topics[0].Subscriptions[3]"
    assert ns.list_queues() == []


def test_sql_rule_quota_names_the_rule() -> None:
    ns = namespace(max_sql_rules_per_topic=2)
    data = nsb_forwarding_topology()
    exc = apply_failure(ns, data, Code.QUOTA_EXCEEDED)
    assert exc.where.startswith(f"{NS}.Topics[0].Subscriptions[")
    assert ".Rules[" in exc.where


# ---------------------------------------------------------------------- exporting


def test_export_round_trips() -> None:
    ns = namespace()
    config_json.apply(ns, config_json.loads(EMULATOR_SAMPLE))
    config_json.apply(ns, config_json.parse(nsb_forwarding_topology()))
    ns.update_queue("Billing", QueueProperties(status=Status.SEND_DISABLED, user_metadata="m"))
    exported = config_json.export(ns)
    text = json.dumps(exported)
    copy_ns = namespace()
    config_json.apply(copy_ns, config_json.loads(text))
    assert definitions(copy_ns) == definitions(ns)
    assert config_json.export(copy_ns) == exported
    assert config_json.apply(ns, config_json.loads(text)) == []


def test_export_writes_the_emulator_shape() -> None:
    ns = namespace()
    config_json.apply(ns, config_json.loads(EMULATOR_SAMPLE))
    ns.create_subscription("topic.1", "none")
    ns.delete_rule("topic.1", "none", "$Default")  # a subscription with no rule gets nothing
    out = config_json.export(ns)
    (space,) = out["UserConfig"]["Namespaces"]
    assert space["Name"] == "sbemulatorns"
    assert out["UserConfig"]["Logging"] == {"Type": "Console"}
    queue = space["Queues"][0]
    assert queue["Properties"]["LockDuration"] == "PT1M"
    assert queue["Properties"]["DefaultMessageTimeToLive"] == "PT1H"
    subs = {s["Name"]: s for s in space["Topics"][0]["Subscriptions"]}
    assert "Rules" not in subs["subscription.3"]  # only $Default: written as the sample does
    assert subs["subscription.4"]["Rules"] == [
        {
            "Name": "sql-filter-1",
            "Properties": {
                "FilterType": "Sql",
                "SqlFilter": {"SqlExpression": "sys.MessageId = '123456' AND userProp1 = 'value1'"},
                "Action": {"SqlExpression": "SET sys.To = 'Entity'"},
            },
        }
    ]
    assert subs["none"]["Rules"] == [
        {
            "Name": "$Default",
            "Properties": {"FilterType": "Sql", "SqlFilter": {"SqlExpression": "1=0"}},
        }
    ]


def test_the_dry_run_copies_a_subscription_without_rules_as_it_is() -> None:
    """No rule counts against the quota: the copy has none either."""
    ns = namespace(max_sql_rules_per_topic=1)
    ns.create_topic("topic.1")
    ns.create_subscription("topic.1", "empty")
    ns.delete_rule("topic.1", "empty", "$Default")
    data = sample()
    sample_namespace(data)["Topics"][0]["Subscriptions"] = [
        {
            "Name": "one",
            "Rules": [
                {
                    "Name": "r",
                    "Properties": {"FilterType": "Sql", "SqlFilter": {"SqlExpression": "a = 1"}},
                }
            ],
        }
    ]
    config_json.apply(ns, config_json.parse(data))
    assert ns.list_rules("topic.1", "empty") == []
    assert [r.name for r in ns.list_rules("topic.1", "one")] == ["r"]


def test_entities_the_file_does_not_name_count_by_name_only() -> None:
    """The file may forward to them and may not reuse their names; what they hold (rules,
    a forwarding whose destination is gone) does not matter to it."""
    ns = namespace()
    ns.create_queue("gone")
    ns.create_topic("other")
    ns.create_subscription("other", "s", SubscriptionProperties(forward_to="gone"))
    ns.delete_queue("gone")
    data = sample()
    sample_namespace(data)["Queues"][0]["Properties"]["ForwardTo"] = "other"
    config_json.apply(ns, config_json.parse(data))
    assert ns.get_queue("queue.1").properties.forward_to == "other"
    sample_namespace(data)["Queues"].append({"Name": "Other"})
    exc = apply_failure(ns, data, Code.ENTITY_ALREADY_EXISTS)
    assert exc.where == f"{NS}.Queues[1]"


def test_a_deleted_forwarding_destination_fails_in_the_dry_run_too() -> None:
    """An entity whose forwarding destination was deleted cannot be updated (the destination
    does not exist); the file fails as a whole, before anything is created."""
    ns = namespace()
    ns.create_queue("gone")
    ns.create_queue("queue.1", QueueProperties(forward_to="gone"))
    ns.delete_queue("gone")
    data = sample()
    del sample_namespace(data)["Queues"][0]["Properties"]["ForwardTo"]
    exc = apply_failure(ns, data)  # changes MaxDeliveryCount of queue.1, adds topic.1
    assert exc.where == f"{NS}.Queues[0].Properties.ForwardTo"
    assert "gone" in exc.text
    assert ns.list_topics() == []
    # The same file without queue.1 applies: the dangling forwarding is left as it is.
    data = sample()
    sample_namespace(data)["Queues"] = []
    config_json.apply(ns, config_json.parse(data))
    assert ns.get_queue("queue.1").properties.forward_to == "gone"
    assert [t.name for t in ns.list_topics()] == ["topic.1"]


def test_export_for_the_emulator_keeps_the_properties_its_schema_knows() -> None:
    ns = namespace()
    config_json.apply(ns, config_json.loads(EMULATOR_SAMPLE))
    ns.update_queue("queue.1", QueueProperties(default_message_ttl=math.inf, user_metadata="m"))
    out = config_json.for_emulator(config_json.export(ns))
    space = out["UserConfig"]["Namespaces"][0]
    assert space["Queues"][0]["Properties"] == {
        "LockDuration": "PT1M",
        "MaxDeliveryCount": 10,
        "DeadLetteringOnMessageExpiration": False,
        "RequiresSession": False,
        "RequiresDuplicateDetection": False,
        "DuplicateDetectionHistoryTimeWindow": "PT10M",
    }  # no UserMetadata, no "never" TTL
    expected = json.loads(EMULATOR_SAMPLE)["UserConfig"]["Namespaces"][0]["Topics"][0]
    topic = space["Topics"][0]
    assert topic["Properties"] == expected["Properties"]
    sub = topic["Subscriptions"][0]
    assert set(sub["Properties"]) <= set(expected["Subscriptions"][0]["Properties"])
    assert sub["Rules"] == expected["Subscriptions"][0]["Rules"]
    assert config_json.parse(out).entity_count == 2


def test_rules_added_to_a_subscription_in_the_file_replace_its_default_rule() -> None:
    """A subscription first listed without rules gets $Default; when the file later gives it
    rules, it ends as one created with them would (Service Bus: creating a subscription with a
    rule replaces the default), so the new filter is not made pointless by a catch-all."""
    doc = {
        "UserConfig": {
            "Namespaces": [
                {
                    "Name": "sbemulatorns",
                    "Topics": [{"Name": "t", "Subscriptions": [{"Name": "s"}]}],
                }
            ]
        }
    }
    ns = namespace()
    config_json.apply(ns, config_json.parse(doc))
    assert [r.name for r in ns.list_rules("t", "s")] == ["$Default"]
    sub = doc["UserConfig"]["Namespaces"][0]["Topics"][0]["Subscriptions"][0]
    sub["Rules"] = [
        {
            "Name": "big",
            "Properties": {"FilterType": "Sql", "SqlFilter": {"SqlExpression": "amount > 100"}},
        }
    ]
    changes = config_json.apply(ns, config_json.parse(doc))
    assert [r.name for r in ns.list_rules("t", "s")] == ["big"]
    assert any("deleted rule '$Default'" in c for c in changes)
    assert config_json.apply(ns, config_json.parse(doc)) == []
    # a $Default the application changed is its own rule, and stays
    ns.create_rule("t", "s", "$Default", RuleProperties(FilterType.SQL, sql="vip = TRUE"))
    assert config_json.apply(ns, config_json.parse(doc)) == []
    assert {r.name for r in ns.list_rules("t", "s")} == {"big", "$Default"}
