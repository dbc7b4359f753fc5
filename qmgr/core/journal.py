"""What the domain tells the store: the durable changes it makes, in order.

The domain calls a journal for persistent messages and for definitions only; the store
implements it by collecting the changes and committing them in groups.
"""

from __future__ import annotations

from typing import Any, Protocol

from qmgr.core.message import Message


class Journal(Protocol):
    def message_added(self, queue: str, msg: Message) -> None: ...
    def message_removed(self, queue: str, msg: Message) -> None: ...
    def message_updated(self, queue: str, msg: Message) -> None: ...
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

    def object_saved(self, kind: str, name: str, data: dict[str, Any]) -> None:
        pass

    def object_deleted(self, kind: str, name: str) -> None:
        pass

    def retained_saved(self, topic: str, msg: Message) -> None:
        pass

    def retained_deleted(self, topic: str) -> None:
        pass
