"""Typed client errors: the one place gRPC failures become MQ-style exceptions."""

from __future__ import annotations

from typing import Any

import grpc

from qmgr.servicebus.errors import Code


class MQClientError(Exception):
    """A failed call, with the MQ reason code and name (e.g. 2085 MQRC_UNKNOWN_OBJECT_NAME)."""

    def __init__(self, reason: int, reason_name: str, text: str, *, accepted: int = 0) -> None:
        super().__init__(f"{reason_name} ({reason}): {text}")
        self.reason = reason
        self.reason_name = reason_name
        self.text = text
        # for a publish: how many publications were accepted before the failure (published,
        # in order); the rest were not, so retrying them makes no duplicate
        self.accepted = accepted


def publish_error(resp: Any, accepted: int) -> MQClientError:
    """The error a PublishResponse carries, with the publications accepted before it."""
    e = resp.error
    return MQClientError(e.reason, e.reason_name, e.text, accepted=accepted)


class ConnectionFailed(MQClientError):
    """The node could not be reached (MQRC_CONNECTION_BROKEN)."""


def acknowledged_too_late(closed: bool) -> MQClientError:
    """What acknowledging raises once the consumer is closed or its stream has ended: what it
    handed out and had not acknowledged has gone back on the queue on the node."""
    if closed:
        return MQClientError(
            2018, "MQRC_HCONN_ERROR", "the consumer is closed: unacknowledged messages went back"
        )
    return ConnectionFailed(
        2009, "MQRC_CONNECTION_BROKEN", "the stream has ended: unacknowledged messages went back"
    )


class UnitsOfWork:
    """The connection each unit of work of a client began on. Units of work belong to their
    connection and are backed out on the node when it ends, so one whose connection was
    replaced before its commit has been backed out (at least in part)."""

    def __init__(self) -> None:
        self._began: dict[str, str] = {}

    def began(self, unit_of_work: str, connection_id: str) -> None:
        self._began.setdefault(unit_of_work, connection_id)

    def ending(self, unit_of_work: str, connection_id: str) -> bool:
        """Forget ``unit_of_work``; whether it began on ``connection_id`` (or did not begin)."""
        return self._began.pop(unit_of_work, connection_id) == connection_id


def backed_out(unit_of_work: str) -> MQClientError:
    return MQClientError(
        2003,
        "MQRC_BACKED_OUT",
        f"the connection of unit of work {unit_of_work} ended before the commit: "
        "its messages went back on their queues",
    )


class MqscCommandError(MQClientError):
    """An MQSC command failed; ``records`` holds what the queue manager answered."""

    def __init__(self, command: str, records: list[Any]) -> None:
        first = records[0] if records else None
        text = f"{first.code}: {first.text}" if first else "command failed"
        detail = first.attrs.get("DETAIL") if first else None
        super().__init__(2195, "MQRC_MQSC_FAILED", f"{text} {detail or ''}".strip())
        self.command = command
        self.records = records


class ServiceBusClientError(MQClientError):
    """A Service Bus call failed: ``code`` is the Service Bus reason (``reason_name``, e.g.
    ``MessagingEntityNotFound``; ``reason`` its HTTP status), ``where`` what was wrong (a
    property, a JSON path of Config.json) and ``position`` where in a filter or action text."""

    def __init__(self, code: Code, text: str, where: str = "", position: int | None = None):
        super().__init__(code.status, code.reason, text)
        self.code = code
        self.where = where
        self.position = position


def _servicebus_error(meta: dict[str, Any], details: str) -> ServiceBusClientError:
    try:
        code = Code[str(meta["sb-code"])]
    except KeyError:
        code = Code.INVALID_OPERATION
    position = meta.get("sb-position")
    return ServiceBusClientError(
        code,
        details,
        str(meta.get("sb-where", "")),
        int(position) if position is not None and str(position).isdigit() else None,
    )


def from_rpc_error(exc: grpc.RpcError) -> MQClientError:
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    meta = dict(exc.trailing_metadata() or ()) if hasattr(exc, "trailing_metadata") else {}
    if "sb-code" in meta:
        return _servicebus_error(meta, details or "")
    if "mq-reason" in meta:
        return MQClientError(
            int(meta["mq-reason"]), str(meta.get("mq-reason-name", "")), details or ""
        )
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNKNOWN) and details:
        refused = _not_connected(details)
        if refused is not None:
            return refused
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return MQClientError(2035, "MQRC_NOT_AUTHORIZED", details or "not authenticated")
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return ConnectionFailed(2009, "MQRC_CONNECTION_BROKEN", details or str(code))
    if code == grpc.StatusCode.CANCELLED:
        return ConnectionFailed(2009, "MQRC_CONNECTION_BROKEN", "call cancelled")
    return MQClientError(2195, "MQRC_UNEXPECTED_ERROR", f"{code}: {details}")


def _not_connected(details: str) -> MQClientError | None:
    """A connection that failed at TLS: the handshake itself (wrong CA, TLS to a plain port),
    or the node closing it before it was made (plain TCP to a TLS port, no client certificate
    where one is required)."""
    lowered = details.lower()
    if "handshake failed" in lowered:
        return ConnectionFailed(
            2393, "MQRC_SSL_INITIALIZATION_ERROR", f"the TLS handshake failed: {details}"
        )
    if "failed to connect" in lowered and "socket closed" in lowered:
        return ConnectionFailed(
            2538,
            "MQRC_HOST_NOT_AVAILABLE",
            f"{details}: the node closed the connection before it was made; its port may be "
            "TLS (give tls_ca or set QMGR_TLS_CA) or require a client certificate "
            "(tls_cert/tls_key)",
        )
    return None
