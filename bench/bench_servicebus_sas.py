"""What SAS verification costs: the real azure-servicebus SDK against a node without keys and
against one started with ``--servicebus-keys``, in one run.

Run: .venv/bin/python bench/bench_servicebus_sas.py [--messages N] [--links N]

For each node: opening sender links one after another (each is a CBS put-token, verified
with HMAC-SHA256 when the node has keys, then an attach checked against the token's claims),
batched send (lists of 100) and peek-lock receive + complete, with msg/s (links/s) and the
node's CPU per operation. Target: keys cost under 5% of the rates without them.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from azure.servicebus import ServiceBusClient, ServiceBusMessage  # noqa: E402
from azure.servicebus.management import ServiceBusAdministrationClient  # noqa: E402
from bench_servicebus_wire import measure, send_all, settle_all, show  # noqa: E402

from qmgr.launcher.launch import start_node  # noqa: E402

KEY_NAME, KEY = "RootManageSharedAccessKey", "bench-key-0123456789"


def open_links(client: ServiceBusClient, links: int) -> None:
    for _ in range(links):
        with client.get_queue_sender("bench") as sender:
            sender.send_messages(ServiceBusMessage("x"))  # opens the link: put-token + attach


def run(base: Path, keys: bool, n: int, links: int) -> None:
    name = "KEYS" if keys else "OPEN"
    extra = ["--servicebus"]
    if keys:
        path = base / "keys.json"
        path.write_text(json.dumps({KEY_NAME: {"key": KEY, "rights": ["Manage"]}}))
        path.chmod(0o600)
        extra += ["--servicebus-keys", str(path)]
    env = {**os.environ, "QMGR_HOME": str(base / "home")}
    node = start_node(
        name, data_dir=base / name, log=base / f"{name}.log", extra_args=extra, env=env
    )
    print(f"-- node {'with' if keys else 'without'} keys", flush=True)
    try:
        conn = (
            f"Endpoint=sb://{node.servicebus};SharedAccessKeyName={KEY_NAME};"
            f"SharedAccessKey={KEY};UseDevelopmentEmulator=true;"
        )
        admin = ServiceBusAdministrationClient.from_connection_string(conn, connection_verify=False)
        admin.create_queue("bench")
        pid = node.proc.pid
        with ServiceBusClient.from_connection_string(conn) as client:
            show("sender links opened", measure(links, pid, lambda: open_links(client, links)))
            with client.get_queue_receiver("bench") as receiver:
                settle_all(receiver, links)
            with client.get_queue_sender("bench") as sender:
                show("batched send (100)", measure(n, pid, lambda: send_all(sender, n)))
            with client.get_queue_receiver("bench", prefetch_count=100) as receiver:
                show(
                    "peek-lock receive + complete", measure(n, pid, lambda: settle_all(receiver, n))
                )
    finally:
        node.proc.send_signal(signal.SIGTERM)
        node.proc.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5_000)
    parser.add_argument("--links", type=int, default=100)
    args = parser.parse_args()
    n = max(100, args.messages // 100 * 100)
    warnings.filterwarnings("ignore", message="Unverified HTTPS request")
    base = Path(tempfile.mkdtemp(prefix="qmgr-bench-sas-"))
    started = time.perf_counter()
    for keys in (False, True):
        run(base, keys, n, args.links)
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
