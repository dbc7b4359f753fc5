"""`qmgr start --servicebus-port ADDR` without `--servicebus` hosts a namespace: the one the
node's store holds, else the default one (as `--servicebus` without a name); its READY line
gives the port, and Microsoft's SDK sends and receives through it."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from qmgr.node.config import DEFAULT_NAMESPACE, ConfigError, make_config
from tests.integration.conftest import NodeProcess

pytest.importorskip("azure.servicebus")

from azure.servicebus import ServiceBusClient, ServiceBusMessage  # noqa: E402

from tests.integration import test_sb_admin_http as admin_http  # noqa: E402
from tests.integration.test_sb_admin_http import _admin, _conn  # noqa: E402

NodeFactory = Callable[..., NodeProcess]
_quiet_insecure_warning = admin_http._quiet_insecure_warning

PORT_ONLY = ("--servicebus-port", "127.0.0.1:0")


def _stored_namespace(node: NodeProcess) -> str | None:
    """The namespace name the node's store holds (read once the node is gone)."""
    assert node.data_dir is not None
    conn = sqlite3.connect(node.data_dir / "qmgr.sqlite")
    try:
        row = conn.execute("SELECT value FROM sb_values WHERE key = 'namespace'").fetchone()
    finally:
        conn.close()
    return None if row is None else str(row[0])


def test_the_port_alone_implies_the_namespace() -> None:
    config = make_config("QM1", "127.0.0.1:0", None, servicebus_port="127.0.0.1:0")
    assert config.servicebus == ""  # hosted: the store's namespace, else the default one
    assert (config.servicebus_host, config.servicebus_port) == ("127.0.0.1", 0)
    named = make_config("QM1", "127.0.0.1:0", None, servicebus="", servicebus_port="127.0.0.1:0")
    assert named.servicebus == DEFAULT_NAMESPACE
    assert make_config("QM1", "127.0.0.1:0", None).servicebus is None


def test_start_with_only_the_port_serves_the_sdk(node_factory: NodeFactory) -> None:
    node = node_factory("QM1", args=PORT_ONLY)
    assert node.sb_address.startswith("127.0.0.1:")  # the READY line's sb=HOST:PORT
    assert not node.sb_address.endswith(":0")
    _admin(node).create_queue("orders")
    with ServiceBusClient.from_connection_string(_conn(node)) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages([ServiceBusMessage("one"), ServiceBusMessage("two")])
        with client.get_queue_receiver("orders", max_wait_time=5) as receiver:
            got: list[str] = []
            while len(got) < 2:
                batch = receiver.receive_messages(max_message_count=2, max_wait_time=5)
                assert batch, f"only {len(got)} of 2 arrived"
                for msg in batch:
                    got.append(str(msg))
                    receiver.complete_message(msg)
    assert got == ["one", "two"]
    node.kill()
    assert _stored_namespace(node) == DEFAULT_NAMESPACE


def test_the_port_alone_keeps_the_namespace_the_store_holds(node_factory: NodeFactory) -> None:
    node = node_factory("QM1", args=("--servicebus", "orders-ns"))
    _admin(node).create_queue("kept")
    node.kill()
    node.extra_args = list(PORT_ONLY)
    node.start()
    assert [q.name for q in _admin(node).list_queues()] == ["kept"]
    node.kill()
    assert _stored_namespace(node) == "orders-ns"
    assert "it is hosted as" not in node.log.read_text()


def test_a_bad_port_fails_the_start_naming_the_option(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--servicebus-port"):
        make_config("QM1", "127.0.0.1:0", str(tmp_path), servicebus_port="127.0.0.1:notaport")
