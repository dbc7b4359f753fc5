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

The management round trips are batched: per received batch, the session state is saved once,
recording the run of messages whose turn has come before any of them is settled (a consumer
that finds such a record peeks which of them are gone: those were handled); an early arrival
stays locked in memory while the session is held and is deferred only when the session is left
(or when more than ``MAX_HELD`` wait); deferred messages are fetched many at a time. A message
fetched from deferral is still settled through ``$management``, one call each (the SDK's way).
While a session is worked, the next one's receiver is opened on a thread of its own (the SDK
takes about half a second to open one; see :func:`take_sessions`). Within a session, messages
are handled and settled one at a time: each completion waits for the node's answer, which is
what lets a restart hand over at most the message in hand; most of a message's cost is the
SDK's receiving and settling it, little is this module's bookkeeping.

:class:`SequenceState` is the bookkeeping alone (pure, no I/O); :class:`SequencedSession`
drives it with a session receiver; :func:`create_sequenced_topology` builds the publishing side
of the pattern with the administration client: a forwarding subscription with the SqlFilter
``EXISTS(user.SessionName) AND EXISTS(user.TransactionId)`` and an action setting
``sys.SessionId`` into a topic whose subscription requires sessions.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import threading
import time
import zlib
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any

from azure.servicebus.exceptions import MessageNotFoundError

log = logging.getLogger("qmgr.client.sequenced")

DEFAULT_PROPERTY = "SequenceNumber"
LAST_PROPERTY = "SequenceLast"
# $management calls one session receiver makes before it hands its session back to be accepted
# again on a new connection: azure-servicebus (7.15) never restores its session's outgoing
# window, so a connection that has sent 65,536 transfers (each management call is one) fails
# its next flow frame ("Value supplied for unsigned int invalid"); the margin leaves room for
# the lock renewer's calls
MANAGEMENT_CALLS_PER_CONNECTION = 50_000
# early arrivals a session receiver keeps locked in memory until their turn; beyond that, the
# furthest ahead are deferred (a deferral costs a settlement to defer and a $management call to
# settle after the fetch: a session that arrives further out of order than this is restored
# faster with a larger max_held, at a few kilobytes of memory per message held)
MAX_HELD = 2_000
# what a session state may hold: Service Bus refuses a larger one (MessageSizeExceeded)
MAX_STATE_BYTES = 256 * 1024
STATE_MAGIC = b"QSEQ2:"  # the compact state's first bytes (the plain JSON form starts with "{")
PEEK_PAGE = 1_000  # messages per peek when a consumer looks for what a dead one settled


class Step(Enum):
    """What to do with a message that arrived, given the session's progress."""

    PROCESS = "process"  # it is the next in sequence
    DEFER = "defer"  # it is early: hold or defer it until its turn
    STALE = "stale"  # its number was already processed: a duplicate, complete it
    INVALID = "invalid"  # no usable sequence number: dead-letter it


class SessionStateTooLarge(ValueError):
    """The sequence state of a session does not fit in a session state (``MAX_STATE_BYTES``)."""


def _delta(numbers: list[int]) -> list[int]:
    """``numbers`` as the first and then each one's difference from the one before."""
    return [b - a for a, b in zip([0, *numbers], numbers, strict=False)]


def _undelta(deltas: list[int]) -> list[int]:
    out: list[int] = []
    total = 0
    for d in deltas:
        total += int(d)
        out.append(total)
    return out


def _delta_map(mapping: dict[int, int]) -> list[list[int]]:
    keys = sorted(mapping)
    return [_delta(keys), _delta([mapping[k] for k in keys])]


def _undelta_map(pair: list[list[int]]) -> dict[int, int]:
    keys, values = pair
    if len(keys) != len(values):
        raise ValueError("keys and values differ in number")
    return dict(zip(_undelta(keys), _undelta(values), strict=True))


@dataclass
class SequenceState:
    """A session's progress: the next number expected, the early arrivals deferred (their
    sequence property → Service Bus sequence number), the numbers that failed, and whether the
    last message of the sequence was processed. Kept in the session state (see ``to_bytes``).
    ``unconfirmed``: deferrals recorded but not yet known to have happened (a consumer may
    die between recording and deferring). ``taken``: the received messages of the run being
    handled (sequence property → Service Bus sequence number), recorded before the first of
    them is settled (a consumer may die in the middle of the run)."""

    next: int = 1
    deferred: dict[int, int] = field(default_factory=dict)
    unconfirmed: set[int] = field(default_factory=set)
    taken: dict[int, int] = field(default_factory=dict)
    failed: list[int] = field(default_factory=list)
    processed: int = 0
    closed: bool = False

    @classmethod
    def from_bytes(cls, data: bytes | str | None, first: int = 1) -> SequenceState:
        """The state stored in a session (None or empty: a new sequence starting at ``first``).
        Reads both the compact form ``to_bytes`` writes and the plain JSON form of earlier
        versions. Raises ValueError when the stored state is not this helper's."""
        if not data:
            return cls(next=first)
        raw_bytes = data.encode() if isinstance(data, str) else bytes(data)
        try:
            if raw_bytes.startswith(STATE_MAGIC):
                raw = json.loads(zlib.decompress(raw_bytes[len(STATE_MAGIC) :]))
                return cls(
                    next=int(raw["next"]),
                    deferred=_undelta_map(raw["deferred"]),
                    unconfirmed=set(_undelta(raw["unconfirmed"])),
                    taken=_undelta_map(raw["taken"]),
                    failed=_undelta(raw["failed"]),
                    processed=int(raw["processed"]),
                    closed=bool(raw["closed"]),
                )
            raw = json.loads(raw_bytes)
            return cls(
                next=int(raw["next"]),
                deferred={int(k): int(v) for k, v in raw.get("deferred", {}).items()},
                unconfirmed={int(n) for n in raw.get("unconfirmed", [])},
                taken={int(k): int(v) for k, v in raw.get("taken", {}).items()},
                failed=[int(n) for n in raw.get("failed", [])],
                processed=int(raw.get("processed", 0)),
                closed=bool(raw.get("closed", False)),
            )
        except (ValueError, TypeError, KeyError, AttributeError, zlib.error) as exc:
            raise ValueError(f"the session state is not a sequence state: {exc}") from None

    def to_bytes(self) -> bytes:
        """The compact form: numbers in ascending order as differences, the JSON compressed
        (``STATE_MAGIC`` first). A session whose sequence arrives far out of order defers
        tens of thousands of messages, and each is recorded: as plain JSON that passes Service
        Bus's limit on a session state (``MAX_STATE_BYTES``), this way a few bytes each do.
        Raises ``SessionStateTooLarge`` when even the compact form passes the limit."""
        data = STATE_MAGIC + zlib.compress(
            json.dumps(
                {
                    "next": self.next,
                    "deferred": _delta_map(self.deferred),
                    "unconfirmed": _delta(sorted(self.unconfirmed)),
                    "taken": _delta_map(self.taken),
                    "failed": _delta(self.failed),
                    "processed": self.processed,
                    "closed": self.closed,
                },
                separators=(",", ":"),
            ).encode(),
            6,
        )
        if len(data) > MAX_STATE_BYTES:
            raise SessionStateTooLarge(
                f"the session's sequence state is {len(data):,} bytes, beyond Service Bus's "
                f"{MAX_STATE_BYTES:,} ({len(self.deferred):,} messages deferred, next "
                f"{self.next}): the sequence has a gap too large for one session's state"
            )
        return data

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
        self.taken.pop(number, None)
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

    def run(self, held: Collection[int]) -> list[int]:
        """The numbers whose turn has come: from ``next`` on, as long as each is ``held``
        (received and kept locked) or deferred."""
        numbers: list[int] = []
        number = self.next
        while number in held or number in self.deferred:
            numbers.append(number)
            number += 1
        return numbers

    def recorded_run(self) -> list[tuple[int, int]]:
        """The run a consumer recorded before it handled it (``taken``, with the confirmed
        deferred numbers between): (number, Service Bus sequence number) from ``next`` on."""
        run: list[tuple[int, int]] = []
        number = self.next
        while True:
            if number in self.taken:
                run.append((number, self.taken[number]))
            elif number in self.deferred and number not in self.unconfirmed:
                run.append((number, self.deferred[number]))
            else:
                return run
            number += 1

    def recover(self, present: Collection[int]) -> int:
        """After a consumer died (or lost its session's lock) handling the recorded run: its
        messages that are no longer ``present`` (Service Bus sequence numbers) were handled,
        then settled, so the state moves past those before the first one still there, which
        and what follows is handled again. A settlement can be lost while later ones of the
        run are not (a disposition in flight when the lock went), so a message gone after the
        first one still there was handled too: it is kept as deferred, and found gone when its
        turn comes, it is moved past without being handled again. Returns how many it moved
        past at once."""
        moved = 0
        first_present = False
        for number, broker_sequence in self.recorded_run():
            if not first_present and broker_sequence not in present:
                self.done(number, ok=True)
                moved += 1
                continue
            first_present = True
            if broker_sequence not in present:
                self.deferred[number] = broker_sequence
                self.unconfirmed.discard(number)
        self.taken.clear()
        return moved


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
    early: int = 0  # arrived before their turn (held until it, or deferred)
    deferred: int = 0
    stale: int = 0
    dead_lettered: int = 0
    waiting: list[int] = field(default_factory=list)  # deferred numbers still before a gap
    closed: bool = False
    handed_back: bool = False  # left with messages to come, for a fresh connection
    lock_lost: bool = False  # the session's lock was lost (SessionLockLostError): taken again
    lock_lost_why: str = ""  # that error's text (what the node or the SDK said)
    opened_ahead: bool = False  # its receiver was opened while another session was worked


class SequencedSession:
    """Processes one session's messages in sequence order with a session receiver
    (``client.get_queue_receiver(..., session_id=...)`` or a next-available one, peek-lock),
    a received batch at a time.

    While the session is held, an early message stays locked in memory until its turn (up to
    ``max_held`` of them; beyond that the furthest ahead are deferred); the ones still early
    when the session is left are deferred and recorded in the session state. Per batch, the run
    of messages whose turn has come (the batch's, the held ones, the deferred ones, fetched by
    sequence number in one call) is recorded in the state (``taken``: the received ones), saved
    once, then handled and settled one at a time; the next save records the progress.

    A consumer that dies anywhere leaves a state the next one continues from: a message of the
    recorded run that is no longer there was settled, after it was handled (a peek says which);
    the first one still there, and what follows, is handled again (at most the one in hand at
    the crash was handled already). An early message is recorded, deferred, then confirmed
    (recorded but not found later: it was never deferred and arrives again); a redelivered
    message whose number was processed is stale and only completed."""

    def __init__(
        self,
        receiver: Any,
        handler: Callable[[Any], None],
        *,
        sequence_property: str = DEFAULT_PROPERTY,
        last_property: str | None = LAST_PROPERTY,
        first: int = 1,
        max_management_calls: int = MANAGEMENT_CALLS_PER_CONNECTION,
        max_held: int = MAX_HELD,
    ) -> None:
        self._receiver = receiver
        self._session = receiver.session
        self._calls = 0  # $management calls made on the receiver's connection
        self._max_calls = max_management_calls
        self._handler = handler
        self._property = sequence_property
        self._last = last_property
        self._first = first
        self._max_held = max_held
        self._held: dict[int, Any] = {}  # received, kept locked until their turn: number -> message
        # received from deferral and not yet handled (locked by this receiver: fetching them
        # again would find no deferred message until the session is let go)
        self._fetched: dict[int, Any] = {}
        self._saved = b""  # the state as the session holds it
        self._fetch_size = 100
        self.state = SequenceState(next=first)
        self.stats = SessionStats(session_id="")

    def run(
        self,
        max_wait_time: float = 5.0,
        max_message_count: int = 100,
        quiet_time: float | None = None,
        first_wait: float | None = None,
    ) -> SessionStats:
        """Receives until nothing arrives for ``max_wait_time`` seconds (``quiet_time`` after
        the first receive, when given; ``first_wait`` for the first, when given) or the
        sequence's last message is processed; returns what it did. Deferred messages are
        fetched as soon as their turn comes. After ``max_management_calls`` it stops between
        two batches with ``handed_back`` set, so that the session is taken up again on a new
        connection (the state says where); so it does, with ``lock_lost`` too, when the
        session's lock is lost."""
        from azure.servicebus.exceptions import SessionLockLostError

        # the first receive settles which session a next-available receiver got (and raises
        # OperationTimeoutError when none is available), so the state is read after it
        batch = self._receiver.receive_messages(
            max_message_count=max_message_count,
            max_wait_time=max_wait_time if first_wait is None else first_wait,
        )
        try:
            self._run(batch, max_wait_time, max_message_count, quiet_time)
        except SessionLockLostError as exc:
            # what was settled under the lost lock comes again; the state says where to go on
            self.stats.lock_lost = self.stats.handed_back = True
            self.stats.lock_lost_why = str(exc)
            self.stats.session_id = str(self._session.session_id)
            return self.stats
        self._leave()
        self.stats.waiting = sorted(self.state.deferred)
        self.stats.closed = self.state.closed
        return self.stats

    def _run(
        self,
        batch: list[Any],
        max_wait_time: float,
        max_message_count: int,
        quiet_time: float | None,
    ) -> None:
        stored = self._session.get_state()
        self._calls += 1
        self.state = SequenceState.from_bytes(stored, self._first)
        self._saved = self.state.to_bytes() if stored else b""
        self._fetch_size = max_message_count
        self.stats.session_id = str(self._session.session_id)
        if self.state.taken:  # left by a consumer that died in the middle of a run
            self._recover()
        while True:
            cut = self.accept(batch)
            if self.state.closed:
                break
            if self._calls >= self._max_calls and (batch or cut):
                self.stats.handed_back = True
                break
            if not batch:
                break
            batch = self._receiver.receive_messages(
                max_message_count=max_message_count,
                max_wait_time=max_wait_time if quiet_time is None else quiet_time,
            )

    def accept(self, batch: list[Any]) -> bool:
        """Handles a received batch according to the state: sorts it out, then processes the
        run whose turn has come. True when the management-call budget cut the run short."""
        for message in batch:
            self._sort(message)
        cut = self._advance()
        if len(self._held) > self._max_held:  # defer the furthest ahead
            self._defer(sorted(self._held)[self._max_held // 2 :])
        return cut

    def _sort(self, message: Any) -> None:
        """Dead-letters, completes (stale) or holds one received message."""
        number = sequence_of(message.application_properties, self._property)
        step = self.state.classify(number)
        if number is None or step is Step.INVALID:
            self._receiver.dead_letter_message(
                message,
                reason="SequenceNumberMissing",
                error_description=f"no integer application property {self._property!r}",
            )
            self.stats.dead_lettered += 1
        elif (
            step is Step.STALE
            or self.state.closed
            or number in self._held  # a second copy of a number held
            or self.state.deferred.get(number, message.sequence_number)
            != message.sequence_number  # a second copy of a number already deferred
        ):
            self._receiver.complete_message(message)
            self.stats.stale += 1
        else:
            self.stats.early += step is Step.DEFER
            self._held[number] = message

    def _advance(self) -> bool:
        """Records the run whose turn has come, then handles and settles it in order (at
        least its first message, whatever the budget). True when the budget cut it short."""
        run = self.state.run(self._held)
        if not run:
            return False
        cut = False
        self.state.taken = {n: self._held[n].sequence_number for n in run if n in self._held}
        self._save_if_changed()  # before anything of the run is settled
        fetched = self._fetched
        for i, number in enumerate(run):
            if self.state.closed:
                break
            if i and self._calls >= self._max_calls:
                cut = True
                break
            if number in self._held:
                self._process(self._held.pop(number), number)
                continue
            if number not in fetched:
                ahead = [n for n in run[i:] if n not in self._held and n not in fetched]
                fetched.update(self._fetch(ahead[: self._fetch_size]))
            message = fetched.pop(number, None)
            if message is not None:
                self._process(message, number, deferred=True)
            elif number in self.state.unconfirmed:  # recorded by a consumer that died before
                # deferring it: the message is still active and arrives again
                self.state.deferred.pop(number, None)
                self.state.unconfirmed.discard(number)
                break
            else:  # settled by a consumer that died before recording it
                self.state.done(number, ok=True)
        self.state.taken = {}
        return cut

    def _fetch(self, numbers: list[int]) -> dict[int, Any]:
        """The deferred messages of ``numbers`` by sequence number, in one call (those that
        are not deferred any more are left out)."""
        wanted = {self.state.deferred[n]: n for n in numbers}
        try:
            self._calls += 1
            found = self._receiver.receive_deferred_messages(list(wanted))
        except MessageNotFoundError:  # one of them is not deferred any more: which ones?
            from azure.servicebus import ServiceBusMessageState

            there = self._present(list(wanted))
            still = [s for s in wanted if there.get(s) == ServiceBusMessageState.DEFERRED]
            self._calls += 1
            found = self._receiver.receive_deferred_messages(still) if still else []
        return {wanted[m.sequence_number]: m for m in found if m.sequence_number in wanted}

    def _present(self, broker_sequences: list[int]) -> dict[int, Any]:
        """Which of these Service Bus sequence numbers are still in the session, with their
        state (active, deferred): a peek from the lowest to the highest."""
        wanted = set(broker_sequences)
        there: dict[int, Any] = {}
        start, end = min(wanted), max(wanted)
        while start <= end:
            self._calls += 1
            page = self._receiver.peek_messages(
                max_message_count=min(end - start + 1, PEEK_PAGE), sequence_number=start
            )
            if not page:
                break
            there.update((m.sequence_number, m.state) for m in page if m.sequence_number in wanted)
            start = page[-1].sequence_number + 1
        return there

    def _recover(self) -> None:
        """The state records a run a consumer was handling when it died: the messages of it
        that are gone were handled and settled; the state moves past them."""
        run = self.state.recorded_run()
        there = self._present([broker for _, broker in run]) if run else {}
        self.state.recover(there)
        self._save_if_changed()

    def _process(self, message: Any, number: int, *, deferred: bool = False) -> None:
        """Hands ``message`` to the handler, settles it (a failure is dead-lettered), then
        advances the state in memory (the run was recorded before)."""
        try:
            self._handler(message)
        except Exception as exc:  # noqa: BLE001 - whatever the application raised goes to the DLQ
            why = repr(exc)[:1024]
            self._count_settlement(deferred)
            self._receiver.dead_letter_message(
                message, reason="ProcessingFailed", error_description=why
            )
            self.state.done(number, ok=False)
            self.stats.dead_lettered += 1
            return
        last = _is_last(message.application_properties, self._last)
        self._count_settlement(deferred)
        self._receiver.complete_message(message)
        self.state.done(number, ok=True, last=last)
        self.stats.processed += 1

    def _count_settlement(self, deferred: bool) -> None:
        if deferred:  # received by sequence number: the SDK settles it by $management
            self._calls += 1

    def _defer(self, numbers: list[int]) -> None:
        """Defers held messages: recorded (unconfirmed), deferred, confirmed in memory (the
        next save records that)."""
        for number in numbers:
            self.state.remember_deferred(number, self._held[number].sequence_number)
        self._save_if_changed()
        for number in numbers:
            self._receiver.defer_message(self._held.pop(number))
            self.state.confirm_deferred(number)
        self.stats.deferred += len(numbers)

    def _leave(self) -> None:
        """Before the session is let go: what is held is deferred (or completed, after the
        sequence's last message), and the state saved."""
        if self.state.closed:
            for message in self._held.values():
                self._receiver.complete_message(message)
                self.stats.stale += 1
            self._held.clear()
        elif self._held:
            self._defer(sorted(self._held))
        self._save_if_changed()

    def _save_if_changed(self) -> None:
        data = self.state.to_bytes()
        if data != self._saved:
            self._calls += 1
            self._session.set_state(data)
            self._saved = data


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
# times in a row one session's lock may be lost before take_sessions gives up on it
MAX_LOCK_LOSSES = 3


def renewal_failed(session: Any, error: BaseException | None) -> None:
    """Called by the lock keeper when a session's lock could not be renewed: logged, since the
    session's next settlement fails with it and what it had in hand is delivered again
    (``take_sessions`` takes the session up again)."""
    log.warning(
        "session %s: its lock ran out before it was renewed (%s)",
        getattr(session, "session_id", "?"),
        "no renewal error"
        if error is None
        else repr(getattr(error, "inner_exception", None) or error),
    )


RENEW_MARGIN = 10.0  # seconds before a session's lock runs out when the keeper renews it
RENEW_CHECK = 0.5  # seconds between the keeper's looks at the locks it keeps


class _Serialized:
    """A session receiver (or its session) whose every call holds one lock. The SDK does not
    promise that a receiver may be used from two threads at once, and it may not: a worker
    receiving on a session while another thread renews the session's lock on the same
    connection reads and handles that connection's frames on both threads, out of order, which
    a loaded drain saw break the receiver's ``$management`` link ("Management Operation error
    occurred") and lose the session's lock. ``_LockKeeper`` renews holding the same lock."""

    def __init__(self, target: Any, lock: threading.RLock) -> None:
        self._target = target
        self._lock = lock

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if name == "session":
            return _Serialized(value, self._lock)
        if not callable(value):
            return value
        lock = self._lock

        def call(*args: Any, **kwargs: Any) -> Any:
            with lock:
                return value(*args, **kwargs)

        return call


class _LockKeeper:
    """Renews the lock of every session it keeps, from one thread of its own, each renewal
    under the receiver's lock (see ``_Serialized``), once the lock has ``RENEW_MARGIN``
    seconds or less to run, until the session is forgotten or ``max_renewal`` seconds after it
    was first kept (by the client's clock, as Service Bus's SDK renews). A renewal that fails
    is reported to ``renewal_failed`` and not tried again: the session's next call fails with
    ``SessionLockLostError``, which ``take_sessions`` handles."""

    def __init__(self, max_renewal: float) -> None:
        self._max_renewal = max_renewal
        self._kept: dict[int, tuple[Any, threading.RLock, float]] = {}
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="qmgr-session-locks", daemon=True)
        self._thread.start()

    def keep(self, receiver: Any) -> threading.RLock:
        """Keep ``receiver``'s session locked; its lock (the one it is kept with, if kept)."""
        with self._guard:
            kept = self._kept.get(id(receiver))
            if kept is not None:
                return kept[1]
            lock = threading.RLock()
            until = time.monotonic() + self._max_renewal
            self._kept[id(receiver)] = (receiver, lock, until)
            return lock

    def forget(self, receiver: Any) -> None:
        with self._guard:
            self._kept.pop(id(receiver), None)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(RENEW_CHECK):
            with self._guard:
                kept = list(self._kept.items())
            for key, (receiver, lock, until) in kept:
                session = receiver.session
                locked_until = session.locked_until_utc
                if time.monotonic() > until or locked_until is None:
                    self._drop(key)
                    continue
                left = (locked_until - datetime.now(UTC)).total_seconds()
                if left > RENEW_MARGIN:
                    continue
                with lock:
                    if key not in self._kept:  # forgotten meanwhile (its work ended)
                        continue
                    try:
                        session.renew_lock()
                    except Exception as exc:  # noqa: BLE001 - reported; the work sees it next
                        self._drop(key)
                        renewal_failed(session, exc)

    def _drop(self, key: int) -> None:
        with self._guard:
            self._kept.pop(key, None)


def _close(opened: Any, guard: threading.RLock) -> None:
    """Close a session receiver (not while its lock is being renewed)."""
    with guard:
        opened.__exit__(None, None, None)


class _Ahead:
    """A next-available session receiver opened on a thread of its own while a session is
    worked, so that the next take need not wait for it: the SDK opens a receiver in about half
    a second whatever the node does (it polls the handshake every 50 ms), which a drain of many
    short sessions otherwise waits once per session. A session it is granted is kept locked
    from then on (``max_lock_renewal`` counts from then); when it finds none or fails, the next
    take opens a receiver of its own (which then waits, or raises, as it always did)."""

    def __init__(
        self,
        open_receiver: Callable[[str | None], Any],
        keeper: _LockKeeper,
        got: tuple[Any, Any] | None = None,
    ) -> None:
        self._open_receiver = open_receiver
        self._keeper = keeper
        self._got = got  # (context manager, receiver) with a session; given: opened already
        self._thread: threading.Thread | None = None
        if got is None:
            self._thread = threading.Thread(target=self._open, daemon=True)
            self._thread.start()

    def _open(self) -> None:
        try:
            opened = self._open_receiver(None)
            receiver = opened.__enter__()
        except Exception:  # noqa: BLE001 - no session for now: the next take opens its own
            log.debug("no session opened ahead", exc_info=True)
            return
        if receiver.session.locked_until_utc is None:  # none came within the wait
            with contextlib.suppress(Exception):
                opened.__exit__(None, None, None)
            return
        self._keeper.keep(receiver)
        self._got = (opened, receiver)

    def take(self) -> tuple[Any, Any] | None:
        """The receiver and its session, once it is open (None: no session came)."""
        if self._thread is not None:
            self._thread.join()
        got, self._got = self._got, None
        return got


def take_sessions(
    open_receiver: Callable[[str | None], Any],
    work: Callable[[Any, bool], SessionStats],
    *,
    receivers: int = 1,
    max_sessions: int | None = None,
    stop: threading.Event | None = None,
    max_lock_renewal: float = 600.0,
    look_ahead: bool = False,
) -> list[SessionStats]:
    """Takes sessions again and again on ``receivers`` receivers at once (threads; the calling
    thread when 1) and runs ``work(receiver, again)`` on each (``again``: a session handed
    back, taken again); returns what each take did, in the order they ended. While ``work``
    holds a session, the session's lock is renewed (``_LockKeeper``, on a thread of its own,
    never while the work is using the receiver) for up to ``max_lock_renewal`` seconds, so a
    session read for longer than its lock duration is not lost to ``SessionLockLostError``. A session whose lock is lost all the same (a renewal
    that came too late on a loaded machine; Service Bus says to request the session again) is
    taken again at once, the work's stats marked ``lock_lost``; what was settled under the lost
    lock fails and is delivered again (at least once). ``MAX_LOCK_LOSSES`` in a row for one
    session raise the error.
    ``open_receiver(None)`` gives a next-available session receiver, ``open_receiver(id)`` one
    for that session (a session ``work`` handed back is taken again at once). A receiver stops
    when it finds no session within its wait, or one with nothing new that was taken before
    (only sessions waiting behind a gap are left), while no other receiver holds one (so the
    last one waits a whole wait after the last session); also after ``max_sessions`` takes in
    all, or once ``stop`` is set. A receiver is closed on a thread of its own (the SDK takes
    about half a second), so the next session need not wait for it. An error in one receiver
    stops them all and is raised.
    With ``look_ahead``, while a session is worked one next-available receiver more is opened
    (one for all the receivers, on a thread of its own) and the next take that wants any
    session uses it (its stats marked ``opened_ahead``; a take of a session handed back uses it
    when it was granted that session, released meanwhile): the SDK takes about half a second to
    open a receiver, which a drain of many sessions otherwise waits between two of them. That
    session is held (its lock renewed) until a receiver is free for it; one still unused at the
    end is released. Without a session granted, the take opens a receiver as before. Off when
    consumers in other processes share few sessions: one held ahead here waits for a receiver of
    this process while theirs may be idle."""
    from azure.servicebus.exceptions import (
        OperationTimeoutError,
        SessionCannotBeLockedError,
        SessionLockLostError,
    )

    if receivers < 1:
        raise ValueError(f"receivers must be at least 1, got {receivers}")
    stop = stop or threading.Event()
    lock = threading.Lock()
    results: list[SessionStats] = []
    seen: set[str] = set()
    busy = [0, 0]  # [receivers holding a session, takes begun]
    errors: list[BaseException] = []
    closing: list[threading.Thread] = []
    losses: dict[str, int] = {}  # session -> its lock lost so many times in a row
    spare: list[_Ahead] = []  # the receiver opened ahead (at most one), not yet taken

    def open_ahead() -> None:
        """Opens the next receiver ahead, unless one is open or no more takes are to come."""
        with lock:
            if (
                look_ahead
                and not spare
                and not stop.is_set()
                and (max_sessions is None or busy[1] < max_sessions)
            ):
                spare.append(_Ahead(open_receiver, keeper))

    def from_spare() -> tuple[Any, Any] | None:
        with lock:
            ahead = spare.pop() if spare else None
        return None if ahead is None else ahead.take()

    def take(target: str | None) -> SessionStats | None:
        ahead = from_spare()
        if ahead is not None and target is not None and ahead[1].session.session_id != target:
            with lock:  # granted another session: kept for a later take
                spare.append(_Ahead(open_receiver, keeper, ahead))
            ahead = None
        if ahead is not None:
            opened, receiver = ahead  # its lock renewed since it was granted
        else:
            opened = open_receiver(target)
            receiver = opened.__enter__()
            if receiver.session.locked_until_utc is None:  # no session came within the wait
                opened.__exit__(None, None, None)  # (the SDK says so after as long again)
                return None
        with lock:
            busy[0] += 1
        session_id = str(receiver.session.session_id)
        # the session's lock (not its messages') is kept from now on, or since it was granted
        # ahead; the work and the keeper use the receiver one at a time
        guard = keeper.keep(receiver)
        try:
            open_ahead()
            try:
                result = work(_Serialized(receiver, guard), target is not None)
            except SessionLockLostError as exc:
                result = SessionStats(
                    session_id=session_id, handed_back=True, lock_lost=True, lock_lost_why=str(exc)
                )
            result.opened_ahead = ahead is not None
            with lock:
                lost = losses[session_id] = losses.get(session_id, 0) + 1 if result.lock_lost else 0
            if result.lock_lost:  # the reason a message may be handled twice: say so
                log.warning(
                    "session %s: its lock was lost (%d in a row: %s); taking it again: a message "
                    "whose settlement failed with it is delivered again",
                    session_id,
                    lost,
                    result.lock_lost_why or "no reason given",
                )
            if lost >= MAX_LOCK_LOSSES:
                raise SessionLockLostError(
                    message=f"the lock of session {session_id} was lost {lost} times in a row"
                )
        except BaseException:
            keeper.forget(receiver)
            with guard:
                opened.__exit__(*sys.exc_info())
            raise
        finally:
            keeper.forget(receiver)
            with lock:
                busy[0] -= 1
        if result.handed_back:  # released before it is taken again
            quiet = contextlib.suppress(Exception) if result.lock_lost else contextlib.nullcontext()
            with quiet, guard:
                opened.__exit__(None, None, None)
        else:
            closer = threading.Thread(target=_close, args=(opened, guard))
            with lock:
                closing.append(closer)
            closer.start()
        return result

    def taker() -> None:
        again: str | None = None  # a session handed back, to take again at once
        while not stop.is_set():
            with lock:
                if max_sessions is not None and busy[1] >= max_sessions:
                    return
                busy[1] += 1
            target, again = again, None
            result: SessionStats | None = None
            try:
                result = take(target)
            except SessionCannotBeLockedError:
                if target is not None:  # taken by another consumer meanwhile
                    continue
            except OperationTimeoutError:
                pass
            with lock:
                if result is not None:
                    results.append(result)
                    if result.handed_back:
                        again = result.session_id
                        continue
                    worked = result.processed or result.deferred or result.stale
                    if worked or result.dead_lettered or result.session_id not in seen:
                        seen.add(result.session_id)
                        continue
                if busy[0] == 0:
                    return  # no session to take while no receiver holds one

    def guarded() -> None:
        try:
            taker()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            with lock:
                errors.append(exc)
            stop.set()

    keeper = _LockKeeper(max_lock_renewal)
    try:
        if receivers == 1:
            taker()
        else:
            threads = [threading.Thread(target=guarded, daemon=True) for _ in range(receivers)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    finally:
        keeper.close()  # no renewal from now on, while receivers are released
        for ahead in spare:  # a session granted ahead and never taken is released
            got = ahead.take()
            if got is not None:
                with contextlib.suppress(Exception):
                    got[0].__exit__(None, None, None)
        for closer in closing:
            closer.join()
    if errors:
        raise errors[0]
    return results


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
    receivers: int = 1,
    max_message_count: int = 100,
    max_held: int = MAX_HELD,
    look_ahead: bool = True,
) -> DrainStats:
    """Accepts the next available session of a queue or subscription again and again and runs
    :class:`SequencedSession` on each, until no session has messages for ``idle_timeout``
    seconds (or ``max_sessions`` were run). ``client`` is an ``azure.servicebus
    .ServiceBusClient``. A session keeps its state, so messages still deferred behind a gap are
    picked up by a later run. A session is left once nothing has arrived in it for
    ``session_quiet`` seconds (at most ``idle_timeout``): what comes later makes it available
    again. Each session's lock is renewed for up to ``max_lock_renewal`` seconds (see
    :func:`take_sessions`), so a slow handler does not lose it. A session
    receiver that made ``max_management_calls`` hands its session back and the session is
    accepted again on a new connection (see ``MANAGEMENT_CALLS_PER_CONNECTION``).

    ``receivers`` sessions are held at once, each on a receiver of its own (see
    :func:`take_sessions`): then ``handler`` is called from as many threads, never at once for
    one session. ``max_message_count`` is the receive batch; ``max_held`` how many early
    arrivals a session receiver keeps locked before it defers the furthest ahead. With
    ``look_ahead`` the next session's receiver is opened while one is worked (see
    :func:`take_sessions`; a drain of many sessions one at a time saves about half a second
    per session; consumers in several processes sharing a few sessions should turn it off)."""
    from azure.servicebus import NEXT_AVAILABLE_SESSION

    if (queue_name is None) == (topic_name is None):
        raise ValueError("give queue_name, or topic_name and subscription_name")
    if topic_name is not None and subscription_name is None:
        raise ValueError("topic_name needs subscription_name")
    entity = (
        {"queue_name": queue_name}
        if queue_name is not None
        else {"topic_name": topic_name, "subscription_name": subscription_name}
    )
    get = client.get_queue_receiver if queue_name is not None else client.get_subscription_receiver

    def open_receiver(session_id: str | None) -> Any:
        return get(
            **entity,
            session_id=NEXT_AVAILABLE_SESSION if session_id is None else session_id,
            max_wait_time=idle_timeout,
        )

    def work(receiver: Any, again: bool) -> SessionStats:
        session = SequencedSession(
            receiver,
            handler,
            sequence_property=sequence_property,
            last_property=last_property,
            max_management_calls=max_management_calls,
            max_held=max_held,
        )
        quiet = min(session_quiet, idle_timeout)
        return session.run(
            max_wait_time=idle_timeout,
            max_message_count=max_message_count,
            quiet_time=quiet,
            first_wait=quiet if again else None,  # it may hold deferred messages alone
        )

    sessions = take_sessions(
        open_receiver,
        work,
        receivers=receivers,
        max_sessions=max_sessions,
        max_lock_renewal=max_lock_renewal,
        look_ahead=look_ahead,
    )
    return DrainStats(sessions)


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
