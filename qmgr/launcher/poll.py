"""The one poll loop of the launcher, its tests and benchmarks: ask a predicate until it holds
or the time is up. Node processes announce readiness on stdout and clusters converge over
gRPC, neither of which offers a notification to wait on, so looking again every ``interval``
seconds is the way to wait for them."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from qmgr.launcher.errors import WaitTimeout

T = TypeVar("T")


def wait_for(
    predicate: Callable[[], T],
    timeout: float,
    interval: float = 0.05,
    what: str = "the condition",
    *,
    retry: type[BaseException] | tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``predicate`` until it returns something true and return that; raise
    :class:`WaitTimeout` naming ``what`` and the last answer after ``timeout`` seconds. It is
    asked once more at the deadline, so a slow last look still counts. An exception of a
    ``retry`` type counts as "not yet" (a node that is restarting refuses connections); any
    other goes straight to the caller. ``interval`` 0 looks again at once (a test that must
    act the moment something starts to move)."""
    if timeout < 0 or interval < 0:
        raise ValueError(
            f"wait_for needs timeout >= 0 and interval >= 0, not {timeout}, {interval}"
        )
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = predicate()
        except retry as exc:
            last = exc
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout:g} s waiting for {what} (last: {last!r})")
        time.sleep(interval)
