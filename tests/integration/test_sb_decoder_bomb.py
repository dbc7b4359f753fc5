"""A 29-byte decoder bomb on a node's Service Bus port: an AMQP array claiming 2^32-1 elements of a
zero-width type (null, true, false, uint0, ulong0, list0), sent before any authentication, in the
SASL layer and in the plain AMQP layer. The node must refuse each connection promptly and go on
serving: its MQ side (gRPC shares the event loop) and a real azure-servicebus client alike."""

from __future__ import annotations

import socket
import struct
import time

import pytest

pytest.importorskip("azure.servicebus")

from azure.servicebus import ServiceBusClient, ServiceBusMessage  # noqa: E402

from qmgr.client import QueueManagerClient  # noqa: E402
from tests.integration import test_sb_admin_http as admin_http  # noqa: E402
from tests.integration.conftest import NodeProcess  # noqa: E402
from tests.integration.test_sb_admin_http import _admin, _conn  # noqa: E402

sb_node = admin_http.sb_node
_quiet_insecure_warning = admin_http._quiet_insecure_warning

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
ZERO_WIDTH = (0x40, 0x41, 0x42, 0x43, 0x44, 0x45)  # null, true, false, uint0, ulong0, list0
PROMPTLY = 5.0


def bomb(code: int, sasl: bool) -> bytes:
    """A protocol header, then one frame: sasl-init (or open) described over an array32 of
    0xFFFFFFFF elements of constructor ``code``."""
    array = b"\xf0" + struct.pack(">II", 5, 0xFFFFFFFF) + bytes((code,))
    body = b"\x00\x53" + (b"\x41" if sasl else b"\x10") + array
    frame = struct.pack(">IBBH", 8 + len(body), 2, 1 if sasl else 0, 0) + body
    return (SASL_HEADER if sasl else AMQP_HEADER) + frame


def _closed_within(s: socket.socket, seconds: float) -> None:
    """Read until the node closes the connection; fail if it is still open after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        assert left > 0, "the node did not close the bomb connection"
        s.settimeout(left)
        try:
            if not s.recv(4096):
                return
        except (ConnectionResetError, BrokenPipeError):
            return
        except TimeoutError:
            continue


def test_bomb_is_29_bytes() -> None:
    assert {len(bomb(code, sasl)) for code in ZERO_WIDTH for sasl in (True, False)} == {29}


def test_zero_width_array_bombs_are_refused_and_the_node_keeps_serving(
    sb_node: NodeProcess,
) -> None:
    _admin(sb_node).create_queue("after-bomb")
    with sb_node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(Q1)")
    host, port = sb_node.sb_address.rsplit(":", 1)
    bombs: list[socket.socket] = []
    try:
        for sasl in (True, False):
            for code in ZERO_WIDTH:
                s = socket.create_connection((host, int(port)), timeout=PROMPTLY)
                bombs.append(s)
                s.sendall(bomb(code, sasl))
        with QueueManagerClient(sb_node.address, timeout=PROMPTLY) as qm:
            qm.put("Q1", b"during the bombs")
            got = qm.get("Q1", wait_ms=1000)
            assert got is not None and got.body == b"during the bombs"
        for s in bombs:
            _closed_within(s, PROMPTLY)
    finally:
        for s in bombs:
            s.close()
    with ServiceBusClient.from_connection_string(_conn(sb_node)) as client:
        with client.get_queue_sender("after-bomb") as sender:
            sender.send_messages(ServiceBusMessage("after the bombs"))
        with client.get_queue_receiver("after-bomb", max_wait_time=5) as receiver:
            batch = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            assert [str(m) for m in batch] == ["after the bombs"]
            receiver.complete_message(batch[0])
    assert "Traceback" not in sb_node.log.read_text()
