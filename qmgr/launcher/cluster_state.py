"""What a local cluster leaves on disk, and whether its node processes still run.

Everything about a cluster lives in ``$QMGR_HOME/clusters/<cluster>/``:

- ``state.json``: what ``status`` and ``down`` read (removed by ``down``);
- ``addresses.json``: the ports chosen, reused by the next ``up`` on the same data so nodes
  come back where the cluster knew them;
- per node, ``<NODE>/data`` (its --data-dir), ``<NODE>/node.log`` (its stdout and stderr) and
  ``<NODE>/mqsc-applied.json`` (the MQSC commands already applied to that data, so an ``up`` on
  kept data does not define things twice).

``down --purge`` removes the whole directory.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any
from urllib.parse import quote

from qmgr.launcher.errors import StateError
from qmgr.launcher.registry import home, unregister
from qmgr.launcher.topology import NodeAddresses

STATE_FILE = "state.json"
ADDRESSES_FILE = "addresses.json"  # kept by `down`: the next `up` reuses the same ports
MQSC_MARKER = "mqsc-applied.json"


@dataclass(frozen=True)
class NodeState:
    name: str
    role: str
    address: str
    raft_address: str | None
    pid: int
    log: str
    data_dir: str
    servicebus: str | None = None  # HOST:PORT of its Service Bus port (sb= of READY), if any


_NODE_FIELDS = frozenset(f.name for f in fields(NodeState))


@dataclass(frozen=True)
class ClusterState:
    cluster: str
    topology: str
    nodes: tuple[NodeState, ...]
    tls: bool = False  # the nodes serve TLS (certificates in the state directory's pki/)

    def node(self, name: str) -> NodeState:
        """The node called ``name`` (KeyError if the cluster has none)."""
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def servicebus_address(self, name: str) -> str | None:
        """HOST:PORT of the Service Bus port of node ``name``; None if it hosts no namespace."""
        return self.node(name).servicebus

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "topology": self.topology,
            "tls": self.tls,
            "nodes": [asdict(n) for n in self.nodes],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClusterState:
        return cls(
            cluster=str(data["cluster"]),
            topology=str(data.get("topology", "")),
            nodes=tuple(
                NodeState(**{k: v for k, v in n.items() if k in _NODE_FIELDS})
                for n in data["nodes"]
            ),
            tls=bool(data.get("tls", False)),
        )


# -- directories and files ------------------------------------------------------------------------


def clusters_dir() -> Path:
    return home() / "clusters"


def file_name(name: str) -> str:
    """A name as one path component ('/' and '%' are legal in MQ names)."""
    return quote(name, safe="")


def state_dir(cluster: str) -> Path:
    return clusters_dir() / file_name(cluster)


def node_dir(base: Path, node: str) -> Path:
    """Where node ``node`` of the cluster in ``base`` keeps its data, log and MQSC marker."""
    return base / file_name(node)


def mqsc_marker(base: Path, node: str) -> Path:
    """The file recording the MQSC commands already applied to ``node``'s data."""
    return node_dir(base, node) / MQSC_MARKER


def read_state(directory: Path) -> ClusterState | None:
    try:
        return ClusterState.from_json(json.loads((directory / STATE_FILE).read_text()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StateError(f"{directory / STATE_FILE} is unreadable: {exc}") from None


def write_state(directory: Path, state: ClusterState) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(state.to_json(), indent=2) + "\n")
    tmp.replace(directory / STATE_FILE)


def clear_state(directory: Path, nodes: Iterable[tuple[str, int]]) -> None:
    """Forget stopped nodes: each (name, pid) leaves the node registry, and ``state.json``
    goes (data, logs and addresses stay)."""
    for name, pid in nodes:
        unregister(name, pid)
    with contextlib.suppress(FileNotFoundError):
        (directory / STATE_FILE).unlink()


def saved_addresses(base: Path) -> dict[str, NodeAddresses]:
    """The addresses the previous run on ``base`` used; empty when there are none."""
    try:
        data = json.loads((base / ADDRESSES_FILE).read_text())
        return {str(name): NodeAddresses(a["listen"], a["raft"]) for name, a in data.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def save_addresses(base: Path, plan: dict[str, NodeAddresses]) -> None:
    base.mkdir(parents=True, exist_ok=True)
    (base / ADDRESSES_FILE).write_text(
        json.dumps({name: asdict(a) for name, a in plan.items()}, indent=2) + "\n"
    )


def _known_clusters() -> list[Path]:
    if not clusters_dir().is_dir():
        return []
    return sorted(d for d in clusters_dir().iterdir() if (d / STATE_FILE).is_file())


def find_cluster(name: str | None) -> tuple[Path, ClusterState]:
    """The state of cluster ``name``, or of the only cluster that is up when ``name`` is None."""
    if name is not None:
        directory = state_dir(name)
        state = read_state(directory)
        if state is None:
            raise StateError(f"cluster {name} is not up (no {directory / STATE_FILE})")
        return directory, state
    known = [(d, s) for d in _known_clusters() if (s := read_state(d)) is not None]
    if len(known) == 1:
        return known[0]
    if not known:
        raise StateError(f"no cluster is up (nothing under {clusters_dir()})")
    live = [(d, s) for d, s in known if any(node_alive(n.pid, n.name) for n in s.nodes)]
    if len(live) == 1:
        return live[0]
    names = ", ".join(s.cluster for _, s in (live or known))
    raise StateError(f"several clusters are up ({names}): choose one with --cluster")


# -- processes ----------------------------------------------------------------------------------


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    if pid <= 0:
        return False
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)  # reap it if it is our own child that has exited
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (macOS): trust kill(0)
    return stat.rpartition(")")[2].split()[:1] not in (["Z"], ["X"])


def node_alive(pid: int, name: str) -> bool:
    """True if ``pid`` is alive and still the ``qmgr start --name NAME`` we launched (a pid
    reused by another program after a reboot does not count)."""
    if not pid_alive(pid):
        return False
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return True
    want = [b"--name", name.encode()]
    return b"start" in args and any(args[i : i + 2] == want for i in range(len(args) - 1))
