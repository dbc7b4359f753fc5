"""azure-servicebus 7.14.x (the newest before 7.15, which reads performative fields by position
and settles pre-settled) against a node: send, peek-lock receive, complete, abandon,
dead-letter and the dead-letter queue, in a virtual environment this test makes."""

from __future__ import annotations

import json
import subprocess
import venv
from pathlib import Path

import pytest

pytest.importorskip("azure.servicebus")

from tests.integration import test_sb_admin_http as admin_http  # noqa: E402
from tests.integration.conftest import NodeProcess  # noqa: E402
from tests.integration.test_sb_admin_http import _admin, _conn  # noqa: E402

sb_node = admin_http.sb_node
_quiet_insecure_warning = admin_http._quiet_insecure_warning

CLIENT = """
import json, sys
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
import azure.servicebus
conn = sys.argv[1]
out = {"version": azure.servicebus.__version__}
with ServiceBusClient.from_connection_string(conn) as client:
    with client.get_queue_sender("old") as sender:
        sender.send_messages([ServiceBusMessage(b) for b in ("c", "a", "x")])
    with client.get_queue_receiver("old", max_wait_time=5) as receiver:
        got = []
        while len(got) < 3:
            got += receiver.receive_messages(max_message_count=3, max_wait_time=5)
        by = {str(m): m for m in got}
        receiver.complete_message(by["c"])
        receiver.abandon_message(by["a"])
        receiver.dead_letter_message(by["x"], reason="r", error_description="d")
        again = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        out["again"] = [(str(m), m.delivery_count) for m in again]
        for m in again:
            receiver.complete_message(m)
    with client.get_queue_receiver(
        "old", sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=5
    ) as dlq:
        dead = dlq.receive_messages(max_message_count=1, max_wait_time=5)
        out["dead"] = [(str(m), m.dead_letter_reason) for m in dead]
        for m in dead:
            dlq.complete_message(m)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def old_sdk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    env_dir = tmp_path_factory.mktemp("sdk714")
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "azure-servicebus>=7.14,<7.15"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot install azure-servicebus 7.14.x: {done.stderr.strip()[-300:]}")
    return python


def test_sdk_7_14_sends_receives_and_settles(sb_node: NodeProcess, old_sdk: Path) -> None:
    _admin(sb_node).create_queue("old")
    done = subprocess.run(
        [str(old_sdk), "-c", CLIENT, _conn(sb_node)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["version"].startswith("7.14.")
    assert out["again"] == [["a", 1]]
    assert out["dead"] == [["x", "r"]]
    assert _admin(sb_node).get_queue_runtime_properties("old").total_message_count == 0
