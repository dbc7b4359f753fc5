"""The Service Bus port of a real node process, managed by the real azure-servicebus 7.15.0
``ServiceBusAdministrationClient`` (HTTPS with the node's self-signed certificate), by plain
HTTP as the .NET and JS admin clients speak it, and by bytes that are not HTTP at all."""

from __future__ import annotations

import datetime as dt
import http.client
import socket
import ssl
import warnings
from collections.abc import Callable, Iterator

import pytest

pytest.importorskip("azure.servicebus")

from azure.core.exceptions import (  # noqa: E402
    HttpResponseError,
    ResourceExistsError,
    ResourceNotFoundError,
)
from azure.servicebus.management import (  # noqa: E402
    CorrelationRuleFilter,
    ServiceBusAdministrationClient,
    SqlRuleAction,
    SqlRuleFilter,
)

from qmgr.servicebus.message import SbMessage  # noqa: E402
from tests.integration.conftest import NodeProcess  # noqa: E402

NodeFactory = Callable[..., NodeProcess]

FORWARDING_FILTER = "EXISTS(user.SessionName) AND EXISTS(user.TransactionId)"
FORWARDING_ACTION = "SET sys.SessionId = user.SessionName"


@pytest.fixture(autouse=True)
def _quiet_insecure_warning() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Unverified HTTPS request")
        yield


@pytest.fixture
def sb_node(node_factory: NodeFactory) -> NodeProcess:
    return node_factory("QM1", args=("--servicebus",))


def _conn(node: NodeProcess) -> str:
    return (
        f"Endpoint=sb://{node.sb_address};SharedAccessKeyName=RootManageSharedAccessKey;"
        "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"
    )


def _admin(node: NodeProcess) -> ServiceBusAdministrationClient:
    return ServiceBusAdministrationClient.from_connection_string(
        _conn(node), connection_verify=False
    )


def _http(node: NodeProcess) -> http.client.HTTPConnection:
    host, port = node.sb_address.rsplit(":", 1)
    return http.client.HTTPConnection(host, int(port), timeout=10)


def _request(
    node: NodeProcess,
    method: str,
    path: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes]:
    conn = _http(node)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _closed(sock: socket.socket) -> bool:
    """Whether the node closes ``sock`` (whatever it sends first, such as a TLS alert)."""
    return any(sock.recv(4096) == b"" for _ in range(100))


def test_queues_topics_subscriptions_and_rules_through_the_real_admin_client(
    sb_node: NodeProcess,
) -> None:
    admin = _admin(sb_node)
    queue = admin.create_queue(
        "orders",
        lock_duration=dt.timedelta(seconds=30),
        max_delivery_count=5,
        requires_duplicate_detection=True,
    )
    assert queue.lock_duration == dt.timedelta(seconds=30)
    assert queue.max_delivery_count == 5
    queue.max_delivery_count = 7
    queue.user_metadata = "shop"
    admin.update_queue(queue)
    got = admin.get_queue("orders")
    assert (got.max_delivery_count, got.user_metadata) == (7, "shop")
    assert got.requires_duplicate_detection is True

    admin.create_topic("events", default_message_time_to_live=dt.timedelta(hours=1))
    admin.create_subscription("events", "all", max_delivery_count=3)
    sub = admin.get_subscription("events", "all")
    assert sub.max_delivery_count == 3
    sub.lock_duration = dt.timedelta(seconds=45)
    admin.update_subscription("events", sub)
    assert admin.get_subscription("events", "all").lock_duration == dt.timedelta(seconds=45)

    admin.create_rule(
        "events",
        "all",
        "forwarding",
        filter=SqlRuleFilter(FORWARDING_FILTER),
        action=SqlRuleAction(FORWARDING_ACTION),
    )
    admin.create_rule(
        "events",
        "all",
        "eu",
        filter=CorrelationRuleFilter(correlation_id="c-1", properties={"region": "eu", "n": 3}),
    )
    rule = admin.get_rule("events", "all", "forwarding")
    assert rule.filter.sql_expression == FORWARDING_FILTER
    assert rule.action.sql_expression == FORWARDING_ACTION
    eu = admin.get_rule("events", "all", "eu")
    assert eu.filter.correlation_id == "c-1"
    assert dict(eu.filter.properties) == {"region": "eu", "n": 3}
    eu.filter = SqlRuleFilter("region = 'us'")
    admin.update_rule("events", "all", eu)
    assert admin.get_rule("events", "all", "eu").filter.sql_expression == "region = 'us'"
    assert sorted(r.name for r in admin.list_rules("events", "all")) == [
        "$Default",
        "eu",
        "forwarding",
    ]

    namespace = admin.get_namespace_properties()
    assert (namespace.name, namespace.messaging_sku) == ("sbemulatorns", "Standard")
    assert [q.name for q in admin.list_queues()] == ["orders"]
    assert [t.name for t in admin.list_topics()] == ["events"]
    assert [s.name for s in admin.list_subscriptions("events")] == ["all"]

    with pytest.raises(ResourceExistsError):
        admin.create_queue("orders")
    with pytest.raises(ResourceNotFoundError):
        admin.get_queue("missing")
    with pytest.raises(ResourceNotFoundError):
        admin.get_rule("events", "all", "missing")

    admin.delete_rule("events", "all", "eu")
    admin.delete_subscription("events", "all")
    admin.delete_topic("events")
    admin.delete_queue("orders")
    assert list(admin.list_queues()) == []
    assert list(admin.list_topics()) == []


def test_runtime_properties_count_messages(sb_node: NodeProcess) -> None:
    admin = _admin(sb_node)
    admin.create_queue("work")
    admin.create_topic("news")
    admin.create_subscription("news", "reader")
    sb = sb_node.client().servicebus
    sb.send("work", [b"a", b"b", b"c"])
    sb.send("news", [b"x"])
    locked = sb.receive("work", 1)
    sb.dead_letter("work", locked[0].lock_token)
    runtime = admin.get_queue_runtime_properties("work")
    assert runtime.active_message_count == 2
    assert runtime.dead_letter_message_count == 1
    assert runtime.total_message_count == 3
    assert admin.get_subscription_runtime_properties("news", "reader").active_message_count == 1
    assert admin.get_topic_runtime_properties("news").subscription_count == 1
    assert [q.active_message_count for q in admin.list_queues_runtime_properties()] == [2]


def test_listing_pages_through_more_than_one_feed(sb_node: NodeProcess) -> None:
    admin = _admin(sb_node)
    names = [f"q{n:03d}" for n in range(105)]
    sb = sb_node.client().servicebus
    for name in names:
        sb.create_queue(name)
    assert sorted(q.name for q in admin.list_queues()) == names


def test_nservicebus_forwarding_topology_created_through_the_admin_client(
    sb_node: NodeProcess,
) -> None:
    """What NServiceBus's ForwardingTopology installer creates: a bundle topic, an endpoint
    queue, and a subscription per endpoint forwarding to it with one rule per event type."""
    admin = _admin(sb_node)
    admin.create_topic("bundle-1")
    for endpoint, event in (("Sales", "OrderPlaced"), ("Billing", "OrderBilled")):
        admin.create_queue(endpoint, max_delivery_count=2147483647)
        admin.create_subscription(
            "bundle-1", endpoint, forward_to=endpoint, enable_batched_operations=False
        )
        admin.delete_rule("bundle-1", endpoint, "$Default")
        admin.create_rule(
            "bundle-1",
            endpoint,
            f"Contracts.{event}",
            filter=SqlRuleFilter(f"[NServiceBus.EnclosedMessageTypes] LIKE '%Contracts.{event}%'"),
        )
    assert admin.get_subscription("bundle-1", "Sales").forward_to.endswith("Sales")

    sb = sb_node.client().servicebus
    sb.send(
        "bundle-1",
        [
            SbMessage(
                body=b"1", properties={"NServiceBus.EnclosedMessageTypes": "Contracts.OrderPlaced"}
            ),
            SbMessage(
                body=b"2", properties={"NServiceBus.EnclosedMessageTypes": "Contracts.OrderBilled"}
            ),
            SbMessage(
                body=b"3", properties={"NServiceBus.EnclosedMessageTypes": "Contracts.Other"}
            ),
        ],
    )
    assert [m.message.body for m in sb.peek("Sales")] == [b"1"]
    assert [m.message.body for m in sb.peek("Billing")] == [b"2"]


def test_bad_xml_is_a_400_and_changes_nothing(sb_node: NodeProcess) -> None:
    admin = _admin(sb_node)
    admin.create_queue("keep", max_delivery_count=4)
    headers = {"Content-Type": "application/atom+xml"}
    bodies = [
        b"<entry",
        b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e "boom">]><entry>&e;</entry>',
        (
            b'<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">'
            b'<QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/'
            b'servicebus/connect"><MaxDeliveryCount>lots</MaxDeliveryCount></QueueDescription>'
            b"</content></entry>"
        ),
        (
            b'<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">'
            b'<QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/'
            b'servicebus/connect"><MaxDeliveryCont>3</MaxDeliveryCont></QueueDescription>'
            b"</content></entry>"
        ),
    ]
    for body in bodies:
        for path, extra in (("/new", {}), ("/keep", {"If-Match": "*"})):
            status, text = _request(sb_node, "PUT", path, body, {**headers, **extra})
            assert status == 400, (body, text)
            assert b"<Error><Code>400</Code>" in text
    assert [q.name for q in admin.list_queues()] == ["keep"]
    assert admin.get_queue("keep").max_delivery_count == 4
    with pytest.raises(HttpResponseError) as info:
        admin.create_queue("bad", lock_duration=dt.timedelta(seconds=1))  # below the minimum
    assert info.value.status_code == 400
    assert "LockDuration" in str(info.value)


def test_plain_http_serves_health_and_the_api(sb_node: NodeProcess) -> None:
    status, body = _request(sb_node, "GET", "/health")
    assert (status, body) == (200, b"Healthy")
    status, body = _request(
        sb_node, "GET", "/$Resources/queues?$skip=0&$top=100&api-version=2024-05"
    )
    assert status == 200
    assert body.startswith(b'<?xml version="1.0" encoding="utf-8"?><feed')


def test_garbage_and_half_open_connections_do_not_harm_others(sb_node: NodeProcess) -> None:
    host, port = sb_node.sb_address.rsplit(":", 1)
    address = (host, int(port))
    silent = socket.create_connection(address, timeout=10)  # half-open: sends nothing
    garbage = socket.create_connection(address, timeout=10)
    garbage.sendall(b"\x00\x01\x02garbage\xff" * 10)
    assert _closed(garbage)
    garbage.close()
    amqp = socket.create_connection(address, timeout=10)
    amqp.sendall(b"AMQP\x09\x01\x00\x00")  # an unknown AMQP protocol id
    assert _closed(amqp)  # answered with the header the node speaks, then closed
    amqp.close()
    bad_http = socket.create_connection(address, timeout=10)
    bad_http.sendall(b"GET / HTTP/1.1\r\nno colon here\r\n\r\n")
    assert bad_http.recv(100).startswith(b"HTTP/1.1 400")
    bad_http.close()
    bad_tls = socket.create_connection(address, timeout=10)
    bad_tls.sendall(b"\x16\x03\x01\x00\x05hello")
    assert _closed(bad_tls)
    bad_tls.close()
    assert _request(sb_node, "GET", "/health") == (200, b"Healthy")
    _admin(sb_node).create_queue("still-served")
    silent.close()
    assert [q.name for q in _admin(sb_node).list_queues()] == ["still-served"]


def test_https_and_http_keep_alive_on_one_connection(sb_node: NodeProcess) -> None:
    host, port = sb_node.sb_address.rsplit(":", 1)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    conn = http.client.HTTPSConnection(host, int(port), timeout=10, context=context)
    for _ in range(3):
        conn.request("GET", "/health")
        response = conn.getresponse()
        assert (response.status, response.read()) == (200, b"Healthy")
    conn.close()


def test_entities_created_over_http_survive_kill_9(sb_node: NodeProcess) -> None:
    admin = _admin(sb_node)
    admin.create_queue("durable", max_delivery_count=6)
    admin.create_topic("t")
    admin.create_subscription("t", "s")
    admin.create_rule("t", "s", "r", filter=SqlRuleFilter("a > 1"))
    sb_node.restart()
    admin = _admin(sb_node)
    assert admin.get_queue("durable").max_delivery_count == 6
    assert admin.get_rule("t", "s", "r").filter.sql_expression == "a > 1"


def test_a_taken_servicebus_port_stops_the_start_with_the_reason(
    sb_node: NodeProcess, node_factory: NodeFactory
) -> None:
    with pytest.raises(RuntimeError, match="cannot listen on .* for Service Bus"):
        node_factory("QM2", args=("--servicebus", "--servicebus-port", sb_node.sb_address))
    assert _request(sb_node, "GET", "/health") == (200, b"Healthy")
