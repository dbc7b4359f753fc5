"""Domain errors to gRPC status: the one place the node translates failures for the wire.

The MQ reason travels in trailing metadata (``mq-reason``, ``mq-reason-name``) and the status
details carry the text, so the client can rebuild a typed error.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc

from qmgr.core.errors import MQError
from qmgr.wire import messages_pb2 as pb

_STATUS = {
    "MQRC_UNKNOWN_OBJECT_NAME": grpc.StatusCode.NOT_FOUND,
    "MQRC_NO_SUBSCRIPTION": grpc.StatusCode.NOT_FOUND,
    "MQRC_OBJECT_ALREADY_EXISTS": grpc.StatusCode.ALREADY_EXISTS,
    "MQRC_SUB_ALREADY_EXISTS": grpc.StatusCode.ALREADY_EXISTS,
    "MQRC_Q_FULL": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "MQRC_MSG_TOO_BIG_FOR_Q": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "MQRC_PUT_INHIBITED": grpc.StatusCode.FAILED_PRECONDITION,
    "MQRC_GET_INHIBITED": grpc.StatusCode.FAILED_PRECONDITION,
    "MQRC_SUB_INHIBITED": grpc.StatusCode.FAILED_PRECONDITION,
    "MQRC_OBJECT_IN_USE": grpc.StatusCode.FAILED_PRECONDITION,
    "MQRC_Q_NOT_EMPTY": grpc.StatusCode.FAILED_PRECONDITION,
    "MQRC_UNEXPECTED_ERROR": grpc.StatusCode.INTERNAL,
}


def error_to_wire(exc: MQError) -> pb.Error:
    return pb.Error(reason=exc.reason, reason_name=exc.reason_name, text=exc.text)


async def abort(context: grpc.aio.ServicerContext[Any, Any], exc: MQError) -> None:
    context.set_trailing_metadata(
        (("mq-reason", str(exc.reason)), ("mq-reason-name", exc.reason_name))
    )
    await context.abort(_STATUS.get(exc.reason_name, grpc.StatusCode.INVALID_ARGUMENT), exc.text)


F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def translated(method: F) -> F:
    """Turn an MQError raised by a unary handler into an aborted call with the MQ reason."""

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: Any) -> Any:
        try:
            return await method(self, request, context)
        except MQError as exc:
            await abort(context, exc)

    return wrapper  # type: ignore[return-value]
