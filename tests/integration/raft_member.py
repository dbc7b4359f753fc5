"""Test harness: one Raft member (a RepositoryReplica) driven by JSON lines on stdin.

    QMGR_CLUSTER_SECRET=... python raft_member.py --self 127.0.0.1:P --peers A,B --cluster C
        [--data-dir D] [--compact-after N] [--insecure]

The cluster secret comes from the environment, never argv (PySyncObj's password is derived from
it, as a full repository does); without one the member refuses to start unless ``--insecure``.

Prints ``READY`` once started, then answers each request line with one JSON line:
``{"submit": cmd}`` -> ``{"ok", "error", "events"}`` (or ``{"unavailable": why}``),
``{"snapshot": true}`` -> the repository snapshot, ``{"status": true}`` -> the Raft status.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from qmgr.node.raft import RaftConfig, RaftUnavailable, RepositoryReplica  # noqa: E402
from qmgr.security.keys import raft_password  # noqa: E402


def answer(replica: RepositoryReplica, request: dict[str, Any]) -> dict[str, Any]:
    if "submit" in request:
        try:
            result = replica.submit(request["submit"], timeout=float(request.get("timeout", 5)))
        except RaftUnavailable as exc:
            return {"unavailable": str(exc)}
        return {
            "ok": result.ok,
            "error": None if result.error is None else result.error.to_dict(),
            "events": len(result.events),
        }
    if "snapshot" in request:
        return replica.snapshot()
    if "status" in request:
        return replica.status()
    return {"bad_request": request}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--self", dest="self_addr", required=True)
    parser.add_argument("--peers", required=True)
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--insecure", action="store_true")
    parser.add_argument("--compact-after", type=int, default=5000)
    args = parser.parse_args()
    secret = os.environ.get("QMGR_CLUSTER_SECRET") or None
    if (secret is None) != args.insecure:
        parser.error("give the secret in QMGR_CLUSTER_SECRET, or --insecure (not both)")
    password = raft_password(secret) if secret is not None else None
    config = RaftConfig(
        self_addr=args.self_addr,
        peers=tuple(p for p in args.peers.split(",") if p),
        cluster=args.cluster,
        password=password,
        data_dir=args.data_dir,
        compact_after_entries=args.compact_after,
    )
    replica = RepositoryReplica(config)
    print("READY", flush=True)
    try:
        for line in sys.stdin:
            if line.strip():
                print(json.dumps(answer(replica, json.loads(line))), flush=True)
    finally:
        replica.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
