"""Where running nodes are found by name: one small JSON file per node under QMGR_HOME
(directories 0700, files 0600)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from qmgr.security.files import private_dir, write_private


def home() -> Path:
    return Path(os.environ.get("QMGR_HOME", Path.home() / ".qmgr"))


def register(name: str, address: str, pid: int, servicebus: str = "") -> Path:
    """Record a running node: its gRPC address and, when it hosts a namespace, its Service Bus
    port (``servicebus``, the READY line's sb=)."""
    path = home() / "nodes" / f"{name}.json"
    private_dir(path.parent)
    tmp = path.with_suffix(".tmp")
    entry = {"name": name, "address": address, "pid": pid}
    if servicebus:
        entry["servicebus"] = servicebus
    write_private(tmp, json.dumps(entry))
    tmp.replace(path)
    return path


def unregister(name: str, pid: int) -> None:
    path = home() / "nodes" / f"{name}.json"
    try:
        if json.loads(path.read_text()).get("pid") == pid:
            path.unlink()
    except (OSError, ValueError):
        pass


def _entry(node: str) -> dict[str, object]:
    path = home() / "nodes" / f"{node}.json"
    try:
        entry = json.loads(path.read_text())
        if isinstance(entry, dict) and "address" in entry:
            return entry
    except (OSError, ValueError):
        pass
    raise LookupError(
        f"no running node called {node} is registered under {home() / 'nodes'}; "
        "give its address as HOST:PORT"
    )


def resolve(node: str) -> str:
    """An address for NODE: itself if it looks like HOST:PORT, else the registered one."""
    if ":" in node:
        return node
    return str(_entry(node)["address"])


def resolve_servicebus(node: str) -> str:
    """The Service Bus port (HOST:PORT) of NODE: itself if it looks like HOST:PORT, else the
    registered node's."""
    if ":" in node:
        return node
    found = _entry(node).get("servicebus")
    if not found:
        raise LookupError(
            f"node {node} has no Service Bus port (start it with --servicebus); or give the "
            "port as HOST:PORT"
        )
    return str(found)
