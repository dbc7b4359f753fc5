"""A node hosting a Service Bus namespace (`qmgr start --servicebus`), on real processes and real
SQLite files: entities and messages survive `kill -9`, bad input is a typed error that changes
nothing, and the node keeps serving."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from qmgr.client import MQClientError, QueueManagerClient, ServiceBusClientError
from qmgr.client.errors import ConnectionFailed
from qmgr.client.servicebus import ServiceBusAdmin
from qmgr.launcher.poll import wait_for
from qmgr.node.server import STORE_FAULT_ENV
from qmgr.servicebus.errors import Code
from qmgr.servicebus.message import MessageState, SbMessage, Stored
from tests.integration.app_security import Nodes, add_user, nodes
from tests.integration.conftest import NodeProcess

__all__ = ["nodes"]

NodeFactory = Callable[..., NodeProcess]

SQL_RULE = {"FilterType": "Sql", "SqlFilter": {"SqlExpression": "priority > 5"}}
ACTION_RULE = {
    "FilterType": "Sql",
    "SqlFilter": {"SqlExpression": "sys.Label = 'x'"},
    "Action": {"SqlExpression": "SET routed = 'yes'"},
}
CORRELATION_RULE = {
    "FilterType": "Correlation",
    "CorrelationFilter": {"CorrelationId": "c-1", "Properties": {"region": "eu"}},
}


@pytest.fixture
def sb_node(node_factory: NodeFactory) -> NodeProcess:
    return node_factory("QM1", args=("--servicebus",))


def _sb(node: NodeProcess) -> ServiceBusAdmin:
    return node.client().servicebus


def _error(call: Callable[[], Any]) -> ServiceBusClientError:
    with pytest.raises(ServiceBusClientError) as info:
        call()
    return info.value


def _definitions(sb: ServiceBusAdmin) -> dict[str, Any]:
    """Every entity and rule with its properties (what must survive a restart)."""
    out: dict[str, Any] = {}
    for q in sb.list_queues():
        out[f"queue {q.name}"] = q.properties
    for t in sb.list_topics():
        out[f"topic {t.name}"] = t.properties
        for s in sb.list_subscriptions(t.name):
            out[f"subscription {t.name}/{s.name}"] = s.properties
            for r in sb.list_rules(t.name, s.name):
                out[f"rule {t.name}/{s.name}/{r.name}"] = r.properties
    return out


def test_entities_from_the_admin_api_survive_kill_9(sb_node: NodeProcess) -> None:
    sb = _sb(sb_node)
    orders = sb.create_queue("Orders", {"MaxDeliveryCount": 5, "LockDuration": "PT30S"})
    assert orders.name == "Orders" and orders.kind == "queue"
    assert orders.properties["MaxDeliveryCount"] == 5
    assert orders.properties["LockDuration"] == "PT30S"
    assert orders.counts.active == 0 and orders.created_at > 0
    sb.create_queue("audit-log", {"RequiresSession": True})
    sb.create_topic("events", {"DefaultMessageTimeToLive": "PT1H"})
    sb.create_subscription("events", "all")
    sb.create_subscription("events", "big", {"ForwardTo": "Orders"}, rule=("big", SQL_RULE))
    sb.create_rule("events", "all", "labelled", ACTION_RULE)
    sb.create_rule("events", "all", "eu", CORRELATION_RULE)
    sb.update_queue("orders", {"MaxDeliveryCount": 7})  # names compare case-insensitively
    sb.delete_rule("events", "all", "$Default")
    assert sb.get_topic("events").counts.subscription_count == 2
    assert sb.get_subscription("events", "all").counts.rule_count == 2
    before = _definitions(sb)
    assert before["queue Orders"]["MaxDeliveryCount"] == 7
    assert before["queue Orders"]["LockDuration"] == "PT30S"  # an update keeps the rest
    assert before["subscription events/big"]["ForwardTo"] == "Orders"
    assert before["rule events/all/labelled"] == ACTION_RULE
    assert "rule events/all/$Default" not in before

    sb_node.restart()  # kill -9, then start on the same data directory
    sb = _sb(sb_node)
    assert _definitions(sb) == before
    assert sb.get_queue("ORDERS").name == "Orders"


def test_a_deleted_entity_stays_deleted_after_kill_9(sb_node: NodeProcess) -> None:
    sb = _sb(sb_node)
    sb.create_topic("t")
    sb.create_subscription("t", "s")
    sb.create_queue("q")
    sb.delete_topic("t")
    sb_node.restart()
    sb = _sb(sb_node)
    assert [q.name for q in sb.list_queues()] == ["q"]
    assert sb.list_topics() == []
    sb.create_topic("t")  # the name is free again, without the old subscription
    assert sb.list_subscriptions("t") == []


def test_bad_input_is_a_typed_error_and_changes_nothing(sb_node: NodeProcess) -> None:
    sb = _sb(sb_node)
    sb.create_queue("orders", {"MaxDeliveryCount": 5})
    sb.create_topic("events")
    sb.create_subscription("events", "all")
    before = _definitions(sb)

    err = _error(lambda: sb.create_queue("bad name!"))
    assert err.code is Code.BAD_ARGUMENT and "invalid queue name" in err.text

    err = _error(lambda: sb.get_queue("missing"))
    assert err.code is Code.ENTITY_NOT_FOUND and err.reason_name == "MessagingEntityNotFound"

    err = _error(lambda: sb.create_queue("ORDERS"))
    assert err.code is Code.ENTITY_ALREADY_EXISTS

    err = _error(lambda: sb.create_queue("q2", {"MaxDeliveryCount": 0}))
    assert err.code is Code.BAD_ARGUMENT and err.where == "MaxDeliveryCount"

    err = _error(lambda: sb.create_queue("q3", {"MaxDeliveryCont": 3}))
    assert err.code is Code.BAD_ARGUMENT and "unknown property 'MaxDeliveryCont'" in err.text

    err = _error(lambda: sb.update_queue("orders", {"LockDuration": "PT10M"}))
    assert err.code is Code.BAD_ARGUMENT and err.where == "LockDuration"

    err = _error(lambda: sb.update_queue("orders", {"RequiresSession": True}))
    assert err.code is Code.BAD_ARGUMENT and "only be set when" in err.text

    err = _error(lambda: sb.create_queue("fwd", {"ForwardTo": "nowhere"}))
    assert err.code is Code.BAD_ARGUMENT and err.where == "ForwardTo"

    bad_sql = {"FilterType": "Sql", "SqlFilter": {"SqlExpression": "a = = 1"}}
    err = _error(lambda: sb.create_rule("events", "all", "broken", bad_sql))
    assert err.code is Code.BAD_ARGUMENT and err.position is not None

    misspelt = {"FilterType": "Sq1", "SqlFilter": {"SqlExpression": "1=1"}}
    err = _error(lambda: sb.create_rule("events", "all", "typo", misspelt))
    assert err.code is Code.BAD_ARGUMENT and "FilterType" in err.text

    err = _error(lambda: sb.create_subscription("events", "other", rule=("r", bad_sql)))
    assert err.code is Code.BAD_ARGUMENT

    err = _error(lambda: sb.create_subscription("nosuch", "s"))
    assert err.code is Code.ENTITY_NOT_FOUND

    err = _error(lambda: sb.delete_rule("events", "all", "nosuch"))
    assert err.code is Code.ENTITY_NOT_FOUND

    assert _definitions(sb) == before  # nothing changed
    sb_node.restart()
    assert _definitions(_sb(sb_node)) == before  # nor on disk


def test_a_node_without_a_namespace_says_so(node_factory: NodeFactory) -> None:
    node = node_factory("QM1")
    err = _error(lambda: node.client().servicebus.list_queues())
    assert err.code is Code.INVALID_OPERATION and "--servicebus" in err.text
    node.client().mqsc("DEFINE QLOCAL(STILL.SERVING)")  # the node keeps serving


def test_a_node_whose_store_holds_a_namespace_hosts_it(node_factory: NodeFactory) -> None:
    node = node_factory("QM1", args=("--servicebus", "orders-ns"))
    _sb(node).create_queue("q")
    node.kill()
    node.extra_args = []  # restarted without --servicebus
    node.start()
    assert [q.name for q in _sb(node).list_queues()] == ["q"]


def test_a_bad_namespace_name_fails_the_start(node_factory: NodeFactory) -> None:
    with pytest.raises(RuntimeError, match="namespace name 'x!'"):
        node_factory("QM1", args=("--servicebus", "x!"))


# ---------------------------------------------------------------------- Config.json


def _config(*, filter_type: str = "Sql", name: str = "sbemulatorns") -> dict[str, Any]:
    return {
        "UserConfig": {
            "Namespaces": [
                {
                    "Name": name,
                    "Queues": [
                        {
                            "Name": "queue.1",
                            "Properties": {"MaxDeliveryCount": 3, "LockDuration": "PT1M"},
                        },
                        {"Name": "endpoint", "Properties": {}},
                    ],
                    "Topics": [
                        {
                            "Name": "bundle-1",
                            "Properties": {"DefaultMessageTimeToLive": "PT1H"},
                            "Subscriptions": [
                                {
                                    "Name": "endpoint",
                                    "Properties": {"ForwardTo": "endpoint"},
                                    "Rules": [
                                        {
                                            "Name": "$default",
                                            "Properties": {
                                                "FilterType": filter_type,
                                                "SqlFilter": {"SqlExpression": "1=0"},
                                            },
                                        },
                                        {
                                            "Name": "Events.OrderPlaced",
                                            "Properties": {
                                                "FilterType": filter_type,
                                                "SqlFilter": {
                                                    "SqlExpression": "[NServiceBus.EnclosedMessageTypes]"
                                                    " LIKE '%Events.OrderPlaced%'"
                                                },
                                            },
                                        },
                                    ],
                                },
                                {"Name": "all", "Properties": {}},
                            ],
                        }
                    ],
                }
            ],
            "Logging": {"Type": "File"},
        }
    }


def test_config_json_entities_at_start_survive_kill_9_and_apply_again(
    node_factory: NodeFactory, tmp_path: Path
) -> None:
    config = tmp_path / "Config.json"
    config.write_text(json.dumps(_config()))
    node = node_factory("QM1", args=("--servicebus-config", str(config)))
    sb = _sb(node)
    assert [q.name for q in sb.list_queues()] == ["queue.1", "endpoint"]
    assert sb.get_queue("queue.1").properties["MaxDeliveryCount"] == 3
    assert [s.name for s in sb.list_subscriptions("bundle-1")] == ["endpoint", "all"]
    rules = {r.name: r.properties for r in sb.list_rules("bundle-1", "endpoint")}
    assert set(rules) == {"$default", "Events.OrderPlaced"}
    assert [r.name for r in sb.list_rules("bundle-1", "all")] == ["$Default"]
    sb.create_rule("bundle-1", "endpoint", "Events.Added", SQL_RULE)  # added at run time
    sb.create_queue("made-by-admin")
    before = _definitions(sb)

    node.restart()  # kill -9; the same file is applied again at start
    sb = _sb(node)
    assert _definitions(sb) == before  # nothing doubled, nothing lost
    assert sb.import_config(config.read_text()) == []  # applying it again changes nothing


def test_a_bad_config_json_fails_the_start_naming_the_json_path(
    node_factory: NodeFactory, tmp_path: Path
) -> None:
    config = tmp_path / "Config.json"
    config.write_text(json.dumps(_config(filter_type="SqlFilter")))
    with pytest.raises(RuntimeError) as info:
        node_factory("QM1", args=("--servicebus-config", str(config)))
    text = str(info.value)
    assert "UserConfig.Namespaces[0].Topics[0].Subscriptions[0].Rules[0].Properties.FilterType" in (
        text
    )
    assert "'SqlFilter'" in text and str(config) in text
    # nothing of it was kept: the node starts with a good file and holds only that
    config.write_text(json.dumps(_config()))
    node = node_factory("QM1", args=("--servicebus-config", str(config)))
    assert len(_sb(node).list_queues()) == 2


def test_a_config_json_for_another_namespace_fails_the_start(
    node_factory: NodeFactory, tmp_path: Path
) -> None:
    config = tmp_path / "Config.json"
    config.write_text(json.dumps(_config(name="otherns")))
    with pytest.raises(RuntimeError, match="defines namespace 'otherns' but --servicebus names"):
        node_factory(
            "QM1", args=("--servicebus", "sbemulatorns", "--servicebus-config", str(config))
        )


def test_import_and_export_through_the_admin_api(sb_node: NodeProcess) -> None:
    sb = _sb(sb_node)
    changes = sb.import_config(_config())
    assert changes and any("queue.1" in line for line in changes)
    exported = sb.export_config()
    assert sb.import_config(exported) == []  # the export round-trips
    before = _definitions(sb)

    bad = _config()
    bad["UserConfig"]["Namespaces"][0]["Queues"][0]["Properties"]["LockDuration"] = "PT1H"
    bad["UserConfig"]["Namespaces"][0]["Queues"].append({"Name": "new-queue"})
    err = _error(lambda: sb.import_config(bad))
    assert err.code is Code.BAD_ARGUMENT
    assert err.where == "UserConfig.Namespaces[0].Queues[0].Properties.LockDuration"
    err = _error(lambda: sb.import_config("{not json"))
    assert err.code is Code.BAD_ARGUMENT and err.position is not None
    assert _definitions(sb) == before  # nothing changed


# ---------------------------------------------------------------------- messages


def _peek(sb: ServiceBusAdmin, path: str) -> list[Stored]:
    return sb.peek(path, 0, 1000)


def test_sent_messages_survive_kill_9(sb_node: NodeProcess) -> None:
    sb = _sb(sb_node)
    sb.create_queue("orders")
    sb.create_topic("events")
    sb.create_subscription("events", "all")
    sb.create_subscription("events", "urgent", rule=("urgent", SQL_RULE))
    typed = {"n": 7, "big": 2**40, "f": 0.5, "ok": True, "s": "text", "raw": b"\x00\x01"}
    sent = [
        SbMessage(body=b"one", message_id="m1", properties=typed),
        SbMessage(body=b"two", message_id="m2", session_id=None, subject="label"),
        SbMessage(body=b"\x00three", message_id="m3", correlation_id="c-3"),
    ]
    sb.send("orders", sent)
    sb.send(
        "events",
        [
            SbMessage(body=b"low", message_id="e1", properties={"priority": 1}),
            SbMessage(body=b"high", message_id="e2", properties={"priority": 9}),
        ],
    )
    before = {
        path: [(m.sequence_number, m.message, m.state) for m in _peek(sb, path)]
        for path in ("orders", "events/Subscriptions/all", "events/Subscriptions/urgent")
    }
    assert [m.body for _, m, _ in before["orders"]] == [b"one", b"two", b"\x00three"]
    assert [m.body for _, m, _ in before["events/Subscriptions/urgent"]] == [b"high"]
    assert before["orders"][0][1].properties == typed

    sb_node.restart()  # kill -9: what the send acknowledged was committed
    sb = _sb(sb_node)
    after = {
        path: [(m.sequence_number, m.message, m.state) for m in _peek(sb, path)] for path in before
    }
    assert after == before
    assert sb.get_queue("orders").counts.active == 3
    assert sb.get_subscription("events", "all").counts.active == 2
    # sequence numbers go on from where they were
    sb.send("orders", [SbMessage(body=b"four")])
    assert [m.sequence_number for m in _peek(sb, "orders")][-1] == before["orders"][-1][0] + 1


def test_a_restart_releases_locks_and_counts_them_as_expired(sb_node: NodeProcess) -> None:
    """The delivery count counts failed deliveries (abandoned, lock expired), as the AMQP
    header does; a restart hands locked messages back at once, each lock it took counted as
    an expired one."""
    sb = _sb(sb_node)
    sb.create_queue("work", {"LockDuration": "PT5M", "MaxDeliveryCount": 5})
    sb.send("work", [SbMessage(body=b"a"), SbMessage(body=b"b")])
    first = sb.receive("work", 2)
    assert [m.delivery_count for m in first] == [0, 0]
    assert all(m.lock_token is not None for m in first)
    sb.abandon("work", first[0].lock_token)  # handed back: counted, available again
    again = sb.receive("work", 1)
    assert again[0].message.body == b"a" and again[0].delivery_count == 1

    sb_node.restart()  # kill -9 with both messages locked for minutes
    sb = _sb(sb_node)
    peeked = _peek(sb, "work")
    assert [(m.message.body, m.delivery_count, m.lock_token) for m in peeked] == [
        (b"a", 2, None),
        (b"b", 1, None),
    ]
    err = _error(lambda: sb.complete("work", first[1].lock_token))  # a lock from before
    assert err.code is Code.MESSAGE_LOCK_LOST
    redelivered = sb.receive("work", 2)  # available at once, not after the lock duration
    assert [(m.message.body, m.delivery_count) for m in redelivered] == [(b"a", 2), (b"b", 1)]
    for m in redelivered:
        sb.complete("work", m.lock_token)
    sb_node.restart()
    assert _peek(_sb(sb_node), "work") == []


def test_the_node_timer_expires_schedules_and_unlocks(sb_node: NodeProcess) -> None:
    sb = _sb(sb_node)
    sb.create_queue(
        "short", {"DefaultMessageTimeToLive": "PT1S", "DeadLetteringOnMessageExpiration": True}
    )
    sb.create_queue("locks", {"LockDuration": "PT5S"})
    sb.create_queue("later")
    sb.send("short", [SbMessage(body=b"expires")])
    sb.send("locks", [SbMessage(body=b"locked")])
    assert sb.receive("locks", 1)[0].lock_token is not None
    at = time.time() + 1.0
    sb.send("later", [SbMessage(body=b"scheduled", scheduled_enqueue_time=at)])
    assert [m.state for m in _peek(sb, "later")] == [MessageState.SCHEDULED]

    # nobody receives: the node's timer does each of these
    wait_for(
        lambda: len(_peek(sb, "short/$DeadLetterQueue")) == 1, 30.0, 0.1, what="expired to the DLQ"
    )
    assert _peek(sb, "short") == []
    wait_for(
        lambda: [m.state for m in _peek(sb, "later")] == [MessageState.ACTIVE],
        30.0,
        0.1,
        what="the scheduled message activated",
    )
    wait_for(lambda: _peek(sb, "locks")[0].lock_token is None, 30.0, 0.1, what="the lock expired")
    assert sb.receive("locks", 1)[0].delivery_count == 1  # the expired lock counted


def test_bad_sends_are_typed_errors_and_store_nothing(sb_node: NodeProcess) -> None:
    sb = _sb(sb_node)
    sb.create_queue("small", {"MaxMessageSizeInKilobytes": 1})
    sb.create_queue("sessions", {"RequiresSession": True})
    sb.create_queue("q", {"Status": "SendDisabled"})

    err = _error(lambda: sb.send("missing", [SbMessage(body=b"x")]))
    assert err.code is Code.ENTITY_NOT_FOUND
    batch = [SbMessage(body=b"fits"), SbMessage(body=b"x" * 4096)]
    err = _error(lambda: sb.send("small", batch))
    assert err.code is Code.MESSAGE_SIZE_EXCEEDED
    assert _peek(sb, "small") == []  # the whole batch is refused, not its first half
    err = _error(lambda: sb.send("sessions", [SbMessage(body=b"no session id")]))
    assert err.code in (Code.INVALID_OPERATION, Code.BAD_ARGUMENT)
    err = _error(lambda: sb.send("q", [SbMessage(body=b"x")]))
    assert err.code is Code.ENTITY_DISABLED
    err = _error(lambda: sb.complete("small", "not-a-uuid"))
    assert err.code is Code.BAD_ARGUMENT and err.where == "lock_token"
    err = _error(lambda: sb.peek("small", 0, 0))
    assert err.code is Code.BAD_ARGUMENT

    sb_node.restart()
    sb = _sb(sb_node)
    assert _peek(sb, "small") == [] and _peek(sb, "sessions") == []
    sb.send("small", [SbMessage(body=b"fits")])  # the node keeps serving
    assert [m.message.body for m in _peek(sb, "small")] == [b"fits"]


def test_entities_made_with_qmgr_sb_survive_kill_9(sb_node: NodeProcess) -> None:
    def sb(*args: str) -> Any:
        done = sb_node.cli("sb", *args)
        assert done.returncode == 0, done.stderr
        return done

    sb("queue", "create", "QM1", "orders", "--max-delivery-count", "4", "--lock-duration", "PT20S")
    sb("topic", "create", "QM1", "events")
    sb("subscription", "create", "QM1", "events", "audit", "--forward-to", "orders")
    sb("rule", "create", "QM1", "events", "audit", "big", "--sql-filter", "size > 10")
    refused = sb_node.cli(
        "sb", "rule", "create", "QM1", "events", "audit", "bad", "--sql-filter", "size >"
    )
    assert refused.returncode != 0 and "BadArgument" in refused.stderr

    sb_node.restart()
    shown = json.loads(sb("queue", "show", "QM1", "orders", "-o", "json").stdout)
    assert shown["properties"]["MaxDeliveryCount"] == 4
    assert shown["properties"]["LockDuration"] == "PT20S"
    sub = json.loads(sb("subscription", "show", "QM1", "events", "audit", "-o", "json").stdout)
    assert sub["properties"]["ForwardTo"] == "orders"
    rules = json.loads(sb("rule", "list", "QM1", "events", "audit", "-o", "json").stdout)
    assert sorted(r["name"] for r in rules) == ["$Default", "big"]


def test_what_the_namespace_remembers_survives_kill_9(sb_node: NodeProcess) -> None:
    """Duplicate-detection history, sequence numbers of emptied entities, dead-lettered
    messages with their reason, and a topic's scheduled messages."""
    sb = _sb(sb_node)
    sb.create_queue("dedup", {"RequiresDuplicateDetection": True})
    sb.create_queue("drained")
    sb.create_queue("failing")
    sb.create_topic("news")
    sb.create_subscription("news", "all")
    sb.send("dedup", [SbMessage(body=b"first", message_id="once")])
    sb.send("drained", [SbMessage(body=b"x") for _ in range(3)])
    assert len(sb.receive("drained", 3, mode="receive_and_delete")) == 3
    sb.send("failing", [SbMessage(body=b"poison")])
    (locked,) = sb.receive("failing", 1)
    sb.dead_letter("failing", locked.lock_token, reason="Poison", description="cannot parse")
    later = time.time() + 3600
    sb.send("news", [SbMessage(body=b"tomorrow", scheduled_enqueue_time=later)])
    sb.send("news", [SbMessage(body=b"soon", scheduled_enqueue_time=time.time() + 2)])

    sb_node.restart()
    sb = _sb(sb_node)
    sb.send("dedup", [SbMessage(body=b"again", message_id="once")])  # accepted, dropped
    assert [m.message.body for m in _peek(sb, "dedup")] == [b"first"]
    sb.send("drained", [SbMessage(body=b"next")])
    assert [m.sequence_number for m in _peek(sb, "drained")] == [4]  # gap-free, not reused
    (dead,) = _peek(sb, "failing/$DeadLetterQueue")
    assert dead.message.body == b"poison"
    assert dead.message.properties.get("DeadLetterReason") == "Poison"
    assert dead.message.properties.get("DeadLetterErrorDescription") == "cannot parse"
    wait_for(
        lambda: [m.message.body for m in _peek(sb, "news/Subscriptions/all")] == [b"soon"],
        30.0,
        0.1,
        what="the scheduled message delivered after the restart",
    )
    assert sb.get_topic("news").counts.scheduled == 1  # "tomorrow" still waits


def test_every_acknowledged_send_survives_kill_9_under_load(sb_node: NodeProcess) -> None:
    sb = _sb(sb_node)
    sb.create_queue("load")
    acknowledged: list[str] = []
    stop = threading.Event()

    def sender() -> None:
        client = sb_node.client().servicebus
        n = 0
        while not stop.is_set():
            batch = [SbMessage(body=b"m", message_id=f"{n}-{i}") for i in range(5)]
            try:
                client.send("load", batch)
            except MQClientError:
                return  # the node is gone
            acknowledged.extend(m.message_id or "" for m in batch)
            n += 1

    threads = [threading.Thread(target=sender) for _ in range(3)]
    for t in threads:
        t.start()
    wait_for(lambda: len(acknowledged) >= 300, 30.0, 0.1, what="300 acknowledged sends")
    sb_node.kill()
    stop.set()
    for t in threads:
        t.join(30)
    sb_node.start()
    stored = _sb(sb_node).peek("load", 0, 5000)
    ids = {m.message.message_id for m in stored}
    assert set(acknowledged) <= ids
    numbers = [m.sequence_number for m in stored]
    assert numbers == list(range(1, len(numbers) + 1))  # gap-free


def test_a_failed_commit_acknowledges_no_send(tmp_path: Path) -> None:
    """Fail-stop on the Service Bus side too: a send answered with an error is not stored, one
    acknowledged is, and the node stops instead of serving what it could not commit."""
    node = NodeProcess("QM1", tmp_path)
    node.extra_args = ["--servicebus"]
    node.start()
    try:
        _sb(node).create_queue("fs")
        node.stop()
        node.env = {**node.env, STORE_FAULT_ENV: "15"}
        node.start()
        acked: list[str] = []
        failed: list[str] = []
        sb = _sb(node)
        for i in range(1000):
            try:
                sb.send("fs", [SbMessage(body=b"x", message_id=str(i))])
            except ConnectionFailed:
                break
            except MQClientError as exc:
                assert exc.reason_name == "MQRC_RESOURCE_PROBLEM", exc
                failed.append(str(i))
                if len(failed) >= 3:
                    break
                continue
            acked.append(str(i))
        assert acked and failed
        assert node.proc is not None and node.proc.wait(60) != 0
        node.env = {k: v for k, v in node.env.items() if k != STORE_FAULT_ENV}
        node.start()
        ids = {m.message.message_id for m in _peek(_sb(node), "fs")}
        assert set(acked) <= ids
        assert not set(failed) & ids
    finally:
        node.kill()


def test_sessions_and_their_state_survive_kill_9(sb_node: NodeProcess) -> None:
    sb = _sb(sb_node)
    sb.create_queue("orders", {"RequiresSession": True, "LockDuration": "PT5M"})
    sb.create_queue("plain")
    sb.send("orders", [SbMessage(body=f"a{i}".encode(), session_id="a") for i in range(3)])
    sb.send("orders", [SbMessage(body=b"b0", session_id="b")])
    assert sorted(sb.list_sessions("orders")) == ["a", "b"]

    lock = sb.accept_session("orders", "a")
    assert lock is not None and lock.session_id == "a"
    got = sb.receive("orders", 10, session="a")
    assert [m.message.body for m in got] == [b"a0", b"a1", b"a2"]  # in order
    sb.complete("orders", got[0].lock_token)
    sb.set_session_state("orders", "a", b"step-1")
    assert sb.get_session_state("orders", "a") == b"step-1"
    err = _error(lambda: sb.accept_session("orders", "a"))
    assert err.code is Code.SESSION_CANNOT_BE_LOCKED
    nxt = sb.accept_session("orders")  # the next session with messages: b
    assert nxt is not None and nxt.session_id == "b"
    assert sb.accept_session("orders") is None  # none left free
    err = _error(lambda: sb.accept_session("plain", "a"))
    assert err.code is Code.INVALID_OPERATION

    sb_node.restart()  # kill -9 while both sessions are locked for minutes
    sb = _sb(sb_node)
    lock = sb.accept_session("orders", "a")  # the restart released the session lock
    assert lock is not None
    assert sb.get_session_state("orders", "a") == b"step-1"
    rest = sb.receive("orders", 10, session="a")
    # received under the session lock the restart took: each counts a failed delivery
    assert [(m.message.body, m.delivery_count) for m in rest] == [(b"a1", 1), (b"a2", 1)]
    for m in rest:
        sb.complete("orders", m.lock_token)
    sb.set_session_state("orders", "a", None)  # null clears
    sb.release_session("orders", "a")

    sb_node.restart()
    sb = _sb(sb_node)
    assert sb.list_sessions("orders") == ["b"]
    assert sb.accept_session("orders", "a") is not None
    assert sb.get_session_state("orders", "a") is None


def test_a_node_without_a_data_directory_keeps_its_namespace_in_memory(
    node_factory: NodeFactory,
) -> None:
    node = node_factory("QM1", persistent=False, args=("--servicebus",))
    sb = _sb(node)
    sb.create_queue("q")
    sb.send("q", [SbMessage(body=b"x")])
    assert [m.message.body for m in _peek(sb, "q")] == [b"x"]
    node.restart()
    assert _sb(node).list_queues() == []  # nothing survives without --data-dir


def test_a_store_whose_namespace_cannot_be_restored_fails_the_start(sb_node: NodeProcess) -> None:
    _sb(sb_node).create_queue("q", {"MaxDeliveryCount": 3})
    assert sb_node.stop() == 0
    assert sb_node.data_dir is not None
    with contextlib.closing(sqlite3.connect(sb_node.data_dir / "qmgr.sqlite")) as db, db:
        data = json.loads(db.execute("SELECT data FROM sb_entities WHERE path = 'q'").fetchone()[0])
        data["properties"]["MaxDeliveryCount"] = 0  # out of range: not what the node wrote
        db.execute("UPDATE sb_entities SET data = ? WHERE path = 'q'", (json.dumps(data),))
    with pytest.raises(RuntimeError, match="cannot restore the Service Bus namespace"):
        sb_node.start()


def test_deferred_and_scheduled_messages_survive_kill_9_and_can_be_fetched(
    sb_node: NodeProcess,
) -> None:
    sb = _sb(sb_node)
    sb.create_queue("q")
    sb.send("q", [SbMessage(body=b"later"), SbMessage(body=b"now")])
    first, second = sb.receive("q", 2)
    sb.defer("q", first.lock_token)
    (scheduled,) = sb.send(
        "q", [SbMessage(body=b"tomorrow", scheduled_enqueue_time=time.time() + 86400)]
    )

    sb_node.restart()
    sb = _sb(sb_node)
    states = [(m.message.body, m.state) for m in _peek(sb, "q")]
    assert states == [
        (b"later", MessageState.DEFERRED),
        (b"now", MessageState.ACTIVE),
        (b"tomorrow", MessageState.SCHEDULED),
    ]
    assert [m.message.body for m in sb.receive("q", 10)] == [b"now"]  # deferred ones wait
    (fetched,) = sb.receive_deferred("q", [first.sequence_number])
    assert fetched.message.body == b"later" and fetched.lock_token is not None
    sb.complete("q", fetched.lock_token)
    err = _error(lambda: sb.cancel_scheduled("q", [first.sequence_number]))
    assert err.code is Code.MESSAGE_NOT_FOUND
    sb.cancel_scheduled("q", [scheduled])
    sb_node.restart()
    assert [m.message.body for m in _peek(_sb(sb_node), "q")] == [b"now"]


def test_the_namespace_quotas_can_be_set_at_start(node_factory: NodeFactory) -> None:
    node = node_factory(
        "QM1", args=("--servicebus", "--servicebus-limit", "max_subscriptions_per_topic=2")
    )
    sb = _sb(node)
    sb.create_topic("t")
    sb.create_subscription("t", "a")
    sb.create_subscription("t", "b")
    err = _error(lambda: sb.create_subscription("t", "c"))
    assert err.code is Code.QUOTA_EXCEEDED and "2" in err.text
    assert [s.name for s in sb.list_subscriptions("t")] == ["a", "b"]


def test_managing_the_namespace_needs_an_administrator(nodes: Nodes, tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    add_user(users, "admin", "admin-Pa55", "mqm")
    add_user(users, "app", "app-Pa55")
    node = nodes.start("QM1", "--auth", str(users), "--servicebus")
    with QueueManagerClient(node.address, user="app", password="app-Pa55") as app:
        with pytest.raises(MQClientError) as raised:
            app.servicebus.create_queue("q")
        assert raised.value.reason_name == "MQRC_NOT_AUTHORIZED"
    with QueueManagerClient(node.address, user="admin", password="admin-Pa55") as admin:
        assert admin.servicebus.list_queues() == []  # the refused create changed nothing
        admin.servicebus.create_queue("q")
