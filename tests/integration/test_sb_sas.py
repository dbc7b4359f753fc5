"""SAS keys on a real node (``qmgr start --servicebus-keys FILE``), driven by the real
azure-servicebus 7.15.0 client and admin client: the right key works (sync and async), a wrong,
unknown or expired token gets the SDK's authentication error, a key without the claim gets its
authorization error, the admin API answers 401 without a Manage token, nothing refused changes
anything, and the node keeps serving everyone else."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote_plus, urlencode

import pytest

pytest.importorskip("azure.servicebus")

from azure.core.credentials import AccessToken  # noqa: E402
from azure.core.exceptions import ClientAuthenticationError  # noqa: E402
from azure.servicebus import ServiceBusClient, ServiceBusMessage  # noqa: E402
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient  # noqa: E402
from azure.servicebus.exceptions import (  # noqa: E402
    ServiceBusAuthenticationError,
    ServiceBusAuthorizationError,
)
from azure.servicebus.management import ServiceBusAdministrationClient  # noqa: E402

from qmgr.node.sbport import CERT_FILE  # noqa: E402
from tests.integration import clock, test_sb_amqp_js  # noqa: E402
from tests.integration import test_sb_admin_http as admin_http  # noqa: E402
from tests.integration.conftest import NodeProcess  # noqa: E402

NodeFactory = Callable[..., NodeProcess]
_quiet_insecure_warning = admin_http._quiet_insecure_warning
movable_clock = clock.movable_clock  # the node's clock moves past a token's expiry
js_client = test_sb_amqp_js.js_client  # @azure/service-bus installed with npm (or skipped)

KEYS = {
    "RootManageSharedAccessKey": {"key": "r00t-secret", "rights": ["Manage", "Send", "Listen"]},
    "sender": {"key": "s3nd-secret", "rights": ["Send"]},
    "listener": {"key": "l1sten-secret", "secondaryKey": "l1sten-2", "rights": ["Listen"]},
    "orders-only": {"key": "0rders-secret", "rights": ["Send", "Listen"], "entity": "orders"},
}


def write_keys(path: Path, keys: object = KEYS, mode: int = 0o600) -> Path:
    path.write_text(json.dumps(keys))
    os.chmod(path, mode)
    return path


@pytest.fixture
def keyed(node_factory: NodeFactory, tmp_path: Path) -> NodeProcess:
    keys = write_keys(tmp_path / "sb-keys.json")
    node = node_factory("QM1", args=("--servicebus", "--servicebus-keys", str(keys)))
    admin(node).create_queue("orders")
    admin(node).create_queue("invoices")
    return node


def conn(node: NodeProcess, name: str = "RootManageSharedAccessKey", key: str = "") -> str:
    if not key:
        key = str(KEYS[name]["key"]) if name in KEYS else "whatever"
    return (
        f"Endpoint=sb://{node.sb_address};SharedAccessKeyName={name};SharedAccessKey={key};"
        "UseDevelopmentEmulator=true;"
    )


def client(
    node: NodeProcess, name: str = "RootManageSharedAccessKey", key: str = ""
) -> ServiceBusClient:
    return ServiceBusClient.from_connection_string(conn(node, name, key), retry_total=0)


def admin(
    node: NodeProcess, name: str = "RootManageSharedAccessKey", key: str = ""
) -> ServiceBusAdministrationClient:
    return ServiceBusAdministrationClient.from_connection_string(
        conn(node, name, key), connection_verify=False, retry_total=0
    )


def sas_token(resource: str, name: str, key: str, expiry: int) -> str:
    text = f"{quote_plus(resource)}\n{expiry}".encode()
    sig = base64.b64encode(hmac.new(key.encode(), text, hashlib.sha256).digest())
    return "SharedAccessSignature " + urlencode(
        {"sr": resource, "sig": sig, "se": expiry, "skn": name}
    )


def send(node: NodeProcess, entity: str, body: str, **who: str) -> None:
    with client(node, **who) as c, c.get_queue_sender(entity) as sender:
        sender.send_messages(ServiceBusMessage(body))


def receive_all(node: NodeProcess, entity: str, **who: str) -> list[str]:
    out: list[str] = []
    with client(node, **who) as c, c.get_queue_receiver(entity, max_wait_time=2) as receiver:
        for msg in receiver.receive_messages(max_message_count=50, max_wait_time=2):
            out.append(str(msg))
            receiver.complete_message(msg)
    return out


def active(node: NodeProcess, entity: str) -> int:
    return admin(node).get_queue_runtime_properties(entity).active_message_count


def test_the_right_keys_work(keyed: NodeProcess) -> None:
    send(keyed, "orders", "by root")
    send(keyed, "orders", "by sender", name="sender")
    send(keyed, "orders", "by orders-only", name="orders-only")
    assert active(keyed, "orders") == 3
    got = receive_all(keyed, "orders", name="listener")
    assert sorted(got) == ["by orders-only", "by root", "by sender"]
    send(keyed, "orders", "again")
    assert receive_all(keyed, "orders", name="listener", key="l1sten-2") == ["again"]  # secondary
    with client(keyed) as c, c.get_queue_receiver("orders") as receiver:
        assert receiver.peek_messages(max_message_count=5) == []  # $management with the token


def test_the_right_key_works_async_and_a_wrong_one_is_refused(keyed: NodeProcess) -> None:
    async def run() -> None:
        async with AsyncServiceBusClient.from_connection_string(conn(keyed), retry_total=0) as c:
            async with c.get_queue_sender("orders") as sender:
                await sender.send_messages([ServiceBusMessage("a1"), ServiceBusMessage("a2")])
            async with c.get_queue_receiver("orders", max_wait_time=2) as receiver:
                got = await receiver.receive_messages(max_message_count=10, max_wait_time=2)
                for msg in got:
                    await receiver.complete_message(msg)
                assert sorted(str(m) for m in got) == ["a1", "a2"]
        bad = conn(keyed, key="not-the-key")
        with pytest.raises(ServiceBusAuthenticationError):
            async with (
                AsyncServiceBusClient.from_connection_string(bad, retry_total=0) as c,
                c.get_queue_sender("orders") as sender,
            ):
                await sender.send_messages(ServiceBusMessage("never"))

    asyncio.run(run())
    assert active(keyed, "orders") == 0


def test_wrong_and_unknown_keys_get_the_authentication_error(keyed: NodeProcess) -> None:
    for who in (
        {"key": "not-the-key"},
        {"name": "nobody", "key": "r00t-secret"},
        {"name": "orders-only"},  # a key of 'orders' signing a token for 'invoices'
    ):
        with (
            pytest.raises(ServiceBusAuthenticationError),
            client(keyed, **who) as c,
            c.get_queue_sender("invoices") as sender,
        ):
            sender.send_messages(ServiceBusMessage("never"))
        with (
            pytest.raises(ServiceBusAuthenticationError),
            client(keyed, **who) as c,
            c.get_queue_receiver("invoices", max_wait_time=1) as r,
        ):
            r.receive_messages(max_wait_time=1)
    send(keyed, "invoices", "kept")  # the node serves the right key still
    assert active(keyed, "invoices") == 1


def test_an_expired_token_is_refused(keyed: NodeProcess) -> None:
    resource = f"sb://{keyed.sb_address}/orders"
    for expiry, refused in ((int(time.time()) - 60, True), (int(time.time()) + 600, False)):
        token = sas_token(resource, "RootManageSharedAccessKey", "r00t-secret", expiry)
        text = (
            f"Endpoint=sb://{keyed.sb_address};SharedAccessSignature={token};"
            "UseDevelopmentEmulator=true;"
        )
        if refused:
            with (
                pytest.raises(ServiceBusAuthenticationError),
                ServiceBusClient.from_connection_string(text, retry_total=0) as c,
                c.get_queue_sender("orders") as sender,
            ):
                sender.send_messages(ServiceBusMessage("late"))
        else:
            with (
                ServiceBusClient.from_connection_string(text, retry_total=0) as c,
                c.get_queue_sender("orders") as sender,
            ):
                sender.send_messages(ServiceBusMessage("in time"))
    assert receive_all(keyed, "orders") == ["in time"]


def test_rights_are_enforced_per_link(keyed: NodeProcess) -> None:
    send(keyed, "orders", "one")
    with (
        pytest.raises(ServiceBusAuthorizationError, match="Listen"),
        client(keyed, name="sender") as c,
        c.get_queue_receiver("orders", max_wait_time=1) as r,
    ):
        r.receive_messages(max_wait_time=1)
    with (
        pytest.raises(ServiceBusAuthorizationError),
        client(keyed, name="sender") as c,
        c.get_queue_receiver("orders") as r,
    ):
        r.peek_messages()
    with (
        pytest.raises(ServiceBusAuthorizationError, match="Send"),
        client(keyed, name="listener") as c,
        c.get_queue_sender("orders") as sender,
    ):
        sender.send_messages(ServiceBusMessage("never"))
    assert active(keyed, "orders") == 1
    assert receive_all(keyed, "orders", name="listener") == ["one"]


def test_the_admin_api_needs_a_manage_token(keyed: NodeProcess) -> None:
    for who in ({"key": "not-the-key"}, {"name": "sender"}, {"name": "listener"}):
        with pytest.raises(ClientAuthenticationError):
            admin(keyed, **who).create_queue("never")
        with pytest.raises(ClientAuthenticationError):
            admin(keyed, **who).get_queue("orders")
    status, body = admin_http._request(keyed, "GET", "/orders?api-version=2024-05")
    assert status == 401 and b"<Code>401</Code>" in body and b"no token" in body
    status, body = admin_http._request(
        keyed,
        "DELETE",
        "/orders?api-version=2024-05",
        headers={"Authorization": "SharedAccessSignature sr=x&sig=AAAA&se=1&skn=sender"},
    )
    assert status == 401
    assert admin_http._request(keyed, "GET", "/health") == (200, b"Healthy")
    names = [q.name for q in admin(keyed).list_queues()]
    assert sorted(names) == ["invoices", "orders"]


def test_keys_file_must_be_private_and_valid(node_factory: NodeFactory, tmp_path: Path) -> None:
    base = NodeProcess("QM2", tmp_path)
    loose = write_keys(tmp_path / "loose.json", mode=0o644)
    result = base.cli("start", "--name", "QM2", "--servicebus", "--servicebus-keys", str(loose))
    assert result.returncode != 0 and "can be read by other users" in result.stderr
    bad = write_keys(tmp_path / "bad.json", {"k": {"key": "x", "rights": ["Write"]}})
    result = base.cli("start", "--name", "QM2", "--servicebus", "--servicebus-keys", str(bad))
    assert result.returncode != 0 and "$.k.rights[0]" in result.stderr


def test_without_keys_every_token_is_accepted(node_factory: NodeFactory) -> None:
    node = node_factory("QM1", args=("--servicebus",))
    admin(node, key="anything at all").create_queue("orders")
    send(node, "orders", "open", name="nobody", key="whatever")
    assert receive_all(node, "orders", name="someone-else", key="x") == ["open"]


class ShortToken:
    """A credential whose tokens expire after ``seconds`` while it tells the SDK they last an
    hour (so the SDK does not renew them, and the node's expiry is what is seen)."""

    token_type = b"servicebus.windows.net:sastoken"

    def __init__(self, name: str, key: str, seconds: int) -> None:
        self.name, self.key, self.seconds = name, key, seconds

    def get_token(self, *scopes: str, **kwargs: object) -> AccessToken:
        now = int(time.time())
        return AccessToken(
            sas_token(scopes[0], self.name, self.key, now + self.seconds), now + 3600
        )


def test_a_link_whose_token_expires_is_detached(keyed: NodeProcess) -> None:
    send(keyed, "orders", "first")
    cred = ShortToken("RootManageSharedAccessKey", "r00t-secret", 3)
    with (
        ServiceBusClient(keyed.sb_address, cred, use_tls=False, retry_total=0) as c,  # type: ignore[arg-type]
        c.get_queue_receiver("orders", max_wait_time=1) as receiver,
    ):
        (msg,) = receiver.receive_messages(max_wait_time=2)
        receiver.complete_message(msg)
        clock.advance_clock(keyed, 4)
        with pytest.raises(ServiceBusAuthorizationError, match="expired"):
            receiver.receive_messages(max_wait_time=2)
    send(keyed, "orders", "others go on")
    assert receive_all(keyed, "orders") == ["others go on"]


def enumerate_rules(receiver: object) -> object:
    """The .NET rule manager's ``com.microsoft:enumerate-rules`` on the receiver's
    ``$management`` link (the Python SDK manages rules over HTTP, so its internal request path
    is used)."""
    from azure.servicebus._common import mgmt_handlers
    from azure.servicebus._common.constants import REQUEST_RESPONSE_GET_RULES_OPERATION

    return receiver._mgmt_request_response_with_retry(  # type: ignore[attr-defined]
        REQUEST_RESPONSE_GET_RULES_OPERATION, {"top": 10, "skip": 0}, mgmt_handlers.default
    )


def test_management_rule_operations_need_manage(keyed: NodeProcess) -> None:
    admin(keyed).create_topic("events")
    admin(keyed).create_subscription("events", "audit")
    with (
        pytest.raises(ServiceBusAuthorizationError, match="Manage"),
        client(keyed, name="listener") as c,
        c.get_subscription_receiver("events", "audit") as receiver,
    ):
        assert receiver.peek_messages() == []  # Listen is enough to peek
        enumerate_rules(receiver)
    with client(keyed) as c, c.get_subscription_receiver("events", "audit") as receiver:
        rules = enumerate_rules(receiver)
    assert rules is not None


JS_PROBE = r"""
const { ServiceBusClient, ServiceBusAdministrationClient } = require("@azure/service-bus");
(async () => {
  const conn = process.argv[2];
  const retryOptions = { maxRetries: 0 };
  const out = {};
  const client = new ServiceBusClient(conn, { retryOptions });
  try {
    const sender = client.createSender("js");
    await sender.sendMessages({ body: "from js" });
    await sender.close();
    out.send = "ok";
  } catch (e) { out.send = e.code || e.name; }
  await client.close();
  const admin = new ServiceBusAdministrationClient(conn, { retryOptions });
  try { out.admin = (await admin.getQueue("js")).name; }
  catch (e) { out.admin = e.statusCode || e.code || e.name; }
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
"""


def test_js_sdk_with_keys(keyed: NodeProcess, js_client: Path) -> None:
    """@azure/service-bus signs its tokens itself (encodeURIComponent, not quote_plus): the
    right key works for its data plane and its admin client, a wrong one is refused."""
    admin(keyed).create_queue("js")
    assert keyed.data_dir is not None
    probe = js_client.parent / "sas-probe.js"
    probe.write_text(JS_PROBE)

    def run(connection: str) -> object:
        done = subprocess.run(
            ["node", str(probe), connection],
            cwd=js_client.parent,
            env={**os.environ, "NODE_EXTRA_CA_CERTS": str(keyed.data_dir / CERT_FILE)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    assert run(conn(keyed)) == {"send": "ok", "admin": "js"}
    assert run(conn(keyed, key="not-the-key")) == {"send": "UnauthorizedAccess", "admin": 401}
    assert run(conn(keyed, name="sender")) == {"send": "ok", "admin": 401}
    assert active(keyed, "js") == 2
