"""PySyncObj's unpickler in a qmgr node: builtin data only, never a global that runs code."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pysyncobj.journal
import pysyncobj.pickle
import pytest

from qmgr.node import raft_pickle


class _Payload:
    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.system, ("true",))


class _Sneaky:
    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        import _codecs

        return (_codecs.encode, ("x", "rot13"))


MESSAGES = [
    {"type": "request_vote", "term": 3, "last_log_index": 7, "last_log_term": 2},
    {
        "type": "append_entries",
        "term": 4,
        "commit_index": 9,
        "entries": [(b"\x00" + pickle.dumps((0, ("{}",), {}), 2), 9, 4)],
        "prevLogIdx": 8,
        "prevLogTerm": 4,
    },
    {"type": "append_entries", "transmission": "start", "data": b"", "lastCommitIndex": 1},
    {"type": "apply_command_response", "request_id": 5, "error": None, "log_idx": 1.5},
    (os.urandom(32), "127.0.0.1:7100"),
    ["status"],
    {1, 2},
    frozenset({"a"}),
    bytearray(b"ab"),
    "readonly",
    None,
    True,
    2**70,
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_pysyncobj_messages_round_trip(message: Any) -> None:
    assert raft_pickle.loads(pickle.dumps(message, 2)) == message


@pytest.mark.parametrize("evil", [_Payload(), {"type": "x", "entries": [_Payload()]}])
def test_a_global_that_is_not_allowed_is_refused(evil: Any) -> None:
    with pytest.raises(pickle.UnpicklingError, match="refused global posix.system"):
        raft_pickle.loads(pickle.dumps(evil, 2))


def test_codecs_encode_is_allowed_for_latin1_only() -> None:
    with pytest.raises(pickle.UnpicklingError, match="rot13"):
        raft_pickle.loads(pickle.dumps(_Sneaky(), 2))


def test_builtins_other_than_data_types_are_refused() -> None:
    frame = b"\x80\x02c__builtin__\neval\nq\x00X\x04\x00\x00\x001+1q\x01\x85q\x02Rq\x03."
    with pytest.raises(pickle.UnpicklingError, match="__builtin__.eval"):
        raft_pickle.loads(frame)


@pytest.mark.parametrize("kind", ["bytes", "bytearray"])
def test_a_tiny_frame_cannot_allocate_a_huge_buffer(kind: str) -> None:
    # bytes(2**40) / bytearray(2**40): a few bytes on the wire, a terabyte zero-filled
    frame = f"\x80\x02c__builtin__\n{kind}\nq\x00\x8a\x06\x00\x00\x00\x00\x00\x01\x85R.".encode(
        "latin1"
    )
    with pytest.raises(pickle.UnpicklingError, match=f"refused {kind}"):
        raft_pickle.loads(frame)


def test_install_replaces_what_pysyncobj_calls() -> None:
    import qmgr.node.raft  # noqa: F401  (installs the restriction on import)

    assert pysyncobj.pickle.loads is raft_pickle.loads
    assert pysyncobj.pickle.load is raft_pickle.load
    assert pysyncobj.journal.loads is raft_pickle.loads
    with pytest.raises(pickle.UnpicklingError):
        pysyncobj.pickle.loads(pickle.dumps(_Payload(), 2))


def test_a_fresh_interpreter_importing_the_raft_adapter_is_protected() -> None:
    code = (
        "import pickle, os, qmgr.node.raft, pysyncobj.pickle as p\n"
        "class E:\n"
        "    def __reduce__(self): return (os.system, ('exit 3',))\n"
        "try:\n"
        "    p.loads(pickle.dumps(E(), 2))\n"
        "except pickle.UnpicklingError:\n"
        "    print('refused')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "refused"


def test_the_journal_metadata_reads_back_through_the_restriction(tmp_path: Path) -> None:
    import qmgr.node.raft  # noqa: F401

    store = pysyncobj.journal.MetaStorer(str(tmp_path / "journal.meta"))
    meta = {"votedForNodeId": "127.0.0.1:7100", "currentTerm": 5, "raftCommitIndex": 9}
    store.storeMeta(meta)
    assert store.getMeta() == meta
