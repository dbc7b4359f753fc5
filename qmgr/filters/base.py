"""The interface every filter implements, and the two boolean filters."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any


class Filter(ABC):
    """A subscription rule's filter.

    `evaluate` returns True, False or None (unknown); `matches` is True only for TRUE, which is
    what selects a message. Both take the message's system properties (canonical names such as
    `MessageId`, `Label`) and its user (application) properties.
    """

    @property
    @abstractmethod
    def text(self) -> str:
        """The SQL text of the filter (for correlation filters, the equivalent SQL)."""

    @abstractmethod
    def evaluate(self, system: Mapping[str, Any], user: Mapping[str, Any]) -> bool | None:
        """TRUE, FALSE or None for UNKNOWN."""

    @abstractmethod
    def matches(self, system: Mapping[str, Any], user: Mapping[str, Any]) -> bool:
        """True when the filter selects the message."""


class TrueFilter(Filter):
    """Selects every message; the same as the SQL filter `1=1` (the `$Default` rule)."""

    @property
    def text(self) -> str:
        return "1=1"

    def evaluate(self, system: Mapping[str, Any], user: Mapping[str, Any]) -> bool | None:
        return True

    def matches(self, system: Mapping[str, Any], user: Mapping[str, Any]) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        return type(other) is TrueFilter

    def __hash__(self) -> int:
        return hash("TrueFilter")

    def __repr__(self) -> str:
        return "TrueFilter()"


class FalseFilter(Filter):
    """Selects no message; the same as the SQL filter `1=0`."""

    @property
    def text(self) -> str:
        return "1=0"

    def evaluate(self, system: Mapping[str, Any], user: Mapping[str, Any]) -> bool | None:
        return False

    def matches(self, system: Mapping[str, Any], user: Mapping[str, Any]) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        return type(other) is FalseFilter

    def __hash__(self) -> int:
        return hash("FalseFilter")

    def __repr__(self) -> str:
        return "FalseFilter()"
