"""Fixtures the unit tests of several pure packages share."""

from __future__ import annotations

import pytest

from qmgr.core.clock import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    """The time a pure module under test sees: it moves only when the test moves it."""
    return ManualClock()
