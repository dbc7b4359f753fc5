"""The store's header of a plain message (written directly) against the general encoder's: the
same text, and the same message back."""

from __future__ import annotations

import json
import math

from hypothesis import given
from hypothesis import strategies as st

from qmgr.servicebus.message import MessageState, SbMessage, Stored
from qmgr.store import sbcodec
from qmgr.store.sbcodec import decode_stored, encode_stored

text = st.none() | st.text(max_size=20)
finite = st.floats(allow_nan=False, allow_infinity=False)


def general(stored: Stored) -> str:
    """``encode_stored`` through the general encoder (``_JSON`` on the header dict)."""
    m = stored.message
    m.properties = {"force": 1}  # not a plain message: the general path
    try:
        header = json.loads(encode_stored(stored))
    finally:
        m.properties = {}
    del header["p"]
    return sbcodec._JSON.encode(header)


@given(
    st.tuples(*[text] * 9),
    st.sampled_from(list(MessageState)),
    finite,
    finite | st.just(math.inf),
    st.integers(0, 10**6),
    st.integers(0, 10**12),
    st.integers(0, 5),
    text,
    st.integers(0, 10**6),
)
def test_a_plain_header_is_the_general_encoders_text(
    ids, state, enqueued, expires, count, first, hops, source, size
) -> None:
    message_id, correlation_id, session_id, reply_to, reply_sid, to, subject, ctype, pkey = ids
    msg = SbMessage(
        b"body",
        message_id=message_id,
        correlation_id=correlation_id,
        session_id=session_id,
        reply_to=reply_to,
        reply_to_session_id=reply_sid,
        to=to,
        subject=subject,
        content_type=ctype,
        partition_key=pkey,
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
        size=size,
    )
    plain = sbcodec._plain_header(stored, msg)
    assert plain is not None
    assert plain == general(stored)
    back = decode_stored(7, b"body", plain)
    assert back.message == msg
    assert (back.state, back.enqueued_time, back.expires_at, back.delivery_count) == (
        state,
        enqueued,
        expires,
        count,
    )
    assert (back.enqueued_sequence_number, back.hop_count, back.size) == (first, hops, size)
    assert back.dead_letter_source == (source or None)


def test_what_is_not_plain_takes_the_general_path() -> None:
    for msg in (
        SbMessage(b"x", time_to_live=5.0),
        SbMessage(b"x", properties={"k": 1}),
        SbMessage(b"x", extra={"amqp-header": {}}),
        SbMessage(b"x", body_type="amqp-value"),
    ):
        stored = Stored(msg, 1, 100.0, math.inf)
        assert decode_stored(1, b"x", encode_stored(stored)).message == msg
    odd = Stored(SbMessage(b"x", message_id=5), 1, 100.0, -math.inf)  # type: ignore[arg-type]
    assert sbcodec._plain_header(odd, odd.message) is None
