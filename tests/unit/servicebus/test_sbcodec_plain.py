"""The store's header written directly against the general encoder's (a header dict through
``json``): the same text, and the same message back; what the direct writer cannot write as
the general path does is left to that path."""

from __future__ import annotations

import datetime as dt
import math
import uuid

from hypothesis import given
from hypothesis import strategies as st

from qmgr.core.values import Int32
from qmgr.servicebus.message import MessageState, SbMessage, Stored
from qmgr.store import sbcodec
from qmgr.store.sbcodec import decode_stored, encode_stored

text = st.none() | st.text(max_size=20)
finite = st.floats(allow_nan=False, allow_infinity=False)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**31), 2**31 - 1).map(Int32)
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.sampled_from([math.inf, -math.inf, math.nan])
    | st.text(max_size=10)
    | st.binary(max_size=10)
    | st.uuids()
    | st.datetimes(timezones=st.none() | st.just(dt.UTC))
    | st.timedeltas()
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=5) | st.integers(), inner, max_size=3)
    ),
    max_leaves=8,
)
properties = st.dictionaries(st.text(max_size=12), values, max_size=8)
ttl = st.none() | st.floats(min_value=0.001) | st.just(math.inf)


@given(
    st.tuples(*[text] * 9),
    ttl,
    st.sampled_from(["data", "amqp-value", "amqp-sequence"]),
    properties,
    st.none() | st.dictionaries(st.text(max_size=8), values, max_size=3),
    st.sampled_from(list(MessageState)),
    finite,
    finite | st.just(math.inf),
    st.integers(0, 10**6),
    st.integers(0, 10**12),
    st.integers(0, 5),
    text,
    st.none() | finite,
    st.integers(0, 10**6),
)
def test_a_header_written_directly_is_the_general_encoders_text(
    ids,
    time_to_live,
    body_type,
    props,
    extra,
    state,
    enqueued,
    expires,
    count,
    first,
    hops,
    source,
    scheduled,
    size,
) -> None:
    message_id, correlation_id, session_id, reply_to, reply_sid, to, subject, ctype, pkey = ids
    msg = SbMessage(
        b"body",
        body_type=body_type,
        message_id=message_id,
        correlation_id=correlation_id,
        session_id=session_id,
        reply_to=reply_to,
        reply_to_session_id=reply_sid,
        to=to,
        subject=subject,
        content_type=ctype,
        partition_key=pkey,
        time_to_live=time_to_live,
        properties=props,
        extra=extra or {},
    )
    stored = Stored(
        msg,
        7,
        enqueued,
        expires,
        state=state,
        delivery_count=count,
        enqueued_sequence_number=first,
        hop_count=hops,
        dead_letter_source=source,
        scheduled_enqueue_time=scheduled,
        size=size,
    )
    direct = sbcodec._direct_header(stored, msg)
    assert direct is not None
    assert direct == sbcodec._general_header(stored)
    back = decode_stored(7, b"body", direct)
    assert back.message.properties.keys() == msg.properties.keys()
    assert (back.state, back.enqueued_time, back.expires_at, back.delivery_count) == (
        state,
        enqueued,
        expires,
        count,
    )
    assert (back.enqueued_sequence_number, back.hop_count, back.size) == (first, hops, size)
    assert back.dead_letter_source == (source or None)
    assert back.scheduled_enqueue_time == scheduled


def test_a_bridged_message_comes_back_with_its_typed_properties() -> None:
    msg = SbMessage(
        b"x",
        message_id="AMQ-1",
        session_id="P001",
        subject="Prices/Fruit",
        time_to_live=30.5,
        properties={
            "SequenceNumber": 12,
            "width": Int32(3),
            "ratio": 0.25,
            "ok": True,
            "raw": b"\x00\xff",
            "id": uuid.UUID(int=5),
            "MQTopicString": "Prices/Fruit",
        },
        extra={"amqp-header": {"durable": True, "priority": 4, "first_acquirer": False}},
    )
    back = decode_stored(1, b"x", encode_stored(Stored(msg, 1, 100.0, math.inf)))
    assert back.message == msg
    assert type(back.message.properties["width"]) is Int32


def test_what_cannot_be_written_directly_takes_the_general_path() -> None:
    for msg in (
        SbMessage(b"x", message_id=5),  # type: ignore[arg-type]  # a number as an identifier
        SbMessage(b"x", message_id=True),  # type: ignore[arg-type]
        SbMessage(b"x", properties={1: "one"}),  # type: ignore[dict-item]
    ):
        stored = Stored(msg, 1, 100.0, math.inf)
        if msg.message_id == 5:
            assert sbcodec._direct_header(stored, msg) == sbcodec._general_header(stored)
            continue
        assert sbcodec._direct_header(stored, msg) is None
        assert encode_stored(stored) == sbcodec._general_header(stored)
    unbounded = SbMessage(b"x", properties={"up": math.inf, "down": -math.inf, "nan": math.nan})
    stored = Stored(unbounded, 1, 100.0, math.inf)
    assert sbcodec._direct_header(stored, unbounded) == sbcodec._general_header(stored)
    odd = Stored(SbMessage(b"x"), 1, 100.0, -math.inf)
    assert sbcodec._direct_header(odd, odd.message) is None
    late = Stored(SbMessage(b"x"), 1, 100.0, math.inf, scheduled_enqueue_time=math.inf)
    assert sbcodec._direct_header(late, late.message) is None
    assert decode_stored(1, b"x", encode_stored(late)).scheduled_enqueue_time == math.inf
