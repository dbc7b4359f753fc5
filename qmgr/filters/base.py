"""The interface every filter implements, and the two boolean filters."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar


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


class _ConstantFilter(Filter):
    """A filter whose answer is the same for every message: ``VALUE``, written ``TEXT``."""

    VALUE: ClassVar[bool]
    TEXT: ClassVar[str]

    @property
    def text(self) -> str:
        return self.TEXT

    def evaluate(self, system: Mapping[str, Any], user: Mapping[str, Any]) -> bool | None:
        return self.VALUE

    def matches(self, system: Mapping[str, Any], user: Mapping[str, Any]) -> bool:
        return self.VALUE

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self).__name__)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class TrueFilter(_ConstantFilter):
    """Selects every message; the same as the SQL filter `1=1` (the `$Default` rule)."""

    VALUE = True
    TEXT = "1=1"


class FalseFilter(_ConstantFilter):
    """Selects no message; the same as the SQL filter `1=0`."""

    VALUE = False
    TEXT = "1=0"
