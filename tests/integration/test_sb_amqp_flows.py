"""How messages flow between entities, driven only through the real azure-servicebus SDK (its
data client and its administration client) against a real node: forwarding chains and the 4-hop
limit, forwarding dead-lettered messages, a disabled destination, duplicate detection, TTL and
dead-lettering on expiration, and NServiceBus's ForwardingTopology with events reaching the right
endpoint queues (docs/servicebus.md; scenarios/nservicebus.toml runs the same topology)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

pytest.importorskip("azure.servicebus")

from azure.servicebus import (  # noqa: E402
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)
from azure.servicebus.exceptions import ServiceBusError  # noqa: E402
from azure.servicebus.management import EntityStatus, SqlRuleFilter  # noqa: E402

from tests.integration import clock, sb_nodes  # noqa: E402
from tests.integration import test_sb_admin_http as admin_http  # noqa: E402
from tests.integration.conftest import NodeProcess  # noqa: E402
from tests.integration.sb_drain import receive_all  # noqa: E402
from tests.integration.test_sb_admin_http import _admin, _conn  # noqa: E402

# one node for the module: each test makes entities of its own names; the expiry test moves
# its clock, which nothing after it minds (no test here counts on the SDK's lock renewal)
sb_node = sb_nodes.shared_sb_node
_quiet_insecure_warning = admin_http._quiet_insecure_warning


def _drain(
    node: NodeProcess,
    queue: str | None = None,
    *,
    topic: str | None = None,
    subscription: str | None = None,
    sub_queue: ServiceBusSubQueue | None = None,
    expect: int,
) -> list[Any]:
    """What the entity (or its DLQ) holds, received and deleted: ``expect`` messages, then what
    one short receive more brings, so that a late duplicate (or one that should not have come)
    is caught too."""
    options: dict[str, Any] = {"receive_mode": ServiceBusReceiveMode.RECEIVE_AND_DELETE}
    if sub_queue is not None:
        options["sub_queue"] = sub_queue
    with ServiceBusClient.from_connection_string(_conn(node)) as client:
        receiver = (
            client.get_queue_receiver(queue, **options)
            if queue is not None
            else client.get_subscription_receiver(topic, subscription, **options)
        )
        with receiver:
            return receive_all(receiver, expect, wait=10)


def _send(
    node: NodeProcess, entity: str, *messages: ServiceBusMessage, topic: bool = False
) -> None:
    with ServiceBusClient.from_connection_string(_conn(node)) as client:
        sender = client.get_topic_sender(entity) if topic else client.get_queue_sender(entity)
        with sender:
            sender.send_messages(list(messages))


def test_a_forwarding_chain_delivers_through_queues_and_a_topic(sb_node: NodeProcess) -> None:
    with _admin(sb_node) as admin:
        admin.create_topic("events")
        admin.create_subscription("events", "audit")
        admin.create_queue("q2", forward_to="events")
        admin.create_queue("q1", forward_to="q2")
    _send(sb_node, "q1", ServiceBusMessage("hello", application_properties={"k": "v"}))
    got = _drain(sb_node, topic="events", subscription="audit", expect=1)
    assert [str(m) for m in got] == ["hello"]
    assert got[0].application_properties[b"k"] == b"v"
    with _admin(sb_node) as admin:  # a forwarding source cannot be read: count what it holds
        for name in ("q1", "q2"):
            assert admin.get_queue_runtime_properties(name).total_message_count == 0


def test_a_forwarding_source_refuses_receivers(sb_node: NodeProcess) -> None:
    with _admin(sb_node) as admin:
        admin.create_queue("dest")
        admin.create_queue("src", forward_to="dest")
    with pytest.raises(ServiceBusError):
        _drain(sb_node, "src", expect=0)


def test_beyond_four_hops_the_message_is_dead_lettered_where_it_stands(
    sb_node: NodeProcess,
) -> None:
    names = [f"hop{i}" for i in range(6)]  # hop0 → hop1 → ... → hop5: five forwards
    with _admin(sb_node) as admin:
        admin.create_queue(names[-1])
        for here, there in reversed(list(zip(names, names[1:], strict=False))):
            admin.create_queue(here, forward_to=there)
    _send(sb_node, "hop0", ServiceBusMessage("far"))
    assert _drain(sb_node, "hop5", expect=0) == []
    dead = _drain(sb_node, "hop4", sub_queue=ServiceBusSubQueue.DEAD_LETTER, expect=1)
    assert [str(m) for m in dead] == ["far"]
    assert dead[0].dead_letter_reason == "MaxTransferHopCountExceeded"
    # four hops are fine
    _send(sb_node, "hop1", ServiceBusMessage("near"))
    assert [str(m) for m in _drain(sb_node, "hop5", expect=1)] == ["near"]


def test_dead_lettered_messages_are_forwarded_with_their_source(sb_node: NodeProcess) -> None:
    with _admin(sb_node) as admin:
        admin.create_queue("errors")
        admin.create_queue("work", forward_dead_lettered_messages_to="errors")
    _send(sb_node, "work", ServiceBusMessage("bad order"))
    with (
        ServiceBusClient.from_connection_string(_conn(sb_node)) as client,
        client.get_queue_receiver("work", max_wait_time=5) as receiver,
    ):
        (message,) = receiver.receive_messages(max_wait_time=5)
        receiver.dead_letter_message(message, reason="Invalid", error_description="no price")
    got = _drain(sb_node, "errors", expect=1)
    assert [str(m) for m in got] == ["bad order"]
    assert got[0].dead_letter_source == "work"
    assert _drain(sb_node, "work", sub_queue=ServiceBusSubQueue.DEAD_LETTER, expect=0) == []


def test_a_disabled_destination_sends_to_the_source_dead_letter_queue(
    sb_node: NodeProcess,
) -> None:
    with _admin(sb_node) as admin:
        admin.create_queue("closed")
        admin.create_queue("feeder", forward_to="closed")
        closed = admin.get_queue("closed")
        closed.status = EntityStatus.DISABLED
        admin.update_queue(closed)
    _send(sb_node, "feeder", ServiceBusMessage("nowhere to go"))
    dead = _drain(sb_node, "feeder", sub_queue=ServiceBusSubQueue.DEAD_LETTER, expect=1)
    assert [str(m) for m in dead] == ["nowhere to go"]


def test_duplicate_detection_drops_a_second_send_of_a_message_id(sb_node: NodeProcess) -> None:
    with _admin(sb_node) as admin:
        admin.create_queue(
            "dedup",
            requires_duplicate_detection=True,
            duplicate_detection_history_time_window=timedelta(minutes=1),
        )
    # both sends succeed; only the first copy of each MessageId is kept
    _send(
        sb_node,
        "dedup",
        ServiceBusMessage("a", message_id="m1"),
        ServiceBusMessage("b", message_id="m2"),
    )
    _send(sb_node, "dedup", ServiceBusMessage("a again", message_id="m1"))
    _send(sb_node, "dedup", ServiceBusMessage("c", message_id="m3"))
    assert [str(m) for m in _drain(sb_node, "dedup", expect=3)] == ["a", "b", "c"]


def test_without_duplicate_detection_both_copies_stay(sb_node: NodeProcess) -> None:
    _admin(sb_node).create_queue("plain")
    _send(sb_node, "plain", ServiceBusMessage("a", message_id="m1"))
    _send(sb_node, "plain", ServiceBusMessage("a", message_id="m1"))
    assert [str(m) for m in _drain(sb_node, "plain", expect=2)] == ["a", "a"]


def test_expired_messages_are_dead_lettered_or_dropped_as_configured(
    sb_node: NodeProcess,
) -> None:
    with _admin(sb_node) as admin:
        admin.create_queue(
            "short",
            default_message_time_to_live=timedelta(seconds=1),
            dead_lettering_on_message_expiration=True,
        )
        admin.create_queue("dropping", default_message_time_to_live=timedelta(seconds=1))
        admin.create_topic("t", default_message_time_to_live=timedelta(hours=1))
        admin.create_subscription(
            "t",
            "brief",
            default_message_time_to_live=timedelta(seconds=1),
            dead_lettering_on_message_expiration=True,
        )
    _send(
        sb_node,
        "short",
        ServiceBusMessage("stale"),
        ServiceBusMessage("fresh", time_to_live=timedelta(hours=1)),
    )  # a longer message TTL is capped by the queue
    _send(sb_node, "dropping", ServiceBusMessage("gone"))
    _send(sb_node, "t", ServiceBusMessage("sub ttl"), topic=True)
    clock.advance_clock(sb_node, 2.5)
    assert _drain(sb_node, "short", expect=0) == []
    dead = _drain(sb_node, "short", sub_queue=ServiceBusSubQueue.DEAD_LETTER, expect=2)
    assert sorted(str(m) for m in dead) == ["fresh", "stale"]
    assert {m.dead_letter_reason for m in dead} == {"TTLExpiredException"}
    assert _drain(sb_node, "dropping", expect=0) == []
    assert _drain(sb_node, "dropping", sub_queue=ServiceBusSubQueue.DEAD_LETTER, expect=0) == []
    # the subscription's shorter TTL wins over the topic's
    assert _drain(sb_node, topic="t", subscription="brief", expect=0) == []
    sub_dead = _drain(
        sb_node, topic="t", subscription="brief", sub_queue=ServiceBusSubQueue.DEAD_LETTER, expect=1
    )
    assert [str(m) for m in sub_dead] == ["sub ttl"]


def test_nservicebus_forwarding_topology_routes_events_to_endpoint_queues(
    sb_node: NodeProcess,
) -> None:
    """One bundle topic, one input queue per endpoint, one forwarding subscription per endpoint
    with a rule per event type it handles, matching EnclosedMessageTypes with LIKE '%type%'
    (so an interface picks up every event that implements it, and a V2 contract still matches
    the V1 handler's rule)."""
    handlers = {
        "Shipping": ["Shipping.OrderAccepted"],
        "Billing": ["Shipping.IOrderStatusChanged"],
        "Audit": ["Shipping.OrderDeclined", "Sales.OrderPlaced"],
    }
    with _admin(sb_node) as admin:
        admin.create_topic("bundle-1")
        for endpoint, events in handlers.items():
            admin.create_queue(endpoint, max_delivery_count=2147483647)
            admin.create_subscription("bundle-1", endpoint, forward_to=endpoint)
            admin.delete_rule("bundle-1", endpoint, "$Default")
            for event in events:
                admin.create_rule(
                    "bundle-1",
                    endpoint,
                    event,
                    filter=SqlRuleFilter(f"[NServiceBus.EnclosedMessageTypes] LIKE '%{event}%'"),
                )

    def event(name: str, *interfaces: str) -> ServiceBusMessage:
        types = ";".join(
            f"{t}, Shared, Version=1.0.0.0, Culture=neutral, PublicKeyToken=XYZ"
            for t in (name, *interfaces)
        )
        return ServiceBusMessage(
            name, application_properties={"NServiceBus.EnclosedMessageTypes": types}
        )

    _send(
        sb_node,
        "bundle-1",
        event("Shipping.OrderAccepted", "Shipping.IOrderAccepted", "Shipping.IOrderStatusChanged"),
        event("Shipping.OrderDeclined", "Shipping.IOrderAccepted", "Shipping.IOrderStatusChanged"),
        event(
            "Shipping.OrderAcceptedV2", "Shipping.IOrderAccepted", "Shipping.IOrderStatusChanged"
        ),
        event("Sales.OrderPlaced"),
        event("Marketing.Newsletter"),
        topic=True,
    )
    expected = {
        "Shipping": ["Shipping.OrderAccepted", "Shipping.OrderAcceptedV2"],
        "Billing": ["Shipping.OrderAccepted", "Shipping.OrderDeclined", "Shipping.OrderAcceptedV2"],
        "Audit": ["Shipping.OrderDeclined", "Sales.OrderPlaced"],
    }
    received = {
        endpoint: [str(m) for m in _drain(sb_node, endpoint, expect=len(expected[endpoint]))]
        for endpoint in handlers
    }
    assert received == expected
