"""The clocks the node and the pure cores read: the wall clock, and the wall clock moved
forward by an offset (a test node's)."""

from __future__ import annotations

import math
import time

import pytest

from qmgr.core.clock import ManualClock, OffsetClock, SystemClock


def test_the_system_clock_is_the_wall_clock() -> None:
    before = time.time()
    now = SystemClock().now()
    assert before <= now <= time.time()


def test_an_offset_clock_is_its_base_moved_forward() -> None:
    base = ManualClock(1000.0)
    clock = OffsetClock(base)
    assert clock.now() == 1000.0 and clock.offset == 0.0
    clock.move_to(7.5)
    assert clock.now() == 1007.5
    base.advance(2.0)
    assert clock.now() == 1009.5  # the base still runs under the offset
    clock.move_to(7.5)  # the same offset again changes nothing
    assert clock.now() == 1009.5


def test_an_offset_clock_runs_on_the_wall_clock_by_default() -> None:
    clock = OffsetClock()
    clock.move_to(3600.0)
    assert time.time() + 3599.0 < clock.now() < time.time() + 3601.0


def test_an_offset_clock_never_moves_back() -> None:
    clock = OffsetClock(ManualClock(1000.0))
    clock.move_to(10.0)
    with pytest.raises(ValueError, match="only moves forward: offset 5.0 s is below the current"):
        clock.move_to(5.0)
    assert clock.offset == 10.0


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_an_offset_clock_refuses_an_offset_that_is_not_a_number_of_seconds(bad: float) -> None:
    clock = OffsetClock(ManualClock(1000.0))
    with pytest.raises(ValueError, match="finite number of seconds"):
        clock.move_to(bad)
    assert clock.offset == 0.0
