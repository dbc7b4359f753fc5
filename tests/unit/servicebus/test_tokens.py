"""Lock tokens: version-4 GUIDs, never repeated, from fresh random bytes after a fork."""

from __future__ import annotations

import os
import uuid

import pytest

from qmgr.servicebus import tokens
from qmgr.servicebus.tokens import CHUNK, LockTokens


def test_tokens_are_distinct_version_4_guids_across_refills() -> None:
    new = LockTokens()
    made = [new() for _ in range(3 * CHUNK // 16 + 5)]  # three refills and a bit
    assert len(set(made)) == len(made)
    for token in made:
        assert isinstance(token, uuid.UUID)
        assert token.version == 4
        assert token.variant == uuid.RFC_4122
        assert uuid.UUID(bytes_le=token.bytes_le) == token  # the delivery tag's round trip


def test_two_sources_share_no_bytes() -> None:
    a, b = LockTokens(), LockTokens()
    assert not {a() for _ in range(100)} & {b() for _ in range(100)}


def test_a_fork_discards_the_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    new = LockTokens()
    first = new()
    fetched: list[int] = []
    real = os.urandom

    def urandom(n: int) -> bytes:
        fetched.append(n)
        return real(n)

    monkeypatch.setattr(tokens.os, "urandom", urandom)
    new()  # from the buffer: nothing fetched
    assert fetched == []
    tokens._forked()  # what a child runs after fork
    after = new()
    assert fetched == [CHUNK]
    assert after != first


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_gives_tokens_its_parent_does_not() -> None:
    new = LockTokens()
    new()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next tokens, written to the parent
        os.close(r)
        os.write(w, b"".join(new().bytes for _ in range(8)))
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 4096):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    child = {uuid.UUID(bytes=data[i : i + 16]) for i in range(0, len(data), 16)}
    parent = {new() for _ in range(8)}
    assert len(child) == 8
    assert not child & parent
