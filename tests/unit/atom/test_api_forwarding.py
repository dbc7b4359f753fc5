"""The management API with Service Bus keys: a PUT that makes a queue or subscription
auto-forward needs Manage on each destination (the request's token or the supplementary one;
Send there is not enough), on create and on update; a refusal is a 401 that names the
destination and changes nothing."""

from __future__ import annotations

import pytest

from qmgr.atom import descriptions as atom
from qmgr.atom.api import ManagementApi, Response
from qmgr.core.clock import ManualClock
from qmgr.servicebus.namespace import Namespace
from qmgr.servicebus.sas import parse_keys
from tests.unit.servicebus.test_sas import token

NOW = 1_800_000_000.0
SB = atom.SB_NS
HOST = "h:1"
KEYS = parse_keys(
    """{
      "root": {"key": "r00t", "rights": ["Manage"]},
      "orders-admin": {"key": "0rders", "rights": ["Manage"], "entity": "orders"},
      "invoices-admin": {"key": "1nv-m", "rights": ["Manage"], "entity": "invoices"},
      "invoices-sender": {"key": "1nv-s", "rights": ["Send"], "entity": "invoices"}
    }"""
)
ROOT = token(f"https://{HOST}", key="r00t", name="root")
ORDERS = token(f"sb://{HOST}/orders", key="0rders", name="orders-admin")
INVOICES = token(f"sb://{HOST}/invoices", key="1nv-m", name="invoices-admin")
INVOICES_SEND = token(f"sb://{HOST}/invoices", key="1nv-s", name="invoices-sender")
SUP = "servicebussupplementaryauthorization"
DLQ = "servicebusdlqsupplementaryauthorization"


def _entry(kind: str, **props: str) -> bytes:
    fields = "".join(f"<{k}>{v}</{k}>" for k, v in props.items())
    return (
        f'<entry xmlns="{atom.ATOM_NS}"><content type="application/xml">'
        f'<{kind} xmlns="{SB}">{fields}</{kind}></content></entry>'
    ).encode()


def queue(**props: str) -> bytes:
    return _entry("QueueDescription", **props)


def sub(**props: str) -> bytes:
    return _entry("SubscriptionDescription", **props)


def make_api(with_keys: bool = True) -> ManagementApi:
    clock = ManualClock(NOW)
    api = ManagementApi(Namespace("ns", clock=clock), clock.now, KEYS if with_keys else None)
    api.ns.create_topic("orders")
    api.ns.create_queue("invoices")
    api.ns.create_queue("orders/archive")
    return api


@pytest.fixture
def api() -> ManagementApi:
    return make_api()


def put(api: ManagementApi, path: str, body: bytes, main: str = ORDERS, **headers: str) -> Response:
    return api.handle("PUT", path, {"authorization": main, **headers}, body, HOST)


def test_creating_a_forwarding_queue_or_subscription_needs_manage_on_the_destination(
    api: ManagementApi,
) -> None:
    for path, body in (
        ("/orders%2Fleak", queue(ForwardTo="invoices")),
        ("/orders/leak", queue(ForwardDeadLetteredMessagesTo=f"sb://{HOST}/invoices")),
        ("/orders/Subscriptions/leak", sub(ForwardTo="invoices")),
        ("/orders/Subscriptions/leak", sub(ForwardDeadLetteredMessagesTo="INVOICES")),
    ):
        for headers in ({}, {SUP: INVOICES_SEND, DLQ: INVOICES_SEND}):
            refused = put(api, path, body, **headers)
            assert (refused.status, refused.changed) == (401, False)
            assert b"<Code>401</Code>" in refused.body
            assert b"'manage' on 'invoices'" in refused.body.lower()
    assert [q.name for q in api.ns.list_queues()] == ["invoices", "orders/archive"]
    assert api.ns.list_subscriptions("orders") == []


def test_either_token_may_grant_it(api: ManagementApi) -> None:
    send_only = put(api, "/orders/a", queue(ForwardTo="invoices"), **{SUP: INVOICES_SEND})
    assert send_only.status == 401
    assert b"'Manage' claim(s) are required" in send_only.body
    assert b"key 'invoices-sender' has Send" in send_only.body
    assert put(api, "/orders/a", queue(ForwardTo="invoices"), **{SUP: INVOICES}).status == 201
    assert put(api, "/orders/b", queue(ForwardTo="orders/archive")).status == 201
    both = sub(ForwardTo="invoices", ForwardDeadLetteredMessagesTo="invoices")
    assert put(api, "/orders/Subscriptions/s", both, **{SUP: INVOICES}).status == 401
    assert put(api, "/orders/Subscriptions/s", both, **{DLQ: INVOICES}).status == 401
    assert put(api, "/orders/Subscriptions/s", both, **{SUP: INVOICES, DLQ: INVOICES}).status == 201
    assert put(api, "/orders/Subscriptions/r", both, main=ROOT).status == 201
    assert api.ns.get_subscription("orders", "s").properties.forward_to == "invoices"


def test_an_update_is_checked_against_what_the_entity_then_forwards_to(api: ManagementApi) -> None:
    match = {"if-match": "*"}
    assert put(api, "/orders/Subscriptions/s", sub(MaxDeliveryCount="3")).status == 201
    refused = put(api, "/orders/Subscriptions/s", sub(ForwardTo="invoices"), **match)
    assert refused.status == 401
    props = api.ns.get_subscription("orders", "s").properties
    assert (props.forward_to, props.max_delivery_count) == (None, 3)
    forward = sub(ForwardTo="invoices")
    send_only = put(api, "/orders/Subscriptions/s", forward, **match, **{SUP: INVOICES_SEND})
    assert send_only.status == 401  # Send on the destination is not Manage
    ok = put(api, "/orders/Subscriptions/s", sub(ForwardTo="invoices"), **match, **{SUP: INVOICES})
    assert ok.status == 200
    # the subscription keeps forwarding to 'invoices': a later change still needs Manage there
    assert put(api, "/orders/Subscriptions/s", sub(MaxDeliveryCount="5"), **match).status == 401
    assert api.ns.get_subscription("orders", "s").properties.max_delivery_count == 3
    cleared = put(api, "/orders/Subscriptions/s", sub(ForwardTo=""), **match)
    assert cleared.status == 200
    assert api.ns.get_subscription("orders", "s").properties.forward_to is None


def test_bad_requests_and_missing_destinations_answer_as_before(api: ManagementApi) -> None:
    assert put(api, "/orders/q", queue(MaxDeliveryCount="0", ForwardTo="invoices")).status == 400
    missing = put(api, "/orders/q", queue(ForwardTo="orders/none"))
    assert missing.status == 400 and b"does not exist" in missing.body
    assert put(api, "/orders/q", queue(ForwardTo="nowhere")).status == 401  # no Manage there
    assert put(api, "/orders/q", queue(), main=ROOT).status == 201
    taken = put(api, "/orders/q", queue(ForwardTo="invoices"), **{SUP: INVOICES})
    assert taken.status == 409


def test_without_keys_every_token_is_accepted() -> None:
    api = make_api(with_keys=False)
    assert put(api, "/orders/q", queue(ForwardTo="invoices"), main="").status == 201
    assert put(api, "/orders/Subscriptions/s", sub(ForwardTo="invoices"), main="").status == 201
