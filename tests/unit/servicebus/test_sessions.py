"""Sessions: accepting a named or the next available session, the exclusive session lock and
its renewal and expiry, session state, in-order delivery, messages without a SessionId."""

from __future__ import annotations

import pytest

from qmgr.core.clock import ManualClock
from qmgr.servicebus.entities import QueueProperties, SubscriptionProperties
from qmgr.servicebus.errors import Code
from qmgr.servicebus.message import SbMessage
from qmgr.servicebus.namespace import Namespace, ReceiveMode
from tests.unit.servicebus.conftest import RecordingJournal, fails, token

PL = ReceiveMode.PEEK_LOCK
RD = ReceiveMode.RECEIVE_AND_DELETE


@pytest.fixture
def sq(ns: Namespace) -> Namespace:
    ns.create_queue("q", QueueProperties(requires_session=True, lock_duration=30))
    return ns


def send(ns: Namespace, session: str, *bodies: bytes) -> None:
    ns.send("q", [SbMessage(b, session_id=session) for b in bodies])


def test_message_without_session_id_is_rejected_on_a_session_queue(sq: Namespace) -> None:
    err = fails(Code.INVALID_OPERATION, sq.send, "q", [SbMessage(session_id="a"), SbMessage()])
    assert "SessionId" in err.text
    assert sq.get_queue("q").active == 0


def test_message_without_session_id_is_dead_lettered_on_a_session_subscription(
    ns: Namespace,
) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "s", SubscriptionProperties(requires_session=True))
    ns.create_subscription("t", "plain")
    ns.send("t", [SbMessage(b"x")])
    [dead] = ns.receive("t/Subscriptions/s/$DeadLetterQueue", 1, RD)
    assert dead.message.properties["DeadLetterReason"] == "Session ID is null."
    assert ns.get_subscription("t", "plain").active == 1


def test_receive_needs_an_accepted_session(sq: Namespace) -> None:
    send(sq, "a", b"1")
    fails(Code.INVALID_OPERATION, sq.receive, "q", 1, PL)
    fails(Code.SESSION_LOCK_LOST, sq.receive, "q", 1, PL, session="a")


def test_accept_named_session_delivers_its_messages_in_order(sq: Namespace) -> None:
    send(sq, "a", b"a1")
    send(sq, "b", b"b1")
    send(sq, "a", b"a2", b"a3")
    lock = sq.accept_session("q", "a")
    assert lock is not None and lock.session_id == "a"
    got = sq.receive("q", 10, PL, session="a")
    assert [m.message.body for m in got] == [b"a1", b"a2", b"a3"]
    assert all(m.locked_until == lock.locked_until for m in got)
    for m in got:
        sq.complete("q", token(m))
    assert sq.get_queue("q").active == 1


def test_accept_next_available_session(sq: Namespace) -> None:
    assert sq.accept_session("q", None) is None
    send(sq, "a", b"1")
    send(sq, "b", b"2")
    first = sq.accept_session("q", None)
    second = sq.accept_session("q", None)
    assert first is not None and second is not None
    assert {first.session_id, second.session_id} == {"a", "b"}
    assert sq.accept_session("q", None) is None  # both are locked


def test_session_lock_is_exclusive(sq: Namespace) -> None:
    send(sq, "a", b"1")
    sq.accept_session("q", "a")
    fails(Code.SESSION_CANNOT_BE_LOCKED, sq.accept_session, "q", "a")


def test_accept_empty_named_session(sq: Namespace) -> None:
    lock = sq.accept_session("q", "new")
    assert lock is not None
    assert sq.receive("q", 5, PL, session="new") == []
    send(sq, "new", b"late")  # messages arriving later belong to the holder
    assert [m.message.body for m in sq.receive("q", 5, PL, session="new")] == [b"late"]


def test_session_state(sq: Namespace, journal: RecordingJournal) -> None:
    sq.accept_session("q", "a")
    assert sq.get_session_state("q", "a") is None
    sq.set_session_state("q", "a", b"step-2")
    assert sq.get_session_state("q", "a") == b"step-2"
    assert journal.session_states[("q", "a")] == b"step-2"
    assert sq.list_sessions("q") == ["a"]  # a session with state is listed
    sq.release_session("q", "a")
    sq.accept_session("q", "a")
    assert sq.get_session_state("q", "a") == b"step-2"  # kept after release
    sq.set_session_state("q", "a", None)
    assert sq.get_session_state("q", "a") is None
    assert ("q", "a") not in journal.session_states
    fails(Code.BAD_ARGUMENT, sq.set_session_state, "q", "a", "text")


def test_session_state_needs_the_session_lock(sq: Namespace) -> None:
    fails(Code.SESSION_LOCK_LOST, sq.get_session_state, "q", "a")
    fails(Code.SESSION_LOCK_LOST, sq.set_session_state, "q", "a", b"x")


def test_list_sessions_with_messages(sq: Namespace) -> None:
    send(sq, "a", b"1")
    send(sq, "b", b"2")
    assert sorted(sq.list_sessions("q")) == ["a", "b"]
    sq.accept_session("q", "a")
    [m] = sq.receive("q", 1, PL, session="a")
    sq.complete("q", token(m))
    assert sq.list_sessions("q") == ["b"]


def test_session_lock_expiry_counts_a_delivery(sq: Namespace, clock: ManualClock) -> None:
    send(sq, "a", b"1")
    lock = sq.accept_session("q", "a")
    assert lock is not None
    [m] = sq.receive("q", 1, PL, session="a")
    assert sq.next_deadline() == lock.locked_until
    clock.advance(30)
    sq.tick()
    fails(Code.SESSION_LOCK_LOST, sq.complete, "q", token(m))
    fails(Code.SESSION_LOCK_LOST, sq.receive, "q", 1, PL, session="a")
    assert sq.accept_session("q", "a") is not None
    [again] = sq.receive("q", 1, PL, session="a")
    assert again.delivery_count == 1


def test_closing_a_session_does_not_count_a_delivery(sq: Namespace) -> None:
    send(sq, "a", b"1")
    sq.accept_session("q", "a")
    sq.receive("q", 1, PL, session="a")
    sq.release_session("q", "a")
    sq.accept_session("q", "a")
    [again] = sq.receive("q", 1, PL, session="a")
    assert again.delivery_count == 0


def test_renew_session_lock(sq: Namespace, clock: ManualClock) -> None:
    send(sq, "a", b"1")
    sq.accept_session("q", "a")
    [m] = sq.receive("q", 1, PL, session="a")
    clock.advance(20)
    until = sq.renew_session_lock("q", "a")
    assert until == clock.now() + 30
    clock.advance(20)
    sq.tick()
    assert sq.renew_lock("q", token(m)) == clock.now() + 30  # a message lock renews the session
    sq.complete("q", token(m))
    fails(Code.SESSION_LOCK_LOST, sq.renew_session_lock, "q", "zzz")


def test_abandon_in_session_keeps_order(sq: Namespace) -> None:
    send(sq, "a", b"1", b"2")
    sq.accept_session("q", "a")
    one, two = sq.receive("q", 2, PL, session="a")
    sq.abandon("q", token(one))
    sq.complete("q", token(two))
    [again] = sq.receive("q", 2, PL, session="a")
    assert (again.message.body, again.delivery_count) == (b"1", 1)


def test_deferred_session_message(sq: Namespace) -> None:
    send(sq, "a", b"1")
    sq.accept_session("q", "a")
    [m] = sq.receive("q", 1, PL, session="a")
    sq.defer("q", token(m))
    fails(Code.SESSION_LOCK_LOST, sq.receive_deferred, "q", [m.sequence_number], PL, "b")
    [d] = sq.receive_deferred("q", [m.sequence_number], PL, session="a")
    sq.complete("q", token(d))
    assert sq.get_queue("q").total == 0


def test_session_operations_on_a_plain_queue(ns: Namespace) -> None:
    ns.create_queue("plain")
    fails(Code.INVALID_OPERATION, ns.accept_session, "plain", None)
    fails(Code.INVALID_OPERATION, ns.list_sessions, "plain")


def test_bad_session_id(sq: Namespace) -> None:
    fails(Code.BAD_ARGUMENT, sq.accept_session, "q", "x" * 129)


def test_dead_letter_queue_of_a_session_queue_needs_no_session(sq: Namespace) -> None:
    send(sq, "a", b"1")
    sq.accept_session("q", "a")
    [m] = sq.receive("q", 1, PL, session="a")
    sq.dead_letter("q", token(m), reason="r")
    [d] = sq.receive("q/$DeadLetterQueue", 1, RD)
    assert d.message.session_id == "a"
