"""When the node's collector freezes and thaws the heap (``qmgr.node.server.Collector``), with
the heap's size, the freezing and the clock given by the test."""

from __future__ import annotations

import logging

import pytest

from qmgr.node.server import (
    GC_FREEZE_STEP,
    GC_SLOW,
    GC_THAW_FLOOR,
    GC_THAW_GROWTH,
    Collector,
)


class Heap:
    def __init__(self, blocks: int) -> None:
        self.blocks = blocks
        self.time = 0.0
        self.calls: list[str] = []

    def collector(self) -> Collector:
        return Collector(
            lambda: self.blocks,
            lambda: self.calls.append("freeze"),
            lambda: self.calls.append("unfreeze"),
            lambda: self.time,
        )

    def collect(self, collector: Collector, generation: int, took: float = 0.0) -> None:
        collector("start", {"generation": generation})
        self.time += took
        collector("stop", {"generation": generation})


def test_the_heap_is_frozen_each_step_it_grows_checked_after_middle_collections() -> None:
    heap = Heap(100_000)
    collector = heap.collector()
    heap.blocks += GC_FREEZE_STEP - 1
    heap.collect(collector, 1)
    assert heap.calls == []
    heap.blocks += 1
    heap.collect(collector, 0)  # the young generation's collections do not look
    assert heap.calls == []
    heap.collect(collector, 1)
    assert heap.calls == ["freeze"]
    heap.blocks += GC_FREEZE_STEP // 2
    heap.collect(collector, 2)
    assert heap.calls == ["freeze"]  # counted from the last freeze
    heap.blocks += GC_FREEZE_STEP // 2
    heap.collect(collector, 2)
    assert heap.calls == ["freeze", "freeze"]


def test_a_drained_heap_is_thawed_and_nothing_frozen_until_a_full_collection() -> None:
    heap = Heap(100_000)
    collector = heap.collector()
    heap.blocks += 4 * GC_FREEZE_STEP
    heap.collect(collector, 1)
    assert heap.calls == ["freeze"]
    heap.blocks = (100_000 + 4 * GC_FREEZE_STEP) // 2 - 1  # below half of the last freeze
    heap.collect(collector, 1)
    assert heap.calls == ["freeze", "unfreeze"]
    heap.blocks += 2 * GC_FREEZE_STEP
    heap.collect(collector, 1)  # the thawed objects have not been walked yet
    assert heap.calls == ["freeze", "unfreeze"]
    heap.collect(collector, 2)
    assert heap.calls == ["freeze", "unfreeze", "freeze"]


def test_a_heap_grown_many_times_since_the_last_thaw_is_thawed() -> None:
    heap = Heap(GC_THAW_FLOOR)
    collector = heap.collector()
    heap.blocks = GC_THAW_FLOOR * GC_THAW_GROWTH
    heap.collect(collector, 1)
    assert heap.calls == ["freeze"]  # not yet past the growth
    heap.blocks += 1
    heap.collect(collector, 1)
    assert heap.calls == ["freeze", "unfreeze"]


def test_growth_is_counted_from_the_floor_in_a_small_heap() -> None:
    heap = Heap(1_000)
    collector = heap.collector()
    heap.blocks = 1_000 * GC_THAW_GROWTH + GC_FREEZE_STEP  # sixteen times, but under the floor
    heap.collect(collector, 1)
    assert heap.calls == ["freeze"]


def test_a_long_collection_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    heap = Heap(1_000)
    collector = heap.collector()
    with caplog.at_level(logging.WARNING, logger="qmgr.node"):
        heap.collect(collector, 2, took=GC_SLOW / 2)
        assert not caplog.records
        heap.collect(collector, 2, took=GC_SLOW * 2)
    assert "generation 2 held the node for 2.0 s" in caplog.text
