"""Service Bus: the engine alone in process, then the real SDK against a node over AMQP.

Run: .venv/bin/python bench/bench_servicebus.py [--messages N] [--rounds R]
     [--wire-messages N] [--receivers P] [--only engine|wire]

The engine alone (no node, no storage, no protocol) prints messages per second for:

- simple sends to a queue (one message per call, and batches of 100);
- sends through a topic whose subscriptions hold 1, 100 and 2,000 SQL rules, and 10,000
  correlation rules (100 subscriptions x 100 rules), each message matching one rule; each as
  a ratio to the 1-rule case of the same run (target: 10,000 correlation rules within 1.5x);
- peek-lock receive + complete on a queue (one message per receive, and 32 per receive).

Targets on one core: at least 100,000 simple sends and 50,000 peek-lock receive + complete per
second. Each case runs ``--rounds`` times; the best round is printed.

Then the wire workloads of ``bench/bench_servicebus_wire.py`` (see there): batched send,
peek-lock receive + complete (one sync receiver, P receiver processes, one async receiver),
receive-and-delete and session receive, each with msg/s and the node's and the clients' CPU per
message, in one run against one node process.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from qmgr.core.clock import SystemClock  # noqa: E402
from qmgr.servicebus.entities import FilterType, RuleProperties  # noqa: E402
from qmgr.servicebus.message import SbMessage  # noqa: E402
from qmgr.servicebus.namespace import Namespace, NamespaceLimits, ReceiveMode  # noqa: E402


def namespace() -> Namespace:
    limits = NamespaceLimits(max_correlation_rules_per_topic=100_000)
    return Namespace(clock=SystemClock(), limits=limits)


def best(rounds: int, run: Callable[[], float]) -> float:
    return max(run() for _ in range(rounds))


def bench_queue_send(n: int, batch: int) -> float:
    ns = namespace()
    ns.create_queue("q")
    msgs = [SbMessage(b"x" * 100, message_id=str(i)) for i in range(n)]
    start = time.perf_counter()
    send = ns.send
    if batch == 1:
        for m in msgs:
            send("q", [m])
    else:
        for i in range(0, n, batch):
            send("q", msgs[i : i + batch])
    return n / (time.perf_counter() - start)


def bench_receive_complete(n: int, count: int) -> float:
    ns = namespace()
    ns.create_queue("q")
    ns.send("q", [SbMessage(b"x" * 100, message_id=str(i)) for i in range(n)])
    receive, complete = ns.receive, ns.complete
    mode = ReceiveMode.PEEK_LOCK
    done = 0
    start = time.perf_counter()
    while done < n:
        got = receive("q", count, mode)
        for m in got:
            complete("q", m.lock_token)  # type: ignore[arg-type]
        done += len(got)
    return n / (time.perf_counter() - start)


def topic_with(kind: str, rules: int) -> tuple[Namespace, list[SbMessage]]:
    """A topic whose rules each match one value; messages cycle through the values."""
    ns = namespace()
    ns.create_topic("t")
    subs = 1 if rules == 1 else min(rules, 100)
    per_sub = rules // subs
    n = 0
    for s in range(subs):
        for r in range(per_sub):
            if kind == "sql":
                rule = RuleProperties(FilterType.SQL, sql=f"kind = 'v{n}'")
            else:
                rule = RuleProperties(FilterType.CORRELATION, properties={"kind": f"v{n}"})
            if r == 0:
                ns.create_subscription("t", f"s{s}", rule=(f"r{r}", rule))
            else:
                ns.create_rule("t", f"s{s}", f"r{r}", rule)
            n += 1
    msgs = [
        SbMessage(b"x" * 100, message_id=str(i), properties={"kind": f"v{i % rules}"})
        for i in range(1000)
    ]
    return ns, msgs


def bench_topic(kind: str, rules: int, n: int) -> float:
    ns, msgs = topic_with(kind, rules)
    send = ns.send
    start = time.perf_counter()
    for i in range(n):
        send("t", [msgs[i % 1000]])
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--wire-messages", type=int, default=10_000)
    parser.add_argument("--receivers", type=int, default=8, help="receiver processes (wire)")
    parser.add_argument("--only", choices=("engine", "wire"))
    args = parser.parse_args()
    if args.only != "wire":
        engine(args.messages, args.rounds)
    if args.only != "engine":
        print()
        import bench_servicebus_wire  # the SDK and a node process: only when asked for

        bench_servicebus_wire.main(
            ["--messages", str(args.wire_messages), "--receivers", str(args.receivers)]
        )


def engine(n: int, rounds: int) -> None:

    print(f"Service Bus engine, in process; best of {rounds} rounds of {n} messages")
    print(f"{'case':52} {'msgs/s':>10} {'ratio':>7}")
    send1 = best(rounds, lambda: bench_queue_send(n, 1))
    print(f"{'queue: send, 1 message per call':52} {send1:10,.0f}")
    send100 = best(rounds, lambda: bench_queue_send(n, 100))
    print(f"{'queue: send, 100 messages per call':52} {send100:10,.0f}")
    topic_n = max(n // 5, 1000)
    base = best(rounds, lambda: bench_topic("sql", 1, topic_n))
    print(f"{'topic: 1 SQL rule':52} {base:10,.0f} {1.0:7.2f}")
    for kind, rules, label in (
        ("sql", 100, "topic: 100 SQL rules (100 subscriptions)"),
        ("sql", 2000, "topic: 2,000 SQL rules (100 subscriptions x 20)"),
        ("correlation", 10_000, "topic: 10,000 correlation rules (100 x 100)"),
    ):
        count = topic_n if kind == "correlation" or rules <= 100 else max(topic_n // 20, 500)
        rate = best(
            rounds, lambda kind=kind, rules=rules, count=count: bench_topic(kind, rules, count)
        )
        print(f"{label:52} {rate:10,.0f} {base / rate:7.2f}")
    rc1 = best(rounds, lambda: bench_receive_complete(n, 1))
    print(f"{'queue: peek-lock receive 1 + complete':52} {rc1:10,.0f}")
    rc32 = best(rounds, lambda: bench_receive_complete(n, 32))
    print(f"{'queue: peek-lock receive 32 + complete each':52} {rc32:10,.0f}")
    print("ratio: time per message relative to the 1-rule topic")


if __name__ == "__main__":
    main()
