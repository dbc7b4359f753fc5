"""Lock tokens: random version-4 GUIDs, as Service Bus gives, made without a system call each.

A token is all a receiver's link needs to settle, renew or dead-letter the message it locks, so
it must not be guessable from the tokens other receivers were given: its 122 random bits come
from the operating system's random source (``os.urandom``), as ``uuid.uuid4``'s do. ``uuid4``
asks the kernel for 16 bytes on every call, one ``getrandom`` per message locked on the
peek-lock path; :class:`LockTokens` asks for a few kilobytes at a time and cuts them into
tokens, so the bytes are of the same kind and only fetched in bulk. Bytes are never handed out
twice: a process forked after the buffer was filled discards it (the parent keeps using it).
One ``LockTokens`` serves one thread (the namespace's).
"""

from __future__ import annotations

import os
import uuid

CHUNK = 16 * 256  # bytes fetched at a time: 256 tokens

_forks = 0  # processes forked from this one so far (a child's buffer is its parent's)


def _forked() -> None:
    global _forks
    _forks += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


class LockTokens:
    """Calling one gives a new random token (see the module docstring)."""

    __slots__ = ("_buffer", "_at", "_forks")

    def __init__(self) -> None:
        self._buffer = b""
        self._at = 0
        self._forks = _forks

    def __call__(self) -> uuid.UUID:
        at = self._at
        if at >= len(self._buffer) or self._forks != _forks:
            self._buffer = os.urandom(CHUNK)
            self._forks = _forks
            at = 0
        self._at = at + 16
        return uuid.UUID(bytes=self._buffer[at : at + 16], version=4)
