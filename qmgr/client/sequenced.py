"""Sequenced delivery on top of Microsoft's azure-servicebus SDK: process the messages of a
session in the order of a sequence-number property, whatever order they arrive in.

Service Bus keeps the order of a session as it was *sent*; when publishers send out of order
(retries, several paths, a bridge from a topic-host cluster), the consumer has to restore it.
This is the consumer pattern of "Ordering Messages in Azure Service Bus": messages travel in
sessions; an early arrival is deferred and its Service Bus sequence number is kept in the
session state; when its turn comes it is fetched by that number; what fails is dead-lettered
and the sequence moves on; progress lives in the session state, so another consumer (or this
one after a crash) resumes where the last one stopped.

    from azure.servicebus import ServiceBusClient
    from qmgr.client.sequenced import drain_sessions

    with ServiceBusClient.from_connection_string(conn) as client:
        stats = drain_sessions(client, handle, topic_name="t3", subscription_name="ordered",
                               sequence_property="SequenceNumber")

``handle(message)`` sees the messages of each session in sequence order (1, 2, 3...). It is
called at least once per message: a consumer killed after ``handle`` returned and before the
message was settled calls it again for that message after a restart (never for an earlier one).

:class:`SequenceState` is the bookkeeping alone (pure, no I/O); :class:`SequencedSession`
drives it with a session receiver; :func:`create_sequenced_topology` builds the publishing side
of the pattern with the administration client: a forwarding subscription with the SqlFilter
``EXISTS(user.SessionName) AND EXISTS(user.TransactionId)`` and an action setting
``sys.SessionId`` into a topic whose subscription requires sessions.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum
from typing import Any

from azure.servicebus.exceptions import MessageNotFoundError

DEFAULT_PROPERTY = "SequenceNumber"
LAST_PROPERTY = "SequenceLast"
# $management calls one session receiver makes before it hands its session back to be accepted
# again on a new connection: azure-servicebus (7.15) never restores its session's outgoing
# window, so a connection that has sent 65,536 transfers (each management call is one) fails
# its next flow frame ("Value supplied for unsigned int invalid"); the margin leaves room for
# the lock renewer's calls
MANAGEMENT_CALLS_PER_CONNECTION = 50_000


class Step(Enum):
    """What to do with a message that arrived, given the session's progress."""

    PROCESS = "process"  # it is the next in sequence
    DEFER = "defer"  # it is early: defer it until its turn
    STALE = "stale"  # its number was already processed: a duplicate, complete it
    INVALID = "invalid"  # no usable sequence number: dead-letter it


@dataclass
class SequenceState:
    """A session's progress: the next number expected, the early arrivals deferred (their
    sequence property → Service Bus sequence number), the numbers that failed, and whether the
    last message of the sequence was processed. Kept as JSON in the session state.
    ``unconfirmed``: deferrals recorded but not yet known to have happened (a consumer may
    die between recording and deferring)."""

    next: int = 1
    deferred: dict[int, int] = field(default_factory=dict)
    unconfirmed: set[int] = field(default_factory=set)
    failed: list[int] = field(default_factory=list)
    processed: int = 0
    closed: bool = False

    @classmethod
    def from_bytes(cls, data: bytes | str | None, first: int = 1) -> SequenceState:
        """The state stored in a session (None or empty: a new sequence starting at ``first``).
        Raises ValueError when the stored state is not this helper's."""
        if not data:
            return cls(next=first)
        try:
            raw = json.loads(data)
            return cls(
                next=int(raw["next"]),
                deferred={int(k): int(v) for k, v in raw.get("deferred", {}).items()},
                unconfirmed={int(n) for n in raw.get("unconfirmed", [])},
                failed=[int(n) for n in raw.get("failed", [])],
                processed=int(raw.get("processed", 0)),
                closed=bool(raw.get("closed", False)),
            )
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"the session state is not a sequence state: {exc}") from None

    def to_bytes(self) -> bytes:
        return json.dumps(
            {
                "next": self.next,
                "deferred": {str(k): v for k, v in sorted(self.deferred.items())},
                "unconfirmed": sorted(self.unconfirmed),
                "failed": self.failed,
                "processed": self.processed,
                "closed": self.closed,
            },
            separators=(",", ":"),
        ).encode()

    def classify(self, number: int | None) -> Step:
        if number is None:
            return Step.INVALID
        if number < self.next:
            return Step.STALE
        if number == self.next:
            return Step.PROCESS
        return Step.DEFER

    def remember_deferred(self, number: int, broker_sequence: int) -> None:
        self.deferred[number] = broker_sequence
        self.unconfirmed.add(number)

    def confirm_deferred(self, number: int) -> None:
        """The deferral of ``number`` happened: from now on, a deferred message that cannot
        be found was settled (by a consumer that died before recording it)."""
        self.unconfirmed.discard(number)

    def done(self, number: int, *, ok: bool, last: bool = False) -> None:
        """``number`` (the next one) was processed (``ok``) or dead-lettered."""
        if number != self.next:
            raise ValueError(f"{number} is not the next in sequence ({self.next})")
        self.deferred.pop(number, None)
        self.unconfirmed.discard(number)
        if ok:
            self.processed += 1
        else:
            self.failed.append(number)
        self.next += 1
        if last:
            self.closed = True

    def next_deferred(self) -> int | None:
        """The Service Bus sequence number of the deferred message whose turn it is, if any."""
        return self.deferred.get(self.next)


def _property(properties: dict[Any, Any] | None, name: str) -> Any:
    """Application property ``name`` as the SDK gives it (keys and strings may be bytes)."""
    if not properties:
        return None
    value = properties.get(name, properties.get(name.encode()))
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def sequence_of(properties: dict[Any, Any] | None, name: str) -> int | None:
    """The message's sequence number from application property ``name`` (None if missing or
    not an integer)."""
    value = _property(properties, name)
    if isinstance(value, bool):
        return None
    try:
        return int(value) if isinstance(value, int | str) else None
    except ValueError:
        return None


def _is_last(properties: dict[Any, Any] | None, name: str | None) -> bool:
    value = _property(properties, name) if name else None
    return value is True or (isinstance(value, str) and value.lower() == "true")


@dataclass
class SessionStats:
    """What one session's run did."""

    session_id: str
    processed: int = 0
    deferred: int = 0
    stale: int = 0
    dead_lettered: int = 0
    waiting: list[int] = field(default_factory=list)  # deferred numbers still before a gap
    closed: bool = False
    handed_back: bool = False  # left with messages to come, for a fresh connection


class SequencedSession:
    """Processes one session's messages in sequence order with a session receiver
    (``client.get_queue_receiver(..., session_id=...)`` or a next-available one, peek-lock).

    A consumer that dies anywhere leaves a state the next one continues from: an early
    message is recorded, deferred, then confirmed (recorded but not found later: it was never
    deferred and arrives again); a received message is processed, ``next`` advanced, then it is
    completed (its redelivery after a crash is stale and only completed); a message fetched
    from deferral is processed and completed before ``next`` advances (a deferred message whose
    lock lapses stays deferred, so the state must keep it until it is settled; a confirmed one
    that cannot be found any more was settled)."""

    def __init__(
        self,
        receiver: Any,
        handler: Callable[[Any], None],
        *,
        sequence_property: str = DEFAULT_PROPERTY,
        last_property: str | None = LAST_PROPERTY,
        first: int = 1,
        max_management_calls: int = MANAGEMENT_CALLS_PER_CONNECTION,
    ) -> None:
        self._receiver = receiver
        self._session = receiver.session
        self._calls = 0  # $management calls made on the receiver's connection
        self._max_calls = max_management_calls
        self._handler = handler
        self._property = sequence_property
        self._last = last_property
        self._first = first
        self.state = SequenceState(next=first)
        self.stats = SessionStats(session_id="")

    def run(
        self,
        max_wait_time: float = 5.0,
        max_message_count: int = 100,
        quiet_time: float | None = None,
    ) -> SessionStats:
        """Receives until nothing arrives for ``max_wait_time`` seconds (``quiet_time`` after
        the first receive, when given) or the sequence's last message is processed; returns
        what it did. Deferred messages are fetched as soon as their turn comes. After
        ``max_management_calls`` it stops between two batches with ``handed_back`` set, so
        that the session is taken up again on a new connection (the state says where)."""
        # the first receive settles which session a next-available receiver got (and raises
        # OperationTimeoutError when none is available), so the state is read after it
        batch = self._receiver.receive_messages(
            max_message_count=max_message_count, max_wait_time=max_wait_time
        )
        self.state = SequenceState.from_bytes(self._session.get_state(), self._first)
        self._calls += 1
        self.stats.session_id = str(self._session.session_id)
        self._catch_up()
        while batch and not self.state.closed:
            for message in batch:
                self.accept(message)
            if self._calls >= self._max_calls:
                self.stats.handed_back = True
                break
            batch = self._receiver.receive_messages(
                max_message_count=max_message_count,
                max_wait_time=max_wait_time if quiet_time is None else quiet_time,
            )
        self.stats.waiting = sorted(self.state.deferred)
        self.stats.closed = self.state.closed
        return self.stats

    def accept(self, message: Any) -> None:
        """Handles one received message according to the state, then what it unblocks."""
        props = message.application_properties
        number = sequence_of(props, self._property)
        step = self.state.classify(number)
        if step is Step.INVALID:
            self._receiver.dead_letter_message(
                message,
                reason="SequenceNumberMissing",
                error_description=f"no integer application property {self._property!r}",
            )
            self.stats.dead_lettered += 1
        elif (
            step is Step.STALE
            or self.state.closed
            or self.state.deferred.get(number or 0, message.sequence_number)
            != message.sequence_number  # a second copy of a number already deferred
        ):
            self._receiver.complete_message(message)
            self.stats.stale += 1
        elif step is Step.DEFER:
            assert number is not None
            self.state.remember_deferred(number, message.sequence_number)
            self._save()
            self._receiver.defer_message(message)
            self.state.confirm_deferred(number)
            self._save()
            self.stats.deferred += 1
        else:
            assert number is not None
            self._process(message, number)
            self._catch_up()

    def _process(self, message: Any, number: int, *, deferred: bool = False) -> None:
        """Hand ``message`` to the handler, then settle it and advance the state: in that
        order for a message fetched from deferral (``deferred``), state first otherwise."""
        try:
            self._handler(message)
        except Exception as exc:  # noqa: BLE001 - whatever the application raised goes to the DLQ
            why = repr(exc)[:1024]
            self._settle(
                lambda: self._receiver.dead_letter_message(
                    message, reason="ProcessingFailed", error_description=why
                ),
                lambda: self.state.done(number, ok=False),
                deferred,
            )
            self.stats.dead_lettered += 1
            return
        last = _is_last(message.application_properties, self._last)
        self._settle(
            lambda: self._receiver.complete_message(message),
            lambda: self.state.done(number, ok=True, last=last),
            deferred,
        )
        self.stats.processed += 1

    def _settle(
        self, settle: Callable[[], None], advance: Callable[[], None], deferred: bool
    ) -> None:
        if deferred:
            settle()
        advance()
        self._save()
        if not deferred:
            settle()

    def _catch_up(self) -> None:
        """Fetches and processes deferred messages while the next one is among them."""
        while not self.state.closed:
            broker_sequence = self.state.next_deferred()
            if broker_sequence is None:
                return
            number = self.state.next
            try:
                self._calls += 1
                found = self._receiver.receive_deferred_messages([broker_sequence])
            except MessageNotFoundError:
                found = []
            if found:
                self._process(found[0], number, deferred=True)
            elif number in self.state.unconfirmed:  # recorded by a consumer that died before
                # deferring it: the message is still active and arrives again
                self.state.deferred.pop(number, None)
                self.state.unconfirmed.discard(number)
                self._save()
                return
            else:  # settled by a consumer that died before recording it
                self.state.done(number, ok=True)
                self._save()

    def _save(self) -> None:
        self._calls += 1
        self._session.set_state(self.state.to_bytes())


@dataclass
class DrainStats:
    sessions: list[SessionStats] = field(default_factory=list)

    @property
    def processed(self) -> int:
        return sum(s.processed for s in self.sessions)

    @property
    def dead_lettered(self) -> int:
        return sum(s.dead_lettered for s in self.sessions)

    @property
    def waiting(self) -> int:
        return sum(len(s.waiting) for s in self.sessions)


SESSION_QUIET = 0.5  # seconds without a new message before a drain leaves a session


def drain_sessions(
    client: Any,
    handler: Callable[[Any], None],
    *,
    queue_name: str | None = None,
    topic_name: str | None = None,
    subscription_name: str | None = None,
    sequence_property: str = DEFAULT_PROPERTY,
    last_property: str | None = LAST_PROPERTY,
    idle_timeout: float = 2.0,
    max_sessions: int | None = None,
    max_lock_renewal: float = 600.0,
    session_quiet: float = SESSION_QUIET,
    max_management_calls: int = MANAGEMENT_CALLS_PER_CONNECTION,
) -> DrainStats:
    """Accepts the next available session of a queue or subscription again and again and runs
    :class:`SequencedSession` on each, until no session has messages for ``idle_timeout``
    seconds (or ``max_sessions`` were run). ``client`` is an ``azure.servicebus
    .ServiceBusClient``. A session keeps its state, so messages still deferred behind a gap are
    picked up by a later run. A session is left once nothing has arrived in it for
    ``session_quiet`` seconds (at most ``idle_timeout``): what comes later makes it available
    again. Each session's lock is renewed (the SDK's ``AutoLockRenewer``)
    for up to ``max_lock_renewal`` seconds, so a slow handler does not lose it. A session
    receiver that made ``max_management_calls`` hands its session back and the session is
    accepted again on a new connection (see ``MANAGEMENT_CALLS_PER_CONNECTION``)."""
    from azure.servicebus import NEXT_AVAILABLE_SESSION, AutoLockRenewer
    from azure.servicebus.exceptions import OperationTimeoutError, SessionCannotBeLockedError

    if (queue_name is None) == (topic_name is None):
        raise ValueError("give queue_name, or topic_name and subscription_name")
    if topic_name is not None and subscription_name is None:
        raise ValueError("topic_name needs subscription_name")
    stats = DrainStats()
    seen: set[str] = set()
    with AutoLockRenewer(max_lock_renewal_duration=max_lock_renewal) as renewer:
        while max_sessions is None or len(stats.sessions) < max_sessions:
            entity = (
                {"queue_name": queue_name}
                if queue_name is not None
                else {"topic_name": topic_name, "subscription_name": subscription_name}
            )
            get = (
                client.get_queue_receiver
                if queue_name is not None
                else client.get_subscription_receiver
            )
            try:
                receiver = get(
                    **entity,
                    session_id=NEXT_AVAILABLE_SESSION,
                    max_wait_time=idle_timeout,
                )
                with receiver:
                    if receiver.session.locked_until_utc is not None:  # a session was granted
                        renewer.register(receiver, receiver.session)  # its lock, not messages'
                    session = SequencedSession(
                        receiver,
                        handler,
                        sequence_property=sequence_property,
                        last_property=last_property,
                        max_management_calls=max_management_calls,
                    )
                    result = session.run(
                        max_wait_time=idle_timeout, quiet_time=min(session_quiet, idle_timeout)
                    )
            except (OperationTimeoutError, SessionCannotBeLockedError):
                break  # no session with messages is available
            stats.sessions.append(result)
            idle = result.processed == result.deferred == result.stale == result.dead_lettered == 0
            if idle and result.session_id in seen:
                break  # only sessions waiting behind a gap are left
            seen.add(result.session_id)
    return stats


def create_sequenced_topology(
    admin: Any,
    *,
    source_topic: str,
    forward_subscription: str,
    session_topic: str,
    session_subscription: str,
    session_expression: str = "user.SessionName + '_' + user.TransactionId",
    max_delivery_count: int = 10,
    lock_duration: timedelta | None = None,
) -> None:
    """Creates the publishing side of the pattern with an ``azure.servicebus.management
    .ServiceBusAdministrationClient``: ``session_topic`` with the session-enabled
    ``session_subscription``, and on ``source_topic`` the subscription ``forward_subscription``
    forwarding to ``session_topic`` with the rule: SqlFilter ``EXISTS(user.SessionName) AND
    EXISTS(user.TransactionId)``, action ``SET sys.SessionId = <session_expression>``. Topics
    that exist already are kept. ``lock_duration`` is the session lock's: how long a consumer
    that died holds its session before another may take it over."""
    from azure.core.exceptions import ResourceExistsError
    from azure.servicebus.management import SqlRuleAction, SqlRuleFilter

    for topic in (source_topic, session_topic):
        with contextlib.suppress(ResourceExistsError):
            admin.create_topic(topic)
    admin.create_subscription(
        session_topic,
        session_subscription,
        requires_session=True,
        max_delivery_count=max_delivery_count,
        **({"lock_duration": lock_duration} if lock_duration is not None else {}),
    )
    admin.create_subscription(source_topic, forward_subscription, forward_to=session_topic)
    admin.delete_rule(source_topic, forward_subscription, "$Default")
    admin.create_rule(
        source_topic,
        forward_subscription,
        "sequenced",
        filter=SqlRuleFilter("EXISTS(user.SessionName) AND EXISTS(user.TransactionId)"),
        action=SqlRuleAction(f"SET sys.SessionId = {session_expression}"),
    )
