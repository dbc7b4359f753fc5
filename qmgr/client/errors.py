"""Typed client errors: the one place gRPC failures become MQ-style exceptions."""

from __future__ import annotations

from typing import Any

import grpc


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


class MqscCommandError(MQClientError):
    """An MQSC command failed; ``records`` holds what the queue manager answered."""

    def __init__(self, command: str, records: list[Any]) -> None:
        first = records[0] if records else None
        text = f"{first.code}: {first.text}" if first else "command failed"
        detail = first.attrs.get("DETAIL") if first else None
        super().__init__(2195, "MQRC_MQSC_FAILED", f"{text} {detail or ''}".strip())
        self.command = command
        self.records = records


def from_rpc_error(exc: grpc.RpcError) -> MQClientError:
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    meta = dict(exc.trailing_metadata() or ()) if hasattr(exc, "trailing_metadata") else {}
    if "mq-reason" in meta:
        return MQClientError(
            int(meta["mq-reason"]), str(meta.get("mq-reason-name", "")), details or ""
        )
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return ConnectionFailed(2009, "MQRC_CONNECTION_BROKEN", details or str(code))
    if code == grpc.StatusCode.CANCELLED:
        return ConnectionFailed(2009, "MQRC_CONNECTION_BROKEN", "call cancelled")
    return MQClientError(2195, "MQRC_UNEXPECTED_ERROR", f"{code}: {details}")
