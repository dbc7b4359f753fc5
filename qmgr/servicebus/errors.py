"""Service Bus failures: every error the namespace raises has a code the edges translate.

The codes are Service Bus's own exception reasons (``ServiceBusFailureReason`` in the .NET SDK,
the ``com.microsoft:`` AMQP error conditions, the HTTP status of the management API), so the
AMQP adapter, the admin service and the CLI each map one table, in one place.
"""

from __future__ import annotations

from enum import Enum


class Code(Enum):
    """Why an operation failed: (name, HTTP status of the management API)."""

    ENTITY_NOT_FOUND = ("MessagingEntityNotFound", 404)
    ENTITY_ALREADY_EXISTS = ("MessagingEntityAlreadyExists", 409)
    ENTITY_DISABLED = ("MessagingEntityDisabled", 400)
    QUOTA_EXCEEDED = ("QuotaExceeded", 403)
    MESSAGE_SIZE_EXCEEDED = ("MessageSizeExceeded", 400)
    MESSAGE_LOCK_LOST = ("MessageLockLost", 410)
    MESSAGE_NOT_FOUND = ("MessageNotFound", 404)
    SESSION_LOCK_LOST = ("SessionLockLost", 410)
    SESSION_CANNOT_BE_LOCKED = ("SessionCannotBeLocked", 409)
    INVALID_OPERATION = ("InvalidOperation", 400)
    BAD_ARGUMENT = ("BadArgument", 400)  # a bad name, property value, filter or action

    @property
    def reason(self) -> str:
        return self.value[0]

    @property
    def status(self) -> int:
        return self.value[1]


class ServiceBusError(Exception):
    """``ServiceBusError(Code.ENTITY_NOT_FOUND, "queue 'orders' does not exist")``.

    ``where`` names what was wrong when it is part of an input (a JSON path in Config.json,
    ``filter`` with ``position`` for a filter syntax error), so messages can point at it."""

    def __init__(
        self, code: Code, text: str, *, where: str = "", position: int | None = None
    ) -> None:
        prefix = f"{where}: " if where else ""
        super().__init__(f"{code.reason}: {prefix}{text}")
        self.code = code
        self.text = text
        self.where = where
        self.position = position


def not_found(kind: str, path: str) -> ServiceBusError:
    return ServiceBusError(Code.ENTITY_NOT_FOUND, f"{kind} '{path}' does not exist")


def bad(text: str, *, where: str = "", position: int | None = None) -> ServiceBusError:
    return ServiceBusError(Code.BAD_ARGUMENT, text, where=where, position=position)
