"""The system properties that `sys.` may name, their types, and which actions may SET.

Names are looked up case-insensitively. The engine passes system properties under their
canonical names (an alias such as `Subject` for `Label` is accepted too); a system property that
is absent from the mapping is a null value, not unknown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

from qmgr.filters import values as v


@dataclass(frozen=True)
class SystemProperty:
    name: str  # canonical name
    aliases: tuple[str, ...]
    kind: int  # the .NET type, a values.* kind
    writable: bool
    correlation: bool  # may appear in a correlation filter
    max_length: int | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    @property
    def folded(self) -> tuple[str, ...]:
        return tuple(fold(name) for name in self.names)


def _p(
    name: str,
    kind: int,
    writable: bool,
    correlation: bool = False,
    aliases: tuple[str, ...] = (),
    max_length: int | None = None,
) -> SystemProperty:
    return SystemProperty(name, aliases, kind, writable, correlation, max_length)


SYSTEM_PROPERTIES: Final[tuple[SystemProperty, ...]] = (
    _p("MessageId", v.STR, True, True, max_length=128),
    _p("CorrelationId", v.STR, True, True),
    _p("Label", v.STR, True, True, aliases=("Subject",)),
    _p("To", v.STR, True, True),
    _p("ReplyTo", v.STR, True, True),
    _p("ReplyToSessionId", v.STR, True, True, max_length=128),
    _p("SessionId", v.STR, True, True, max_length=128),
    _p("ContentType", v.STR, True, True),
    _p("PartitionKey", v.STR, True, max_length=128),
    _p("ViaPartitionKey", v.STR, True, max_length=128),
    _p("TimeToLive", v.TIMESPAN, True),
    _p("ScheduledEnqueueTimeUtc", v.DATETIME, True),
    _p("ForcePersistence", v.BOOL, True),
    _p("EnqueuedTimeUtc", v.DATETIME, False),
    _p("ExpiresAtUtc", v.DATETIME, False),
    _p("SequenceNumber", v.I64, False),
    _p("EnqueuedSequenceNumber", v.I64, False),
    _p("DeliveryCount", v.I32, False),
    _p("LockedUntilUtc", v.DATETIME, False, aliases=("LockedUntil",)),
    _p("LockToken", v.GUID, False),
    _p("Size", v.I64, False),
    _p("State", v.STR, False),
    _p("DeadLetterSource", v.STR, False),
)


@lru_cache(maxsize=8192)
def fold(name: str) -> str:
    """Case-folding for property names (per-character, like .NET OrdinalIgnoreCase)."""
    if name.isascii():
        return name.lower()
    out = []
    for ch in name:
        upper = ch.upper()
        ch = upper if len(upper) == 1 else ch
        lower = ch.lower()
        out.append(lower if len(lower) == 1 else ch)
    return "".join(out)


_BY_FOLDED: Final[dict[str, SystemProperty]] = {
    fold(name): prop for prop in SYSTEM_PROPERTIES for name in prop.names
}


def resolve(name: str) -> SystemProperty | None:
    """The system property a `sys.` name refers to, or None if there is no such property."""
    return _BY_FOLDED.get(fold(name))


def lookup_user(user: Mapping[str, Any], name: str) -> Any:
    """A user property by name (case-insensitive); UNKNOWN when absent."""
    value = user.get(name, v.UNKNOWN)
    if value is v.UNKNOWN:
        value = lookup_user_folded(user, fold(name))
    return value


def lookup_user_folded(user: Mapping[str, Any], folded: str) -> Any:
    """The slow path of `lookup_user`: scan the keys with a folded name."""
    for key, value in user.items():
        if type(key) is str and fold(key) == folded:
            return value
    return v.UNKNOWN


def lookup_system(system: Mapping[str, Any], prop: SystemProperty) -> Any:
    """A system property's value; None when the mapping does not have it."""
    value = system.get(prop.name, v.UNKNOWN)
    if value is v.UNKNOWN:
        value = lookup_system_folded(system, prop.folded)
    return value


def lookup_system_folded(system: Mapping[str, Any], folded: tuple[str, ...]) -> Any:
    """The slow path of `lookup_system`."""
    for key, value in system.items():
        if type(key) is str and fold(key) in folded:
            return value
    return None


def matching_keys(mapping: Mapping[str, Any], folded: tuple[str, ...]) -> list[str]:
    """The keys of `mapping` whose folded form is one of `folded` (used by SET and REMOVE)."""
    return [key for key in mapping if type(key) is str and fold(key) in folded]
