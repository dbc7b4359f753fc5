"""The one poll loop of the launcher, its tests and benchmarks: ask a predicate until it holds
or the time is up. Node processes announce readiness on stdout and clusters converge over
gRPC, neither of which offers a notification to wait on, so looking again every ``interval``
seconds is the way to wait for them."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from qmgr.launcher.errors import WaitTimeout

T = TypeVar("T")


def wait_for(
    predicate: Callable[[], T],
    timeout: float,
    interval: float = 0.05,
    what: str = "the condition",
) -> T:
    """Call ``predicate`` until it returns something true and return that; raise
    :class:`WaitTimeout` naming ``what`` after ``timeout`` seconds. It is asked once more at
    the deadline, so a slow last look still counts."""
    if timeout < 0 or interval <= 0:
        raise ValueError(
            f"wait_for needs timeout >= 0 and interval > 0 (got {timeout}, {interval})"
        )
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)
