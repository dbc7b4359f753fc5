"""Review findings: what the store's message codec gives back after a restart."""

from __future__ import annotations

import datetime as dt
import math

from qmgr.servicebus.message import SbMessage, Stored
from qmgr.store.sbcodec import decode_stored, encode_stored


def roundtrip(stored: Stored) -> Stored:
    return decode_stored(stored.sequence_number, stored.message.body, encode_stored(stored))


def test_a_timespan_property_comes_back_as_a_timespan() -> None:
    span = dt.timedelta(days=1, seconds=5, microseconds=7)
    msg = SbMessage(b"x", properties={"span": span, "neg": -span, "inner": {"k": [span]}})
    back = roundtrip(Stored(msg, 3, 100.0, math.inf)).message.properties
    assert back == {"span": span, "neg": -span, "inner": {"k": [span]}}
    assert type(back["span"]) is dt.timedelta
