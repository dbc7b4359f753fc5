"""`qmgr sb` against a real node hosting a namespace: entities made from the command line survive
`kill -9`, errors come back typed with nothing changed, Config.json import/export round trips."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient
from click.testing import CliRunner, Result

from qmgr.cli.sb import sb
from tests.integration.conftest import NodeProcess
from tests.unit.servicebus.test_config_json import EMULATOR_SAMPLE, nsb_forwarding_topology

NodeFactory = Callable[..., NodeProcess]


@pytest.fixture
def sb_node(node_factory: NodeFactory, monkeypatch: pytest.MonkeyPatch) -> NodeProcess:
    node = node_factory("QM1", args=("--servicebus",))
    monkeypatch.setenv("QMGR_HOME", node.env["QMGR_HOME"])  # so NODE may be the name
    return node


def qsb(*args: str, ok: bool = True) -> Result:
    result = CliRunner().invoke(sb, list(args))
    assert (result.exit_code == 0) is ok, result.output
    return result


def as_json(*args: str) -> Any:
    return json.loads(qsb(*args, "-o", "json").output)


def everything(node: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for q in as_json("queue", "list", node):
        out[q["name"]] = q["properties"]
    for t in as_json("topic", "list", node):
        out[t["name"]] = t["properties"]
        for s in as_json("subscription", "list", node, t["name"]):
            out[f"{t['name']}/{s['name']}"] = s["properties"]
            for r in as_json("rule", "list", node, t["name"], s["name"]):
                out[f"{t['name']}/{s['name']}/{r['name']}"] = r["properties"]
    return out


def test_entities_made_with_qmgr_sb_survive_kill_9(sb_node: NodeProcess) -> None:
    qsb(
        "queue",
        "create",
        "QM1",
        "Shipping",
        "--max-delivery-count",
        "5",
        "--lock-duration",
        "PT30S",
    )
    qsb("topic", "create", sb_node.address, "bundle-1", "--default-message-time-to-live", "P1D")
    qsb(
        "subscription", "create", "QM1", "bundle-1", "Shipping",
        "--forward-to", "Shipping", "--max-delivery-count", "2147483647",
        "--rule-name", "$default", "--sql-filter", "1=0",
    )  # fmt: skip
    qsb(
        "rule", "create", "QM1", "bundle-1", "Shipping", "Sales.OrderAccepted",
        "--sql-filter", "[NServiceBus.EnclosedMessageTypes] LIKE '%Sales.OrderAccepted%'",
    )  # fmt: skip
    qsb(
        "rule", "create", "QM1", "bundle-1", "Shipping", "eu",
        "--label", "orders", "--correlation-filter", "region=eu", "--sql-action", "SET eu = 1",
    )  # fmt: skip
    qsb("queue", "update", "QM1", "shipping", "--enable-dead-lettering-on-message-expiration")

    queue = as_json("queue", "show", "QM1", "Shipping")
    assert queue["properties"]["MaxDeliveryCount"] == 5
    assert queue["properties"]["LockDuration"] == "PT30S"
    assert queue["properties"]["DeadLetteringOnMessageExpiration"] is True
    assert queue["counts"]["active"] == 0
    sub = as_json("subscription", "show", "QM1", "bundle-1", "Shipping")
    assert sub["properties"]["ForwardTo"] == "Shipping"
    rules = {
        r["name"]: r["properties"] for r in as_json("rule", "list", "QM1", "bundle-1", "Shipping")
    }
    assert set(rules) == {"$default", "Sales.OrderAccepted", "eu"}
    assert rules["$default"]["SqlFilter"] == {"SqlExpression": "1=0"}
    assert rules["eu"] == {
        "FilterType": "Correlation",
        "CorrelationFilter": {"Label": "orders", "Properties": {"region": "eu"}},
        "Action": {"SqlExpression": "SET eu = 1"},
    }
    table = qsb("queue", "list", "QM1").output
    assert "Shipping" in table and "dead-lettered" in table

    before = everything("QM1")
    sb_node.restart()
    assert everything(sb_node.address) == before


def test_errors_are_typed_and_change_nothing(sb_node: NodeProcess) -> None:
    qsb("topic", "create", "QM1", "events")
    qsb("subscription", "create", "QM1", "events", "audit")
    before = everything("QM1")

    result = qsb("queue", "show", "QM1", "nope", ok=False)
    assert result.exit_code == 1
    assert "MessagingEntityNotFound" in result.output and "nope" in result.output
    result = qsb("queue", "create", "QM1", "q", "--forward-to", "nowhere", ok=False)
    assert "BadArgument" in result.output and "nowhere" in result.output
    result = qsb(
        "rule", "create", "QM1", "events", "audit", "r", "--sql-filter", "a = = 1", ok=False
    )
    assert "BadArgument" in result.output
    result = qsb("topic", "create", "QM1", "Events", ok=False)
    assert "MessagingEntityAlreadyExists" in result.output
    result = qsb("subscription", "create", "QM1", "events", "bad/name", ok=False)
    assert "invalid subscription name" in result.output
    result = qsb("queue", "create", "QM1", "q", "--lock-duration", "PT10M", ok=False)
    assert "--lock-duration" in result.output

    assert everything("QM1") == before


def test_import_and_export_round_trip(sb_node: NodeProcess, tmp_path: Path) -> None:
    sample = tmp_path / "Config.json"
    sample.write_text(EMULATOR_SAMPLE)
    out = qsb("import", "QM1", str(sample)).output
    assert "created queue 'queue.1'" in out
    nsb = tmp_path / "nsb.json"
    nsb.write_text(json.dumps(nsb_forwarding_topology()))
    qsb("import", "QM1", str(nsb))
    assert "nothing to change" in qsb("import", "QM1", str(sample)).output

    exported = tmp_path / "export.json"
    qsb("export", "QM1", "-f", str(exported))
    before = everything("QM1")
    assert "nothing to change" in qsb("import", "QM1", str(exported)).output

    # The export re-creates the same definitions on another node.
    other = NodeProcess("QM2", tmp_path, persistent=True)
    other.extra_args = ["--servicebus", "--servicebus-config", str(exported)]
    other.start()
    try:
        assert everything(other.address) == before
    finally:
        other.kill()


def test_a_bad_file_names_its_json_path_and_changes_nothing(
    sb_node: NodeProcess, tmp_path: Path
) -> None:
    data = json.loads(EMULATOR_SAMPLE)
    rule = data["UserConfig"]["Namespaces"][0]["Topics"][0]["Subscriptions"][3]["Rules"][0]
    rule["Properties"]["FilterType"] = "SqlFilter"
    bad = tmp_path / "Config.json"
    bad.write_text(json.dumps(data))
    result = qsb("import", "QM1", str(bad), ok=False)
    assert (
        "UserConfig.Namespaces[0].Topics[0].Subscriptions[3].Rules[0].Properties.FilterType"
        in result.output
    )
    assert as_json("queue", "list", "QM1") == []

    # Checked by the node too (a file that reads well but that the namespace refuses).
    rule["Properties"]["FilterType"] = "Sql"
    data["UserConfig"]["Namespaces"][0]["Queues"][0]["Properties"]["ForwardTo"] = "missing"
    bad.write_text(json.dumps(data))
    result = qsb("import", "QM1", str(bad), ok=False)
    assert "UserConfig.Namespaces[0].Queues[0].Properties.ForwardTo" in result.output
    assert as_json("queue", "list", "QM1") == [] and as_json("topic", "list", "QM1") == []


def test_send_and_peek(sb_node: NodeProcess) -> None:
    qsb("queue", "create", "QM1", "orders")
    qsb("topic", "create", "QM1", "events")
    qsb("subscription", "create", "QM1", "events", "big", "--sql-filter", "amount > 100")
    qsb("subscription", "create", "QM1", "events", "all", "--forward-to", "orders")
    out = qsb(
        "send", "QM1", "events", "hello", "-p", "amount:=250", "-p", "region=eu",
        "--message-id", "m-1", "--subject", "order", "--count", "2",
    ).output  # fmt: skip
    assert "sent 2 messages to events" in out
    qsb("send", "QM1", "events", "small", "-p", "amount:=5")

    (first, second) = as_json("peek", "QM1", "events/Subscriptions/big")
    assert first["body"] == "hello" and first["messageId"] == "m-1"
    assert first["subject"] == "order" and first["state"] == "Active"
    assert first["properties"] == {"amount": 250, "region": "eu"}
    assert second["sequenceNumber"] == first["sequenceNumber"] + 1
    forwarded = as_json("peek", "QM1", "orders")
    assert [m["body"] for m in forwarded] == ["hello", "hello", "small"]
    assert (
        as_json("peek", "QM1", "orders", "--from", str(forwarded[2]["sequenceNumber"]))[0]["body"]
        == "small"
    )
    assert as_json("queue", "show", "QM1", "orders")["counts"]["active"] == 3
    table = qsb("peek", "QM1", "orders").output
    assert "hello" in table and "m-1" in table
    assert "no messages" in qsb("peek", "QM1", "orders/$DeadLetterQueue").output

    result = qsb("send", "QM1", "nope", "x", ok=False)
    assert "MessagingEntityNotFound" in result.output and "nope" in result.output
    result = qsb("peek", "QM1", "events/Subscriptions/all", ok=False)  # a forwarding source
    assert "forward" in result.output
    result = qsb("receive", "QM1", "nope", ok=False)
    assert "MessagingEntityNotFound" in result.output and "nope" in result.output
    assert as_json("queue", "show", "QM1", "orders")["counts"]["active"] == 3


def test_receive_peek_lock_and_receive_and_delete(sb_node: NodeProcess) -> None:
    qsb("queue", "create", "QM1", "orders")
    qsb("topic", "create", "QM1", "events")
    qsb("subscription", "create", "QM1", "events", "audit")
    for n in range(3):
        qsb("send", "QM1", "orders", f"m{n}", "-p", f"n:={n}")
    got = as_json("receive", "QM1", "orders", "--max", "2")
    assert [m["body"] for m in got] == ["m0", "m1"]
    assert [m["properties"]["n"] for m in got] == [0, 1]
    assert all(m["deliveryCount"] == 0 for m in got)
    assert as_json("queue", "show", "QM1", "orders")["counts"]["active"] == 1  # completed
    table = qsb("receive", "QM1", "orders", "--receive-and-delete").output
    assert "m2" in table
    out = qsb("receive", "QM1", "orders", "--wait", "0.5").output
    assert "no messages in orders" in out

    qsb("send", "QM1", "events", "e1", "--subject", "created", "--count", "2")
    got = as_json("receive", "QM1", "events/Subscriptions/audit", "--max", "5", "--wait", "1")
    assert [(m["body"], m["subject"]) for m in got] == [("e1", "created"), ("e1", "created")]
    assert as_json("peek", "QM1", "events/subscriptions/audit") == []


def test_dead_letter_queue_read_and_resubmit(sb_node: NodeProcess) -> None:
    qsb("queue", "create", "QM1", "orders")
    qsb("topic", "create", "QM1", "events")
    qsb("subscription", "create", "QM1", "events", "audit")
    qsb("subscription", "create", "QM1", "events", "other")
    qsb("send", "QM1", "orders", "bad order", "-p", "region=eu", "--message-id", "o-1")
    qsb("send", "QM1", "events", "bad event")
    conn = qsb("connection-string", "QM1").output.strip()
    assert conn == (
        f"Endpoint=sb://{sb_node.sb_address};SharedAccessKeyName=RootManageSharedAccessKey;"
        "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"
    )
    with ServiceBusClient.from_connection_string(conn) as client:
        for receiver in (
            client.get_queue_receiver("orders", max_wait_time=5),
            client.get_subscription_receiver("events", "audit", max_wait_time=5),
        ):
            with receiver:
                (msg,) = receiver.receive_messages(max_wait_time=5)
                receiver.dead_letter_message(msg, reason="Invalid", error_description="no sku")

    (dead,) = as_json("dlq", "QM1", "orders")
    assert dead["body"] == "bad order" and dead["messageId"] == "o-1"
    assert dead["deadLetterReason"] == "Invalid"
    assert dead["deadLetterErrorDescription"] == "no sku"
    assert "Invalid" in qsb("dlq", "QM1", "orders").output
    assert as_json("dlq", "QM1", "orders") == as_json("peek", "QM1", "orders/$DeadLetterQueue")

    out = qsb("dlq", "QM1", "orders", "--resubmit").output
    assert "resubmitted 1 message to orders" in out
    assert as_json("dlq", "QM1", "orders") == []
    (back,) = as_json("receive", "QM1", "orders")
    assert back["body"] == "bad order" and back["messageId"] == "o-1"
    assert back["properties"] == {"region": "eu"}  # without the dead-letter reason

    # a subscription's dead letters go back through its topic (so every subscription gets one)
    assert (
        "resubmitted 1 message to events"
        in qsb("dlq", "QM1", "events/Subscriptions/audit", "--resubmit").output
    )
    assert [m["body"] for m in as_json("peek", "QM1", "events/Subscriptions/audit")] == [
        "bad event"
    ]
    assert len(as_json("peek", "QM1", "events/Subscriptions/other")) == 2
    assert "no dead-lettered messages" in qsb("dlq", "QM1", "events/Subscriptions/audit").output

    result = qsb("dlq", "QM1", "orders/$DeadLetterQueue", ok=False)
    assert "not its /$DeadLetterQueue" in result.output
    result = qsb("dlq", "QM1", "nope", "--resubmit", ok=False)
    assert "MessagingEntityNotFound" in result.output


def test_data_commands_with_keys(
    node_factory: NodeFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text(
        json.dumps(
            {
                "sender": {"key": "s3nd", "rights": ["Send"]},
                "RootManageSharedAccessKey": {"key": "r00t", "rights": ["Manage"]},
            }
        )
    )
    keys.chmod(0o600)
    node = node_factory("QM1", args=("--servicebus", "--servicebus-keys", str(keys)))
    monkeypatch.setenv("QMGR_HOME", node.env["QMGR_HOME"])
    qsb("queue", "create", "QM1", "orders")  # the admin gRPC port is not the Service Bus port

    result = qsb("send", "QM1", "orders", "x", ok=False)  # the emulator's key
    assert "ServiceBusAuthenticationError" in result.output
    qsb("send", "QM1", "orders", "one", "--keys", str(keys), "--key-name", "sender")
    result = qsb("receive", "QM1", "orders", "--keys", str(keys), "--key-name", "sender", ok=False)
    assert "ServiceBusAuthorizationError" in result.output and "Listen" in result.output
    monkeypatch.setenv("QMGR_SERVICEBUS_KEYS", str(keys))
    assert [m["body"] for m in as_json("receive", "QM1", "orders")] == ["one"]  # Manage key
    conn = qsb("connection-string", "QM1", "--key-name", "sender").output.strip()
    assert conn.endswith(
        "SharedAccessKeyName=sender;SharedAccessKey=s3nd;UseDevelopmentEmulator=true;"
    )
    result = qsb("connection-string", "QM1", "--key-name", "nobody", ok=False)
    assert "has no key 'nobody'" in result.output


def test_node_and_path_errors(sb_node: NodeProcess, node_factory: NodeFactory) -> None:
    result = qsb("send", "QM9", "orders", "x", ok=False)
    assert "no running node called QM9" in result.output
    result = qsb("peek", "QM1", "events/Subscriptions/", ok=False)
    assert "names no subscription" in result.output
    plain = node_factory("QM2")
    result = qsb("connection-string", "QM2", ok=False)
    assert "QM2 has no Service Bus port" in result.output
    assert plain.sb_address == ""
    result = qsb("send", sb_node.sb_address, "nope", "x", ok=False)  # HOST:PORT of the port
    assert "MessagingEntityNotFound" in result.output
