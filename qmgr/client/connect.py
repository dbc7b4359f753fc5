"""How a client reaches a node: TLS credentials for its channel and the user's credentials on
every call (as gRPC metadata ``authorization: Basic ...``, MQ's connection authentication)."""

from __future__ import annotations

import base64
import functools
import os
from pathlib import Path
from typing import Any

import grpc

from qmgr.client.errors import MQClientError

TLS_CA_ENV = "QMGR_TLS_CA"
AUTHORIZATION = "authorization"
PathLike = str | Path


def _read(path: PathLike, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise MQClientError(
            2393, "MQRC_SSL_INITIALIZATION_ERROR", f"cannot read the TLS {what} {path}: {exc}"
        ) from None


def channel_credentials(
    tls_ca: PathLike | None, tls_cert: PathLike | None, tls_key: PathLike | None
) -> grpc.ChannelCredentials | None:
    """TLS credentials (None: plain TCP). ``tls_ca`` (default: ``$QMGR_TLS_CA``) is the CA the
    node's certificate must come from; ``tls_cert``/``tls_key`` are the client's certificate
    for nodes that require one."""
    tls_ca = tls_ca or os.environ.get(TLS_CA_ENV) or None
    if bool(tls_cert) != bool(tls_key):
        raise MQClientError(
            2393, "MQRC_SSL_INITIALIZATION_ERROR", "tls_cert and tls_key go together"
        )
    if not tls_ca and not tls_cert:
        return None
    return grpc.ssl_channel_credentials(
        root_certificates=_read(tls_ca, "CA") if tls_ca else None,
        private_key=_read(tls_key, "key") if tls_key else None,
        certificate_chain=_read(tls_cert, "certificate") if tls_cert else None,
    )


def open_channel(
    module: Any,
    address: str,
    options: list[tuple[str, Any]],
    tls_ca: PathLike | None,
    tls_cert: PathLike | None,
    tls_key: PathLike | None,
) -> Any:
    """A channel of ``module`` (``grpc`` or ``grpc.aio``): TLS when a CA or client
    certificate is given (see :func:`channel_credentials`), plain TCP otherwise."""
    credentials = channel_credentials(tls_ca, tls_cert, tls_key)
    if credentials is None:
        return module.insecure_channel(address, options=options)
    return module.secure_channel(address, credentials, options=options)


def basic_authorization(user: str, password: str) -> str:
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return f"Basic {token}"


def call_metadata(user: str | None, password: str | None) -> tuple[tuple[str, str], ...]:
    """The metadata every call carries: the user's credentials, if any."""
    if not user:
        return ()
    if ":" in user:
        raise MQClientError(2035, "MQRC_NOT_AUTHORIZED", f"user name '{user}' contains ':'")
    if password is None:
        raise MQClientError(2035, "MQRC_NOT_AUTHORIZED", f"user '{user}' needs a password")
    return ((AUTHORIZATION, basic_authorization(user, password)),)


class WithMetadata:
    """A gRPC stub whose every method sends ``metadata`` (unary calls and streams alike)."""

    def __init__(self, stub: Any, metadata: tuple[tuple[str, str], ...]) -> None:
        self._stub = stub
        self._metadata = metadata

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._stub, name)
        if not self._metadata:
            return method
        return functools.partial(method, metadata=self._metadata)
