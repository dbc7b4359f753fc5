"""The launcher's one poll loop: what it returns, when it gives up and what it says then."""

from __future__ import annotations

import pytest

from qmgr.launcher.errors import WaitTimeout
from qmgr.launcher.poll import wait_for


def test_returns_the_first_true_answer() -> None:
    answers = iter([0, None, "", "ready"])
    assert wait_for(lambda: next(answers), 5, 0.001) == "ready"


def test_an_interval_of_zero_looks_again_at_once() -> None:
    looks: list[int] = []

    def seen() -> bool:
        looks.append(1)
        return len(looks) == 50

    assert wait_for(seen, 5, 0) is True
    assert len(looks) == 50


@pytest.mark.parametrize(("timeout", "interval"), [(-1, 0.1), (1, -0.1)])
def test_a_negative_timeout_or_interval_is_refused(timeout: float, interval: float) -> None:
    with pytest.raises(ValueError, match="wait_for needs"):
        wait_for(lambda: True, timeout, interval)


def test_it_gives_up_naming_what_and_the_last_answer() -> None:
    with pytest.raises(WaitTimeout, match=r"waiting for the depth \(last: 0\)"):
        wait_for(lambda: 0, 0.05, 0.01, what="the depth")


def test_an_error_of_a_retry_type_counts_as_not_yet_and_is_named() -> None:
    def refused() -> bool:
        raise ConnectionRefusedError("node restarting")

    with pytest.raises(WaitTimeout, match="node restarting"):
        wait_for(refused, 0.05, 0.01, retry=ConnectionError)


def test_any_other_error_goes_straight_to_the_caller() -> None:
    def broken() -> bool:
        raise KeyError("bad")

    with pytest.raises(KeyError):
        wait_for(broken, 5, 0.01, retry=ConnectionError)
