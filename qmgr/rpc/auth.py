"""Connection authentication (``qmgr start --auth FILE``), as MQ's CONNAUTH with a user and
password: every Messaging and Admin call carries ``authorization: Basic base64(user:password)``
of a user in the users file, and Admin calls (MQSC) need a member of group ``mqm``.

``ConnectionAuthentication`` is a server interceptor placed before the error boundary (it runs
first, per call). A refused call is answered UNAUTHENTICATED (no or wrong credentials) or
PERMISSION_DENIED (not in ``mqm``), with MQRC_NOT_AUTHORIZED (2035) in the trailing metadata, and
its handler never runs. Health checks and the cluster services (Peer, Repository) are not
subject to it: members authenticate with the cluster secret or certificates.

A password is checked with scrypt once per distinct user and password (in a worker thread, so
the event loop goes on); later calls with the same credentials are a dictionary look-up.
Failed attempts are never remembered. Client certificates do not stand in for a password.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import grpc

from qmgr.rpc.errors import HEALTH_PREFIX, abort_with
from qmgr.security.users import ADMIN_GROUP, CredentialCache, Users, UsersFileError, parse_users

log = logging.getLogger("qmgr.rpc.auth")

AUTHORIZATION = "authorization"
ADMIN_PREFIX = "/qmgr.wire.Admin/"
EXEMPT = (HEALTH_PREFIX, "/qmgr.wire.Peer/", "/qmgr.wire.Repository/")
NOT_AUTHORIZED = (2035, "MQRC_NOT_AUTHORIZED")


def load_users(path: Path) -> Users:
    """The users of ``path``; :class:`UsersFileError` says what is wrong with it."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsersFileError(f"cannot read {path}: {exc}") from None
    try:
        return parse_users(text)
    except UsersFileError as exc:
        raise UsersFileError(f"{path}: {exc}") from None


def credentials(metadata: Sequence[Any] | None) -> tuple[str, str] | str:
    """The (user, password) of a call's metadata, or why there are none."""
    values = [value for key, value in metadata or () if key == AUTHORIZATION]
    if not values:
        return (
            "this queue manager requires a user and password (connection authentication) "
            "and none was given"
        )
    scheme, _, token = str(values[0]).partition(" ")
    try:
        if scheme.lower() != "basic":
            raise ValueError(scheme)
        user, sep, password = base64.b64decode(token, validate=True).decode().partition(":")
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return "the authorization metadata is not 'Basic base64(user:password)'"
    if not sep or not user:
        return "the authorization metadata names no user"
    return user, password


class ConnectionAuthentication(grpc.aio.ServerInterceptor):
    """See the module docstring."""

    def __init__(self, users: Users) -> None:
        self._cache = CredentialCache(users)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        method = handler_call_details.method
        if method.startswith(EXEMPT):
            return await continuation(handler_call_details)
        refusal = await self._refusal(method, handler_call_details.invocation_metadata)
        handler = await continuation(handler_call_details)
        if refusal is None or handler is None:
            return handler
        return _refusing(handler, *refusal)

    async def _refusal(
        self, method: str, metadata: Sequence[Any] | None
    ) -> tuple[grpc.StatusCode, str] | None:
        found = credentials(metadata)
        if isinstance(found, str):
            log.warning("%s refused: %s", method, found)
            return grpc.StatusCode.UNAUTHENTICATED, found
        name, password = found
        user = self._cache.lookup(name, password)
        if user is None:
            loop = asyncio.get_running_loop()
            user = await loop.run_in_executor(None, self._cache.verify, name, password)
        if user is None:
            log.warning("%s refused: user '%s' failed to authenticate", method, name)
            return (
                grpc.StatusCode.UNAUTHENTICATED,
                f"user '{name}' is not known to this queue manager or the password is wrong",
            )
        if method.startswith(ADMIN_PREFIX) and not user.is_admin:
            log.warning("%s refused: user '%s' is not in group %s", method, name, ADMIN_GROUP)
            return (
                grpc.StatusCode.PERMISSION_DENIED,
                f"user '{name}' is not in group {ADMIN_GROUP}, which MQSC administration needs",
            )
        return None


def _refusing(
    handler: grpc.RpcMethodHandler, status: grpc.StatusCode, text: str
) -> grpc.RpcMethodHandler:
    """A handler of ``handler``'s shape that only ends the call with ``status``."""

    async def refuse(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await abort_with(context, status, *NOT_AUTHORIZED, text)

    ser = handler.response_serializer
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(refuse, None, ser)
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(refuse, None, ser)
    if handler.stream_unary is not None:
        return grpc.stream_unary_rpc_method_handler(refuse, None, ser)
    return grpc.stream_stream_rpc_method_handler(refuse, None, ser)
