"""Time as the pure core sees it: a clock that is passed in, never read from the system.

The node builds one :class:`SystemClock` (the wall clock) and hands it to everything that
stamps or compares times. :class:`OffsetClock` is that clock moved forward by a given number of
seconds: a node started for a test uses it so the test can make a lock, a time to live, a
scheduled time or a token expire without waiting for it.
"""

from __future__ import annotations

import math
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...


class SystemClock:
    """The wall clock: the one place the node reads the time of day."""

    def now(self) -> float:
        return time.time()


class ManualClock:
    """A clock that moves only when told to (tests and simulations)."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds


class OffsetClock:
    """``base`` (the wall clock unless given) plus an offset that only grows: time seen by a
    node whose clock a test moves forward. Moving it back is refused, since locks, times to
    live and scheduled times already handled would seem undone."""

    def __init__(self, base: Clock | None = None) -> None:
        self._base: Clock = base if base is not None else SystemClock()
        self.offset = 0.0

    def now(self) -> float:
        return self._base.now() + self.offset

    def move_to(self, offset: float) -> None:
        """Make the offset ``offset`` seconds (ValueError if not finite or below the current
        one)."""
        if not math.isfinite(offset):
            raise ValueError(f"a clock offset must be a finite number of seconds, not {offset}")
        if offset < self.offset:
            raise ValueError(
                f"the clock only moves forward: offset {offset} s is below the current "
                f"{self.offset} s"
            )
        self.offset = offset
