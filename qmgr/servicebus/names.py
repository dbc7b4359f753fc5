"""Entity names and paths, as Service Bus documents them.

- Queue and topic: 1-260 characters of letters, digits, ``.``, ``-``, ``_`` and ``/``; starts and
  ends with a letter or digit; no empty path segment (``a//b``).
- Subscription and rule: 1-50 characters of letters, digits, ``.``, ``-`` and ``_``; starts and
  ends with a letter or digit. A rule may also be named ``$Default`` (any case), the rule a new
  subscription gets and the name frameworks use to replace it.
- Names compare case-insensitively; the case given at creation is kept for display.
- Paths: ``queue``, ``topic``, ``topic/Subscriptions/sub``, and a dead-letter sub-queue
  ``<queue or subscription path>/$DeadLetterQueue``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from qmgr.servicebus.errors import bad

DEFAULT_RULE = "$Default"
DLQ_SUFFIX = "$DeadLetterQueue"
SUBSCRIPTIONS = "Subscriptions"

_ENTITY = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._/-]{0,258}[A-Za-z0-9])?\Z")
_CHILD = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,48}[A-Za-z0-9])?\Z")


def check_entity_name(name: str, kind: str = "queue") -> str:
    """A queue or topic name; returns it, or raises ``BadArgument`` saying what is wrong."""
    if not isinstance(name, str) or not _ENTITY.match(name) or "//" in name:
        raise bad(
            f"invalid {kind} name {name!r}: 1-260 characters of letters, digits, '.', '-', "
            "'_' and '/', starting and ending with a letter or digit, no empty segment"
        )
    if any(seg.lower() == SUBSCRIPTIONS.lower() for seg in name.split("/")[1:]):
        raise bad(f"invalid {kind} name {name!r}: '{SUBSCRIPTIONS}' is a reserved path segment")
    return name


def check_subscription_name(name: str) -> str:
    if not isinstance(name, str) or not _CHILD.match(name):
        raise bad(
            f"invalid subscription name {name!r}: 1-50 characters of letters, digits, '.', '-' "
            "and '_', starting and ending with a letter or digit"
        )
    return name


def check_rule_name(name: str) -> str:
    if isinstance(name, str) and name.lower() == DEFAULT_RULE.lower():
        return name
    if not isinstance(name, str) or not _CHILD.match(name):
        raise bad(
            f"invalid rule name {name!r}: 1-50 characters of letters, digits, '.', '-' and '_', "
            f"starting and ending with a letter or digit (or {DEFAULT_RULE})"
        )
    return name


def key(name: str) -> str:
    """The form names are compared in (case-insensitive)."""
    return name.lower()


@dataclass(frozen=True, slots=True)
class EntityPath:
    """A parsed path: ``entity`` (queue or topic), ``subscription`` (or None), ``dlq``."""

    entity: str
    subscription: str | None = None
    dlq: bool = False

    @staticmethod
    def parse(path: str) -> EntityPath:
        """``orders``, ``events/Subscriptions/audit``, ``orders/$DeadLetterQueue``, ...
        (case-insensitive keywords; no validation of the names themselves)."""
        parts = path.strip("/").split("/")
        dlq = len(parts) > 1 and parts[-1].lower() == DLQ_SUFFIX.lower()
        if dlq:
            parts = parts[:-1]
        for i in range(1, len(parts) - 1):
            if parts[i].lower() == SUBSCRIPTIONS.lower():
                sub = "/".join(parts[i + 1 :])
                return EntityPath("/".join(parts[:i]), sub, dlq)
        return EntityPath("/".join(parts), None, dlq)

    @property
    def base(self) -> str:
        """The path without the dead-letter suffix."""
        if self.subscription is None:
            return self.entity
        return f"{self.entity}/{SUBSCRIPTIONS}/{self.subscription}"

    def __str__(self) -> str:
        return f"{self.base}/{DLQ_SUFFIX}" if self.dlq else self.base
