from __future__ import annotations

from typing import Any

import pytest

from qmgr.core.clock import ManualClock
from qmgr.core.message import Message
from qmgr.core.qmgr import QueueManager


class RecordingJournal:
    """Keeps the durable changes the domain reports, as a store would."""

    def __init__(self) -> None:
        self.messages: dict[int, tuple[str, Message]] = {}
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.retained: dict[str, Message] = {}

    def message_added(self, queue: str, msg: Message) -> None:
        self.messages[msg.sequence] = (queue, msg)

    def message_removed(self, queue: str, msg: Message) -> None:
        self.messages.pop(msg.sequence, None)

    def message_updated(self, queue: str, msg: Message) -> None:
        self.messages[msg.sequence] = (queue, msg)

    def object_saved(self, kind: str, name: str, data: dict[str, Any]) -> None:
        self.objects[(kind, name)] = data

    def object_deleted(self, kind: str, name: str) -> None:
        self.objects.pop((kind, name), None)

    def retained_saved(self, topic: str, msg: Message) -> None:
        self.retained[topic] = msg

    def retained_deleted(self, topic: str) -> None:
        self.retained.pop(topic, None)


@pytest.fixture
def journal() -> RecordingJournal:
    return RecordingJournal()


@pytest.fixture
def qm(clock: ManualClock, journal: RecordingJournal) -> QueueManager:
    return QueueManager("QM1", clock, journal)


def msg(body: bytes | str = b"x", **kw: Any) -> Message:
    return Message("", body.encode() if isinstance(body, str) else body, **kw)
