"""Moving a test node's clock forward instead of sleeping until a lock, a time to live, a
scheduled time or a token expires on the node.

A module that uses :func:`advance_clock` takes :func:`movable_clock` as an autouse fixture
(``movable_clock = clock.movable_clock``): the nodes its tests start read their clock's offset
from a file (``QMGR_TEST_CLOCK_FILE``) whenever they get SIGUSR2. Only the node's clock moves:
what the client times itself (the SDK's lock renewal, a receive's wait) still needs real time.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from qmgr.launcher.errors import WaitTimeout
from qmgr.launcher.poll import wait_for
from qmgr.node.server import CLOCK_FILE_ENV, replace_file
from tests.integration.conftest import NodeProcess


@pytest.fixture(autouse=True)
def movable_clock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Nodes started in the test (after this fixture) can have their clock moved."""
    path = tmp_path / "clock"
    monkeypatch.setenv(CLOCK_FILE_ENV, str(path))
    yield path


def advance_clock(node: NodeProcess, seconds: float, timeout: float = 10.0) -> float:
    """Move ``node``'s clock ``seconds`` forward and return once the node has done what that
    made due (expired locks and messages, activated scheduled ones, detached links whose
    token expired); the node's total offset from the wall clock."""
    if seconds < 0:
        raise ValueError(f"a node's clock only moves forward, not by {seconds} s")
    setting = (node.env or {}).get(CLOCK_FILE_ENV)
    if not setting:
        raise AssertionError(
            f"node {node.name} was not started with {CLOCK_FILE_ENV}: its clock cannot be "
            "moved (use the movable_clock fixture before the node starts)"
        )
    if node.proc is None or node.proc.poll() is not None:
        raise AssertionError(f"node {node.name} is not running: its clock cannot be moved")
    path = Path(setting)
    ack = path.with_name(path.name + ".ack")
    before = _acked(ack) if ack.exists() else 0.0
    target = before + seconds
    ack.unlink(missing_ok=True)
    replace_file(path, repr(target))
    node.proc.send_signal(signal.SIGUSR2)
    try:
        wait_for(lambda: ack.exists(), timeout, interval=0.01, what=f"{ack} to be written")
    except WaitTimeout as exc:
        raise AssertionError(
            f"node {node.name} did not acknowledge moving its clock to +{target} s: {exc} "
            f"(its log: {node.log})"
        ) from None
    applied = _acked(ack)
    if applied != target:
        raise AssertionError(f"node {node.name} moved its clock to +{applied} s, not +{target} s")
    return applied


def _acked(ack: Path) -> float:
    text = ack.read_text(encoding="utf-8")
    if text.startswith("error:"):
        raise AssertionError(f"the node could not move its clock: {text}")
    return float(text)
