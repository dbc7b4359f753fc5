"""The sequenced helper keeps a held session's lock renewed from a thread of its own, never
while the work is inside a call on the same receiver (the SDK's receivers are not safe to use
from two threads at once), and stops renewing when the session is forgotten, when its renewal
time is up, or after a renewal fails (reported, so the work's next call meets the lost lock)."""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from qmgr.client.sequenced import _LockKeeper, _Serialized


class _Recorder:
    """Says whether two calls on one receiver ever ran at once."""

    def __init__(self) -> None:
        self.inside = 0
        self.overlapped = False
        self.guard = threading.Lock()

    def run(self, seconds: float) -> None:
        with self.guard:
            self.inside += 1
            self.overlapped = self.overlapped or self.inside > 1
        time.sleep(seconds)
        with self.guard:
            self.inside -= 1


class _Session:
    def __init__(self, recorder: _Recorder, fail: bool = False) -> None:
        self.recorder = recorder
        self.session_id = "S1"
        self.locked_until_utc = datetime.now(UTC) + timedelta(seconds=1)
        self.renewals = 0
        self.fail = fail

    def renew_lock(self) -> None:
        self.recorder.run(0.02)
        if self.fail:
            raise RuntimeError("the lock is gone")
        self.renewals += 1
        self.locked_until_utc = datetime.now(UTC) + timedelta(seconds=1)


class _Receiver:
    def __init__(self, fail: bool = False) -> None:
        self.recorder = _Recorder()
        self.session = _Session(self.recorder, fail)

    def receive_messages(self, **_: Any) -> list[Any]:
        self.recorder.run(0.05)
        return []


def test_the_lock_is_renewed_only_between_the_works_calls() -> None:
    keeper = _LockKeeper(max_renewal=60)
    receiver = _Receiver()
    try:
        worked = _Serialized(receiver, keeper.keep(receiver))
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            worked.receive_messages(max_wait_time=0.05)
        assert worked.session.session_id == "S1"  # attributes pass through
    finally:
        keeper.close()
    assert receiver.session.renewals >= 3  # a one-second lock, renewed all along
    assert not receiver.recorder.overlapped


def test_renewal_stops_when_forgotten_or_when_its_time_is_up() -> None:
    keeper = _LockKeeper(max_renewal=0.8)
    up, forgotten = _Receiver(), _Receiver()
    try:
        keeper.keep(up)
        keeper.keep(forgotten)
        keeper.forget(forgotten)
        time.sleep(2.0)
    finally:
        keeper.close()
    assert forgotten.session.renewals == 0
    assert 1 <= up.session.renewals <= 2  # renewed while its 0.8 s lasted, then no more


def test_a_failed_renewal_is_reported_and_not_tried_again(caplog: pytest.LogCaptureFixture) -> None:
    keeper = _LockKeeper(max_renewal=60)
    receiver = _Receiver(fail=True)
    with caplog.at_level(logging.WARNING, logger="qmgr.client.sequenced"):
        try:
            keeper.keep(receiver)
            time.sleep(1.5)
        finally:
            keeper.close()
    assert caplog.text.count("its lock ran out before it was renewed") == 1
    assert "the lock is gone" in caplog.text
