"""Local queues: priority order then arrival order, expiry, browse, depth and size limits."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from qmgr.core.errors import MQError
from qmgr.core.journal import Journal
from qmgr.core.message import MAX_PRIORITY, Message

DEFAULT_MAXDEPTH = 5000
DEFAULT_MAXMSGL = 4_194_304
# MAXDEPTH of the model queues that managed subscription queues are made from
# (SYSTEM.DURABLE.MODEL.QUEUE, SYSTEM.NDURABLE.MODEL.QUEUE; ALTER QMODEL changes it): a
# subscriber that stops reading holds at most this many messages on its node.
DEFAULT_MODEL_MAXDEPTH = 100_000


@dataclass(frozen=True)
class QueueDef:
    """A QLOCAL definition as DEFINE QLOCAL spells it."""

    name: str
    descr: str = ""
    maxdepth: int = DEFAULT_MAXDEPTH
    maxmsgl: int = DEFAULT_MAXMSGL
    defpsist: bool = False
    defprty: int = 0
    get_enabled: bool = True
    put_enabled: bool = True
    bothresh: int = 0
    boqname: str = ""
    usage: str = "NORMAL"
    managed: bool = False  # created for a subscription (SYSTEM.MANAGED.*)
    temporary: bool = False  # gone at restart: its messages are never stored
    created: float = 0.0
    altered: float = 0.0
    extra: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> QueueDef:
        return cls(**data)

    def altered_with(self, **changes: Any) -> QueueDef:
        return replace(self, **changes)


class LocalQueue:
    """Messages of one queue. Persistent changes go to the journal."""

    def __init__(self, definition: QueueDef, journal: Journal) -> None:
        self.definition = definition
        self._journal = journal
        self._levels: list[deque[Message]] = [deque() for _ in range(MAX_PRIORITY + 1)]
        self.depth = 0
        self.uncommitted = 0  # messages got under syncpoint, not yet committed
        self.enqueued = 0
        self.dequeued = 0
        self.last_put = 0.0
        self.last_get = 0.0
        self.on_put: Callable[[str], None] | None = None

    @property
    def name(self) -> str:
        return self.definition.name

    def check_put(self, msg: Message, count: int = 1) -> None:
        """Raise the MQ error a put of ``msg`` would meet, without putting it."""
        d = self.definition
        if not d.put_enabled:
            raise MQError("MQRC_PUT_INHIBITED", f"queue {d.name} is PUT(DISABLED)")
        if msg.size > d.maxmsgl:
            raise MQError(
                "MQRC_MSG_TOO_BIG_FOR_Q",
                f"message of {msg.size} bytes exceeds MAXMSGL({d.maxmsgl}) of {d.name}",
            )
        if self.depth + self.uncommitted + count > d.maxdepth:
            raise MQError("MQRC_Q_FULL", f"queue {d.name} is full (MAXDEPTH {d.maxdepth})")

    def put(self, msg: Message, now: float, *, check: bool = True) -> None:
        if check:
            self.check_put(msg)
        self._levels[msg.priority].append(msg)
        self.depth += 1
        self.enqueued += 1
        self.last_put = now
        if msg.persistent and not self.definition.temporary:
            self._journal.message_added(self.name, msg)
        if self.on_put is not None:
            self.on_put(self.name)

    def fits(self, count: int, max_size: int) -> bool:
        """Whether ``count`` more messages, none larger than ``max_size`` bytes, can be put
        (``check_put`` would pass each of them)."""
        d = self.definition
        return (
            d.put_enabled
            and max_size <= d.maxmsgl
            and self.depth + self.uncommitted + count <= d.maxdepth
        )

    def put_run(self, msgs: list[Message], now: float) -> None:
        """Put ``msgs`` in order, each as ``put(msg, now, check=False)`` would (the caller
        has checked them: ``fits``); listeners are told once."""
        levels = self._levels
        journal = None if self.definition.temporary else self._journal
        name = self.name
        for msg in msgs:
            levels[msg.priority].append(msg)
            if msg.persistent and journal is not None:
                journal.message_added(name, msg)
        n = len(msgs)
        self.depth += n
        self.enqueued += n
        self.last_put = now
        if self.on_put is not None:
            self.on_put(self.name)

    def restore(self, msg: Message) -> None:
        """Load a stored message at start-up (no journal, no counters)."""
        self._levels[msg.priority].append(msg)
        self.depth += 1

    def drain(self) -> list[Message]:
        """Remove every message, highest priority first, without journaling or counting (the
        caller moves them elsewhere)."""
        out = [m for level in reversed(self._levels) for m in level]
        for level in self._levels:
            level.clear()
        self.depth = 0
        return out

    def return_front(self, msg: Message) -> None:
        """Put a backed-out message back where it was: first of its priority."""
        self._levels[msg.priority].appendleft(msg)
        self.depth += 1
        if self.on_put is not None:
            self.on_put(self.name)

    def check_get(self) -> None:
        if not self.definition.get_enabled:
            raise MQError("MQRC_GET_INHIBITED", f"queue {self.name} is GET(DISABLED)")

    def get(
        self,
        now: float,
        *,
        message_id: str = "",
        correl_id: bytes = b"",
        journal_removal: bool = True,
    ) -> Message | None:
        """Remove and return the next message (or the first matching one), dropping expired
        messages on the way; None if there is none."""
        self.check_get()
        for level in reversed(self._levels):
            if not level:
                continue
            if message_id or correl_id:
                found = self._take_matching(level, now, message_id, correl_id, journal_removal)
                if found is not None:
                    return found
                continue
            while level:
                msg = level.popleft()
                self.depth -= 1
                if msg.expired(now):
                    self.discard_stored(msg)
                    continue
                self._taken(msg, now, journal_removal)
                return msg
        return None

    def get_batch(
        self,
        now: float,
        limit: int,
        *,
        size: Callable[[Message], int] | None = None,
        max_bytes: int = 0,
        first_max_bytes: int = 0,
        journal_removal: bool = True,
    ) -> list[Message]:
        """Remove and return up to ``limit`` messages in delivery order. With ``max_bytes``,
        stop before a message that would take the batch past it, sizing messages with ``size``
        (their body length without it); the first message only has to fit ``first_max_bytes``
        (``max_bytes`` when 0). A message that does not fit is not taken."""
        self.check_get()
        out: list[Message] = []
        total = 0
        budget = first_max_bytes or max_bytes
        journal = journal_removal and not self.definition.temporary
        full = False  # the next message does not fit the budget
        for level in reversed(self._levels):
            while level and len(out) < limit:
                msg = level[0]
                expiry = msg.expiry
                if expiry is not None and now >= expiry:  # expired: dropped on the way
                    level.popleft()
                    self.depth -= 1
                    self.discard_stored(msg)
                    continue
                if budget:
                    n = len(msg.body) if size is None else size(msg)
                    if total + n > budget:
                        full = True
                        break
                    total += n
                    budget = max_bytes
                level.popleft()
                if journal and msg.persistent:
                    self._journal.message_removed(self.name, msg)
                out.append(msg)
            if full or len(out) >= limit:
                break
        taken = len(out)
        if taken:
            self.depth -= taken
            self.dequeued += taken
            self.last_get = now
        return out

    def peek(self, now: float, message_id: str = "", correl_id: bytes = b"") -> Message | None:
        """The message a get (matching ``message_id``/``correl_id`` when given) would return
        next, not removed."""
        for level in reversed(self._levels):
            for msg in level:
                if _matches(msg, now, message_id, correl_id):
                    return msg
        return None

    def _take_matching(
        self, level: deque[Message], now: float, message_id: str, correl_id: bytes, jr: bool
    ) -> Message | None:
        for i, msg in enumerate(level):
            if not _matches(msg, now, message_id, correl_id):
                continue
            del level[i]
            self.depth -= 1
            self._taken(msg, now, jr)
            return msg
        return None

    def _taken(self, msg: Message, now: float, journal_removal: bool) -> None:
        self.dequeued += 1
        self.last_get = now
        if journal_removal:
            self.discard_stored(msg)

    def discard_stored(self, msg: Message) -> None:
        """Forget the stored copy of a message that has left this queue."""
        if msg.persistent and not self.definition.temporary:
            self._journal.message_removed(self.name, msg)

    def browse(self, now: float, after: int = 0, limit: int = 1) -> list[Message]:
        """Messages in delivery order with ``sequence > after`` (not removed)."""
        out: list[Message] = []
        for msg in self.iter_messages():
            if msg.sequence > after and not msg.expired(now):
                out.append(msg)
                if len(out) >= limit:
                    break
        return out

    def iter_messages(self) -> Iterator[Message]:
        for level in reversed(self._levels):
            yield from level

    def clear(self) -> int:
        if self.uncommitted:
            raise MQError("MQRC_OBJECT_IN_USE", f"queue {self.name} has uncommitted messages")
        n = 0
        for level in self._levels:
            while level:
                self.discard_stored(level.popleft())
                n += 1
        self.depth = 0
        return n

    def oldest_put_time(self) -> float | None:
        times = [level[0].put_time for level in self._levels if level]
        return min(times) if times else None


def _matches(msg: Message, now: float, message_id: str, correl_id: bytes) -> bool:
    """Whether a get by ``message_id``/``correl_id`` (each when given) would take ``msg``."""
    if msg.expired(now):
        return False
    if message_id and msg.message_id != message_id:
        return False
    return not correl_id or msg.correl_id == correl_id
