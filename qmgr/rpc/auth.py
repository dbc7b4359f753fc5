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
Failed attempts are never remembered.

On a port that requires client certificates (``--tls-ca``), a call without credentials may
stand on its certificate instead: the certificate (verified by TLS against the CA) names a user
(``qmgr.security.pki.client_name``: its common name) who must be in the users file, whose groups
then apply.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import inspect
import logging
import stat
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc

from qmgr.rpc.errors import HEALTH_PREFIX, abort_with
from qmgr.security.pki import client_name
from qmgr.security.users import (
    ADMIN_GROUP,
    NAME_RE,
    CredentialCache,
    User,
    Users,
    UsersFileError,
    parse_users,
)

log = logging.getLogger("qmgr.rpc.auth")

AUTHORIZATION = "authorization"
ADMIN_PREFIX = "/qmgr.wire.Admin/"
EXEMPT = (HEALTH_PREFIX, "/qmgr.wire.Peer/", "/qmgr.wire.Repository/")
NOT_AUTHORIZED = (2035, "MQRC_NOT_AUTHORIZED")
NO_CREDENTIALS = (
    "this queue manager requires a user and password (connection authentication) and none was given"
)
Refusal = tuple[grpc.StatusCode, str]
PASSWORD_CHECKS = 2  # threads verifying passwords at once


def load_users(path: Path) -> Users:
    """The users of ``path``; :class:`UsersFileError` says what is wrong with it."""
    try:
        text = path.read_text(encoding="utf-8")
        mode = path.stat().st_mode
    except (OSError, UnicodeDecodeError) as exc:
        raise UsersFileError(f"cannot read {path}: {exc}") from None
    try:
        users = parse_users(text)
    except UsersFileError as exc:
        raise UsersFileError(f"{path}: {exc}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning("%s can be read by other users (mode %o); make it 0600", path, mode & 0o777)
    if not users:
        log.warning("%s has no users: every application call will be refused", path)
    return users


def credentials(metadata: Sequence[Any] | None) -> tuple[str, str] | str:
    """The (user, password) of a call's metadata, or why there are none."""
    values = [value for key, value in metadata or () if key == AUTHORIZATION]
    if not values:
        return NO_CREDENTIALS
    scheme, _, token = str(values[0]).partition(" ")
    try:
        if scheme.lower() != "basic":
            raise ValueError(scheme)
        user, sep, password = base64.b64decode(token, validate=True).decode().partition(":")
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return "the authorization metadata is not 'Basic base64(user:password)'"
    if not sep or not user:
        return "the authorization metadata names no user"
    if not NAME_RE.fullmatch(user):  # no user has such a name (nor may it reach the log)
        return "the authorization metadata names no valid user name"
    return user, password


class ConnectionAuthentication(grpc.aio.ServerInterceptor):
    """See the module docstring."""

    def __init__(self, users: Users, *, client_certificates: bool = False) -> None:
        """``client_certificates``: the port requires (and verifies) client certificates, so
        one may stand in for a password."""
        self._cache = CredentialCache(users)
        self._client_certificates = client_certificates
        self._by_certificate: dict[bytes, User | None] = {}
        # scrypt runs here: a burst of wrong passwords queues behind itself, not other work
        self._checks = ThreadPoolExecutor(PASSWORD_CHECKS, thread_name_prefix="qmgr-auth")

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        method = handler_call_details.method
        if method.startswith(EXEMPT):
            return await continuation(handler_call_details)
        found = credentials(handler_call_details.invocation_metadata)
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        if found == NO_CREDENTIALS:  # the client certificate, if any, decides in the call
            return _guarded(handler, lambda context: self._certificate_refusal(method, context))
        refusal = await self._refusal(method, found)
        return handler if refusal is None else _refusing(handler, *refusal)

    async def _refusal(self, method: str, found: tuple[str, str] | str) -> Refusal | None:
        if isinstance(found, str):
            log.warning("%s refused: %s", method, found)
            return grpc.StatusCode.UNAUTHENTICATED, found
        name, password = found
        user = self._cache.lookup(name, password)
        if user is None:
            loop = asyncio.get_running_loop()
            user = await loop.run_in_executor(self._checks, self._cache.verify, name, password)
        if user is None:
            log.warning("%s refused: user '%s' failed to authenticate", method, name)
            return (
                grpc.StatusCode.UNAUTHENTICATED,
                f"user '{name}' is not known to this queue manager or the password is wrong",
            )
        return _authorized(method, user)

    def _certificate_refusal(
        self, method: str, context: grpc.aio.ServicerContext[Any, Any]
    ) -> Refusal | None:
        """A call without credentials: its TLS client certificate (already verified against
        the node's CA) may name a user of the users file."""
        pems = (context.auth_context() or {}).get("x509_pem_cert") or []
        if not self._client_certificates:
            pems = []
        if not pems:
            log.warning("%s refused: %s", method, NO_CREDENTIALS)
            return grpc.StatusCode.UNAUTHENTICATED, NO_CREDENTIALS
        pem = bytes(pems[0])
        if pem not in self._by_certificate:
            if len(self._by_certificate) >= 1024:
                self._by_certificate.clear()
            name = client_name(pem)
            self._by_certificate[pem] = self._cache.users.get(name) if name else None
        user = self._by_certificate[pem]
        if user is None:
            text = (
                f"the client certificate ({client_name(pem) or 'no user name'}) names no user "
                "of this queue manager, and no user and password were given"
            )
            log.warning("%s refused: %s", method, text)
            return grpc.StatusCode.UNAUTHENTICATED, text
        return _authorized(method, user)


def _authorized(method: str, user: User) -> Refusal | None:
    """None when ``user`` may call ``method``: MQSC (Admin) needs group mqm."""
    name = user.name
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

    return _like(handler, lambda behaviour: refuse)


Check = Callable[[grpc.aio.ServicerContext[Any, Any]], Refusal | None]


def _guarded(handler: grpc.RpcMethodHandler, check: Check) -> grpc.RpcMethodHandler:
    """``handler``, refusing the call when ``check`` (run with the call's context) says so."""

    def wrap(behaviour: Any) -> Any:
        if inspect.isasyncgenfunction(behaviour):

            async def stream(request: Any, context: Any) -> Any:
                refusal = check(context)
                if refusal is not None:
                    await abort_with(context, refusal[0], *NOT_AUTHORIZED, refusal[1])
                async with contextlib.aclosing(behaviour(request, context)) as responses:
                    async for response in responses:
                        yield response

            return stream

        async def call(request: Any, context: Any) -> Any:
            refusal = check(context)
            if refusal is not None:
                await abort_with(context, refusal[0], *NOT_AUTHORIZED, refusal[1])
            return await behaviour(request, context)

        return call

    return _like(handler, wrap)


def _like(handler: grpc.RpcMethodHandler, wrap: Callable[[Any], Any]) -> grpc.RpcMethodHandler:
    """A handler of ``handler``'s shape and serializers whose behaviour is ``wrap(behaviour)``."""
    des, ser = handler.request_deserializer, handler.response_serializer
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(wrap(handler.unary_unary), des, ser)
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(wrap(handler.unary_stream), des, ser)
    if handler.stream_unary is not None:
        return grpc.stream_unary_rpc_method_handler(wrap(handler.stream_unary), des, ser)
    return grpc.stream_stream_rpc_method_handler(wrap(handler.stream_stream), des, ser)
