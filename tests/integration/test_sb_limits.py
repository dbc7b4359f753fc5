"""What one client may hold on a node's Service Bus port (``--servicebus-limit``), against a real
node process: a raw AMQP client (frames written by hand, so it can misbehave as no SDK does) goes
past each budget and is closed with ``amqp:resource-limit-exceeded``, the node's memory stays
bounded, and Microsoft's SDK on another connection is served throughout."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("azure.servicebus")

from azure.servicebus import ServiceBusClient, ServiceBusMessage  # noqa: E402
from azure.servicebus._pyamqp import performatives as pf  # noqa: E402
from azure.servicebus.exceptions import ServiceBusError  # noqa: E402

from tests.integration import test_sb_admin_http as admin_http  # noqa: E402
from tests.integration import test_sb_sas as sas_tests  # noqa: E402
from tests.integration.conftest import QMGR, NodeProcess  # noqa: E402
from tests.integration.test_sb_admin_http import _admin, _conn  # noqa: E402
from tests.unit.amqp.test_connection import (  # noqa: E402
    AMQP_HEADER,
    ATTACH,
    BEGIN,
    BEGIN_FRAME,
    CLOSE,
    OPEN,
    OPEN_FRAME,
    SASL_HEADER,
    Message,
    Properties,
    attach,
    encode_message,
    frame,
    parse,
    transfer,
)

_quiet_insecure_warning = admin_http._quiet_insecure_warning

SENDER = False


class RawClient:
    """An AMQP client on a plain socket: SASL ANONYMOUS, open, one session; then any frame."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.buffer = b""
        self.frames: list[tuple[Any, ...]] = []

    def open(self) -> None:
        init = pf.SASLInit(mechanism=b"ANONYMOUS", initial_response=b"", hostname="localhost")
        self.send(SASL_HEADER + frame(init, sasl=True) + AMQP_HEADER + frame(OPEN_FRAME))
        self.send(frame(BEGIN_FRAME))
        self.wait_for(BEGIN)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _read(self) -> bool:
        try:
            chunk = self.sock.recv(1 << 20)
        except (ConnectionResetError, TimeoutError):
            return False
        if not chunk:
            return False
        self.buffer += chunk
        while True:
            if self.buffer.startswith(b"AMQP") and len(self.buffer) >= 8:
                self.buffer = self.buffer[8:]
                continue
            if len(self.buffer) < 4:
                return True
            size = struct.unpack(">I", self.buffer[:4])[0]
            if len(self.buffer) < size:
                return True
            whole, self.buffer = self.buffer[:size], self.buffer[size:]
            if whole[5] == 0:  # an AMQP frame (SASL frames are skipped)
                self.frames.extend(parse(whole))

    def wait_for(self, code: int, timeout: float = 10.0) -> list[Any]:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for f in self.frames:
                if f[0] == code:
                    self.frames.remove(f)
                    return list(f[2])
            if not self._read():
                break
        raise AssertionError(f"no frame {code:#x} from the node (got {self.frames})")

    def closed_with(self) -> str:
        """The condition of the node's close frame, after which the socket ends."""
        fields = self.wait_for(CLOSE)
        while self._read():
            pass
        return bytes(fields[0][0]).decode()

    def close(self) -> None:
        self.sock.close()


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _sdk_round_trip(node: NodeProcess, queue: str, body: str) -> None:
    with ServiceBusClient.from_connection_string(_conn(node)) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage(body))
        with client.get_queue_receiver(queue, max_wait_time=5) as receiver:
            (msg,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            assert str(msg) == body
            receiver.complete_message(msg)


def test_the_open_and_begin_answers_carry_the_limits(node_factory: Any) -> None:
    node = node_factory(
        "QM1",
        args=(
            "--servicebus",
            "--servicebus-limit",
            "sessions_per_connection=8",
            "--servicebus-limit",
            "links_per_session=16",
        ),
    )
    raw = RawClient(node.sb_address)
    init = pf.SASLInit(mechanism=b"ANONYMOUS", initial_response=b"", hostname="localhost")
    raw.send(SASL_HEADER + frame(init, sasl=True) + AMQP_HEADER + frame(OPEN_FRAME))
    raw.send(frame(BEGIN_FRAME))
    assert raw.wait_for(OPEN)[3] == 7  # channel-max
    assert raw.wait_for(BEGIN)[4] == 15  # handle-max
    raw.close()


def test_unfinished_deliveries_on_many_links_are_bounded(node_factory: Any) -> None:
    """200 links each holding most of a 1 MB delivery took +191 MB of the node before: now the
    connection is closed once its unfinished deliveries pass 2 MiB, the node's memory grows by a
    few MB at most, and an SDK client on another connection is served."""
    node = node_factory("QM1", args=("--servicebus",))
    with _admin(node) as admin:  # closed: its HTTP connection counts on the port
        admin.create_queue("q")
    assert node.proc is not None
    before = _rss_kb(node.proc.pid)
    raw = RawClient(node.sb_address)
    raw.open()
    chunk = b"x" * 60_000
    condition = ""
    try:
        for handle in range(200):
            raw.send(frame(attach(f"s{handle}", handle, SENDER, "q")))
            for i in range(16):  # 960 KB of a delivery that never ends
                raw.send(
                    frame(
                        transfer(
                            handle,
                            handle if i == 0 else None,
                            b"t" if i == 0 else None,
                            chunk,
                            more=True,
                        )
                    )
                )
    except (BrokenPipeError, ConnectionResetError):
        pass
    condition = raw.closed_with()
    raw.close()
    grown_mb = (_rss_kb(node.proc.pid) - before) / 1024
    assert condition == "amqp:resource-limit-exceeded"
    assert grown_mb < 40, f"the node grew by {grown_mb:.0f} MB"
    _sdk_round_trip(node, "q", "still served")


def test_links_past_the_connection_limit_close_that_connection_only(node_factory: Any) -> None:
    node = node_factory(
        "QM1", args=("--servicebus", "--servicebus-limit", "links_per_connection=10")
    )
    with _admin(node) as admin:  # closed: its HTTP connection counts on the port
        admin.create_queue("q")
    raw = RawClient(node.sb_address)
    raw.open()
    with (
        ServiceBusClient.from_connection_string(_conn(node)) as client,
        client.get_queue_sender("q") as sender,  # its links: on its own connection
    ):
        for handle in range(10):
            raw.send(frame(attach(f"s{handle}", handle, SENDER, "q")))
            raw.wait_for(ATTACH)
        raw.send(frame(attach("s10", 10, SENDER, "q")))
        assert raw.closed_with() == "amqp:resource-limit-exceeded"
        sender.send_messages(ServiceBusMessage("after"))
    raw.close()
    with (
        ServiceBusClient.from_connection_string(_conn(node)) as client,
        client.get_queue_receiver("q", max_wait_time=5) as receiver,
    ):
        assert [str(m) for m in receiver.receive_messages(max_wait_time=5)] == ["after"]


def test_connections_past_the_port_limit_are_refused_until_one_goes(node_factory: Any) -> None:
    node = node_factory("QM1", args=("--servicebus", "--servicebus-limit", "connections=3"))
    with _admin(node) as admin:  # closed: its HTTP connection counts on the port
        admin.create_queue("q")
    held = [RawClient(node.sb_address) for _ in range(3)]
    for raw in held:
        raw.open()
    extra = RawClient(node.sb_address)
    init = pf.SASLInit(mechanism=b"ANONYMOUS", initial_response=b"", hostname="localhost")
    extra.send(SASL_HEADER + frame(init, sasl=True) + AMQP_HEADER + frame(OPEN_FRAME))
    assert extra.closed_with() == "amqp:resource-limit-exceeded"
    extra.close()
    with (
        pytest.raises(ServiceBusError),
        ServiceBusClient.from_connection_string(_conn(node), retry_total=0) as client,
        client.get_queue_sender("q") as sender,
    ):
        sender.send_messages(ServiceBusMessage("refused"))
    # HTTP counts too: the admin API answers 503
    host, port = node.sb_address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 503")
    held.pop().close()
    deadline = time.monotonic() + 10
    while True:  # the node sees the socket go at its next read
        try:
            _sdk_round_trip(node, "q", "served again")
            break
        except ServiceBusError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    for raw in held:
        raw.close()


def test_tokens_past_the_connection_limit_close_the_connection(
    node_factory: Any, tmp_path: Path
) -> None:
    """With keys, CBS put-token stores one token per audience: a client putting more than the
    limit is closed (one token per entity it uses is all an SDK puts)."""
    keys = sas_tests.write_keys(tmp_path / "sb-keys.json")
    node = node_factory(
        "QM1",
        args=(
            "--servicebus",
            "--servicebus-keys",
            str(keys),
            "--servicebus-limit",
            "tokens_per_connection=3",
        ),
    )
    raw = RawClient(node.sb_address)
    raw.open()
    raw.send(frame(attach("cbs-out", 0, SENDER, "$cbs")))
    raw.wait_for(ATTACH)
    raw.send(frame(attach("cbs-in", 1, True, "$cbs")))
    raw.wait_for(ATTACH)
    key = str(sas_tests.KEYS["RootManageSharedAccessKey"]["key"])
    try:
        for i in range(5):
            audience = f"sb://{node.sb_address}/q{i}"
            token = sas_tests.sas_token(
                audience, "RootManageSharedAccessKey", key, int(time.time()) + 3600
            )
            request = Message(
                value=token,
                properties=Properties(message_id=f"m{i}", reply_to="cbs-in"),
                application_properties={
                    "operation": "put-token",
                    "type": "servicebus.windows.net:sastoken",
                    "name": audience,
                },
            )
            raw.send(frame(transfer(0, i, bytes([i]), encode_message(request), settled=True)))
    except (BrokenPipeError, ConnectionResetError):
        pass
    assert raw.closed_with() == "amqp:resource-limit-exceeded"
    raw.close()


def test_a_slow_http_request_is_cut_off_and_others_are_served(node_factory: Any) -> None:
    node = node_factory(
        "QM1", args=("--servicebus", "--servicebus-limit", "http_request_seconds=2")
    )
    host, port = node.sb_address.rsplit(":", 1)
    slow = socket.create_connection((host, int(port)), timeout=10)
    slow.sendall(b"GET /$Resources/queues HTTP/1.1\r\n")
    answered = b""  # (the test's timeout bounds the wait)
    try:
        while not answered:
            slow.sendall(b"X-Slow: 1\r\n")  # a header line a second: never the end
            with _admin(node) as admin:  # the node serves others meanwhile
                admin.get_namespace_properties()
            slow.settimeout(1.0)
            try:
                answered = slow.recv(4096)
            except TimeoutError:
                continue
    except (BrokenPipeError, ConnectionResetError):
        pass
    slow.close()
    assert answered.startswith(b"HTTP/1.1 408")


def test_the_limits_are_checked_at_start(tmp_path: Path) -> None:
    bad = subprocess.run(
        [QMGR, "start", "--name", "QMX", "--listen", "127.0.0.1:0", "--servicebus"]
        + ["--servicebus-limit", "links_per_connection=none"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "QMGR_HOME": str(tmp_path)},
    )
    assert bad.returncode != 0
    assert "links_per_connection must be a whole number" in bad.stderr
