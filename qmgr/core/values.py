"""Typed message property values.

A property value is a ``str``, ``int``, ``float``, ``bool``, ``bytes`` or ``None``. A plain
``int`` is a 64-bit integer; :class:`Int32` marks a value that must travel as a 32-bit integer,
so a property set as int32 by one application is seen as int32 by the next.
"""

from __future__ import annotations

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class Int32(int):
    """An integer property value carried as a 32-bit integer."""

    __slots__ = ()

    def __new__(cls, value: int) -> Int32:
        if not INT32_MIN <= value <= INT32_MAX:
            raise ValueError(f"{value} does not fit in a 32-bit integer")
        return super().__new__(cls, value)


PropertyValue = str | int | float | bool | bytes | None
Properties = dict[str, PropertyValue]


def check_property(name: str, value: object) -> PropertyValue:
    """Return ``value`` if it is a valid property value, else raise ``ValueError``."""
    if not name:
        raise ValueError("property names must not be empty")
    if value is None or isinstance(value, str | bool | float | bytes):
        return value
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise ValueError(f"property {name}: {value} does not fit in a 64-bit integer")
        return value
    raise ValueError(f"property {name}: unsupported type {type(value).__name__}")
