"""Message.with_properties keeps every other field (it must track the dataclass's fields)."""

from __future__ import annotations

import dataclasses

from qmgr.core.message import Message


def test_with_properties_equals_a_generic_copy() -> None:
    values = {f.name: f"v-{f.name}" for f in dataclasses.fields(Message)}
    msg = Message(**values)  # type: ignore[arg-type]
    copy = msg.with_properties({"k": 1})
    assert copy == dataclasses.replace(msg, properties={"k": 1})
    assert copy is not msg and msg.properties == "v-properties"
