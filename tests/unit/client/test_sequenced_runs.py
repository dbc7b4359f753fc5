"""The sequenced-delivery bookkeeping of a batch: the run whose turn has come, recorded in the
session state before any of it is settled, and what a consumer that finds such a record (its
predecessor died in the middle of the run) moves past."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qmgr.client.sequenced import SequenceState, renewal_failed


def test_the_run_goes_from_next_through_held_and_deferred_numbers_up_to_a_gap() -> None:
    state = SequenceState(next=3, deferred={4: 104, 7: 107})
    assert state.run(held={3, 5, 8}) == [3, 4, 5]
    assert state.run(held={5}) == []  # 3 has not come
    assert SequenceState(next=4, deferred={4: 104}).run(held=()) == [4]


def test_the_recorded_run_is_what_was_taken_and_the_confirmed_deferrals_between() -> None:
    state = SequenceState(next=3, deferred={4: 104, 6: 106}, taken={3: 201, 5: 202})
    assert state.recorded_run() == [(3, 201), (4, 104), (5, 202), (6, 106)]
    state.unconfirmed.add(4)  # maybe never deferred: not part of a recorded run
    assert state.recorded_run() == [(3, 201)]


def test_taken_round_trips_and_an_older_state_without_it_reads_as_none_taken() -> None:
    state = SequenceState(next=2, taken={2: 40, 3: 41})
    assert SequenceState.from_bytes(state.to_bytes()) == state
    assert SequenceState.from_bytes(b'{"next": 5, "deferred": {"7": 9}}').taken == {}


def test_done_forgets_a_taken_number() -> None:
    state = SequenceState(taken={1: 10, 2: 11})
    state.done(1, ok=True)
    assert state.taken == {2: 11}


@given(
    st.integers(min_value=1, max_value=30),
    st.data(),
)
def test_after_a_crash_in_a_run_only_the_message_in_hand_is_handled_again(
    length: int, data: st.DataObject
) -> None:
    """A run of ``length`` (some received, some deferred) recorded, then handled and settled
    one at a time until a crash while the ``at``-th is in hand (handled or not, not settled):
    the next consumer sees the settled ones gone, moves past exactly those, and its ``next``
    is the one in hand."""
    deferred_ones = data.draw(st.sets(st.integers(min_value=1, max_value=length)))
    at = data.draw(st.integers(min_value=1, max_value=length))
    state = SequenceState(
        next=1,
        deferred={n: 100 + n for n in deferred_ones},
        taken={n: 100 + n for n in range(1, length + 1) if n not in deferred_ones},
    )
    stored = SequenceState.from_bytes(state.to_bytes())
    present = {100 + n for n in range(at, length + 1)}  # 1 .. at-1 were settled
    assert stored.recover(present) == at - 1
    assert stored.next == at and stored.processed == at - 1
    assert stored.taken == {}
    assert sorted(stored.deferred) == sorted(n for n in deferred_ones if n >= at)


def test_a_lock_that_ran_out_before_its_renewal_is_logged_with_the_renewal_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """What the SDK's lock renewer hands its failure callback: the session and the error
    (``AutoLockRenewFailed`` wrapping the renewal's own, or none)."""
    from azure.servicebus.exceptions import AutoLockRenewFailed

    class Session:
        session_id = "P002"

    with caplog.at_level(logging.WARNING, logger="qmgr.client.sequenced"):
        renewal_failed(Session(), AutoLockRenewFailed("failed", error=TimeoutError("no answer")))
        renewal_failed(Session(), None)
    assert [r.getMessage() for r in caplog.records] == [
        "session P002: its lock ran out before it was renewed (TimeoutError('no answer'))",
        "session P002: its lock ran out before it was renewed (no renewal error)",
    ]
