"""The consumer's delivery buffer alone: messages handed out in order across deliveries, the
counts the application sees, and the acknowledgements and credit owed to the node."""

from __future__ import annotations

from itertools import accumulate

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qmgr.client import convert
from qmgr.client.flow import DeliveryBuffer
from qmgr.wire import messages_pb2, messaging_pb2


def delivery(first: int, count: int, size: int | None = None) -> convert.WireDelivery:
    wire = messaging_pb2.Delivery(size=size if size is not None else 10 * count)
    for i in range(first, first + count):
        wire.messages.append(messages_pb2.Message(body=str(i).encode(), sequence=i))
    return convert.WireDelivery(wire.SerializeToString())


def bodies(msgs: list[convert.ReceivedMessage]) -> list[int]:
    return [int(m.body) for m in msgs]


def test_messages_come_out_in_order_across_deliveries() -> None:
    buf = DeliveryBuffer(100, 10_000, "auto")
    buf.add(delivery(1, 3))
    buf.add(delivery(4, 2))
    assert buf.pending_messages == 5 and buf.pending_bytes == 50
    got = [buf.take_one(), buf.take_one()]
    assert bodies(got) == [1, 2]  # type: ignore[arg-type]
    assert buf.pending_messages == 3 and buf.handed == 2
    assert bodies(buf.take_all()) == [3, 4, 5]
    assert buf.take_one() is None and buf.take_all() == [] and not buf.ready()
    assert buf.pending_messages == 0 and buf.pending_bytes == 0 and buf.handed == 5


def test_credit_is_owed_once_a_delivery_is_taken_whole() -> None:
    buf = DeliveryBuffer(100, 10_000, "auto")
    buf.add(delivery(1, 2, size=70))
    buf.take_one()
    assert not buf.news and buf.control() is None  # half a delivery returns no credit
    buf.take_one()
    assert buf.news
    ack = buf.control()
    assert ack is not None
    assert (ack.acknowledged, ack.handed, ack.credit_messages, ack.credit_bytes) == (2, 2, 2, 70)
    assert not ack.closing and buf.control() is None


def test_explicit_acknowledgement_covers_what_was_handed_out() -> None:
    buf = DeliveryBuffer(100, 10_000, "explicit")
    buf.add(delivery(1, 3))
    buf.take_one()
    buf.news = False
    buf.acknowledge()
    assert buf.news
    ack = buf.control()
    assert ack is not None and (ack.acknowledged, ack.handed, ack.credit_messages) == (1, 1, 0)
    buf.take_all()
    ack = buf.control(final=True)
    assert ack is not None
    assert (ack.acknowledged, ack.handed, ack.credit_messages, ack.closing) == (1, 3, 3, True)


def test_credit_is_due_at_once_from_a_quarter_of_the_buffer() -> None:
    buf = DeliveryBuffer(8, 10_000, "auto")
    buf.add(delivery(1, 1))
    buf.take_all()
    assert not buf.credit_due()
    buf.add(delivery(2, 1))
    buf.take_all()
    assert buf.credit_due()
    by_bytes = DeliveryBuffer(1000, 100, "auto")
    by_bytes.add(delivery(1, 1, size=25))
    by_bytes.take_one()
    assert by_bytes.credit_due()


def test_a_full_buffer_is_a_slow_consumer_event_once_until_taken() -> None:
    buf = DeliveryBuffer(4, 10_000, "auto")
    assert not buf.add(delivery(1, 3))
    assert buf.add(delivery(4, 2)) and buf.full
    assert not buf.add(delivery(6, 1))  # still the same event
    assert buf.slow_consumer_events == 1
    buf.take_one()
    buf.take_one()
    buf.take_one()
    assert not buf.full
    assert buf.add(delivery(7, 5)) and buf.slow_consumer_events == 2


def test_an_empty_delivery_returns_its_bytes_at_once() -> None:
    buf = DeliveryBuffer(100, 10_000, "auto")
    assert not buf.add(delivery(1, 0, size=30))
    assert not buf.ready() and buf.news
    ack = buf.control()
    assert ack is not None and (ack.credit_messages, ack.credit_bytes) == (0, 30)


@pytest.mark.parametrize("ack", ["", "manual"])
def test_an_unknown_ack_mode_is_refused(ack: str) -> None:
    with pytest.raises(ValueError, match="ack must be one of"):
        DeliveryBuffer(10, 10, ack)


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("add"), st.integers(0, 5)),
            st.tuples(st.sampled_from(["one", "next", "all"]), st.just(0)),
        ),
        max_size=40,
    )
)
def test_messages_taken_any_way_come_out_once_in_order_with_credit_per_delivery(
    steps: list[tuple[str, int]],
) -> None:
    """take_one, take_all and ``next(buffer.taking)`` (a receiver's short way) mixed: every
    message once, in order, ``handed`` counting them, and a delivery's credit owed exactly
    when its last message has been taken."""
    buf = DeliveryBuffer(10_000, 10**9, "auto")
    added: list[int] = []
    sizes: list[int] = []  # each delivery's message count, in order
    out: list[int] = []
    credited = 0  # deliveries whose credit was returned
    for what, count in steps:
        if what == "add":
            buf.add(delivery(len(added) + 1, count))
            added += range(len(added) + 1, len(added) + 1 + count)
            if count:
                sizes.append(count)
        elif what == "one":
            msg = buf.take_one()
            assert (msg is None) == (len(out) == len(added))
            out += [] if msg is None else bodies([msg])
        elif what == "next":
            msg = next(buf.taking, None)
            out += [] if msg is None else bodies([msg])
        else:
            out += bodies(buf.take_all())
        assert out == added[: len(out)]
        assert buf.handed == len(out) and buf.pending_messages == len(added) - len(out)
        assert buf.ready() == (len(out) < len(added))
        whole = sum(1 for end in accumulate(sizes) if end <= len(out))
        owed, credited = sum(sizes[credited:whole]), whole
        ack = buf.control()
        if ack is None:
            assert owed == 0
        else:
            assert (ack.credit_messages, ack.handed, ack.acknowledged) == (owed, len(out), len(out))
