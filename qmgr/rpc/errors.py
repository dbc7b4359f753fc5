"""The node's one error boundary: every failure of every gRPC handler becomes a clear status.

``ErrorBoundary`` is a server interceptor registered for every service. It takes each request as
bytes and decodes it itself, so a request that is not valid protobuf is answered
INVALID_ARGUMENT (never reaching grpc's deserializer, never a traceback per request), runs the
edge validation of unary requests (``qmgr.rpc.convert.check_request``) and maps whatever a
handler raises, unary or streaming, including while the handler iterates a request stream:

- ``MQError``: its typed status, with the MQ reason in trailing metadata (``mq-reason``,
  ``mq-reason-name``) and the text as details, so the client rebuilds a typed error;
- ``ServiceBusError``: its gRPC status (``SERVICEBUS_STATUS``), the Service Bus code in
  trailing metadata (``sb-code``, with ``sb-where`` and ``sb-position`` when the error points
  into the input) and the text as details;
- ``RequestError`` (undecodable protobuf, a malformed request): INVALID_ARGUMENT;
- ``StoreFailed`` (the store cannot commit; the node is stopping): UNAVAILABLE, with
  MQRC_RESOURCE_PROBLEM;
- anything else: INTERNAL, with one log line.

A stream whose request iterator failed ends with that error even if the handler swallowed it:
a stream never ends OK after a failure.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc

from qmgr.core.errors import MQError
from qmgr.servicebus.errors import Code, ServiceBusError
from qmgr.store import StoreFailed
from qmgr.wire import messages_pb2 as pb

log = logging.getLogger("qmgr.rpc")

_STATUS = {
    "MQRC_UNKNOWN_OBJECT_NAME": grpc.StatusCode.NOT_FOUND,
    "MQRC_NO_SUBSCRIPTION": grpc.StatusCode.NOT_FOUND,
    "MQRC_Q_DELETED": grpc.StatusCode.NOT_FOUND,
    "MQRC_OBJECT_ALREADY_EXISTS": grpc.StatusCode.ALREADY_EXISTS,
    "MQRC_SUB_ALREADY_EXISTS": grpc.StatusCode.ALREADY_EXISTS,
    "MQRC_Q_FULL": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "MQRC_MSG_TOO_BIG_FOR_Q": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "MQRC_PUT_INHIBITED": grpc.StatusCode.FAILED_PRECONDITION,
    "MQRC_GET_INHIBITED": grpc.StatusCode.FAILED_PRECONDITION,
    "MQRC_SUB_INHIBITED": grpc.StatusCode.FAILED_PRECONDITION,
    "MQRC_OBJECT_IN_USE": grpc.StatusCode.FAILED_PRECONDITION,
    "MQRC_Q_NOT_EMPTY": grpc.StatusCode.FAILED_PRECONDITION,
    "MQRC_PUBLICATION_FAILURE": grpc.StatusCode.FAILED_PRECONDITION,
    "MQRC_RESOURCE_PROBLEM": grpc.StatusCode.UNAVAILABLE,
    "MQRC_UNEXPECTED_ERROR": grpc.StatusCode.INTERNAL,
}

SERVICEBUS_STATUS = {
    Code.ENTITY_NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    Code.MESSAGE_NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    Code.ENTITY_ALREADY_EXISTS: grpc.StatusCode.ALREADY_EXISTS,
    Code.QUOTA_EXCEEDED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Code.MESSAGE_SIZE_EXCEEDED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Code.ENTITY_DISABLED: grpc.StatusCode.FAILED_PRECONDITION,
    Code.MESSAGE_LOCK_LOST: grpc.StatusCode.FAILED_PRECONDITION,
    Code.SESSION_LOCK_LOST: grpc.StatusCode.FAILED_PRECONDITION,
    Code.SESSION_CANNOT_BE_LOCKED: grpc.StatusCode.FAILED_PRECONDITION,
    Code.INVALID_OPERATION: grpc.StatusCode.FAILED_PRECONDITION,
    Code.BAD_ARGUMENT: grpc.StatusCode.INVALID_ARGUMENT,
}

HEALTH_PREFIX = "/grpc.health.v1.Health/"


class RequestError(ValueError):
    """A request that cannot be decoded or is malformed (answered INVALID_ARGUMENT)."""


def error_to_wire(exc: MQError) -> pb.Error:
    return pb.Error(reason=exc.reason, reason_name=exc.reason_name, text=exc.text)


async def abort(context: grpc.aio.ServicerContext[Any, Any], exc: MQError) -> None:
    status = _STATUS.get(exc.reason_name, grpc.StatusCode.INVALID_ARGUMENT)
    await abort_with(context, status, exc.reason, exc.reason_name, exc.text)


async def abort_with(
    context: grpc.aio.ServicerContext[Any, Any],
    status: grpc.StatusCode,
    reason: int,
    reason_name: str,
    text: str,
) -> None:
    """End the call with ``status`` and the MQ reason in trailing metadata (always raises)."""
    context.set_trailing_metadata((("mq-reason", str(reason)), ("mq-reason-name", reason_name)))
    await context.abort(status, text)


async def abort_servicebus(
    context: grpc.aio.ServicerContext[Any, Any], exc: ServiceBusError
) -> None:
    """End the call with the status of ``exc``'s code, the code (and where the input was
    wrong) in trailing metadata and the message as details (always raises)."""
    meta = [("sb-code", exc.code.name)]
    if exc.where:
        meta.append(("sb-where", exc.where))
    if exc.position is not None:
        meta.append(("sb-position", str(exc.position)))
    context.set_trailing_metadata(tuple(meta))
    status = SERVICEBUS_STATUS.get(exc.code, grpc.StatusCode.FAILED_PRECONDITION)
    await context.abort(status, str(exc))


F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def translated(method: F) -> F:
    """Turn an MQError raised by a unary handler into an aborted call with the MQ reason (the
    interceptor does this for every handler; kept for handlers called without it)."""

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: Any) -> Any:
        try:
            return await method(self, request, context)
        except MQError as exc:
            await abort(context, exc)

    return wrapper  # type: ignore[return-value]


async def fail(
    context: grpc.aio.ServicerContext[Any, Any], exc: BaseException, method: str
) -> None:
    """End the call with the status ``exc`` maps to (always raises)."""
    if isinstance(exc, grpc.aio.AbortError | GeneratorExit) or not isinstance(exc, Exception):
        raise exc  # already aborted, cancelled or closed
    if isinstance(exc, MQError):
        await abort(context, exc)
    if isinstance(exc, ServiceBusError):
        await abort_servicebus(context, exc)
    if isinstance(exc, RequestError):
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
    if isinstance(exc, StoreFailed):
        await abort(context, MQError("MQRC_RESOURCE_PROBLEM", str(exc)))
    log.error("%s failed: %s: %s", method, type(exc).__name__, exc)
    await context.abort(grpc.StatusCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc}")


def _decode(deserializer: Callable[[bytes], Any] | None, raw: Any, method: str) -> Any:
    if deserializer is None:
        return raw
    try:
        return deserializer(raw)
    except Exception as exc:
        raise RequestError(f"the request to {method} is not a valid message: {exc}") from None


Check = Callable[[Any], None]


class _Requests:
    """A request stream decoded one message at a time; remembers why it failed."""

    def __init__(
        self, raw: AsyncIterator[Any], deserializer: Any, method: str, check: Check
    ) -> None:
        self._raw = raw
        self._deserializer = deserializer
        self._method = method
        self._check = check
        self.error: Exception | None = None

    def failure(self, exc: BaseException) -> BaseException:
        """What ends the call when the handler raised ``exc``: the request stream's own error
        unless the call was already aborted or cancelled."""
        if self.error is None or isinstance(exc, grpc.aio.AbortError):
            return exc
        return self.error if isinstance(exc, Exception) else exc

    def __aiter__(self) -> _Requests:
        return self

    async def __anext__(self) -> Any:
        if self.error is not None:
            raise self.error
        raw = await self._raw.__anext__()
        try:
            request = _decode(self._deserializer, raw, self._method)
            self._check(request)
        except (RequestError, MQError) as exc:
            self.error = exc
            raise
        return request


class ErrorBoundary(grpc.aio.ServerInterceptor):
    """See the module docstring. ``gate`` runs before every call except health checks (it
    raises to refuse calls, e.g. ``StoreFailed`` once the store is broken); ``check``
    validates a decoded unary request, ``stream_check`` each request of a request stream
    (a failure ends the stream with that error)."""

    def __init__(
        self,
        gate: Callable[[], None] | None = None,
        check: Check | None = None,
        stream_check: Check | None = None,
    ) -> None:
        self._gate = gate or (lambda: None)
        self._check = check or (lambda request: None)
        self._stream_check = stream_check or (lambda request: None)
        self._wrapped: dict[str, grpc.RpcMethodHandler] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        method = handler_call_details.method
        cached = self._wrapped.get(method)
        if cached is not None:
            return cached
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        wrapped = self._wrap(handler, method)
        self._wrapped[method] = wrapped
        return wrapped

    def _wrap(self, h: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        gate = (lambda: None) if method.startswith(HEALTH_PREFIX) else self._gate
        check = self._check
        deser = h.request_deserializer
        ser = h.response_serializer

        def prepare(raw: Any) -> Any:
            gate()
            request = _decode(deser, raw, method)
            check(request)
            return request

        def coroutine(inner: Any) -> Any:
            async def call(raw: Any, ctx: Any) -> Any:
                try:
                    return await inner(prepare(raw), ctx)
                except BaseException as exc:
                    await fail(ctx, exc, method)

            return call

        if h.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(coroutine(h.unary_unary), None, ser)
        if h.unary_stream is not None:
            us = h.unary_stream

            async def unary_stream(raw: Any, ctx: Any) -> AsyncIterator[Any]:
                try:
                    async with contextlib.aclosing(us(prepare(raw), ctx)) as responses:
                        async for response in responses:
                            yield response
                except BaseException as exc:
                    await fail(ctx, exc, method)

            # a handler that writes with context.write (health Watch) stays a coroutine
            behaviour = coroutine(us) if inspect.iscoroutinefunction(us) else unary_stream
            return grpc.unary_stream_rpc_method_handler(behaviour, None, ser)

        def streamed(inner: Any) -> Any:
            async def call(raw: AsyncIterator[Any], ctx: Any) -> Any:
                requests = _Requests(raw, deser, method, self._stream_check)
                try:
                    gate()
                    response = await inner(requests, ctx)
                except BaseException as exc:
                    await fail(ctx, requests.failure(exc), method)
                if requests.error is not None:
                    await fail(ctx, requests.error, method)
                return response

            return call

        if h.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(streamed(h.stream_unary), None, ser)
        ss = h.stream_stream

        async def stream_stream(raw: AsyncIterator[Any], ctx: Any) -> AsyncIterator[Any]:
            requests = _Requests(raw, deser, method, self._stream_check)
            try:
                gate()
                async with contextlib.aclosing(ss(requests, ctx)) as responses:
                    async for response in responses:
                        yield response
            except BaseException as exc:
                await fail(ctx, requests.failure(exc), method)
            if requests.error is not None:
                await fail(ctx, requests.error, method)

        # a handler that writes with context.write (Subscribe, Consume) stays a coroutine
        behaviour = streamed(ss) if inspect.iscoroutinefunction(ss) else stream_stream
        return grpc.stream_stream_rpc_method_handler(behaviour, None, ser)
