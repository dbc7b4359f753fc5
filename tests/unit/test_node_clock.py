"""A test node's clock moved forward on request (``QMGR_TEST_CLOCK_FILE`` and SIGUSR2): the
offset read from the file, what is due run at once, and the answer written beside the file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from qmgr.core.clock import ManualClock, OffsetClock
from qmgr.node.server import ClockFile, replace_file
from qmgr.node.servicebus import ServiceBusHost


class Moves:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1


def _clock_file(tmp_path: Path) -> tuple[ClockFile, OffsetClock, Moves]:
    clock = OffsetClock(ManualClock(1000.0))
    moves = Moves()
    return ClockFile(tmp_path / "clock", clock, moves), clock, moves


def test_the_offset_in_the_file_moves_the_clock_then_runs_what_is_due_then_answers(
    tmp_path: Path,
) -> None:
    file, clock, moves = _clock_file(tmp_path)
    replace_file(file.path, "7.5\n")
    assert file.apply() == "7.5"
    assert clock.now() == 1007.5
    assert moves.calls == 1
    assert (tmp_path / "clock.ack").read_text() == "7.5"
    assert not (tmp_path / "clock.ack.tmp").exists()  # written beside it, then renamed
    replace_file(file.path, "10")
    assert file.apply() == "10.0"
    assert clock.now() == 1010.0 and moves.calls == 2


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("soon", "not a number of seconds: 'soon'"),
        ("", "not a number of seconds: ''"),
        ("nan", "finite number of seconds"),
        ("-1", "only moves forward"),
    ],
)
def test_a_bad_offset_is_answered_with_why_and_the_clock_stays(
    tmp_path: Path, text: str, why: str
) -> None:
    file, clock, moves = _clock_file(tmp_path)
    replace_file(file.path, text)
    answer = file.apply()
    assert answer.startswith(f"error: {file.path}: ") and why in answer
    assert (tmp_path / "clock.ack").read_text() == answer
    assert clock.now() == 1000.0 and moves.calls == 0


def test_a_missing_file_is_answered_with_why(tmp_path: Path) -> None:
    file, clock, moves = _clock_file(tmp_path)
    answer = file.apply()
    assert answer.startswith("error: ") and "No such file" in answer
    assert clock.now() == 1000.0 and moves.calls == 0


def test_moving_the_clock_ticks_the_namespace_at_once() -> None:
    """A lock an hour from expiry: the timer waits an hour of the clock's time; moved an hour
    forward, the namespace ticks at once instead of when the old wait would have ended."""

    class Namespace:
        def __init__(self) -> None:
            self.deadline: float | None = None
            self.ticks: list[float] = []

        def next_deadline(self) -> float | None:
            return self.deadline

        def tick(self) -> None:
            self.ticks.append(clock.now())
            self.deadline = None

    clock = OffsetClock(ManualClock(1000.0))

    async def scenario() -> None:
        host = ServiceBusHost("clock-ns", clock)
        fake = Namespace()
        host.namespace = fake  # type: ignore[assignment]
        host.start()
        fake.deadline = clock.now() + 3600.0
        host.changed()
        await asyncio.sleep(0)
        assert fake.ticks == []
        clock.move_to(3600.0)
        host.clock_moved()
        assert fake.ticks == [4600.0]  # at once, not on the next turn of the loop
        host.clock_moved()  # nothing more is due
        assert fake.ticks == [4600.0]
        await host.stop()
        host.clock_moved()  # stopped: nothing runs

    asyncio.run(scenario())
