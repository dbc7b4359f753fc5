"""A Service Bus namespace: queues, topics, subscriptions and rules, and their messages.

Pure: the clock is passed in, durable changes go to an ``SbJournal``. Every operation
validates everything first and then changes state, so a refused operation changes nothing.
Names are compared case-insensitively and kept as given for display.

How messages are numbered and kept:

- Every queue, subscription and topic numbers what it accepts, gap-free from 1. ``send`` to a
  topic returns the topic's numbers; each subscription numbers its own copies and keeps the
  topic's number as ``enqueued_sequence_number`` (so does a forwarding destination: the
  number at the first entity). A dead-lettered message keeps its number in the dead-letter
  queue. A scheduled message gets a number when scheduled (to cancel it) and a new one when
  it becomes active.
- ``send`` returns 0 for a message that duplicate detection dropped (the send succeeds).
- ``Stored.delivery_count`` counts failed deliveries (abandon, lock or session lock expiry),
  as AMQP's ``delivery-count`` header does; a receiver sees 0 the first time. A message whose
  count reaches MaxDeliveryCount is dead-lettered (``MaxDeliveryCountExceeded``).
- ``receive``, ``peek`` and ``receive_deferred`` return snapshots: later changes to the
  message do not show in them.
- Dead-letter reasons are the application properties ``DeadLetterReason`` and
  ``DeadLetterErrorDescription`` of the dead-lettered message: the system reasons are
  ``MaxDeliveryCountExceeded``, ``TTLExpiredException``, ``MaxTransferHopCountExceeded``,
  ``Session ID is null.``, ``FilterEvaluationException`` and, for a message that could not be
  auto-forwarded, the code of the failure (``MessagingEntityNotFound``,
  ``MessagingEntityDisabled``, ``QuotaExceeded``).
- The journal is told of a message when it is added, removed, or its state, properties or
  delivery count change, and when it is handed out under a lock (``message_locked``; a
  release ends the mark with ``message_unlocked``). Lock tokens are not kept: after a restart
  every message is unlocked, and one that was locked when the namespace went down has lost
  its lock as if it had expired (delivery count + 1, dead-lettered at MaxDeliveryCount).

Timers: ``next_deadline`` says when ``tick`` has something to do (lock and session lock
expiry, scheduled activation, TTL expiry, duplicate history, AutoDeleteOnIdle); each store
keeps its deadlines in heaps, so a tick visits only what is due.

``Namespace`` is the public face: each method hands its call to the module that holds the
concern, all of them functions over one ``NamespaceState``:

| module | concern |
|---|---|
| `state.py` | the state, its entities, and the bookkeeping every concern shares |
| `management.py` | queues, topics, subscriptions and rules: create, update, delete, list |
| `delivery.py` | where a message goes: stored, fanned out, forwarded, dead-lettered, expired |
| `dataplane.py` | send, receive, browse, and settling a message under its lock |
| `sessions.py` | session locks and session state |
| `timers.py` | scheduled messages and ``tick`` |
| `restore.py` | rebuilding the namespace from its journal |
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from qmgr.core.clock import Clock
from qmgr.servicebus import dataplane, management, restore, sessions, timers
from qmgr.servicebus.dataplane import ReceiveMode
from qmgr.servicebus.entities import (
    QueueProperties,
    RuleProperties,
    SubscriptionProperties,
    TopicProperties,
)
from qmgr.servicebus.management import QueueInfo, RuleInfo, SubscriptionInfo, TopicInfo
from qmgr.servicebus.message import NullSbJournal, SbJournal, SbMessage, Stored
from qmgr.servicebus.sessions import SessionLock
from qmgr.servicebus.state import NamespaceLimits, NamespaceState, receive_source, send_target

__all__ = [
    "Namespace",
    "NamespaceLimits",
    "QueueInfo",
    "ReceiveMode",
    "RuleInfo",
    "SessionLock",
    "SubscriptionInfo",
    "TopicInfo",
]


class Namespace:
    """One Service Bus namespace (see the module docstring)."""

    def __init__(
        self,
        name: str = "sbemulatorns",
        *,
        clock: Clock,
        journal: SbJournal | None = None,
        limits: NamespaceLimits | None = None,
    ) -> None:
        self._state = NamespaceState(
            name, clock, journal or NullSbJournal(), limits or NamespaceLimits()
        )

    @property
    def name(self) -> str:
        return self._state.name

    @property
    def clock(self) -> Clock:
        return self._state.clock

    @property
    def journal(self) -> SbJournal:
        return self._state.journal

    @property
    def limits(self) -> NamespaceLimits:
        return self._state.limits

    # ================================================================== queues

    def create_queue(self, name: str, props: QueueProperties | None = None) -> QueueInfo:
        return management.create_queue(self._state, name, props)

    def update_queue(self, name: str, props: QueueProperties) -> QueueInfo:
        return management.update_queue(self._state, name, props)

    def delete_queue(self, name: str) -> None:
        management.delete_queue(self._state, name)

    def get_queue(self, name: str) -> QueueInfo:
        return management.get_queue(self._state, name)

    def list_queues(self) -> list[QueueInfo]:
        return management.list_queues(self._state)

    # ================================================================== topics

    def create_topic(self, name: str, props: TopicProperties | None = None) -> TopicInfo:
        return management.create_topic(self._state, name, props)

    def update_topic(self, name: str, props: TopicProperties) -> TopicInfo:
        return management.update_topic(self._state, name, props)

    def delete_topic(self, name: str) -> None:
        management.delete_topic(self._state, name)

    def get_topic(self, name: str) -> TopicInfo:
        return management.get_topic(self._state, name)

    def list_topics(self) -> list[TopicInfo]:
        return management.list_topics(self._state)

    # ================================================================== subscriptions

    def create_subscription(
        self,
        topic: str,
        name: str,
        props: SubscriptionProperties | None = None,
        rule: tuple[str, RuleProperties] | None = None,
    ) -> SubscriptionInfo:
        """A new subscription with ``rule`` (name, definition), or ``$Default`` (a true filter)."""
        return management.create_subscription(self._state, topic, name, props, rule)

    def update_subscription(
        self, topic: str, name: str, props: SubscriptionProperties
    ) -> SubscriptionInfo:
        return management.update_subscription(self._state, topic, name, props)

    def delete_subscription(self, topic: str, name: str) -> None:
        management.delete_subscription(self._state, topic, name)

    def get_subscription(self, topic: str, name: str) -> SubscriptionInfo:
        return management.get_subscription(self._state, topic, name)

    def list_subscriptions(self, topic: str) -> list[SubscriptionInfo]:
        return management.list_subscriptions(self._state, topic)

    # ================================================================== rules

    def create_rule(
        self, topic: str, subscription: str, name: str, rule: RuleProperties
    ) -> RuleInfo:
        return management.create_rule(self._state, topic, subscription, name, rule)

    def update_rule(
        self, topic: str, subscription: str, name: str, rule: RuleProperties
    ) -> RuleInfo:
        return management.update_rule(self._state, topic, subscription, name, rule)

    def delete_rule(self, topic: str, subscription: str, name: str) -> None:
        management.delete_rule(self._state, topic, subscription, name)

    def get_rule(self, topic: str, subscription: str, name: str) -> RuleInfo:
        return management.get_rule(self._state, topic, subscription, name)

    def list_rules(self, topic: str, subscription: str) -> list[RuleInfo]:
        return management.list_rules(self._state, topic, subscription)

    # ================================================================== send

    def check_sender(self, path: str) -> None:
        """Raise the error a send to ``path`` would meet (unknown entity, a subscription or
        dead-letter queue, sending disabled); a protocol edge checks a link with it."""
        send_target(self._state, path)

    def check_receiver(self, path: str) -> bool:
        """Raise the error a receive from ``path`` would meet; returns whether the entity
        requires sessions."""
        return receive_source(self._state, path)[1].sessions_enabled

    def send(self, path: str, messages: Sequence[SbMessage]) -> list[int]:
        """Send a batch (validated whole first: nothing is stored if one message is refused).
        Returns the sequence number each message got at ``path`` (0 for a duplicate that
        duplicate detection dropped)."""
        return dataplane.send(self._state, path, messages)

    def schedule(self, path: str, messages: Sequence[SbMessage], at: float) -> list[int]:
        """Schedule messages for ``at`` (epoch seconds); returns the sequence numbers to cancel
        them with. A time not in the future sends them now."""
        return timers.schedule(self._state, path, messages, at)

    def cancel_scheduled(self, path: str, sequence_numbers: Sequence[int]) -> None:
        timers.cancel_scheduled(self._state, path, sequence_numbers)

    # ================================================================== receive

    def receive(
        self,
        path: str,
        max_count: int,
        mode: ReceiveMode,
        *,
        session: str | None = None,
        holder: uuid.UUID | None = None,
    ) -> list[Stored]:
        """Up to ``max_count`` messages in sequence order (fewer, or none, if fewer are
        available). Peek-lock locks each under a new lock token for the entity's
        LockDuration; receive-and-delete removes them. ``holder``: see
        ``sessions.session_for``."""
        return dataplane.receive(self._state, path, max_count, mode, session, holder)

    def peek(
        self, path: str, from_sequence: int, max_count: int, session: str | None = None
    ) -> list[Stored]:
        """Messages from ``from_sequence`` on, in sequence order, whatever their state
        (active, deferred, scheduled; ``Stored.state``); nothing is locked."""
        return dataplane.peek(self._state, path, from_sequence, max_count, session)

    def receive_deferred(
        self,
        path: str,
        sequence_numbers: Sequence[int],
        mode: ReceiveMode,
        session: str | None = None,
        holder: uuid.UUID | None = None,
    ) -> list[Stored]:
        """Deferred messages by sequence number (all must exist and be deferred).
        ``holder``: see ``sessions.session_for``."""
        return dataplane.receive_deferred(
            self._state, path, sequence_numbers, mode, session, holder
        )

    # ================================================================== settlement

    def complete(self, path: str, lock_token: uuid.UUID) -> None:
        dataplane.complete(self._state, path, lock_token)

    def abandon(
        self, path: str, lock_token: uuid.UUID, properties: Mapping[str, Any] | None = None
    ) -> None:
        """Unlock now (delivery count + 1; dead-lettered past MaxDeliveryCount)."""
        dataplane.abandon(self._state, path, lock_token, properties)

    def release(self, path: str, lock_token: uuid.UUID) -> None:
        """A message handed back unseen: available again, delivery count unchanged."""
        dataplane.release(self._state, path, lock_token)

    def defer(
        self, path: str, lock_token: uuid.UUID, properties: Mapping[str, Any] | None = None
    ) -> None:
        """Set aside: only ``receive_deferred`` by sequence number gets it again."""
        dataplane.defer(self._state, path, lock_token, properties)

    def dead_letter(
        self,
        path: str,
        lock_token: uuid.UUID,
        reason: str | None = None,
        description: str | None = None,
        properties: Mapping[str, Any] | None = None,
    ) -> None:
        dataplane.dead_letter(self._state, path, lock_token, reason, description, properties)

    def renew_lock(self, path: str, lock_token: uuid.UUID) -> float:
        """Extend a message lock by the entity's LockDuration from now; returns the new
        locked-until time (for a session's message, the session lock is renewed)."""
        return dataplane.renew_lock(self._state, path, lock_token)

    # ================================================================== sessions

    def accept_session(self, path: str, session_id: str | None) -> SessionLock | None:
        """Lock a named session (it need not have messages yet), or the next session with
        available messages (``None`` when there is none now)."""
        return sessions.accept_session(self._state, path, session_id)

    def renew_session_lock(
        self, path: str, session_id: str, holder: uuid.UUID | None = None
    ) -> float:
        """Extends the session's lock; ``holder``: see ``sessions.session_for`` (a late
        renewal from a receiver that lost the session must not extend the lock of the one
        that took it)."""
        return sessions.renew_session_lock(self._state, path, session_id, holder)

    def release_session(self, path: str, session_id: str, holder: uuid.UUID | None = None) -> None:
        """Close a session: its unsettled messages are available again, their delivery count
        unchanged. Releasing a session that is not locked does nothing; nor does a receiver
        that closes after its lock ran out (``holder``, the lock it was granted, is not the
        session's lock): the session may be held by another receiver by then."""
        sessions.release_session(self._state, path, session_id, holder)

    def get_session_state(
        self, path: str, session_id: str, holder: uuid.UUID | None = None
    ) -> bytes | None:
        """The state of a session this receiver holds (``holder``: see
        ``sessions.session_for``)."""
        return sessions.get_session_state(self._state, path, session_id, holder)

    def set_session_state(
        self, path: str, session_id: str, state: bytes | None, holder: uuid.UUID | None = None
    ) -> None:
        """Set (``None`` clears) the state of a session this receiver holds (``holder``: see
        ``sessions.session_for``)."""
        sessions.set_session_state(self._state, path, session_id, state, holder)

    def list_sessions(self, path: str) -> list[str]:
        """The sessions that have messages or a state."""
        return sessions.list_sessions(self._state, path)

    # ================================================================== timers

    def next_deadline(self) -> float | None:
        """When ``tick`` has something to do next (None: nothing pending)."""
        return timers.next_deadline(self._state)

    def tick(self) -> None:
        """Expire locks and session locks, activate scheduled messages, expire messages past
        their time to live and forget old duplicate-detection history, as far as the clock
        has come. Only the stores with something due are visited."""
        timers.tick(self._state)

    # ================================================================== restore

    def restore_entity(self, path: str, data: dict[str, Any]) -> None:
        """An entity (queue, topic, subscription or rule) as ``entity_saved`` journaled it.
        Entities may come in any order; all of them must come before the messages, session
        states and values."""
        restore.restore_entity(self._state, path, data)

    def restore_message(self, entity: str, stored: Stored, *, lock_lost: bool = False) -> None:
        """A message as the journal saved it under ``entity`` (its lock is not restored).
        ``lock_lost``: it was still marked locked (``SbJournal.message_locked``): the restart
        took its lock, which ``finish_restore`` counts as an expired lock."""
        restore.restore_message(self._state, entity, stored, lock_lost)

    def restore_session_state(self, entity: str, session_id: str, state: bytes | None) -> None:
        restore.restore_session_state(self._state, entity, session_id, state)

    def restore_value(self, key_: str, value: str) -> None:
        """A value saved with ``value_saved`` (sequence counters, duplicate history)."""
        restore.restore_value(self._state, key_, value)

    def finish_restore(self) -> None:
        """Everything saved has been restored: the messages whose lock the restart took count
        a failed delivery, as an expired lock does (dead-lettered at MaxDeliveryCount); then
        set the timers. Every other message keeps its delivery count."""
        restore.finish_restore(self._state)
