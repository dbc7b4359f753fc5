"""Where running nodes are found by name: one small JSON file per node under QMGR_HOME
(directories 0700, files 0600)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from qmgr.security.files import private_dir, write_private


def home() -> Path:
    return Path(os.environ.get("QMGR_HOME", Path.home() / ".qmgr"))


def register(name: str, address: str, pid: int) -> Path:
    path = home() / "nodes" / f"{name}.json"
    private_dir(path.parent)
    tmp = path.with_suffix(".tmp")
    write_private(tmp, json.dumps({"name": name, "address": address, "pid": pid}))
    tmp.replace(path)
    return path


def unregister(name: str, pid: int) -> None:
    path = home() / "nodes" / f"{name}.json"
    try:
        if json.loads(path.read_text()).get("pid") == pid:
            path.unlink()
    except (OSError, ValueError):
        pass


def resolve(node: str) -> str:
    """An address for NODE: itself if it looks like HOST:PORT, else the registered one."""
    if ":" in node:
        return node
    path = home() / "nodes" / f"{node}.json"
    try:
        return str(json.loads(path.read_text())["address"])
    except (OSError, ValueError, KeyError):
        raise LookupError(
            f"no running node called {node} is registered under {home() / 'nodes'}; "
            "give its address as HOST:PORT"
        ) from None
