"""Frames built with azure-servicebus's own ``_pyamqp`` performatives, as the tests send them.

The SDK's frames are named tuples with no defaults: every field must be given. ``sdk_frame``
gives the fields a test names and leaves the others absent (None), as the SDK does for the
fields it does not use.
"""

from __future__ import annotations

from typing import Any

from azure.servicebus._pyamqp import performatives as pf


def sdk_frame(kind: Any, **fields: Any) -> Any:
    """The SDK's ``kind`` frame (e.g. ``pf.FlowFrame``) with ``fields``, the others None."""
    unknown = set(fields) - set(kind._fields)
    if unknown:
        raise TypeError(f"{kind.__name__} has no field {sorted(unknown)}")
    return kind(**{**dict.fromkeys(kind._fields), **fields})


def open_frame(container_id: str, max_frame_size: int, properties: dict[Any, Any]) -> Any:
    """An OPEN as the SDK sends it: channel_max 65535, no idle time-out, locales or
    capabilities."""
    return sdk_frame(
        pf.OpenFrame,
        container_id=container_id,
        hostname="localhost",
        max_frame_size=max_frame_size,
        channel_max=65535,
        properties=properties,
    )


def flow_frame(**fields: Any) -> Any:
    """A FLOW with ``fields``; drain and echo False unless given, the others absent."""
    return sdk_frame(pf.FlowFrame, **{"drain": False, "echo": False, **fields})
