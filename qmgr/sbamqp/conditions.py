"""The AMQP error conditions of Service Bus: one table for links and ``$management`` alike.

A refused operation reaches the client as an AMQP error condition (a link's ``rejected`` or
detach, or a ``$management`` answer's ``errorCondition``); the azure-servicebus SDK turns each
symbol into its exception class, so every ``Code`` of the namespace maps to exactly one symbol
here and both the link logic and ``$management`` read this table.
"""

from __future__ import annotations

from qmgr.amqp import performatives as p
from qmgr.servicebus.errors import Code, ServiceBusError

VENDOR = "com.microsoft:"

# the symbols azure-servicebus maps to its exception classes
NOT_FOUND = "amqp:not-found"  # MessagingEntityNotFoundError
NOT_ALLOWED = "amqp:not-allowed"
NOT_IMPLEMENTED = "amqp:not-implemented"
INTERNAL_ERROR = "amqp:internal-error"
DECODE_ERROR = "amqp:decode-error"
UNAUTHORIZED = "amqp:unauthorized-access"  # ServiceBusAuthenticationError
RESOURCE_LIMIT_EXCEEDED = "amqp:resource-limit-exceeded"  # ServiceBusQuotaExceededError
MESSAGE_SIZE_EXCEEDED = "amqp:link:message-size-exceeded"  # MessageSizeExceededError
MESSAGE_LOCK_LOST = VENDOR + "message-lock-lost"  # MessageLockLostError
MESSAGE_NOT_FOUND = VENDOR + "message-not-found"  # MessageNotFoundError
SESSION_LOCK_LOST = VENDOR + "session-lock-lost"  # SessionLockLostError
SESSION_CANNOT_BE_LOCKED = VENDOR + "session-cannot-be-locked"  # SessionCannotBeLockedError
ENTITY_DISABLED = VENDOR + "entity-disabled"  # MessagingEntityDisabledError
ENTITY_ALREADY_EXISTS = VENDOR + "entity-already-exists"  # MessagingEntityAlreadyExistsError
ARGUMENT_ERROR = VENDOR + "argument-error"  # ServiceBusError
TIMEOUT = VENDOR + "timeout"  # OperationTimeoutError

# ServiceBusError codes → their conditions
CONDITIONS: dict[Code, str] = {
    Code.ENTITY_NOT_FOUND: NOT_FOUND,
    Code.ENTITY_ALREADY_EXISTS: ENTITY_ALREADY_EXISTS,
    Code.ENTITY_DISABLED: ENTITY_DISABLED,
    Code.QUOTA_EXCEEDED: RESOURCE_LIMIT_EXCEEDED,
    Code.MESSAGE_SIZE_EXCEEDED: MESSAGE_SIZE_EXCEEDED,
    Code.MESSAGE_LOCK_LOST: MESSAGE_LOCK_LOST,
    Code.MESSAGE_NOT_FOUND: MESSAGE_NOT_FOUND,
    Code.SESSION_LOCK_LOST: SESSION_LOCK_LOST,
    Code.SESSION_CANNOT_BE_LOCKED: SESSION_CANNOT_BE_LOCKED,
    Code.INVALID_OPERATION: NOT_ALLOWED,
    Code.BAD_ARGUMENT: ARGUMENT_ERROR,
}


def condition_of(exc: ServiceBusError, default: str = INTERNAL_ERROR) -> str:
    """The condition of a refused operation (``default`` for a code the table lacks)."""
    return CONDITIONS.get(exc.code, default)


def error_for(exc: ServiceBusError) -> p.Error:
    """The AMQP error a link answers a refused operation with."""
    return p.Error(condition=condition_of(exc), description=str(exc))
