"""Messages as the namespace holds them, and what it tells its journal.

``SbMessage`` is what an application sends: body, the settable system properties, application
properties. ``Stored`` adds what the broker assigns: sequence number, enqueued time, state,
lock, delivery count, expiry, forwarding hops. The body is opaque to the namespace (``body``
bytes, with ``body_type`` naming how the protocol adapter encoded it) and so is ``extra`` (what
the adapter must keep, such as message annotations the namespace does not use).

Names follow the .NET ``ServiceBusReceivedMessage``; times are float seconds since the epoch,
``math.inf`` meaning never.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol


class MessageState(Enum):
    ACTIVE = 0
    DEFERRED = 1
    SCHEDULED = 2


@dataclass(slots=True)
class SbMessage:
    body: bytes = b""
    body_type: str = "data"
    message_id: str | None = None
    correlation_id: str | None = None
    session_id: str | None = None
    reply_to: str | None = None
    reply_to_session_id: str | None = None
    to: str | None = None
    subject: str | None = None  # Label
    content_type: str | None = None
    partition_key: str | None = None
    time_to_live: float | None = None  # seconds; None: the entity's DefaultMessageTimeToLive
    scheduled_enqueue_time: float | None = None  # epoch seconds
    properties: dict[str, Any] = field(default_factory=dict)  # application properties
    extra: dict[str, Any] = field(default_factory=dict)  # opaque to the namespace

    def copy(self) -> SbMessage:
        """A copy of its own (the property maps too, not what they hold)."""
        return SbMessage(
            self.body,
            self.body_type,
            self.message_id,
            self.correlation_id,
            self.session_id,
            self.reply_to,
            self.reply_to_session_id,
            self.to,
            self.subject,
            self.content_type,
            self.partition_key,
            self.time_to_live,
            self.scheduled_enqueue_time,
            dict(self.properties),
            dict(self.extra) if self.extra else {},
        )

    @property
    def size(self) -> int:
        """Approximate size counted against MaxMessageSizeInKilobytes and MaxSizeInMegabytes."""
        props = sum(len(str(k)) + len(str(v)) for k, v in self.properties.items())
        return len(self.body) + props + 64


@dataclass(slots=True)
class Stored:
    """A message in one entity (a queue, a subscription, or a dead-letter sub-queue)."""

    message: SbMessage
    sequence_number: int
    enqueued_time: float
    expires_at: float = math.inf
    state: MessageState = MessageState.ACTIVE
    delivery_count: int = 0
    lock_token: uuid.UUID | None = None
    locked_until: float = 0.0
    enqueued_sequence_number: int = 0  # the sequence number it had where it was first sent
    hop_count: int = 0  # auto-forwarding hops so far
    dead_letter_source: str | None = None
    scheduled_enqueue_time: float | None = None
    size: int = 0  # SbMessage.size when it was stored (counted against the entity's size)
    session_lock: bool = False  # locked as part of its session (the session lock governs it)

    def snapshot(self) -> Stored:
        """A copy of the broker state as it is now (the message itself is shared: the
        namespace never changes a message in place)."""
        return Stored(
            self.message,
            self.sequence_number,
            self.enqueued_time,
            self.expires_at,
            self.state,
            self.delivery_count,
            self.lock_token,
            self.locked_until,
            self.enqueued_sequence_number,
            self.hop_count,
            self.dead_letter_source,
            self.scheduled_enqueue_time,
            self.size,
            self.session_lock,
        )


class SbJournal(Protocol):
    """The durable changes the namespace makes, in order; the node's store collects them and
    commits them in groups (an operation is acknowledged once its changes are committed).

    ``entity`` is the path of the queue, subscription or ``.../$DeadLetterQueue`` holding the
    message (a topic's path for its scheduled messages, which fan out when due).

    - ``entity_saved(path, data)``: ``data["kind"]`` is ``queue``, ``topic``, ``subscription``
      or ``rule`` (rules have the path ``<topic>/Subscriptions/<sub>/Rules/<rule>``); saving
      an existing path replaces it. Give the same ``(path, data)`` back to
      ``Namespace.restore_entity``.
    - ``entity_deleted(path)`` removes the entity **and everything under the path**: a
      topic's subscriptions and rules, a subscription's rules, and the messages and session
      states of the entity and its dead-letter sub-queue.
    - ``value_saved(key, value)``: small namespace values (sequence counters, duplicate
      detection history); an empty ``value`` deletes the key.
    - ``message_settled(entity, sequence_number)``: a peek-locked message completed; removed
      like ``message_removed``, but a store may make it durable against a crash of the process
      only, and against a power loss with its next full flush (losing a completion can only
      deliver the message again, which peek-lock's at-least-once delivery allows; losing a
      removal in receive-and-delete mode would deliver a message twice, so that one is not
      relaxed).
    - ``message_locked(entity, sequence_number)``: the message was handed out under a lock
      (peek-lock, a session's or its own); ``message_unlocked`` says its lock ended with no
      other change (released unseen). Any other change to the message (``message_updated``,
      removal) ends the mark too. A message still marked when the namespace is restored lost
      its lock to the restart: ``Namespace.restore_message(..., lock_lost=True)`` counts it as
      an expired lock. A store may keep these marks as it keeps completions (losing one to a
      power loss only leaves that delivery uncounted).
    """

    def entity_saved(self, path: str, data: dict[str, Any]) -> None: ...
    def entity_deleted(self, path: str) -> None: ...
    def message_added(self, entity: str, stored: Stored) -> None: ...
    def message_updated(self, entity: str, stored: Stored) -> None: ...
    def message_removed(self, entity: str, sequence_number: int) -> None: ...
    def message_settled(self, entity: str, sequence_number: int) -> None: ...
    def message_locked(self, entity: str, sequence_number: int) -> None: ...
    def message_unlocked(self, entity: str, sequence_number: int) -> None: ...
    def session_state_saved(self, entity: str, session_id: str, state: bytes | None) -> None: ...
    def value_saved(self, key: str, value: str) -> None: ...


class NullSbJournal:
    """A journal that keeps nothing (a namespace without a data directory)."""

    def entity_saved(self, path: str, data: dict[str, Any]) -> None:
        pass

    def entity_deleted(self, path: str) -> None:
        pass

    def message_added(self, entity: str, stored: Stored) -> None:
        pass

    def message_updated(self, entity: str, stored: Stored) -> None:
        pass

    def message_removed(self, entity: str, sequence_number: int) -> None:
        pass

    def message_settled(self, entity: str, sequence_number: int) -> None:
        pass

    def message_locked(self, entity: str, sequence_number: int) -> None:
        pass

    def message_unlocked(self, entity: str, sequence_number: int) -> None:
        pass

    def session_state_saved(self, entity: str, session_id: str, state: bytes | None) -> None:
        pass

    def value_saved(self, key: str, value: str) -> None:
        pass
