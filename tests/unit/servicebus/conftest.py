"""Shared fixtures: a namespace on a manual clock with a journal that records everything."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from qmgr.core.clock import ManualClock
from qmgr.servicebus.entities import QueueProperties
from qmgr.servicebus.errors import Code, ServiceBusError
from qmgr.servicebus.message import SbMessage, Stored
from qmgr.servicebus.namespace import Namespace, ReceiveMode
from qmgr.servicebus.state import resolve
from qmgr.servicebus.store import MessageStore


def token(stored: Stored) -> uuid.UUID:
    """The lock token of a message received in peek-lock mode."""
    assert stored.lock_token is not None
    return stored.lock_token


def one_locked(
    ns: Namespace, message: SbMessage | None = None, props: QueueProperties | None = None
) -> Stored:
    """Queue "q" created (with ``props``), ``message`` (an empty one by default) sent to it,
    and received again under a peek lock."""
    ns.create_queue("q", props)
    ns.send("q", [message or SbMessage()])
    [m] = ns.receive("q", 1, ReceiveMode.PEEK_LOCK)
    return m


def store_of(ns: Namespace, path: str) -> MessageStore:
    """The message store behind ``path`` (a queue, subscription or dead-letter queue)."""
    return resolve(ns._state, path)[1]


def fails(code: Code, call: Callable[..., Any], *args: Any, **kw: Any) -> ServiceBusError:
    """Call and expect a ServiceBusError with ``code``."""
    with pytest.raises(ServiceBusError) as info:
        call(*args, **kw)
    assert info.value.code is code, info.value
    return info.value


class RecordingJournal:
    """Keeps the journal calls, and the state they describe (what a store would hold)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.entities: dict[str, dict[str, Any]] = {}
        self.messages: dict[str, dict[int, Stored]] = {}
        self.session_states: dict[tuple[str, str], bytes] = {}
        self.values: dict[str, str] = {}
        self.locked: set[tuple[str, int]] = set()  # (entity, seq) handed out under a lock

    def entity_saved(self, path: str, data: dict[str, Any]) -> None:
        self.calls.append(("entity_saved", path))
        self.entities[path.lower()] = (path, data)  # type: ignore[assignment]

    def entity_deleted(self, path: str) -> None:
        self.calls.append(("entity_deleted", path))
        low = path.lower()
        for k in [k for k in self.entities if k == low or k.startswith(low + "/")]:
            del self.entities[k]
        for k in [k for k in self.messages if k.lower() == low or k.lower().startswith(low + "/")]:
            del self.messages[k]
        self.locked = {
            (e, seq)
            for e, seq in self.locked
            if e.lower() != low and not e.lower().startswith(low + "/")
        }

    def message_added(self, entity: str, stored: Stored) -> None:
        self.calls.append(("message_added", entity, stored.sequence_number))
        self.locked.discard((entity, stored.sequence_number))
        self.messages.setdefault(entity, {})[stored.sequence_number] = stored.snapshot()

    def message_updated(self, entity: str, stored: Stored) -> None:
        self.calls.append(("message_updated", entity, stored.sequence_number))
        self.locked.discard((entity, stored.sequence_number))
        self.messages.setdefault(entity, {})[stored.sequence_number] = stored.snapshot()

    def message_removed(self, entity: str, sequence_number: int) -> None:
        self.calls.append(("message_removed", entity, sequence_number))
        self.locked.discard((entity, sequence_number))
        self.messages.get(entity, {}).pop(sequence_number, None)

    def message_settled(self, entity: str, sequence_number: int) -> None:
        self.calls.append(("message_settled", entity, sequence_number))
        self.messages.get(entity, {}).pop(sequence_number, None)
        self.locked.discard((entity, sequence_number))

    def message_locked(self, entity: str, sequence_number: int) -> None:
        self.calls.append(("message_locked", entity, sequence_number))
        assert sequence_number in self.messages.get(entity, {}), "a lock on an unsaved message"
        self.locked.add((entity, sequence_number))

    def message_unlocked(self, entity: str, sequence_number: int) -> None:
        self.calls.append(("message_unlocked", entity, sequence_number))
        self.locked.discard((entity, sequence_number))

    def session_state_saved(self, entity: str, session_id: str, state: bytes | None) -> None:
        self.calls.append(("session_state_saved", entity, session_id))
        if state is None:
            self.session_states.pop((entity, session_id), None)
        else:
            self.session_states[(entity, session_id)] = state

    def value_saved(self, key: str, value: str) -> None:
        self.calls.append(("value_saved", key))
        if value == "":
            self.values.pop(key, None)
        else:
            self.values[key] = value


def replay(journal: RecordingJournal, ns: Namespace) -> Namespace:
    """Feed ``ns`` what a store would load after a restart (the messages still marked locked
    lost their lock), then finish the restore."""
    for path, data in journal.entities.values():  # type: ignore[misc]
        ns.restore_entity(path, data)
    for entity, messages in journal.messages.items():
        for stored in messages.values():
            lost = (entity, stored.sequence_number) in journal.locked
            ns.restore_message(entity, stored.snapshot(), lock_lost=lost)
    for (entity, session_id), state in journal.session_states.items():
        ns.restore_session_state(entity, session_id, state)
    for key, value in journal.values.items():
        ns.restore_value(key, value)
    ns.finish_restore()
    return ns


def restarted(journal: RecordingJournal, clock: ManualClock) -> tuple[Namespace, RecordingJournal]:
    """A namespace restored from what ``journal`` holds, journaling to a copy of it (so it
    can be restarted again)."""
    fresh = RecordingJournal()
    fresh.entities = dict(journal.entities)
    fresh.messages = {k: dict(v) for k, v in journal.messages.items()}
    fresh.session_states = dict(journal.session_states)
    fresh.values = dict(journal.values)
    fresh.locked = set(journal.locked)
    return replay(journal, Namespace(clock=clock, journal=fresh)), fresh


@pytest.fixture
def journal() -> RecordingJournal:
    return RecordingJournal()


@pytest.fixture
def ns(clock: ManualClock, journal: RecordingJournal) -> Namespace:
    return Namespace(clock=clock, journal=journal)
