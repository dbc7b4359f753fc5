"""The sequenced-delivery bookkeeping alone: what happens to each arrival, given the progress
kept in the session state (the consumer pattern docs/servicebus.md describes)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qmgr.client.sequenced import (
    MAX_STATE_BYTES,
    STATE_MAGIC,
    SequenceState,
    SessionStateTooLarge,
    Step,
    sequence_of,
)


def test_a_new_session_starts_at_the_first_number() -> None:
    assert SequenceState.from_bytes(None).next == 1
    assert SequenceState.from_bytes(b"", first=5).next == 5


def test_early_arrivals_are_deferred_and_fetched_in_turn() -> None:
    state = SequenceState()
    assert state.classify(3) is Step.DEFER
    state.remember_deferred(3, broker_sequence=101)
    assert state.classify(2) is Step.DEFER
    state.remember_deferred(2, broker_sequence=102)
    assert state.next_deferred() is None  # 1 has not come yet
    assert state.classify(1) is Step.PROCESS
    state.done(1, ok=True)
    assert state.next_deferred() == 102
    state.done(2, ok=True)
    assert state.next_deferred() == 101
    state.done(3, ok=True, last=True)
    assert state.closed and state.processed == 3 and state.deferred == {}


def test_a_number_already_processed_is_stale_and_a_missing_one_invalid() -> None:
    state = SequenceState(next=4)
    assert state.classify(3) is Step.STALE
    assert state.classify(None) is Step.INVALID


def test_a_failure_is_recorded_and_the_sequence_moves_on() -> None:
    state = SequenceState()
    state.done(1, ok=False)
    assert state.next == 2 and state.failed == [1] and state.processed == 0


def test_only_the_next_number_can_be_done() -> None:
    with pytest.raises(ValueError, match="not the next"):
        SequenceState().done(2, ok=True)


def test_state_round_trips_and_foreign_state_is_refused() -> None:
    state = SequenceState(next=7, deferred={9: 44, 8: 43}, failed=[2], processed=4, closed=False)
    assert SequenceState.from_bytes(state.to_bytes()) == state
    with pytest.raises(ValueError, match="not a sequence state"):
        SequenceState.from_bytes(b'{"cart": 3}')
    with pytest.raises(ValueError, match="not a sequence state"):
        SequenceState.from_bytes(b"\xff\x00")


def test_the_sequence_property_as_the_sdk_gives_it() -> None:
    assert sequence_of({b"SequenceNumber": 3}, "SequenceNumber") == 3
    assert sequence_of({"SequenceNumber": b"12"}, "SequenceNumber") == 12
    assert sequence_of({"SequenceNumber": "x"}, "SequenceNumber") is None
    assert sequence_of({"SequenceNumber": True}, "SequenceNumber") is None
    assert sequence_of({"SequenceNumber": 1.5}, "SequenceNumber") is None
    assert sequence_of(None, "SequenceNumber") is None


@given(st.integers(min_value=1, max_value=60), st.randoms(use_true_random=False))
def test_any_arrival_order_is_processed_in_sequence(n: int, rnd: random.Random) -> None:
    """Driving the state as the receiver does, with redeliveries thrown in: the processed
    numbers come out as 1..n exactly once each."""
    arrivals = list(range(1, n + 1)) + [rnd.randint(1, n) for _ in range(n // 4)]
    rnd.shuffle(arrivals)
    state = SequenceState()
    deferred_msgs: dict[int, int] = {}
    processed: list[int] = []
    for number in arrivals:
        step = state.classify(number)
        if step is Step.DEFER:
            if number in state.deferred:
                continue  # a redelivered copy of a deferred one: only its first is kept
            state.remember_deferred(number, 1000 + number)
            deferred_msgs[1000 + number] = number
        elif step is Step.PROCESS:
            processed.append(number)
            state.done(number, ok=True)
            while (broker := state.next_deferred()) is not None:
                processed.append(deferred_msgs.pop(broker))
                state.done(state.next, ok=True)
    assert processed == list(range(1, n + 1))
    assert state.deferred == {}


def test_a_deferral_is_confirmed_once_it_happened_and_kept_in_the_state() -> None:
    state = SequenceState()
    state.remember_deferred(3, broker_sequence=7)
    assert state.unconfirmed == {3}  # a consumer dying now: the message is still active
    state.confirm_deferred(3)
    assert state.unconfirmed == set() and state.deferred == {3: 7}
    state.remember_deferred(4, broker_sequence=8)
    assert SequenceState.from_bytes(state.to_bytes()) == state


def test_the_state_of_earlier_versions_still_loads() -> None:
    """A session state written as plain JSON (as earlier versions of the helper did) goes on."""
    old = b'{"next":7,"deferred":{"8":43,"9":44},"unconfirmed":[9],"taken":{},"failed":[2],'
    old += b'"processed":4,"closed":false}'
    state = SequenceState.from_bytes(old)
    assert state == SequenceState(
        next=7, deferred={8: 43, 9: 44}, unconfirmed={9}, failed=[2], processed=4
    )
    assert SequenceState.from_bytes(old.decode()) == state  # the SDK may hand back a str


def test_a_session_far_out_of_order_fits_in_a_session_state() -> None:
    """Two paths, one 100,000 messages behind the other: every other number deferred (50,000
    entries) fits in Service Bus's 256 KB session state, and reads back the same."""
    deferred = {n: 1_000_000 + i for i, n in enumerate(range(2, 100_002, 2))}
    taken = {n: 2_000_000 + n for n in range(100_003, 102_003)}
    state = SequenceState(
        next=1, deferred=deferred, unconfirmed=set(range(2, 2002, 2)), taken=taken
    )
    data = state.to_bytes()
    assert len(data) <= MAX_STATE_BYTES
    assert SequenceState.from_bytes(data) == state


def test_a_state_beyond_the_limit_is_refused_with_a_clear_error() -> None:
    rng = random.Random(5)
    deferred = {n: rng.randrange(1 << 40) for n in rng.sample(range(1 << 40), 80_000)}
    with pytest.raises(SessionStateTooLarge, match="beyond Service Bus's"):
        SequenceState(next=1, deferred=deferred).to_bytes()


@given(
    st.dictionaries(st.integers(1, 10**12), st.integers(0, 2**63 - 1), max_size=50),
    st.sets(st.integers(1, 10**12), max_size=20),
    st.lists(st.integers(1, 10**12), max_size=10),
    st.integers(1, 10**12),
)
def test_the_compact_state_round_trips(
    deferred: dict[int, int], unconfirmed: set[int], failed: list[int], next_: int
) -> None:
    state = SequenceState(
        next=next_, deferred=deferred, unconfirmed=unconfirmed, taken=dict(deferred), failed=failed
    )
    assert SequenceState.from_bytes(state.to_bytes()) == state


def test_a_damaged_compact_state_is_refused() -> None:
    data = SequenceState(next=3, deferred={5: 9}).to_bytes()
    with pytest.raises(ValueError, match="not a sequence state"):
        SequenceState.from_bytes(data[:-3])
    with pytest.raises(ValueError, match="not a sequence state"):
        SequenceState.from_bytes(STATE_MAGIC + b"garbage")


def test_recovery_moves_past_what_is_gone_and_keeps_a_later_gone_one_from_being_lost() -> None:
    """A run 5..9 was recorded and handled; 5 and 6 are gone (settled), 7 is still there (its
    settlement was lost), 8 is gone too (settled after it) and 9 is there. 5 and 6 are moved
    past; 7 and 9 are handled again when they arrive; 8 is kept as deferred, so that when its
    turn comes and it is not found it is moved past instead of the sequence waiting for it."""
    state = SequenceState(next=5, taken={5: 105, 6: 106, 7: 107, 8: 108, 9: 109})
    assert state.recover(present={107, 109}) == 2
    assert state.next == 7 and state.taken == {}
    assert state.deferred == {8: 108} and not state.unconfirmed
    assert state.classify(7) is Step.PROCESS
    state.done(7, ok=True)
    assert state.next_deferred() == 108  # looked for; gone, so moved past
    state.done(8, ok=True)
    assert state.classify(9) is Step.PROCESS


def test_recovery_with_the_whole_run_gone_moves_past_it() -> None:
    state = SequenceState(next=5, taken={5: 105, 6: 106})
    assert state.recover(present=set()) == 2
    assert state.next == 7 and state.deferred == {}
