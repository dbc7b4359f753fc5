"""Service Bus messages to and from rows: the body as a blob, everything else as tagged JSON, so
typed application properties (and what the protocol adapter keeps in ``extra``) come back with
their types.

Every stored copy of a message sent is encoded on the event loop before its send is
acknowledged, so the encoding is on the path of each send's answer. The header is written
directly, field by field, with ``json``'s own string and number forms, and gives the same text
the general path (a header dict through one ``json`` encoder made once) gives: about half its
cost for a message with application properties (a bridged one has eight, and three copies in
the demo's topic). A header with anything that path would write differently (a system property
that is neither a string nor a plain number, a property name that is not a string, a time that
is not a finite float) goes through the general path."""

from __future__ import annotations

import datetime as dt
import json
import math
import operator
import uuid
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from qmgr.core.values import Int32
from qmgr.servicebus.message import MessageState, SbMessage, Stored

# One encoder for every row: ``json.dumps`` with any option builds a new one per call.
_JSON = json.JSONEncoder(separators=(",", ":"))
_FIELDS = tuple(  # the optional system properties, kept under their own names
    f.name for f in fields(SbMessage) if f.name not in ("body", "body_type", "properties", "extra")
)
_field_values = operator.attrgetter(*_FIELDS)  # their values, in that order
_KEYS = tuple(f'"{name}":' for name in _FIELDS)  # their keys, as JSON
_stored_values = operator.attrgetter(
    "enqueued_time",
    "expires_at",
    "delivery_count",
    "enqueued_sequence_number",
    "hop_count",
    "dead_letter_source",
    "size",
)
_STATES = {state: str(state.value) for state in MessageState}
_text = json.encoder.encode_basestring_ascii  # a JSON string, as _JSON writes it
_float = float.__repr__  # a finite float, as _JSON writes it
_int = int.__repr__  # an int (or a subclass of it), as _JSON writes it
_TTL_KEY = '"time_to_live":'


def encode_value(v: Any) -> list[Any]:
    """A value as ``[tag, data]``: null, bool, int (Int32 kept apart), float, str, bytes, UUID,
    datetime, timedelta (TimeSpan), list and map (keys encoded too); anything else as its text (``r``)."""
    if v is None:
        return ["n", None]
    if isinstance(v, bool):
        return ["b", v]
    if isinstance(v, Int32):
        return ["i", int(v)]
    if isinstance(v, int):
        return ["l", v]
    if isinstance(v, float):
        return ["d", v if math.isfinite(v) else repr(v)]
    if isinstance(v, str):
        return ["s", v]
    if isinstance(v, bytes | bytearray | memoryview):
        return ["y", bytes(v).hex()]
    if isinstance(v, uuid.UUID):
        return ["u", str(v)]
    if isinstance(v, dt.datetime):
        return ["t", v.isoformat()]
    if isinstance(v, dt.timedelta):  # a TimeSpan, exactly (days, seconds, microseconds)
        return ["ts", [v.days, v.seconds, v.microseconds]]
    if isinstance(v, list | tuple):
        return ["a", [encode_value(x) for x in v]]
    if isinstance(v, dict):
        return ["o", [[encode_value(k), encode_value(x)] for k, x in v.items()]]
    return ["r", str(v)]


def decode_value(item: list[Any]) -> Any:
    tag, data = item
    if tag == "i":
        return Int32(data)
    if tag == "d":
        return float(data)
    if tag == "y":
        return bytes.fromhex(data)
    if tag == "u":
        return uuid.UUID(data)
    if tag == "t":
        return dt.datetime.fromisoformat(data)
    if tag == "ts":
        return dt.timedelta(days=data[0], seconds=data[1], microseconds=data[2])
    if tag == "a":
        return [decode_value(x) for x in data]
    if tag == "o":
        return {_key(decode_value(k)): decode_value(x) for k, x in data}
    return data  # n, b, l, s, r


def _key(k: Any) -> Any:
    return tuple(k) if isinstance(k, list) else k


def _time(t: float | None) -> float | str | None:
    return t if t is None or math.isfinite(t) else "inf"


def _untime(t: float | str | None) -> float | None:
    return math.inf if t == "inf" else t  # type: ignore[return-value]


def encode_stored(s: Stored) -> str:
    """Everything of a stored message but its body, as JSON (the lock token is not kept: a
    restart releases every lock; whether it was locked is the row's ``locked`` column)."""
    direct = _direct_header(s, s.message)
    return direct if direct is not None else _general_header(s)


def _general_header(s: Stored) -> str:
    """``encode_stored``'s text through a header dict and the JSON encoder: any message."""
    m = s.message
    header: dict[str, Any] = {k: v for k in _FIELDS if (v := getattr(m, k)) is not None}
    if "time_to_live" in header:
        header["time_to_live"] = _time(m.time_to_live)
    if m.body_type != "data":
        header["bt"] = m.body_type
    if m.properties:
        header["p"] = [[k, encode_value(v)] for k, v in m.properties.items()]
    if m.extra:
        header["x"] = encode_value(m.extra)
    header["st"] = s.state.value
    header["et"] = s.enqueued_time
    header["ex"] = _time(s.expires_at)
    header["dc"] = s.delivery_count
    header["es"] = s.enqueued_sequence_number
    if s.hop_count:
        header["hc"] = s.hop_count
    if s.dead_letter_source:
        header["dl"] = s.dead_letter_source
    if s.scheduled_enqueue_time is not None:
        header["sc"] = s.scheduled_enqueue_time
    if s.size:
        header["sz"] = s.size
    return _JSON.encode(header)


class _Indirect(Exception):
    """A value ``_value_text`` does not write as the general path would: take that path."""


def _value_text(v: Any) -> str:
    """``encode_value(v)`` as JSON text: the common types written directly, found by their
    exact type; any other (a subclass, a UUID, a time...) through ``encode_value`` and the
    encoder, which is what the general path writes by definition."""
    write = _WRITERS.get(type(v))
    return write(v) if write is not None else _JSON.encode(encode_value(v))


def _bool_text(v: bool) -> str:
    return '["b",true]' if v else '["b",false]'


def _int32_text(v: int) -> str:
    return f'["i",{_int(v)}]'


def _int_text(v: int) -> str:
    return f'["l",{_int(v)}]'


def _float_text(v: float) -> str:
    return f'["d",{_float(v)}]' if math.isfinite(v) else f'["d",{_text(repr(v))}]'


def _str_text(v: str) -> str:
    return f'["s",{_text(v)}]'


def _bytes_text(v: bytes | bytearray | memoryview) -> str:
    return f'["y","{bytes(v).hex()}"]'


def _list_text(v: list[Any] | tuple[Any, ...]) -> str:
    return '["a",[' + ",".join([_value_text(x) for x in v]) + "]]"


def _dict_text(v: dict[Any, Any]) -> str:
    return (
        '["o",[' + ",".join([f"[{_value_text(k)},{_value_text(x)}]" for k, x in v.items()]) + "]]"
    )


# the writer of each common type, found by the value's exact type (no isinstance chain)
_WRITERS: dict[type, Callable[[Any], str]] = {
    type(None): lambda _: '["n",null]',
    bool: _bool_text,
    Int32: _int32_text,
    int: _int_text,
    float: _float_text,
    str: _str_text,
    bytes: _bytes_text,
    list: _list_text,
    tuple: _list_text,
    dict: _dict_text,
}


def _number(v: Any) -> str:
    """A field's number as the JSON encoder writes it (finite floats and ints only)."""
    kind = type(v)
    if kind is float and math.isfinite(v):
        return _float(v)
    if kind is int:
        return _int(v)
    raise _Indirect


def _direct_header(s: Stored, m: SbMessage) -> str | None:
    """``encode_stored``'s text written directly (field by field, in the general path's order,
    with ``json``'s own string escaping) for a message whose system properties are strings or
    plain numbers, whose property names are strings and whose times are floats (finite, or an
    expiry of never); None for any other (the general path). Each stored copy of a message is
    encoded on the event loop before its send is answered, and most messages carry
    application properties (a bridged one, eight): through the header dict and the encoder
    that costs about twice as much."""
    et, ex, dc, es, hc, dl, sz = _stored_values(s)
    if (
        type(et) is not float
        or type(ex) is not float
        or not (ex == math.inf or math.isfinite(ex))
        or type(dc) is not int
        or type(es) is not int
        or type(hc) is not int
        or type(sz) is not int
        or not (dl is None or type(dl) is str)
    ):
        return None
    out = ["{"]
    try:
        for key, v in zip(_KEYS, _field_values(m), strict=True):
            if v is not None:
                if type(v) is str:
                    out += (key, _text(v), ",")
                elif key == _TTL_KEY:
                    out += (key, _number(v) if math.isfinite(v) else '"inf"', ",")
                else:
                    out += (key, _number(v), ",")
        if m.body_type != "data":
            out += ('"bt":', _text(m.body_type), ",")
        if m.properties:
            out.append('"p":[')
            for k, v in m.properties.items():
                if type(k) is not str:
                    return None
                out += ("[", _text(k), ",", _value_text(v), "],")
            out[-1] = "]],"
        if m.extra:
            out += ('"x":', _value_text(m.extra), ",")
        at = s.scheduled_enqueue_time
        scheduled = None if at is None else _number(at)
    except (_Indirect, TypeError):
        return None
    expires = '"inf"' if ex == math.inf else _float(ex)  # never expires: as ``_time`` writes it
    out.append(f'"st":{_STATES[s.state]},"et":{_float(et)},"ex":{expires},"dc":{dc},"es":{es}')
    if hc:
        out.append(f',"hc":{hc}')
    if dl:
        out.append(f',"dl":{_text(dl)}')
    if scheduled is not None:
        out.append(f',"sc":{scheduled}')
    if sz:
        out.append(f',"sz":{sz}')
    out.append("}")
    return "".join(out)


def decode_stored(seq: int, body: bytes, header: str) -> Stored:
    h = json.loads(header)
    message = SbMessage(body=bytes(body), body_type=h.get("bt", "data"))
    for name in _FIELDS:
        if name in h:
            setattr(message, name, h[name])
    if message.time_to_live is not None:
        message.time_to_live = _untime(message.time_to_live)
    message.properties = {k: decode_value(v) for k, v in h.get("p", ())}
    if "x" in h:
        message.extra = decode_value(h["x"])
    return Stored(
        message=message,
        sequence_number=seq,
        enqueued_time=h["et"],
        expires_at=float(_untime(h["ex"]) or 0.0),
        state=MessageState(h["st"]),
        delivery_count=h["dc"],
        enqueued_sequence_number=h["es"],
        hop_count=h.get("hc", 0),
        dead_letter_source=h.get("dl"),
        scheduled_enqueue_time=h.get("sc"),
        size=h.get("sz", 0),
    )
