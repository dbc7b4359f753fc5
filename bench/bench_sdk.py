"""The Python SDK's own CPU per message: a publisher process and a subscriber process on one node.

Run: .venv/bin/python bench/bench_sdk.py [--messages N] [--rounds R] [--base REV]
     [--node-rev REV] [--receive one|batch|consume] [--properties K] [--batch-size B]
     [--persistent]

One node runs for the whole run (from the working tree, or with ``--node-rev REV`` from a
worktree of REV, so that unfinished changes to the node neither break nor sway the figures).
Each round starts a subscriber process (a non-durable subscription, automatic
acknowledgement, default flow control) and then a publisher process (``stream_publisher``
with batches of ``--batch-size``, 100 by default: N messages of 100 bytes, non-persistent
or with ``--persistent`` persistent, one ``publish`` call each, ``K`` string properties per
message when asked). Each client
process reports its own CPU time (user + system of all its threads,
``getrusage(RUSAGE_SELF)``) from just before its first message to just after its last, so
imports and connecting are left out; the node's CPU comes from /proc over the same span. The
rate is N over the time from the publisher's first ``publish`` to the subscriber's last
message.

``--receive one`` takes each message with ``receive()`` (iterating the subscription),
``--receive batch`` with ``receive_batch()``; ``--receive consume`` reads a queue on the
Consume stream with acknowledged delivery (``consume()``: each batch acknowledged when the
next is asked for), the queue being the destination of a durable subscription made for the
round (removed, with its queue, afterwards).

With ``--base REV`` the client processes also run from a ``git worktree`` of REV (its whole
``qmgr`` package, so its SDK), against the same node. Rounds alternate base and current (the
first side alternating as well, so neither always runs first) and the figures are medians of
the rounds with the ratio current / base: on a shared machine only figures from one run
compare.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qmgr.core.values import PropertyValue

ROOT = Path(__file__).resolve().parent.parent
PAYLOAD = b"x" * 100
TOPIC = "bench/sdk/t"


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _proc_cpu(pid: int) -> float:
    """User + system CPU time a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _report(**fields: Any) -> None:
    print("RESULT " + json.dumps(fields), flush=True)


def run_subscriber(address: str, n: int, receive: str) -> None:
    from qmgr.client import QueueManagerClient

    client = QueueManagerClient(address, timeout=120)
    if receive == "consume":
        _consume(client, n)
        return
    sub = client.subscribe(TOPIC, max_batch=1000)
    print("READY", flush=True)
    got = 0
    cpu0 = 0.0
    first = 0.0
    if receive == "one":
        msg = sub.receive(timeout=120)
        cpu0, first = _cpu_self(), time.time()
        while msg is not None:
            got += 1
            if got >= n:
                break
            msg = sub.receive(timeout=60)
    else:
        batch = sub.receive_batch(timeout=120)
        cpu0, first = _cpu_self(), time.time()
        while batch:
            got += len(batch)
            if got >= n:
                break
            batch = sub.receive_batch(timeout=60)
    last = time.time()
    cpu = _cpu_self() - cpu0
    sub.close()
    client.close()
    _report(got=got, cpu=cpu, first=first, last=last)


def _consume(client: Any, n: int) -> None:
    """The Consume stream of a queue a durable subscription delivers to, each batch
    acknowledged when the next is asked for; the subscription and queue removed after."""
    queue = f"BENCH.SDK.{os.getpid()}"
    client.mqsc(f"DEFINE QLOCAL({queue}) MAXDEPTH(999999999)")
    client.create_subscription(TOPIC, name=queue, destination=queue)
    print("READY", flush=True)
    got = 0
    batches = client.consume(queue, 1000)
    batch = next(batches)
    cpu0, first = _cpu_self(), time.time()
    while True:
        got += len(batch)
        if got >= n:
            break
        batch = next(batches, [])
        if not batch:
            break
    batches.close()  # acknowledges the last batch
    last = time.time()
    cpu = _cpu_self() - cpu0
    client.unsubscribe(queue)
    client.mqsc(f"DELETE QLOCAL({queue}) PURGE")
    client.close()
    _report(got=got, cpu=cpu, first=first, last=last)


def run_publisher(address: str, n: int, properties: int, batch_size: int, persistent: bool) -> None:
    from qmgr.client import QueueManagerClient

    client = QueueManagerClient(address, timeout=120)
    pub = client.stream_publisher(batch_size=batch_size, window=16)
    props: dict[str, PropertyValue] | None = {f"k{i}": f"value{i}" for i in range(properties)}
    props = props or None
    publish = pub.publish
    cpu0, start = _cpu_self(), time.time()
    for _ in range(n):
        publish(TOPIC, PAYLOAD, properties=props, persistent=persistent)
    result = pub.close()
    end = time.time()
    cpu = _cpu_self() - cpu0
    client.close()
    _report(accepted=result.accepted, cpu=cpu, start=start, end=end)


def _child(root: Path, role: str, address: str, args: argparse.Namespace) -> subprocess.Popen[str]:
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--role",
        role,
        "--root",
        str(root),
        "--address",
        address,
        "--messages",
        str(args.messages),
        "--receive",
        args.receive,
        "--properties",
        str(args.properties),
        "--batch-size",
        str(args.batch_size),
    ] + (["--persistent"] if args.persistent else [])
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=root)


def _result(proc: subprocess.Popen[str], what: str) -> dict[str, Any]:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("RESULT "):
            proc.wait(60)
            return dict(json.loads(line[len("RESULT ") :]))
    proc.wait(60)
    raise SystemExit(f"the {what} process ended (exit code {proc.returncode}) without a result")


def one_round(
    root: Path, address: str, node_pid: int, args: argparse.Namespace
) -> dict[str, float]:
    n = args.messages
    sub = _child(root, "sub", address, args)
    assert sub.stdout is not None
    if sub.stdout.readline().strip() != "READY":
        sub.kill()
        raise SystemExit("the subscriber did not start")
    node0 = _proc_cpu(node_pid)
    pub = _child(root, "pub", address, args)
    published = _result(pub, "publisher")
    received = _result(sub, "subscriber")
    node_cpu = _proc_cpu(node_pid) - node0
    if published["accepted"] != n or received["got"] != n:
        raise SystemExit(f"published {published['accepted']}, received {received['got']} of {n}")
    return {
        "pub_us": published["cpu"] / n * 1e6,
        "sub_us": received["cpu"] / n * 1e6,
        "node_us": node_cpu / n * 1e6,
        "rate": n / (received["last"] - published["start"]),
    }


@contextlib.contextmanager
def worktree(rev: str, tmp: str) -> Iterator[Path]:
    """A detached ``git worktree`` of ``rev`` under ``tmp``, removed afterwards."""
    path = Path(tmp) / f"rev-{rev.replace('/', '_')}"
    if not path.exists():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), rev],
            check=True,
            capture_output=True,
        )
    try:
        yield path
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)],
            check=False,
            capture_output=True,
        )


COLUMNS = (
    ("pub_us", "publisher CPU us/msg"),
    ("sub_us", "subscriber CPU us/msg"),
    ("node_us", "node CPU us/msg"),
    ("rate", "msg/s"),
)


def _print_round(side: str, figures: dict[str, float]) -> None:
    text = "  ".join(f"{key} {figures[key]:,.2f}" for key, _ in COLUMNS)
    print(f"  {side:<8} {text}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--base", help="also run the clients from this git revision")
    parser.add_argument(
        "--node-rev", help="run the node from this git revision (default: the working tree)"
    )
    parser.add_argument("--receive", choices=("one", "batch", "consume"), default="one")
    parser.add_argument("--properties", type=int, default=0, help="string properties a message")
    parser.add_argument("--batch-size", type=int, default=100, help="publications a batch")
    parser.add_argument("--persistent", action="store_true", help="persistent messages")
    parser.add_argument("--role", choices=("pub", "sub"), help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    parser.add_argument("--address", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if min(args.messages, args.rounds, args.batch_size) < 1 or args.properties < 0:
        parser.error(
            "--messages, --rounds and --batch-size must be positive, --properties not negative"
        )
    if args.role:  # a client process: the SDK of --root
        sys.path.insert(0, args.root)
        import qmgr

        if not Path(qmgr.__file__).resolve().is_relative_to(Path(args.root).resolve()):
            raise SystemExit(f"qmgr was imported from {qmgr.__file__}, not from {args.root}")
        if args.role == "sub":
            run_subscriber(args.address, args.messages, args.receive)
        else:
            run_publisher(
                args.address, args.messages, args.properties, args.batch_size, args.persistent
            )
        return

    sys.path.insert(0, str(ROOT))
    from qmgr.launcher.launch import start_node

    print(
        f"SDK benchmark: {args.messages:,} "
        f"{'persistent' if args.persistent else 'non-persistent'} messages of {len(PAYLOAD)} bytes, "
        f"{args.properties} properties, batches of {args.batch_size}, receive {args.receive}, "
        f"{args.rounds} rounds"
    )
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        sides: list[tuple[str, Path]] = [("current", ROOT)]
        if args.base:
            sides.insert(0, (f"base {args.base}", stack.enter_context(worktree(args.base, tmp))))
        env = dict(os.environ)
        if args.node_rev:
            env["PYTHONPATH"] = str(stack.enter_context(worktree(args.node_rev, tmp)))
        node = start_node(
            "SDKBENCH", data_dir=Path(tmp) / "data", log=Path(tmp) / "node.log", env=env
        )
        results: dict[str, list[dict[str, float]]] = {side: [] for side, _ in sides}
        try:
            for r in range(args.rounds):
                order = sides if r % 2 == 0 else sides[::-1]
                for side, root in order:
                    figures = one_round(root, node.address, node.proc.pid, args)
                    results[side].append(figures)
                    _print_round(side if side == "current" else "base", figures)
        finally:
            node.proc.terminate()
            node.proc.wait(30)
    print(f"medians of {args.rounds} rounds (machine shared: figures are noisy)")
    medians = {
        side: {key: statistics.median(f[key] for f in rows) for key, _ in COLUMNS}
        for side, rows in results.items()
    }
    for side, _ in sides:
        print(f"  {side}")
        for key, label in COLUMNS:
            print(f"    {label:<24} {medians[side][key]:>12,.2f}")
    if args.base:
        base, now = medians[sides[0][0]], medians["current"]
        print("  current / base")
        for key, label in COLUMNS:
            print(f"    {label:<24} {now[key] / base[key]:>12.2f}x")


if __name__ == "__main__":
    main()
