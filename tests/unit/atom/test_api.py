"""The management API's routing and status codes, on a namespace in memory."""

from __future__ import annotations

import pytest

from qmgr.atom import descriptions as atom
from qmgr.atom.api import ManagementApi, Response
from qmgr.core.clock import ManualClock
from qmgr.servicebus.namespace import Namespace

SB = atom.SB_NS


def _entry(description: str) -> bytes:
    return (
        f'<entry xmlns="{atom.ATOM_NS}"><content type="application/xml">{description}'
        "</content></entry>"
    ).encode()


QUEUE = _entry(
    f'<QueueDescription xmlns="{SB}"><MaxDeliveryCount>3</MaxDeliveryCount></QueueDescription>'
)
TOPIC = _entry(f'<TopicDescription xmlns="{SB}"/>')
SUB = _entry(f'<SubscriptionDescription xmlns="{SB}"/>')
RULE = _entry(
    f'<RuleDescription xmlns="{SB}" xmlns:i="{atom.XSI_NS}"><Filter i:type="SqlFilter">'
    "<SqlExpression>a = 1</SqlExpression></Filter><Name>r</Name></RuleDescription>"
)
MATCH = {"if-match": "*"}


@pytest.fixture
def api() -> ManagementApi:
    clock = ManualClock(1_800_000_000.0)
    return ManagementApi(Namespace("ns", clock=clock), clock.now)


def call(api: ManagementApi, method: str, path: str, body: bytes = b"", **headers: str) -> Response:
    return api.handle(
        method, path, {k.replace("_", "-"): v for k, v in headers.items()}, body, "h:1"
    )


def test_put_creates_then_conflicts_and_if_match_updates(api: ManagementApi) -> None:
    created = call(api, "PUT", "/q?api-version=2024-05", QUEUE)
    assert (created.status, created.changed) == (201, True)
    assert b"<MaxDeliveryCount>3</MaxDeliveryCount>" in created.body
    assert call(api, "PUT", "/q", QUEUE).status == 409
    update = QUEUE.replace(b">3<", b">8<")
    assert api.handle("PUT", "/q", MATCH, update, "h").status == 200
    assert api.ns.get_queue("q").properties.max_delivery_count == 8
    assert api.handle("PUT", "/missing", MATCH, update, "h").status == 404


def test_get_delete_and_not_found(api: ManagementApi) -> None:
    call(api, "PUT", "/t", TOPIC)
    got = call(api, "GET", "/t")
    assert got.status == 200 and b"<TopicDescription" in got.body and not got.changed
    assert call(api, "DELETE", "/t").status == 200
    missing = call(api, "GET", "/t")
    assert missing.status == 404
    assert b"<Error><Code>404</Code>" in missing.body


def test_subscription_and_rule_routes_in_any_case(api: ManagementApi) -> None:
    call(api, "PUT", "/a/b", TOPIC)  # entity names may hold '/'
    assert call(api, "PUT", "/a/b/subscriptions/s", SUB).status == 201
    assert call(api, "PUT", "/a/b/Subscriptions/s/Rules/r", RULE).status == 201
    listing = call(api, "GET", "/a/b/subscriptions/s/rules?$skip=0&$top=100")
    assert listing.status == 200
    assert listing.body.count(b"<entry") == 2  # $Default and r
    assert call(api, "GET", "/a/b/subscriptions").body.count(b"<entry") == 1
    assert api.handle("PUT", "/a/b/subscriptions/s/rules/r", MATCH, RULE, "h").status == 200
    assert call(api, "DELETE", "/a/b/subscriptions/s/rules/r").status == 200
    assert call(api, "GET", "/a/b/subscriptions/s/rules/r").status == 404
    assert call(api, "POST", "/a/b/subscriptions/s").status == 405
    assert call(api, "GET", "/a/b/subscriptions/s/other").status == 404


def test_paging_adds_a_next_link(api: ManagementApi) -> None:
    for n in range(3):
        call(api, "PUT", f"/q{n}", QUEUE)
    page = call(api, "GET", "/$Resources/queues?$skip=0&$top=2")
    assert page.body.count(b"<entry") == 2
    assert b'rel="next"' in page.body
    last = call(api, "GET", "/$Resources/queues?$skip=2&$top=2")
    assert last.body.count(b"<entry") == 1
    assert b'rel="next"' not in last.body
    assert call(api, "GET", "/$Resources/queues?$top=x").status == 400


def test_bad_bodies_change_nothing(api: ManagementApi) -> None:
    assert call(api, "PUT", "/q", b"<entry").status == 400
    assert call(api, "PUT", "/q", SUB).status == 400  # a subscription body for a queue path
    bad_value = QUEUE.replace(b">3<", b">-1<")
    response = call(api, "PUT", "/q", bad_value)
    assert response.status == 400 and b"MaxDeliveryCount" in response.body
    assert api.ns.list_queues() == []


def test_health(api: ManagementApi) -> None:
    assert call(api, "GET", "/health") == Response(200, "text/plain; charset=utf-8", b"Healthy")


def test_a_default_rule_description_replaces_default(api: ManagementApi) -> None:
    call(api, "PUT", "/t", TOPIC)
    sub = _entry(
        f'<SubscriptionDescription xmlns="{SB}" xmlns:i="{atom.XSI_NS}"><DefaultRuleDescription>'
        '<Filter i:type="SqlFilter"><SqlExpression>1=0</SqlExpression></Filter>'
        "<Name>none</Name></DefaultRuleDescription></SubscriptionDescription>"
    )
    assert call(api, "PUT", "/t/subscriptions/s", sub).status == 201
    assert [r.name for r in api.ns.list_rules("t", "s")] == ["none"]
