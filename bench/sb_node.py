"""One node process hosting a Service Bus namespace, for the benchmarks that drive it with the
real azure-servicebus SDK."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from azure.servicebus.management import ServiceBusAdministrationClient

from qmgr.launcher.launch import Launched, start_node


@dataclass
class SbNode:
    node: Launched
    conn: str  # the SDK's connection string for its Service Bus port
    admin: ServiceBusAdministrationClient


@contextmanager
def servicebus_node(prefix: str) -> Iterator[SbNode]:
    """``qmgr start --servicebus`` with a data directory (sends and receive-and-delete wait for
    the disk) in a new temporary directory; SIGTERM when done."""
    warnings.filterwarnings("ignore", message="Unverified HTTPS request")
    base = Path(tempfile.mkdtemp(prefix=prefix))
    env = {**os.environ, "QMGR_HOME": str(base / "home")}
    node = start_node(
        "BENCH",
        data_dir=base / "BENCH",
        log=base / "node.log",
        extra_args=["--servicebus"],
        env=env,
    )
    try:
        conn = (
            f"Endpoint=sb://{node.servicebus};SharedAccessKeyName=RootManageSharedAccessKey;"
            "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"
        )
        admin = ServiceBusAdministrationClient.from_connection_string(conn, connection_verify=False)
        yield SbNode(node, conn, admin)
    finally:
        node.proc.send_signal(signal.SIGTERM)
        node.proc.wait(30)
        shutil.rmtree(base, ignore_errors=True)
