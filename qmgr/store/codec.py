"""Messages to and from rows: typed properties survive the round trip."""

from __future__ import annotations

import json
from typing import Any

from qmgr.core.message import Message
from qmgr.core.values import Int32, Properties, PropertyValue


def encode_properties(props: Properties) -> list[list[Any]]:
    out: list[list[Any]] = []
    for name, value in props.items():
        if value is None:
            out.append([name, "n", None])
        elif isinstance(value, bool):
            out.append([name, "b", value])
        elif isinstance(value, Int32):
            out.append([name, "i", int(value)])
        elif isinstance(value, int):
            out.append([name, "l", value])
        elif isinstance(value, float):
            out.append([name, "d", value])
        elif isinstance(value, bytes):
            out.append([name, "y", value.hex()])
        else:
            out.append([name, "s", value])
    return out


def decode_properties(items: list[list[Any]]) -> Properties:
    props: Properties = {}
    for name, kind, raw in items:
        value: PropertyValue
        if kind == "i":
            value = Int32(raw)
        elif kind == "y":
            value = bytes.fromhex(raw)
        elif kind == "d":
            value = float(raw)
        else:
            value = raw
        props[name] = value
    return props


def encode_header(msg: Message, encoded_properties: list[list[Any]] | None = None) -> str:
    """The message's metadata as JSON; ``encoded_properties`` saves re-encoding properties
    shared by the copies of one publication."""
    return json.dumps(
        {
            "p": encode_properties(msg.properties)
            if encoded_properties is None
            else encoded_properties,
            "pr": msg.priority,
            "ex": msg.expiry,
            "c": msg.correl_id.hex(),
            "t": msg.put_time,
            "bo": msg.backout_count,
            "r": msg.reply_to_queue,
            "tp": msg.topic,
            "ud": msg.sub_user_data,
            "rt": msg.retained,
        },
        separators=(",", ":"),
    )


def decode_message(seq: int, message_id: str, body: bytes, header: str) -> Message:
    h = json.loads(header)
    return Message(
        message_id=message_id,
        body=bytes(body),
        properties=decode_properties(h["p"]),
        persistent=True,
        priority=h["pr"],
        expiry=h["ex"],
        correl_id=bytes.fromhex(h["c"]),
        put_time=h["t"],
        backout_count=h["bo"],
        reply_to_queue=h["r"],
        topic=h["tp"],
        sub_user_data=h["ud"],
        retained=h["rt"],
        sequence=seq,
    )
