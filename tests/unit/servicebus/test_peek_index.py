"""Peek from a sequence number starts there: its cost is what it returns (and the removed
messages it passes), not the messages before it (a browse of a million-message entity used to
walk them all on every call). The index behind it stays exact through removals, restores of
lower numbers and its own rebuilds."""

from __future__ import annotations

import random
from typing import Any

from qmgr.core.clock import ManualClock
from qmgr.servicebus.entities import QueueProperties
from qmgr.servicebus.message import MessageState, SbMessage, Stored
from qmgr.servicebus.namespace import Namespace, ReceiveMode
from tests.unit.servicebus.conftest import RecordingJournal, replay, store_of, token

PL = ReceiveMode.PEEK_LOCK


class CountingMessages(dict[int, Stored]):
    """The store's messages, counting the lookups a browse makes and refusing a full walk."""

    lookups = 0

    def get(self, key: int, default: Any = None) -> Any:
        CountingMessages.lookups += 1
        return super().get(key, default)

    def values(self) -> Any:
        raise AssertionError("a browse walked every message")

    def __iter__(self) -> Any:
        raise AssertionError("a browse walked every message")


def test_peek_from_a_number_looks_only_at_what_it_returns() -> None:
    ns = Namespace(clock=ManualClock(), journal=RecordingJournal())
    ns.create_queue("q")
    for _ in range(20):
        ns.send("q", [SbMessage(b"x") for _ in range(500)])
    store = store_of(ns, "q")
    store.messages = CountingMessages(store.messages)
    CountingMessages.lookups = 0
    got = ns.peek("q", 9_990, 5)
    assert [s.sequence_number for s in got] == [9_990, 9_991, 9_992, 9_993, 9_994]
    assert CountingMessages.lookups == 5
    CountingMessages.lookups = 0
    assert ns.peek("q", 20_000, 5) == []
    assert CountingMessages.lookups == 0


def test_peek_returns_every_state_at_or_after_the_number() -> None:
    clock = ManualClock()
    ns = Namespace(clock=clock, journal=RecordingJournal())
    ns.create_queue("q")
    ns.send("q", [SbMessage(str(i).encode()) for i in range(1, 9)])
    one, two, three = ns.receive("q", 3, PL)
    ns.defer("q", token(two))
    ns.complete("q", token(three))
    ns.schedule("q", [SbMessage(b"later")], clock.now() + 60)
    peeked = ns.peek("q", 2, 4)
    assert [(s.sequence_number, s.state) for s in peeked] == [
        (2, MessageState.DEFERRED),
        (4, MessageState.ACTIVE),
        (5, MessageState.ACTIVE),
        (6, MessageState.ACTIVE),
    ]
    assert ns.peek("q", 1, 1)[0].sequence_number == 1  # locked: still browsed
    assert [s.sequence_number for s in ns.peek("q", 8, 10)] == [8, 9]
    assert ns.peek("q", 9, 10)[0].state is MessageState.SCHEDULED


def test_peek_agrees_with_a_sorted_walk_through_removals_and_rebuilds() -> None:
    rng = random.Random(4)
    ns = Namespace(clock=ManualClock(), journal=RecordingJournal())
    ns.create_queue("q", QueueProperties(max_delivery_count=1000))
    store = store_of(ns, "q")
    for _ in range(3_000):
        roll = rng.random()
        if roll < 0.45:
            ns.send("q", [SbMessage(b"m") for _ in range(rng.randint(1, 5))])
        elif roll < 0.9:
            for m in ns.receive("q", rng.randint(1, 6), PL):
                (ns.complete if rng.random() < 0.8 else ns.defer)("q", token(m))
        else:
            deferred = [s for s in store.messages.values() if s.state is MessageState.DEFERRED]
            if deferred:
                seq = rng.choice(deferred).sequence_number
                [m] = ns.receive_deferred("q", [seq], PL)
                ns.complete("q", token(m))
        start = rng.randint(0, store.next_sequence + 2)
        count = rng.randint(1, 20)
        expected = [seq for seq in sorted(store.messages) if seq >= start][:count]
        assert [s.sequence_number for s in ns.peek("q", start, count)] == expected
    assert len(store.order) <= 2 * len(store.messages) + 257  # rebuilt as removals add up


def test_a_restore_out_of_order_keeps_peek_in_order() -> None:
    journal = RecordingJournal()
    ns = Namespace(clock=ManualClock(), journal=journal)
    ns.create_queue("q")
    ns.send("q", [SbMessage(str(i).encode()) for i in range(1, 11)])
    for m in ns.receive("q", 10, PL)[::3]:
        ns.complete("q", token(m))
    again = Namespace(clock=ManualClock(), journal=RecordingJournal())
    held = list(journal.messages["q"].items())
    rng = random.Random(1)
    rng.shuffle(held)
    journal.messages["q"] = dict(held)
    replay(journal, again)
    assert [s.sequence_number for s in again.peek("q", 0, 100)] == [2, 3, 5, 6, 8, 9]
    assert [s.sequence_number for s in again.peek("q", 4, 2)] == [5, 6]
