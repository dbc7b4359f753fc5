"""What the domain tells the store: the durable changes it makes, in order.

The domain calls a journal for persistent messages and for definitions only; the store
implements it by collecting the changes and committing them in groups.

Besides messages, a journal keeps *copies*: messages stored for their writer in a form the
store does not read (a transmission-queue copy of a publication holds the message as its
channel carries it). The store keeps the body as given with a topic and the writer's routing
text, and hands the row back as a ``StoredCopy`` after a restart; the writer decodes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from qmgr.core.message import Message


@dataclass(frozen=True, slots=True)
class StoredCopy:
    """A copy as stored: its row's sequence, the message id, the body as the writer gave it,
    the topic and the writer's routing text."""

    sequence: int
    message_id: str
    body: bytes
    topic: str
    routing: str


class Journal(Protocol):
    def message_added(self, queue: str, msg: Message) -> None: ...
    def message_removed(self, queue: str, msg: Message) -> None: ...
    def message_updated(self, queue: str, msg: Message) -> None: ...
    def copy_added(
        self, queue: str, sequence: int, message_id: str, body: bytes, topic: str, routing: str
    ) -> None: ...
    def copy_removed(self, queue: str, sequence: int) -> None: ...
    def object_saved(self, kind: str, name: str, data: dict[str, Any]) -> None: ...
    def object_deleted(self, kind: str, name: str) -> None: ...
    def retained_saved(self, topic: str, msg: Message) -> None: ...
    def retained_deleted(self, topic: str) -> None: ...


class NullJournal:
    """A journal that keeps nothing (a queue manager without a data directory)."""

    def message_added(self, queue: str, msg: Message) -> None:
        pass

    def message_removed(self, queue: str, msg: Message) -> None:
        pass

    def message_updated(self, queue: str, msg: Message) -> None:
        pass

    def copy_added(
        self, queue: str, sequence: int, message_id: str, body: bytes, topic: str, routing: str
    ) -> None:
        pass

    def copy_removed(self, queue: str, sequence: int) -> None:
        pass

    def object_saved(self, kind: str, name: str, data: dict[str, Any]) -> None:
        pass

    def object_deleted(self, kind: str, name: str) -> None:
        pass

    def retained_saved(self, topic: str, msg: Message) -> None:
        pass

    def retained_deleted(self, topic: str) -> None:
        pass
