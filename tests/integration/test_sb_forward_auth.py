"""Auto-forwarding needs Manage on the destination, on a real node with ``--servicebus-keys``,
driven by azure-servicebus 7.15.0's ``ServiceBusAdministrationClient``.

A Manage key defined on ``orders`` manages what is under ``orders``; a queue or subscription
there that forwards (``forward_to``, ``forward_dead_lettered_messages_to``) would send into
another entity with no key for it. Creating or updating one so is refused (401,
``ClientAuthenticationError``) and changes nothing unless the request's token or the
supplementary token the admin client sends for the destination grants Manage there, as Service
Bus requires for chaining (a key with only Send, or Listen, on the destination is refused); the
escalation (forwarding subscription, send into ``orders``, message in ``invoices``) is blocked.
``qmgr sb`` and Config.json import go through the Admin service, which takes the node's users
(``--auth``, group ``mqm``), never a Service Bus key."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

pytest.importorskip("azure.servicebus")

from azure.core.credentials import AccessToken  # noqa: E402
from azure.core.exceptions import (  # noqa: E402
    ClientAuthenticationError,
    ResourceNotFoundError,
)
from azure.servicebus import ServiceBusClient, ServiceBusMessage  # noqa: E402
from azure.servicebus._base_handler import ServiceBusSharedKeyCredential  # noqa: E402
from azure.servicebus.management import ServiceBusAdministrationClient  # noqa: E402
from click.testing import CliRunner  # noqa: E402

from qmgr.atom.descriptions import ATOM_NS, SB_NS  # noqa: E402
from qmgr.cli.sb import sb  # noqa: E402
from tests.integration import test_sb_admin_http as admin_http  # noqa: E402
from tests.integration.app_security import add_user  # noqa: E402
from tests.integration.conftest import NodeProcess  # noqa: E402
from tests.integration.test_sb_sas import sas_token, write_keys  # noqa: E402

NodeFactory = Callable[..., NodeProcess]
_quiet_insecure_warning = admin_http._quiet_insecure_warning

KEYS: dict[str, dict[str, Any]] = {
    "RootManageSharedAccessKey": {"key": "r00t-secret", "rights": ["Manage", "Send", "Listen"]},
    "orders-admin": {"key": "0rders-admin", "rights": ["Manage"], "entity": "orders"},
    "invoices-admin": {"key": "1nvoices-admin", "rights": ["Manage"], "entity": "invoices"},
    "invoices-sender": {"key": "1nvoices-send", "rights": ["Send"], "entity": "invoices"},
    "invoices-listener": {"key": "1nvoices-listen", "rights": ["Listen"], "entity": "invoices"},
}
ROOT = "RootManageSharedAccessKey"
HOUR = 3600


@pytest.fixture
def keyed(node_factory: NodeFactory, tmp_path: Path) -> NodeProcess:
    keys = write_keys(tmp_path / "sb-keys.json", KEYS)
    node = node_factory("QM1", args=("--servicebus", "--servicebus-keys", str(keys)))
    root = admin(node)
    root.create_topic("orders")
    root.create_subscription("orders", "audit")
    root.create_queue("invoices")
    root.create_queue("orders/archive")
    return node


class Signer(ServiceBusSharedKeyCredential):
    """A shared key as the SDK holds one, for a key that may be defined on an entity.

    The admin client signs its own token for the namespace's address (``https://HOST``); a key
    defined on an entity cannot sign that (Service Bus refuses it), so that token is signed for
    the key's entity instead, as a token handed out for the entity is. Every other token (the
    data plane's, the supplementary ones for forwarding destinations) is signed for the address
    asked, with the key ``also`` names for that entity, else this one."""

    def __init__(self, node: NodeProcess, name: str, also: Mapping[str, str] | None = None):
        super().__init__(name, str(KEYS[name]["key"]))
        self.node = node
        self.also = {k.lower(): v for k, v in (also or {}).items()}

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        scope = scopes[0]
        path = urlsplit(scope).path.strip("/")
        name = self.also.get(path.lower(), self.policy)
        entity = KEYS[name].get("entity")
        if not path and entity:
            scope = f"sb://{self.node.sb_address}/{entity}"
        expiry = int(time.time()) + HOUR
        return AccessToken(sas_token(scope, name, str(KEYS[name]["key"]), expiry), expiry)


def admin(
    node: NodeProcess, name: str = ROOT, also: Mapping[str, str] | None = None
) -> ServiceBusAdministrationClient:
    return ServiceBusAdministrationClient(
        node.sb_address, Signer(node, name, also), connection_verify=False, retry_total=0
    )


def client(node: NodeProcess, name: str = ROOT) -> ServiceBusClient:
    return ServiceBusClient(node.sb_address, Signer(node, name), use_tls=False, retry_total=0)


def refused(call: Callable[..., object], *args: object, **kwargs: object) -> str:
    """The 401 ``call`` gets; its text."""
    with pytest.raises(ClientAuthenticationError) as raised:
        call(*args, **kwargs)
    assert raised.value.status_code == 401
    return str(raised.value)


def subscriptions(node: NodeProcess) -> list[str]:
    return sorted(s.name for s in admin(node).list_subscriptions("orders"))


def queues(node: NodeProcess) -> list[str]:
    return sorted(q.name for q in admin(node).list_queues())


def active(node: NodeProcess, queue: str) -> int:
    return int(admin(node).get_queue_runtime_properties(queue).active_message_count or 0)


def drain(node: NodeProcess, queue: str) -> list[str]:
    out: list[str] = []
    with client(node) as c, c.get_queue_receiver(queue, max_wait_time=2) as receiver:
        for msg in receiver.receive_messages(max_message_count=50, max_wait_time=2):
            out.append(str(msg))
            receiver.complete_message(msg)
    return out


def test_creating_a_forwarding_entity_without_manage_on_the_destination_is_refused(
    keyed: NodeProcess,
) -> None:
    orders = admin(keyed, "orders-admin")
    text = refused(orders.create_subscription, "orders", "leak", forward_to="invoices")
    assert "invoices" in text and "ForwardTo" in text and "'Manage' on 'invoices'" in text
    text = refused(
        orders.create_subscription,
        "orders",
        "leak",
        forward_dead_lettered_messages_to="invoices",
    )
    assert "ForwardDeadLetteredMessagesTo 'invoices'" in text
    assert "ServiceBusDlqSupplementaryAuthorization" in text
    refused(orders.create_queue, "orders/leak", forward_to="invoices")
    refused(orders.create_queue, "orders/leak", forward_dead_lettered_messages_to="invoices")
    assert subscriptions(keyed) == ["audit"]
    assert queues(keyed) == ["invoices", "orders/archive"]
    orders.create_subscription("orders", "plain")  # without forwarding the key may
    orders.create_queue("orders/plain")
    assert subscriptions(keyed) == ["audit", "plain"]


def test_updating_an_entity_to_forward_without_manage_on_the_destination_changes_nothing(
    keyed: NodeProcess,
) -> None:
    orders = admin(keyed, "orders-admin")
    orders.create_subscription("orders", "plain", max_delivery_count=3)
    orders.create_queue("orders/plain", max_delivery_count=3)

    sub = orders.get_subscription("orders", "plain")
    sub.forward_to = "invoices"
    sub.max_delivery_count = 9
    refused(orders.update_subscription, "orders", sub)
    sub = orders.get_subscription("orders", "plain")
    sub.forward_dead_lettered_messages_to = "invoices"
    refused(orders.update_subscription, "orders", sub)
    queue = orders.get_queue("orders/plain")
    queue.forward_to = "invoices"
    queue.max_delivery_count = 9
    refused(orders.update_queue, queue)
    queue = orders.get_queue("orders/plain")
    queue.forward_dead_lettered_messages_to = "invoices"
    refused(orders.update_queue, queue)
    # with the supplementary token of a key that may only send to the destination
    with_sender = admin(keyed, "orders-admin", also={"invoices": "invoices-sender"})
    sub = with_sender.get_subscription("orders", "plain")
    sub.forward_to = "invoices"
    refused(with_sender.update_subscription, "orders", sub)
    queue = with_sender.get_queue("orders/plain")
    queue.forward_dead_lettered_messages_to = "invoices"
    refused(with_sender.update_queue, queue)

    got_sub = admin(keyed).get_subscription("orders", "plain")
    got_queue = admin(keyed).get_queue("orders/plain")
    for got in (got_sub, got_queue):
        assert got.forward_to is None and got.forward_dead_lettered_messages_to is None
        assert got.max_delivery_count == 3


def test_the_escalation_through_a_forwarding_subscription_is_blocked(
    keyed: NodeProcess,
) -> None:
    orders = admin(keyed, "orders-admin")
    refused(orders.create_subscription, "orders", "leak", forward_to="invoices")
    with client(keyed, "orders-admin") as c, c.get_topic_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage("for invoices?"))
    assert active(keyed, "invoices") == 0
    audit = admin(keyed).get_subscription_runtime_properties("orders", "audit")
    assert audit.active_message_count == 1  # the topic took the message
    with pytest.raises(ResourceNotFoundError):
        admin(keyed).get_subscription("orders", "leak")


def test_manage_on_the_destination_lets_forwarding_through(keyed: NodeProcess) -> None:
    # a destination under the key's own entity: its token grants Manage there
    orders = admin(keyed, "orders-admin")
    orders.create_subscription("orders", "to-archive", forward_to="orders/archive")
    # the supplementary token of a key with Manage on the destination
    with_admin = admin(keyed, "orders-admin", also={"invoices": "invoices-admin"})
    with_admin.create_subscription("orders", "billed", forward_to="invoices")
    with_admin.create_queue("orders/billing", forward_dead_lettered_messages_to="invoices")
    queue = with_admin.get_queue("orders/billing")
    queue.forward_to = "invoices"
    with_admin.update_queue(queue)
    # Send, or Listen, on the destination is not Manage
    for name in ("invoices-sender", "invoices-listener"):
        without = admin(keyed, "orders-admin", also={"invoices": name})
        text = refused(without.create_subscription, "orders", "heard", forward_to="invoices")
        assert "'Manage' claim(s) are required" in text and f"key '{name}'" in text
        refused(without.create_queue, "orders/heard", forward_dead_lettered_messages_to="invoices")
    # a namespace-wide Manage key
    root = admin(keyed)
    root.create_subscription(
        "orders", "root", forward_to="invoices", forward_dead_lettered_messages_to="invoices"
    )
    sub = root.get_subscription("orders", "root")
    sub.lock_duration = dt.timedelta(seconds=30)
    root.update_subscription("orders", sub)

    assert subscriptions(keyed) == ["audit", "billed", "root", "to-archive"]
    assert queues(keyed) == ["invoices", "orders/archive", "orders/billing"]
    got = admin(keyed).get_queue("orders/billing")
    assert (got.forward_to, got.forward_dead_lettered_messages_to) == ("invoices", "invoices")
    with client(keyed, "orders-admin") as c, c.get_topic_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage("billed"))
    assert drain(keyed, "invoices") == ["billed", "billed"]  # by 'billed' and 'root'
    assert drain(keyed, "orders/archive") == ["billed"]


# -- the headers themselves, over plain HTTP ------------------------------------------------


def _subscription_body(**props: str) -> bytes:
    fields = "".join(f"<{k}>{v}</{k}>" for k, v in props.items())
    return (
        f'<entry xmlns="{ATOM_NS}"><content type="application/xml">'
        f'<SubscriptionDescription xmlns="{SB_NS}">{fields}</SubscriptionDescription>'
        "</content></entry>"
    ).encode()


def _token(node: NodeProcess, entity: str, name: str, expiry: int = 0) -> str:
    expiry = expiry or int(time.time()) + HOUR
    return sas_token(f"sb://{node.sb_address}/{entity}", name, str(KEYS[name]["key"]), expiry)


def test_the_supplementary_headers_are_verified_like_the_main_token(keyed: NodeProcess) -> None:
    main = _token(keyed, "orders", "orders-admin")
    good = _token(keyed, "invoices", "invoices-admin")
    expired = _token(keyed, "invoices", "invoices-admin", int(time.time()) - 60)
    forged = good.replace("skn=invoices-admin", "skn=invoices-sender")
    sup, dlq = "ServiceBusSupplementaryAuthorization", "ServiceBusDlqSupplementaryAuthorization"

    def put(name: str, body: bytes, **headers: str) -> tuple[int, bytes]:
        return admin_http._request(
            keyed,
            "PUT",
            f"/orders/Subscriptions/{name}?api-version=2024-05",
            body,
            headers={"Authorization": main, **headers},
        )

    forward = _subscription_body(ForwardTo="invoices")
    for headers, why in (
        ({}, b"none was sent"),
        ({sup: expired}, b"expired"),
        ({sup: forged}, b"signature does not match"),
        ({sup: _token(keyed, "invoices", "orders-admin")}, b"defined on 'orders'"),
        ({sup: _token(keyed, "invoices", "invoices-sender")}, b"'Manage' claim"),
        ({sup: _token(keyed, "invoices", "invoices-listener")}, b"'Manage' claim"),
        ({sup: _token(keyed, "orders", "invoices-admin")}, b"cannot sign"),
        ({dlq: good}, b"none was sent"),  # the header for the other property
    ):
        status, body = put("leak", forward, **headers)
        assert status == 401, (headers, body)
        assert b"<Code>401</Code>" in body and b"'invoices'" in body and why in body, body
    status, body = put("leak", _subscription_body(ForwardDeadLetteredMessagesTo="invoices"))
    assert status == 401 and b"ServiceBusDlqSupplementaryAuthorization" in body
    assert subscriptions(keyed) == ["audit"]

    assert put("fwd", forward, **{sup: good})[0] == 201
    both = _subscription_body(ForwardTo="invoices", ForwardDeadLetteredMessagesTo="invoices")
    assert put("both", both, **{sup: good})[0] == 401  # the dead-letter destination too
    assert put("both", both, **{sup: good, dlq: good})[0] == 201
    status, _ = put("fwd", _subscription_body(MaxDeliveryCount="4"), **{"If-Match": "*"})
    assert status == 401  # still forwarding to 'invoices', which the request must reach
    assert admin(keyed).get_subscription("orders", "fwd").max_delivery_count == 10
    status, _ = put("fwd", _subscription_body(MaxDeliveryCount="4"), **{"If-Match": "*", sup: good})
    assert status == 200
    assert subscriptions(keyed) == ["audit", "both", "fwd"]


# -- qmgr sb and Config.json: the Admin service, the node's users -------------------------


CONFIG = """{"UserConfig": {"Namespaces": [{"Name": "sbemulatorns",
  "Topics": [{"Name": "orders", "Subscriptions": [
    {"Name": "imported", "Properties": {"ForwardTo": "invoices"}}]}]}]}}"""


def test_qmgr_sb_and_import_need_an_administrator_not_a_service_bus_key(
    node_factory: NodeFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    users = tmp_path / "users.json"
    add_user(users, "admin", "admin-Pa55", "mqm")
    add_user(users, "app", "app-Pa55")
    keys = write_keys(tmp_path / "sb-keys.json", KEYS)
    node = node_factory(
        "QM1", args=("--servicebus", "--servicebus-keys", str(keys), "--auth", str(users))
    )
    admin(node).create_topic("orders")
    admin(node).create_queue("invoices")
    config = tmp_path / "Config.json"
    config.write_text(CONFIG)

    def run(user: str, password: str, *args: str) -> int:
        monkeypatch.setenv("QMGR_PASSWORD", password)
        return CliRunner().invoke(sb, [*args, "--user", user]).exit_code

    make = ("subscription", "create", node.address, "orders", "leak", "--forward-to", "invoices")
    for user, password in (("app", "app-Pa55"), ("orders-admin", str(KEYS["orders-admin"]["key"]))):
        assert run(user, password, *make) != 0
        assert run(user, password, "import", node.address, str(config)) != 0
    assert subscriptions(node) == []
    assert run("admin", "admin-Pa55", *make) == 0
    assert run("admin", "admin-Pa55", "import", node.address, str(config)) == 0
    assert subscriptions(node) == ["imported", "leak"]
