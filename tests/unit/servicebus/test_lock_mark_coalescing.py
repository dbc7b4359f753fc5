"""Lock marks coalesced in a commit group (``coalesce_lock_marks``) leave SQLite exactly as the
group in its own order would, with the marks in runs of one kind."""

from __future__ import annotations

import sqlite3
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from qmgr.store.servicebus import SB_SCHEMA, SB_SQL, coalesce_lock_marks, register_functions

ENTITIES = ("q", "t/subscriptions/s")

Op = tuple[str, tuple[Any, ...]]


def _op(kind: str, entity: str, seq: int) -> Op:
    if kind == "sb_put":
        return kind, (entity, seq, b"body", "{}")
    if kind == "sb_drop_messages":
        return kind, (entity,)
    return kind, (entity, seq)


ops_strategy = st.lists(
    st.builds(
        _op,
        st.sampled_from(
            ["sb_put", "sb_del", "sb_settle", "sb_lock", "sb_unlock", "sb_drop_messages"]
        ),
        st.sampled_from(ENTITIES),
        st.integers(1, 4),
    ),
    max_size=40,
)


def _apply(before: list[Op], ops: list[Op]) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(":memory:")
    register_functions(conn)
    conn.executescript(SB_SCHEMA)
    for kind, args in before + ops:
        conn.execute(SB_SQL[kind], args)
    return conn.execute("SELECT entity, seq, locked FROM sb_messages ORDER BY 1, 2").fetchall()


@settings(max_examples=300, deadline=None)
@given(before=ops_strategy, ops=ops_strategy)
def test_coalesced_marks_end_in_the_same_state(before: list[Op], ops: list[Op]) -> None:
    coalesced = coalesce_lock_marks(ops)
    assert _apply(before, coalesced) == _apply(before, ops)
    kinds = [kind for kind, _ in coalesced]
    tail = [k for k in kinds if k in ("sb_lock", "sb_unlock")]
    assert kinds[len(kinds) - len(tail) :] == sorted(tail)  # the marks last, in two runs


def test_a_receive_then_complete_group_keeps_no_mark() -> None:
    ops: list[Op] = []
    for seq in range(1, 4):
        ops += [_op("sb_lock", "q", seq), _op("sb_settle", "q", seq)]
    ops.append(_op("sb_lock", "q", 9))
    assert coalesce_lock_marks(ops) == [_op("sb_settle", "q", s) for s in range(1, 4)] + [
        _op("sb_lock", "q", 9)
    ]


def test_a_group_without_marks_is_handed_back_as_it_is() -> None:
    ops = [_op("sb_put", "q", 1), _op("sb_settle", "q", 1)]
    assert coalesce_lock_marks(ops) is ops
