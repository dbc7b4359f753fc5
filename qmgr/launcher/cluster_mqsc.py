"""Each node's MQSC from the topology, run once per node data: the commands already applied
are recorded next to the data (:func:`qmgr.launcher.cluster_state.mqsc_marker`) and skipped on the
next ``up`` of the same data."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from qmgr.launcher.cluster_launch import Launch
from qmgr.launcher.cluster_secrets import admin_client_options
from qmgr.launcher.cluster_state import mqsc_marker
from qmgr.launcher.errors import LaunchError
from qmgr.launcher.topology import NodeSpec, Topology, mqsc_commands


class MqscFailure(LaunchError):
    """A command failed: the message names the node, the command and the answer."""


def apply_mqsc(
    spec: NodeSpec, address: str, marker: Path, client_options: dict[str, Any] | None = None
) -> tuple[int, int]:
    """Run the node's MQSC; commands recorded in ``marker`` as already applied to this data
    are skipped. Returns (applied, skipped); raises MqscFailure on the first failure.
    ``client_options``: more ``QueueManagerClient`` arguments (TLS files)."""
    from qmgr.client import MQClientError, QueueManagerClient

    try:
        done: list[str] = json.loads(marker.read_text())
    except (OSError, ValueError):
        done = []
    earlier = Counter(done)  # a command given twice is run twice
    applied = skipped = 0
    with QueueManagerClient(address, timeout=30, **(client_options or {})) as client:
        for text in mqsc_commands(spec):
            if earlier[text] > 0:
                earlier[text] -= 1
                skipped += 1
                continue
            try:
                ok, records = client.mqsc_ok(text)
            except MQClientError as exc:
                raise MqscFailure(f"{spec.name}: {text}\n  {exc}") from None
            if not ok:
                answer = "\n".join("  " + r.render().replace("\n", "\n  ") for r in records)
                raise MqscFailure(f"{spec.name}: {text}\n{answer}")
            applied += 1
            done.append(text)
            marker.write_text(json.dumps(done, indent=2) + "\n")
    return applied, skipped


def apply_all_mqsc(
    topology: Topology, launches: list[Launch], base: Path, console: Any
) -> dict[str, str]:
    """Every node's MQSC in node order, with a status line on ``console`` (a rich Console).
    Returns node name -> what ran, for the summary ('-' when the node has none)."""
    by_name = {x.spec.name: x for x in launches}
    options = admin_client_options(base, topology.tls)
    out: dict[str, str] = {}
    for spec in topology.nodes:
        if not mqsc_commands(spec):
            out[spec.name] = "-"
            continue
        with console.status(f"MQSC on {spec.name}"):
            applied, skipped = apply_mqsc(
                spec, by_name[spec.name].address, mqsc_marker(base, spec.name), options
            )
        out[spec.name] = str(applied) + (f" (+{skipped} earlier)" if skipped else "")
    return out
