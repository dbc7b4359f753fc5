"""Filter evaluation speed: compiled filters against the plain AST interpreter, in one run.

Run: .venv/bin/python bench/bench_filters.py [--seconds 0.3]

Prints evaluations per second for a correlation filter, a simple SQL comparison, the
NServiceBus LIKE rule and a 10-clause filter, the speed-up of the compiled code over the
tree-walking interpreter, and compile/cache times. It asserts nothing about speed; the
project's target (over 1 million simple compiled evaluations per second) is reported as met or
not.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from qmgr.filters import CorrelationFilter, Int32, compile_filter
from qmgr.filters.interpreter import Interpreter
from qmgr.filters.parser import parse_filter
from qmgr.filters.sql import SqlFilter

Evaluate = Callable[[Mapping[str, Any], Mapping[str, Any]], Any]

HEADER = (
    "Shipping.OrderAccepted, Shared, Version=1.0.0.0, Culture=neutral, PublicKeyToken=XYZ;"
    "Shipping.IOrderAccepted, Shared, Version=1.0.0.0, Culture=neutral, PublicKeyToken=XYZ;"
    "Shipping.IOrderStatusChanged, Shared, Version=1.0.0.0, Culture=neutral, PublicKeyToken=XYZ"
)
SYSTEM = {
    "MessageId": "0b6c2a52-9d0b-4a8e-9b43-2f9a1b0c7d11",
    "CorrelationId": "high",
    "Label": "order",
    "To": "orders",
    "ContentType": "application/json",
    "SequenceNumber": 12345,
    "DeliveryCount": Int32(1),
    "EnqueuedTimeUtc": dt.datetime(2024, 1, 15, 13, 45, 30, tzinfo=dt.UTC),
    "LockToken": uuid.UUID(int=1),
}
USER = {
    "color": "blue",
    "quantity": Int32(12),
    "priority": "high",
    "region": "eu",
    "customer": "C-1001",
    "amount": 120.75,
    "tenant": "contoso",
    "status": "open",
    "NServiceBus.EnclosedMessageTypes": HEADER,
}
TEN_CLAUSES = (
    "color = 'blue' AND quantity >= 10 AND priority <> 'low' AND sys.Label = 'order' "
    "AND region IN ('eu', 'us', 'apac') AND customer LIKE 'C-%' AND amount > 99.5 "
    "AND EXISTS(tenant) AND sys.To IS NOT NULL AND NOT (status = 'cancelled')"
)
SQL_CASES = {
    "simple SQL comparison": "color = 'blue'",
    "NServiceBus LIKE rule": "[NServiceBus.EnclosedMessageTypes] LIKE '%Shipping.OrderAccepted%'",
    "10-clause filter": TEN_CLAUSES,
}


def rate(function: Evaluate, seconds: float) -> float:
    """Best evaluations per second over three timed runs of about `seconds` each."""
    system, user = SYSTEM, USER
    count = 1000
    while True:  # calibrate
        start = time.perf_counter()
        for _ in itertools.repeat(None, count):
            function(system, user)
        elapsed = time.perf_counter() - start
        if elapsed > seconds / 4:
            break
        count *= 4
    count = max(1000, int(count * seconds / elapsed))
    best = 0.0
    for _ in range(3):
        start = time.perf_counter()
        for _ in itertools.repeat(None, count):
            function(system, user)
        best = max(best, count / (time.perf_counter() - start))
    return best


def per_call_us(action: Callable[[], object], repeat: int) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        action()
    return (time.perf_counter() - start) / repeat * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.3, help="time per measurement")
    args = parser.parse_args()

    print("qmgr.filters benchmark (evaluations per second, best of 3; higher is better)\n")
    print(f"{'filter':<26}{'result':>8}{'compiled':>14}{'interpreted':>14}{'speed-up':>10}")
    correlation = CorrelationFilter(correlation_id="high")
    print(
        f"{'correlation filter':<26}{'TRUE':>8}{rate(correlation.matches, args.seconds):>14,.0f}{'-':>14}{'-':>10}"
    )
    simple_rate = 0.0
    for name, text in SQL_CASES.items():
        compiled = compile_filter(text)
        result = compiled.evaluate(SYSTEM, USER)
        interpreter = Interpreter(compiled.parameters)
        tree = compiled.tree

        def interpreted(
            s: Mapping[str, Any],
            u: Mapping[str, Any],
            tree: Any = tree,
            interpreter: Interpreter = interpreter,
        ) -> Any:
            return interpreter.condition(tree, s, u)

        assert interpreted(SYSTEM, USER) is result  # same answer, or the comparison is meaningless
        fast = rate(compiled.evaluate, args.seconds)
        slow = rate(interpreted, args.seconds)
        if name == "simple SQL comparison":
            simple_rate = fast
        label = {True: "TRUE", False: "FALSE", None: "UNKNOWN"}[result]
        print(f"{name:<26}{label:>8}{fast:>14,.0f}{slow:>14,.0f}{fast / slow:>9.1f}x")

    print("\ncompile cost:")
    cold = per_call_us(lambda: SqlFilter(TEN_CLAUSES, {}, parse_filter(TEN_CLAUSES)), 200)
    cached = per_call_us(lambda: compile_filter(TEN_CLAUSES), 20000)
    print(f"  10-clause filter, parse + code generation + compile(): {cold:,.0f} us")
    print(f"  10-clause filter, compile_filter cache hit:             {cached:,.2f} us")

    print("\npathological LIKE (a backtracking regex needs seconds here):")
    pathological = "x LIKE '%a%a%a%a%a%a_b'"
    value = {"x": "a" * 100}
    cold = per_call_us(lambda: SqlFilter(pathological, {}, parse_filter(pathological)), 200)
    compiled = compile_filter(pathological)
    assert compiled.evaluate(SYSTEM, value) is False
    print(f"  parse + compile: {cold:,.0f} us")
    print(
        f"  match against 100 characters: {per_call_us(lambda: compiled.evaluate(SYSTEM, value), 2000):,.1f} us"
    )
    folded = f"'{'a' * 100}' LIKE '%a%a%a%a%a%a_b'"
    print(
        "  constant LIKE, folded at compile time: "
        f"{per_call_us(lambda: SqlFilter(folded, {}, parse_filter(folded)), 200):,.0f} us"
    )

    verdict = "met" if simple_rate > 1_000_000 else "NOT met"
    print(
        f"\ntarget: over 1,000,000 simple compiled evaluations/s on this machine -> {verdict} "
        f"({simple_rate:,.0f}/s)"
    )


if __name__ == "__main__":
    main()
