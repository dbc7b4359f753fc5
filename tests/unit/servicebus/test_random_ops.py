"""Random sequences of operations (fixed seeds): the counts always agree with the messages
held, every lock points at its message, the journal marks exactly the locked messages, and
replaying the journal gives back the same messages, the locked ones counted as if their
locks had expired."""

from __future__ import annotations

import random
import uuid

import pytest

from qmgr.core.clock import ManualClock
from qmgr.servicebus.entities import QueueProperties, SubscriptionProperties
from qmgr.servicebus.errors import ServiceBusError
from qmgr.servicebus.message import MessageState, SbMessage
from qmgr.servicebus.namespace import Namespace, ReceiveMode
from qmgr.servicebus.store import MessageStore
from tests.unit.servicebus.conftest import RecordingJournal, replay, store_of

PATHS = ["q", "q/$DeadLetterQueue", "t/Subscriptions/a", "t/Subscriptions/b"]


def check_store(store: MessageStore) -> None:
    states = [s.state for s in store.messages.values()]
    assert store.active_count == states.count(MessageState.ACTIVE)
    assert store.deferred_count == states.count(MessageState.DEFERRED)
    assert store.scheduled_count == states.count(MessageState.SCHEDULED)
    assert store.size_bytes == sum(s.size for s in store.messages.values())
    for token_, stored in store.locks.items():
        assert stored.lock_token == token_
        assert store.messages.get(stored.sequence_number) is stored
    locked = [s for s in store.messages.values() if s.lock_token is not None]
    assert len(locked) == len(store.locks)
    assert [seq for seq in store.order if seq in store.messages] == sorted(store.messages)
    assert store.order == sorted(set(store.order))
    assert len(store.order) - len(store.messages) == store.removed_in_order


def check_marks(ns: Namespace, journal: RecordingJournal, paths: list[str]) -> None:
    """The journal's lock marks are the messages locked now."""
    locked = {
        (store.path, s.sequence_number)
        for store in (store_of(ns, path) for path in paths)
        for s in store.messages.values()
        if s.lock_token is not None
    }
    assert journal.locked == locked


def same_after_lock_expiry(
    ns: Namespace, journal: RecordingJournal, clock: ManualClock, paths: list[str]
) -> Namespace:
    """A namespace replayed from ``journal`` now (its locks lost to the restart) and ``ns``
    once every lock has expired hold the same messages with the same delivery counts."""
    again = replay(journal, Namespace(clock=clock))
    assert not any(store_of(again, path).locks for path in paths)
    clock.advance(61)  # past every lock and session lock (the longest: 60 s)
    ns.tick()
    again.tick()
    for path in paths:
        assert content(again, path) == content(ns, path), path
        check_store(store_of(again, path))
    return again


def content(ns: Namespace, path: str) -> list[tuple[int, MessageState, int, bytes]]:
    return [
        (s.sequence_number, s.state, s.delivery_count, s.message.body)
        for s in ns.peek(path, 0, 100_000)
    ]


def _seeded(seed: int) -> tuple[random.Random, ManualClock, RecordingJournal, Namespace]:
    """A run's random source and a fresh namespace on a manual clock, journalled."""
    clock = ManualClock()
    journal = RecordingJournal()
    return random.Random(seed), clock, journal, Namespace(clock=clock, journal=journal)


@pytest.mark.parametrize("seed", range(8))
def test_random_operations_keep_the_books(seed: int) -> None:
    rng, clock, journal, ns = _seeded(seed)
    ns.create_queue(
        "q",
        QueueProperties(
            lock_duration=10,
            max_delivery_count=3,
            dead_lettering_on_expiration=rng.random() < 0.5,
            requires_duplicate_detection=True,
            duplicate_detection_window=20,
        ),
    )
    ns.create_topic("t")
    ns.create_subscription("t", "a", SubscriptionProperties(lock_duration=5, max_delivery_count=2))
    ns.create_subscription("t", "b", SubscriptionProperties(default_message_ttl=30))
    tokens: list[tuple[str, uuid.UUID, int]] = []
    deferred: list[tuple[str, int]] = []
    for step in range(400):
        op = rng.random()
        try:
            if op < 0.25:
                target = rng.choice(["q", "t"])
                msgs = [
                    SbMessage(
                        f"{step}-{i}".encode(),
                        message_id=str(rng.randrange(60)),
                        time_to_live=rng.choice([None, 5.0, 50.0]),
                        scheduled_enqueue_time=(clock.now() + 7 if rng.random() < 0.1 else None),
                    )
                    for i in range(rng.randrange(1, 4))
                ]
                ns.send(target, msgs)
            elif op < 0.45:
                path = rng.choice(PATHS)
                mode = rng.choice(list(ReceiveMode))
                for s in ns.receive(path, rng.randrange(1, 4), mode):
                    if s.lock_token is not None:
                        tokens.append((path, s.lock_token, s.sequence_number))
            elif op < 0.7 and tokens:
                path, tok, seq = tokens.pop(rng.randrange(len(tokens)))
                action = rng.choice(["complete", "abandon", "defer", "dead_letter", "release"])
                if action == "defer":
                    ns.defer(path, tok)
                    deferred.append((path, seq))
                elif action == "dead_letter":
                    ns.dead_letter(path, tok, reason="test")
                else:
                    getattr(ns, action)(path, tok)
            elif op < 0.75 and deferred:
                path, seq = deferred.pop()
                for s in ns.receive_deferred(path, [seq], ReceiveMode.PEEK_LOCK):
                    assert s.lock_token is not None
                    tokens.append((path, s.lock_token, seq))
            elif op < 0.8:
                path, tok, _ = rng.choice(tokens) if tokens else ("q", uuid.uuid4(), 0)
                ns.renew_lock(path, tok)
            else:
                clock.advance(rng.choice([0.5, 1, 3, 6, 11]))
                ns.tick()
                deadline = ns.next_deadline()
                assert deadline is None or deadline > clock.now()  # all that was due is done
        except ServiceBusError:
            pass  # lost locks, deferred messages already taken, ...
        for path in PATHS:
            check_store(store_of(ns, path))
        check_marks(ns, journal, PATHS)

    again = same_after_lock_expiry(ns, journal, clock, PATHS)
    # every message can still be received or is waiting: nothing is lost in the structures
    clock.advance(1000)
    again.tick()
    for path in PATHS:
        store = store_of(again, path)
        active = store.active_count
        got = again.receive(path, 100_000, ReceiveMode.RECEIVE_AND_DELETE)
        assert len(got) == active


@pytest.mark.parametrize("seed", range(6))
def test_random_session_operations_keep_the_books(seed: int) -> None:
    rng, clock, journal, ns = _seeded(seed)
    ns.create_queue("s", QueueProperties(requires_session=True, lock_duration=10))
    held: dict[str, float] = {}  # sessions this test holds -> when the lock ends
    tokens: list[tuple[str, uuid.UUID]] = []
    for step in range(400):
        op = rng.random()
        try:
            if op < 0.3:
                ns.send(
                    "s",
                    [
                        SbMessage(f"{step}".encode(), session_id=rng.choice("abcd"))
                        for _ in range(rng.randrange(1, 3))
                    ],
                )
            elif op < 0.45:
                lock = ns.accept_session("s", rng.choice([None, "a", "b", "e"]))
                if lock is not None:
                    held[lock.session_id] = lock.locked_until
            elif op < 0.65 and held:
                sid = rng.choice(sorted(held))
                got = ns.receive("s", rng.randrange(1, 4), ReceiveMode.PEEK_LOCK, session=sid)
                seqs = [m.sequence_number for m in got]
                assert seqs == sorted(seqs)  # in order within the session
                assert all(m.message.session_id == sid for m in got)
                tokens += [(sid, m.lock_token) for m in got if m.lock_token is not None]
            elif op < 0.8 and tokens:
                _, tok = tokens.pop(rng.randrange(len(tokens)))
                getattr(ns, rng.choice(["complete", "abandon", "release"]))("s", tok)
            elif op < 0.85 and held:
                sid = rng.choice(sorted(held))
                ns.release_session("s", sid)
                del held[sid]
            elif op < 0.9 and held:
                sid = rng.choice(sorted(held))
                ns.set_session_state("s", sid, rng.choice([None, b"x", b"yy"]))
            else:
                clock.advance(rng.choice([1, 4, 11]))
                ns.tick()
                held = {k: v for k, v in held.items() if v > clock.now()}
        except ServiceBusError:
            pass
        store = store_of(ns, "s")
        check_store(store)
        per_session = sum(sq.count for sq in store.sessions.values())
        assert per_session == store.active_count + store.deferred_count
        for sid, sq in store.sessions.items():
            assert all(m.message.session_id == sid for m in sq.locked.values())
        check_marks(ns, journal, ["s"])
    again = same_after_lock_expiry(ns, journal, clock, ["s"])
    assert sorted(again.list_sessions("s")) == sorted(ns.list_sessions("s"))
