"""The sequenced-delivery helper (qmgr.client.sequenced) draining out-of-order sessions of a
real node through Microsoft's azure-servicebus SDK, alone or as the load job's session drain.

Run: .venv/bin/python bench/bench_sequenced.py [--sessions S] [--messages N] [--window W]
     [--receivers R] [--max-held H] [--batch B] [--no-look-ahead] [--helper FILE]
     [--drain all|sequenced [--drain-module FILE] [--partitions P]]

Starts one node (``qmgr start --servicebus`` with a data directory), makes a topic with a
session-enabled subscription, publishes S sessions of N messages each (application property
``SequenceNumber`` 1..N, each session's numbers shuffled: wholly with ``--window 0``, else
within consecutive windows of W numbers, as two routes of a bridge mix them; the sessions
interleaved) and drains them with ``drain_sessions``. Prints messages per second through the
helper, the ``$management`` calls per message (session state get/set, receive by sequence
number, settling a deferred message, peek) and the link settlements per message (complete,
defer, dead-letter on the receive link), counted in the SDK, the CPU time per message of the
drain's process (its partitions' with ``--drain``) and of the node (a figure less sensitive than
the rate to other work on a shared machine), and checks each session came out 1..N in order,
once. The session takes say how many sessions came from a receiver opened ahead
(``look_ahead``; ``--no-look-ahead`` turns it off). ``--batch B`` is the helper's
``max_message_count`` (the receive batch).

``--helper FILE`` loads another version of the helper from a file (e.g. an older one:
``git show REV:qmgr/client/sequenced.py > /tmp/old.py``) to compare on the same machine.

``--drain all|sequenced`` reads the subscription as one partition of the load job's data source
does (``qmgr.spark.drain.drain`` with ``sessions`` = ``all`` or ``sequenced``, no Spark), and
prints the rows per second to the last row; ``--drain-module FILE`` loads another version of
qmgr/spark/drain.py (its sequenced drain calls this tree's helper); ``--partitions P`` reads it
as the data source's option ``partitions`` does, in P processes at once (Spark's tasks), the
session receivers shared out between them. ``--max-held H`` sets the helper's ``max_held``
(early arrivals held in memory before it defers; with ``--drain``, the data source's
``SEQUENCED_MAX_HELD``, which it passes to the helper): with ``--window`` wider than it,
messages are deferred and fetched again, which the management calls per message show.
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing
import os
import queue
import random
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from azure.servicebus import ServiceBusClient, ServiceBusMessage  # noqa: E402
from azure.servicebus._servicebus_receiver import ServiceBusReceiver  # noqa: E402
from sb_node import servicebus_node  # noqa: E402

import qmgr.client.sequenced  # noqa: E402
import qmgr.spark.drain  # noqa: E402
from qmgr.spark.options import SbSource  # noqa: E402

TOPIC, SUBSCRIPTION = "bench", "ordered"


def load_module(path: str | None, default: ModuleType, name: str) -> ModuleType:
    if path is None:
        return default
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def shuffled(n: int, window: int, rnd: random.Random) -> list[int]:
    """1..n shuffled wholly (``window`` 0) or within consecutive windows of ``window``."""
    size = window or n
    numbers: list[int] = []
    for start in range(1, n + 1, size):
        part = list(range(start, min(start + size, n + 1)))
        rnd.shuffle(part)
        numbers += part
    return numbers


def publish(conn: str, sessions: int, n: int, window: int, seed: int) -> None:
    rnd = random.Random(seed)
    orders = {f"S{k}": shuffled(n, window, rnd) for k in range(sessions)}
    messages = [
        ServiceBusMessage(
            f"{session}-{number}",
            session_id=session,
            application_properties={"SequenceNumber": number},
        )
        for row in zip(*orders.values(), strict=True)
        for session, number in zip(orders, row, strict=True)
    ]
    with (
        ServiceBusClient.from_connection_string(conn) as client,
        client.get_topic_sender(TOPIC) as sender,
    ):
        for i in range(0, len(messages), 200):
            sender.send_messages(messages[i : i + 200])


@contextmanager
def counting() -> Iterator[dict[str, int]]:
    """Counts the SDK receivers' $management requests and receive-link settlements."""
    counts = {"management": 0, "settle": 0}
    mgmt = ServiceBusReceiver._mgmt_request_response
    settle = ServiceBusReceiver._settle_message

    def counted(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return real(self, *args, **kwargs)

        return call

    def settle_counted(self: Any, message: Any, *args: Any, **kwargs: Any) -> Any:
        if not message._is_deferred_message:  # a deferred one is settled by $management
            counts["settle"] += 1
        return settle(self, message, *args, **kwargs)

    ServiceBusReceiver._mgmt_request_response = counted("management", mgmt)  # type: ignore[method-assign]
    ServiceBusReceiver._settle_message = settle_counted  # type: ignore[method-assign]
    try:
        yield counts
    finally:
        ServiceBusReceiver._mgmt_request_response = mgmt  # type: ignore[method-assign]
        ServiceBusReceiver._settle_message = settle  # type: ignore[method-assign]


def _partition(
    args: argparse.Namespace, conn: str, receivers: int | None, out: Any, start: float
) -> None:
    """One partition (a process, as a Spark task is): its rows' numbers per session, the
    times of its last row and of its end, and the SDK calls it counted, put on ``out``."""
    drain = load_module(args.drain_module, qmgr.spark.drain, "bench_sequenced_drain")
    if args.max_held is not None:
        setattr(drain, "SEQUENCED_MAX_HELD", args.max_held)  # noqa: B010 - a module loaded by name
    fields: dict[str, Any] = {} if receivers is None else {"receivers": receivers}
    src = SbSource(
        label="bench",
        connection_string=conn,
        queue=None,
        topic=TOPIC,
        subscription=SUBSCRIPTION,
        sessions=args.drain,
        sequence_property="SequenceNumber",
        receive_mode="peek_lock",
        **fields,
    )
    seen: dict[str, list[int]] = {}
    last = start
    with counting() as counts:
        for row in drain.drain(src, 1.0, None, 100):
            seen.setdefault(row[10], []).append(int(row[3]["SequenceNumber"]))
            last = time.time()
    out.put((seen, last, time.time(), dict(counts)))


def drain_rows(
    args: argparse.Namespace, conn: str
) -> tuple[dict[str, list[int]], float, float, dict[str, int]]:
    """The rows of the data source's partitions: the numbers per session (each partition's
    in its order), the seconds to the last row and to the drain's end (its wait for anything
    more included), the SDK calls counted."""
    receivers = None
    if args.partitions > 1:
        from qmgr.spark.options import SESSION_RECEIVERS

        receivers = max(1, SESSION_RECEIVERS // args.partitions)
    out: Any = multiprocessing.Queue()
    start = time.time()
    procs = [
        multiprocessing.Process(target=_partition, args=(args, conn, receivers, out, start))
        for _ in range(args.partitions)
    ]
    for proc in procs:
        proc.start()
    results = []
    while len(results) < len(procs):
        try:
            results.append(out.get(timeout=1.0))
        except queue.Empty:
            dead = [p for p in procs if p.exitcode not in (None, 0)]
            if dead:  # its traceback is above; the others cannot make up for it
                for proc in procs:
                    proc.kill()
                raise SystemExit(
                    f"a drain partition failed (exit code {dead[0].exitcode})"
                ) from None
    for proc in procs:
        proc.join()
    seen: dict[str, list[int]] = {}
    counts = {"management": 0, "settle": 0}
    for part, _, _, part_counts in results:
        for session, numbers in part.items():
            if args.drain == "sequenced" and numbers != sorted(numbers):
                numbers = [-1]  # out of order within a partition: reported as wrong
            seen.setdefault(session, []).extend(numbers)
        for name in counts:
            counts[name] += part_counts[name]
    last = max(r[1] for r in results)
    ended = max(r[2] for r in results)
    return seen, last - start, ended - start, counts


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds a process and its ended children have used so far (Linux
    ``/proc``): the drain's partitions are such children."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--messages", type=int, default=1000, help="per session")
    parser.add_argument("--window", type=int, default=0, help="0: shuffle each session wholly")
    parser.add_argument("--receivers", type=int, default=None, help="drain_sessions' receivers")
    parser.add_argument("--helper", default=None, help="a file holding another helper version")
    parser.add_argument("--drain", choices=["all", "sequenced"], default=None)
    parser.add_argument("--drain-module", default=None, help="another qmgr/spark/drain.py")
    parser.add_argument("--partitions", type=int, default=1, help="--drain in P processes")
    parser.add_argument("--max-held", type=int, default=None, help="the helper's max_held")
    parser.add_argument("--batch", type=int, default=None, help="the helper's max_message_count")
    parser.add_argument(
        "--no-look-ahead", action="store_true", help="drain_sessions(look_ahead=False)"
    )
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    helper = load_module(args.helper, qmgr.client.sequenced, "bench_sequenced_helper")
    total = args.sessions * args.messages
    seen: dict[str, list[int]] = {}
    last = [0.0]

    def handle(message: Any) -> None:
        number = int(message.application_properties[b"SequenceNumber"])
        seen.setdefault(str(message.session_id), []).append(number)
        last[0] = time.perf_counter()

    with servicebus_node("bench-sequenced-") as node:
        node.admin.create_topic(TOPIC)
        node.admin.create_subscription(TOPIC, SUBSCRIPTION, requires_session=True)
        publish(node.conn, args.sessions, args.messages, args.window, args.seed)
        cpu = (cpu_seconds(os.getpid()), cpu_seconds(node.node.proc.pid))
        if args.drain is not None:
            seen, seconds, ended, counts = drain_rows(args, node.conn)
            takes = f"ended after {ended:.2f} s (a wait of 1 s for more included)"
        else:
            extra: dict[str, Any] = {} if args.receivers is None else {"receivers": args.receivers}
            if args.max_held is not None:
                extra["max_held"] = args.max_held
            if args.batch is not None:
                extra["max_message_count"] = args.batch
            if args.no_look_ahead:
                extra["look_ahead"] = False
            with ServiceBusClient.from_connection_string(node.conn) as client, counting() as counts:
                start = time.perf_counter()
                stats = helper.drain_sessions(
                    client,
                    handle,
                    topic_name=TOPIC,
                    subscription_name=SUBSCRIPTION,
                    idle_timeout=1.0,
                    **extra,
                )
                seconds = last[0] - start  # to the last message handled: the idle wait left out
            ahead = sum(getattr(t, "opened_ahead", False) for t in stats.sessions)
            takes = f"{len(stats.sessions)} session takes ({ahead} opened ahead)"
        used = (cpu_seconds(os.getpid()) - cpu[0], cpu_seconds(node.node.proc.pid) - cpu[1])
    expected = {f"S{k}": list(range(1, args.messages + 1)) for k in range(args.sessions)}
    if args.drain == "all" or args.partitions > 1:  # each partition's rows of a session are
        # in order; partitions that held one session in turn interleave them
        seen = {session: sorted(numbers) for session, numbers in seen.items()}
    ok = "in order, once" if seen == expected else "WRONG ORDER OR COUNT"
    what = (
        f"qmgr.spark.drain sessions={args.drain} ({args.drain_module or 'this tree'}, "
        f"{args.partitions} partition{'s' if args.partitions > 1 else ''})"
        if args.drain
        else args.helper or "qmgr.client.sequenced"
    )
    print(
        f"{what}: {args.sessions} sessions x {args.messages} "
        f"(window {args.window or 'whole'}), {takes}"
    )
    print(
        f"  {total / seconds:8.0f} msg/s ({seconds:.2f} s to the last one), "
        f"{counts['management'] / total:.3f} management calls/msg, "
        f"{counts['settle'] / total:.3f} link settlements/msg: {ok}"
    )
    print(
        f"  CPU per message: {used[0] / total * 1e6:.0f} us in the "
        f"drain's process{'es' if args.drain else ''}, "
        f"{used[1] / total * 1e6:.0f} us in the node"
    )


if __name__ == "__main__":
    main()
