"""`qmgr sb` against an in-process namespace: options to documented properties, output, errors.

The admin calls go to a real ``Namespace`` through a stand-in for the client's
``ServiceBusAdmin`` (same methods, same ``SbEntityInfo`` results, the same typed error);
the node and gRPC are covered by the integration tests.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from qmgr.cli import sb as sb_cli
from qmgr.client.errors import ServiceBusClientError
from qmgr.client.sbwire import SbCounts, SbEntityInfo
from qmgr.core.clock import ManualClock
from qmgr.servicebus import config_json
from qmgr.servicebus.entities import (
    FilterType,
    QueueProperties,
    RuleProperties,
    SubscriptionProperties,
    TopicProperties,
)
from qmgr.servicebus.errors import Code, ServiceBusError
from qmgr.servicebus.namespace import Namespace

CLASSES: dict[str, Any] = {
    "queue": QueueProperties,
    "topic": TopicProperties,
    "subscription": SubscriptionProperties,
}


class LocalAdmin:
    """The client's ServiceBusAdmin calls, served by a Namespace in this process."""

    def __init__(self, ns: Namespace) -> None:
        self.ns = ns
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        verb, _, kind = name.partition("_")
        if verb == "list":
            kind = kind[:-1]

        def call(*args: Any, rule: tuple[str, Any] | None = None) -> Any:
            self.calls.append((name, args))
            try:
                if rule is not None:
                    first = (rule[0], RuleProperties.from_dict(rule[1]))
                    topic, sub, props = args
                    info = self.ns.create_subscription(
                        topic, sub, SubscriptionProperties.from_dict(props), first
                    )
                    return self._info(kind, info)
                return self._call(verb, kind, *args)
            except ServiceBusError as exc:
                raise ServiceBusClientError(exc.code, str(exc), exc.where, exc.position) from None

        return call

    def _call(self, verb: str, kind: str, *args: Any) -> Any:
        method = getattr(self.ns, f"{verb}_{kind}s" if verb == "list" else f"{verb}_{kind}")
        if verb == "list":
            return [self._info(kind, i) for i in method(*args)]
        if verb in ("get", "delete"):
            result = method(*args)
            return None if verb == "delete" else self._info(kind, result)
        *names, data = args
        if kind == "rule":
            rule = RuleProperties.from_dict(data)
            return self._info(kind, method(*names, rule))
        cls = CLASSES[kind]
        if verb == "create":
            return self._info(kind, method(*names, cls.from_dict(data)))
        current = getattr(self.ns, f"get_{kind}")(*names).properties
        return self._info(kind, method(*names, current.with_changes(data)))

    @staticmethod
    def _info(kind: str, info: Any) -> SbEntityInfo:
        counts = SbCounts(
            active=getattr(info, "active", 0),
            dead_lettered=getattr(info, "dead_lettered", 0),
            scheduled=getattr(info, "scheduled", 0),
            subscription_count=getattr(info, "subscription_count", 0),
        )
        return SbEntityInfo(
            kind=kind,
            name=info.name,
            topic=getattr(info, "topic", None),
            subscription=getattr(info, "subscription", None),
            properties=info.properties.to_dict(),
            counts=counts,
            created_at=info.created_at,
            updated_at=info.updated_at,
        )

    def import_config(self, text: str) -> list[str]:
        try:
            return config_json.apply(self.ns, config_json.loads(text))
        except ServiceBusError as exc:
            raise ServiceBusClientError(exc.code, str(exc), exc.where, exc.position) from None

    def export_config(self) -> dict[str, Any]:
        return config_json.export(self.ns)


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> LocalAdmin:
    local = LocalAdmin(Namespace(clock=ManualClock()))

    @contextlib.contextmanager
    def fake(node: str, access: Any) -> Iterator[Any]:
        assert node == "QM1"
        try:
            yield local
        except ServiceBusClientError as exc:
            raise click.ClickException(sb_cli._error_text(exc)) from None

    monkeypatch.setattr(sb_cli, "_admin", fake)
    return local


def run(*args: str, ok: bool = True) -> Result:
    result = CliRunner().invoke(sb_cli.sb, list(args))
    if ok:
        assert result.exit_code == 0, result.output
    else:
        assert result.exit_code != 0, result.output
    return result


# ---------------------------------------------------------------------- options


def test_queue_create_maps_az_options_to_documented_properties(admin: LocalAdmin) -> None:
    run(
        "queue", "create", "QM1", "orders",
        "--max-delivery-count", "5",
        "--lock-duration", "PT30S",
        "--default-message-time-to-live", "1.00:00:00",
        "--enable-dead-lettering-on-message-expiration",
        "--requires-session",
        "--enable-duplicate-detection", "false",
        "--status", "SendDisabled",
    )  # fmt: skip
    (call,) = admin.calls
    assert call == (
        "create_queue",
        (
            "orders",
            {
                "MaxDeliveryCount": 5,
                "LockDuration": "PT30S",
                "DefaultMessageTimeToLive": "1.00:00:00",
                "DeadLetteringOnMessageExpiration": True,
                "RequiresSession": True,
                "RequiresDuplicateDetection": False,
                "Status": "SendDisabled",
            },
        ),
    )
    props = admin.ns.get_queue("orders").properties
    assert (props.max_delivery_count, props.lock_duration) == (5, 30.0)
    assert props.default_message_ttl == 86400.0
    assert props.requires_session is True


def test_bad_option_value_names_the_option_and_sends_nothing(admin: LocalAdmin) -> None:
    result = run("queue", "create", "QM1", "q", "--lock-duration", "PT10M", ok=False)
    assert "--lock-duration" in result.output
    assert "maximum" in result.output
    result = run("queue", "create", "QM1", "q", "--max-delivery-count", "0", ok=False)
    assert "--max-delivery-count" in result.output
    result = run("queue", "create", "QM1", "q", "--ttl", "soon", ok=False)
    assert "--default-message-time-to-live" in result.output
    assert admin.calls == []


def test_options_are_those_of_the_kind() -> None:
    result = CliRunner().invoke(
        sb_cli.sb, ["topic", "create", "QM1", "t", "--lock-duration", "PT1M"]
    )
    assert result.exit_code == 2
    assert "No such option" in result.output and "--lock-duration" in result.output


def test_update_changes_only_the_options_given(admin: LocalAdmin) -> None:
    run("queue", "create", "QM1", "orders", "--max-delivery-count", "5", "--user-metadata", "m")
    run("queue", "update", "QM1", "orders", "--lock-duration", "PT45S")
    props = admin.ns.get_queue("orders").properties
    assert (props.max_delivery_count, props.lock_duration, props.user_metadata) == (5, 45.0, "m")
    result = run("queue", "update", "QM1", "orders", ok=False)
    assert "nothing to update" in result.output


def test_subscription_commands_take_the_topic(admin: LocalAdmin) -> None:
    run("queue", "create", "QM1", "Shipping")
    run("topic", "create", "QM1", "bundle-1")
    run(
        "subscription", "create", "QM1", "bundle-1", "Shipping",
        "--forward-to", "Shipping", "--max-delivery-count", "2147483647",
        "--dead-letter-on-filter-exceptions", "false",
    )  # fmt: skip
    sub = admin.ns.get_subscription("bundle-1", "Shipping").properties
    assert sub.forward_to == "Shipping"
    assert sub.dead_lettering_on_filter_exceptions is False
    out = run("subscription", "list", "QM1", "bundle-1", "-o", "json").output
    (item,) = json.loads(out)
    assert item["name"] == "Shipping" and item["topic"] == "bundle-1"
    assert item["properties"]["ForwardTo"] == "Shipping"


# ---------------------------------------------------------------------- rules


def test_subscription_created_with_its_first_rule(admin: LocalAdmin) -> None:
    """NServiceBus's shape: the subscription starts with a ``$default`` false filter, so nothing
    flows before the event rules exist."""
    admin.ns.create_queue("Shipping")
    admin.ns.create_topic("bundle-1")
    run(
        "subscription", "create", "QM1", "bundle-1", "Shipping", "--forward-to", "Shipping",
        "--rule-name", "$default", "--sql-filter", "1=0",
    )  # fmt: skip
    (rule,) = admin.ns.list_rules("bundle-1", "Shipping")
    assert (rule.name, rule.properties.sql) == ("$default", "1=0")
    run("subscription", "create", "QM1", "bundle-1", "eu", "--label", "eu")
    (rule,) = admin.ns.list_rules("bundle-1", "eu")
    assert rule.name == "$Default" and dict(rule.properties.correlation) == {"Label": "eu"}
    result = run("subscription", "create", "QM1", "bundle-1", "x", "--rule-name", "r", ok=False)
    assert "--rule-name needs a filter option" in result.output


def test_rule_create_sql_filter_and_action(admin: LocalAdmin) -> None:
    admin.ns.create_topic("events")
    admin.ns.create_subscription("events", "audit")
    run(
        "rule", "create", "QM1", "events", "audit", "big",
        "--sql-filter", "size > 10", "--sql-action", "SET big = 1",
    )  # fmt: skip
    rule = admin.ns.get_rule("events", "audit", "big").properties
    assert (rule.filter_type, rule.sql, rule.action) == (FilterType.SQL, "size > 10", "SET big = 1")
    table = run("rule", "list", "QM1", "events", "audit").output
    assert "$Default" in table and "size > 10" in table and "SET big = 1" in table


def test_rule_create_correlation_filter(admin: LocalAdmin) -> None:
    admin.ns.create_topic("events")
    admin.ns.create_subscription("events", "eu")
    run(
        "rule", "create", "QM1", "events", "eu", "west",
        "--correlation-filter", "subject=orders",
        "--correlation-filter", "region=west",
        "--correlation-filter", "priority:=5",
        "--correlation-filter", "Sales.OrderAccepted:=true",
        "--correlation-id", "c1",
    )  # fmt: skip
    rule = admin.ns.get_rule("events", "eu", "west").properties
    assert rule.filter_type is FilterType.CORRELATION
    assert dict(rule.correlation) == {"Label": "orders", "CorrelationId": "c1"}
    assert dict(rule.properties) == {"region": "west", "priority": 5, "Sales.OrderAccepted": True}


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ((), "needs --sql-filter or a correlation filter"),
        (("--sql-filter", "a = 1", "--label", "x"), "not both"),
        (("--correlation-filter", "novalue"), "is not NAME=VALUE"),
        (("--correlation-filter", "n:=nope"), "not a JSON value"),
    ],
)
def test_rule_option_errors(admin: LocalAdmin, args: tuple[str, ...], words: str) -> None:
    result = run("rule", "create", "QM1", "t", "s", "r", *args, ok=False)
    assert words in result.output
    assert admin.calls == []


def test_rule_sql_syntax_error_comes_back_typed(admin: LocalAdmin) -> None:
    admin.ns.create_topic("events")
    admin.ns.create_subscription("events", "audit")
    result = run(
        "rule", "create", "QM1", "events", "audit", "bad", "--sql-filter", "a = = 1", ok=False
    )
    assert "BadArgument" in result.output
    assert [r.name for r in admin.ns.list_rules("events", "audit")] == ["$Default"]


def test_rule_update_replaces_the_filter(admin: LocalAdmin) -> None:
    admin.ns.create_topic("events")
    admin.ns.create_subscription("events", "audit")
    run("rule", "create", "QM1", "events", "audit", "r", "--sql-filter", "a = 1")
    run("rule", "update", "QM1", "events", "audit", "r", "--label", "x")
    rule = admin.ns.get_rule("events", "audit", "r").properties
    assert rule.filter_type is FilterType.CORRELATION
    run("rule", "delete", "QM1", "events", "audit", "r")
    assert [r.name for r in admin.ns.list_rules("events", "audit")] == ["$Default"]


# ---------------------------------------------------------------------- output and errors


def test_show_prints_properties_and_counts(admin: LocalAdmin) -> None:
    run("queue", "create", "QM1", "orders", "--max-delivery-count", "7")
    table = run("queue", "show", "QM1", "orders").output
    assert "MaxDeliveryCount" in table and "7" in table
    assert "count: active" in table and "count: dead lettered" in table
    assert "never" in table and "P10675199D" not in table  # AutoDeleteOnIdle
    data = json.loads(run("queue", "show", "QM1", "orders", "-o", "json").output)
    assert data["properties"]["MaxDeliveryCount"] == 7
    assert data["counts"]["active"] == 0
    assert "subscription_count" not in data["counts"]


def test_list_tables(admin: LocalAdmin) -> None:
    run("queue", "create", "QM1", "a")
    run("queue", "create", "QM1", "b", "--status", "Disabled")
    table = run("queue", "list", "QM1").output
    assert "dead-lettered" in table and "Disabled" in table
    run("topic", "create", "QM1", "t")
    assert "subscriptions" in run("topic", "list", "QM1").output
    result = run("subscription", "list", "QM1", "t")
    assert "no subscriptions" in result.output


def test_unknown_entity_is_a_typed_error(admin: LocalAdmin) -> None:
    result = run("queue", "show", "QM1", "nope", ok=False)
    assert result.exit_code == 1
    assert "MessagingEntityNotFound" in result.output and "nope" in result.output
    result = run("queue", "delete", "QM1", "nope", ok=False)
    assert "MessagingEntityNotFound" in result.output


def test_already_exists_and_forwarding_to_a_missing_entity(admin: LocalAdmin) -> None:
    run("queue", "create", "QM1", "q")
    assert "MessagingEntityAlreadyExists" in run("queue", "create", "QM1", "q", ok=False).output
    result = run("queue", "create", "QM1", "q2", "--forward-to", "nowhere", ok=False)
    assert "BadArgument" in result.output and "nowhere" in result.output
    assert [q.name for q in admin.ns.list_queues()] == ["q"]


def test_delete(admin: LocalAdmin) -> None:
    run("topic", "create", "QM1", "t")
    run("subscription", "create", "QM1", "t", "s")
    assert "deleted subscription t/s" in run("subscription", "delete", "QM1", "t", "s").output
    assert admin.ns.list_subscriptions("t") == []


def test_error_text_keeps_code_and_where() -> None:
    exc = ServiceBusClientError(Code.BAD_ARGUMENT, "too long", "LockDuration")
    assert sb_cli._error_text(exc) == "BadArgument: --lock-duration: too long"
    exc = ServiceBusClientError(Code.ENTITY_NOT_FOUND, "MessagingEntityNotFound: queue 'x'")
    assert sb_cli._error_text(exc) == "MessagingEntityNotFound: queue 'x'"


# ---------------------------------------------------------------------- import / export


SAMPLE = {
    "UserConfig": {
        "Namespaces": [
            {
                "Name": "sbemulatorns",
                "Queues": [{"Name": "q1", "Properties": {"MaxDeliveryCount": 3}}],
                "Topics": [{"Name": "t1", "Subscriptions": [{"Name": "s1"}]}],
            }
        ],
        "Logging": {"Type": "File"},
    }
}


def test_import_then_export_round_trip(admin: LocalAdmin, tmp_path: Path) -> None:
    path = tmp_path / "Config.json"
    path.write_text(json.dumps(SAMPLE))
    out = run("import", "QM1", str(path)).output
    assert "created queue 'q1'" in out and "3 changes" in out
    assert "nothing to change" in run("import", "QM1", str(path)).output
    exported = tmp_path / "out.json"
    run("export", "QM1", "-f", str(exported))
    data = json.loads(exported.read_text())
    assert data["UserConfig"]["Namespaces"][0]["Queues"][0]["Properties"]["MaxDeliveryCount"] == 3
    assert "nothing to change" in run("import", "QM1", str(exported)).output
    assert json.loads(run("export", "QM1").output) == data
    small = json.loads(run("export", "QM1", "--emulator").output)
    props = small["UserConfig"]["Namespaces"][0]["Queues"][0]["Properties"]
    assert props["MaxDeliveryCount"] == 3 and "MaxSizeInMegabytes" not in props


def test_import_of_a_bad_file_names_the_path_and_changes_nothing(
    admin: LocalAdmin, tmp_path: Path
) -> None:
    bad = json.loads(json.dumps(SAMPLE))
    bad["UserConfig"]["Namespaces"][0]["Topics"][0]["Subscriptions"][0]["Rules"] = [
        {"Name": "r", "Properties": {"FilterType": "SqlFilter", "SqlFilter": {}}}
    ]
    path = tmp_path / "Config.json"
    path.write_text(json.dumps(bad))
    result = run("import", "QM1", str(path), ok=False)
    assert "Subscriptions[0].Rules[0].Properties.FilterType" in result.output
    assert admin.calls == [] and admin.ns.list_queues() == []
    result = run("import", "QM1", str(path), "--check", ok=False)
    assert "FilterType" in result.output


def test_import_check_only_reads(admin: LocalAdmin, tmp_path: Path) -> None:
    path = tmp_path / "Config.json"
    path.write_text(json.dumps(SAMPLE))
    assert "valid (2 queues and topics)" in run("import", "QM1", str(path), "--check").output
    assert admin.ns.list_queues() == []


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ("region=eu", ("region", "eu", "eu")),
        ("n:=5", ("n", 5, "5")),
        ("ok:=true", ("ok", True, "true")),
        ("a=b=c", ("a", "b=c", "b=c")),
        ('s:="5"', ("s", "5", '"5"')),
    ],
)
def test_name_value(item: str, expected: tuple[str, Any, str]) -> None:
    assert sb_cli.name_value(item, "--property") == expected


@pytest.mark.parametrize("item", ["novalue", "=x", ":=5", "n:=nope"])
def test_name_value_errors(item: str) -> None:
    with pytest.raises(click.BadParameter):
        sb_cli.name_value(item, "--property")
