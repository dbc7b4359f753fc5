"""runmqsc output records: an AMQ message id, its text, and KEY(value) pairs in order."""

from __future__ import annotations

import time as _time
from collections.abc import Iterable
from dataclasses import dataclass, field

from qmgr.core.errors import MQError

# Error reasons to the AMQ message runmqsc prints for them.
_ERROR_CODES = {
    "MQRC_UNKNOWN_OBJECT_NAME": ("AMQ8147E", "IBM MQ object {name} not found."),
    "MQRC_NO_SUBSCRIPTION": ("AMQ8147E", "IBM MQ object {name} not found."),
    "MQRC_OBJECT_ALREADY_EXISTS": ("AMQ8150E", "IBM MQ object already exists."),
    "MQRC_SUB_ALREADY_EXISTS": ("AMQ8150E", "IBM MQ object already exists."),
    "MQRC_Q_NOT_EMPTY": ("AMQ8143E", "IBM MQ queue {name} not empty."),
    "MQRC_OBJECT_IN_USE": ("AMQ8148E", "IBM MQ object in use."),
}


@dataclass
class Record:
    code: str
    text: str
    attrs: list[tuple[str, str]] = field(default_factory=list)

    @property
    def is_error(self) -> bool:
        return self.code.endswith("E")

    def get(self, key: str) -> str | None:
        for k, v in self.attrs:
            if k == key:
                return v
        return None

    def render(self) -> str:
        return render_record(self.code, self.text, self.attrs)


COLUMN = 40


def render_record(code: str, text: str, attrs: Iterable[tuple[str, str]]) -> str:
    """runmqsc's layout: the message line, then two KEY(value) pairs per line in columns of
    40 characters. A pair too long for the left column (no space would be left before the
    next) is put on a line of its own, as MQ does for long values, and the next pair starts
    the following line."""
    lines = [f"{code}: {text}"]
    left: str | None = None
    for k, v in attrs:
        pair = f"{k}({v})"
        if left is not None:
            lines.append("   " + left.ljust(COLUMN) + pair)
            left = None
        elif len(pair) >= COLUMN:
            lines.append("   " + pair)
        else:
            left = pair
    if left is not None:
        lines.append("   " + left)
    return "\n".join(lines)


def error_record(exc: MQError, name: str = "") -> Record:
    code, text = _ERROR_CODES.get(
        exc.reason_name, ("AMQ8101E", "IBM MQ error ({reason}) has occurred.")
    )
    return Record(
        code,
        text.format(name=name, reason=f"{exc.reason:X}"),
        [("REASON", exc.reason_name), ("DETAIL", exc.text)],
    )


def date_time(epoch: float) -> tuple[str, str]:
    """MQ's date and time columns (yyyy-mm-dd, hh.mm.ss) in UTC, from an epoch time."""
    t = _time.gmtime(epoch)
    return _time.strftime("%Y-%m-%d", t), _time.strftime("%H.%M.%S", t)


def yes_no(flag: bool) -> str:
    return "YES" if flag else "NO"


def enabled(flag: bool) -> str:
    return "ENABLED" if flag else "DISABLED"


def select(
    attrs: list[tuple[str, str]], identity: int, requested: tuple[str, ...], show_all: bool
) -> list[tuple[str, str]]:
    """Keep the first ``identity`` pairs plus the requested ones (or all)."""
    if show_all:
        return attrs
    wanted = set(requested)
    return attrs[:identity] + [kv for kv in attrs[identity:] if kv[0] in wanted]
