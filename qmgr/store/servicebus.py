"""The Service Bus namespace's tables in the node's SQLite store, on the same group commit as
the MQ side: what the namespace tells its journal (``qmgr.servicebus.message.SbJournal``) is
collected with everything else and committed in the same transactions, and read back at start.

Tables:

- ``sb_entities``: one row per queue, topic, subscription and rule, keyed by its path
  (``orders``, ``events/Subscriptions/audit``, ``events/Subscriptions/audit/Rules/big``), with
  the namespace's own description of it (JSON), in creation order;
- ``sb_messages``: every message of every queue, subscription and dead-letter sub-queue
  (active, deferred and scheduled), keyed by entity path and sequence number; ``locked`` is 1
  while the message is handed out under a lock (set by ``message_locked``, cleared by
  ``message_unlocked`` and by rewriting the row), so a restart knows which locks it took;
- ``sb_sessions``: session state, by entity path and session id;
- ``sb_values``: what else the namespace keeps (sequence counters, duplicate-detection
  history...), by key; saving an empty value deletes the key.

Paths compare case-insensitively, as Service Bus names do. Deleting an entity deletes what
hangs off it: a topic's subscriptions, a subscription's rules, the messages and session state
of each and of their dead-letter sub-queues.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from qmgr.servicebus.message import Stored
from qmgr.store.sbcodec import decode_stored, encode_stored

if TYPE_CHECKING:
    from qmgr.store.sqlite import SqliteStore

SB_SCHEMA = """
CREATE TABLE IF NOT EXISTS sb_entities (
    path TEXT COLLATE NOCASE PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sb_messages (
    entity TEXT COLLATE NOCASE NOT NULL, seq INTEGER NOT NULL, body BLOB NOT NULL,
    header TEXT NOT NULL, locked INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (entity, seq));
CREATE TABLE IF NOT EXISTS sb_sessions (
    entity TEXT COLLATE NOCASE NOT NULL, session_id TEXT NOT NULL, state BLOB NOT NULL,
    PRIMARY KEY (entity, session_id));
CREATE TABLE IF NOT EXISTS sb_values (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

SB_SQL = {
    "sb_save": "INSERT INTO sb_entities (path, data) VALUES (?,?) "
    "ON CONFLICT(path) DO UPDATE SET data = excluded.data",
    "sb_drop": "DELETE FROM sb_entities WHERE sb_under(path, ?)",
    "sb_drop_messages": "DELETE FROM sb_messages WHERE sb_under(entity, ?)",
    "sb_drop_sessions": "DELETE FROM sb_sessions WHERE sb_under(entity, ?)",
    "sb_put": "INSERT OR REPLACE INTO sb_messages (entity, seq, body, header) VALUES (?,?,?,?)",
    "sb_del": "DELETE FROM sb_messages WHERE entity = ? AND seq = ?",
    "sb_settle": "DELETE FROM sb_messages WHERE entity = ? AND seq = ?",  # a completion
    "sb_lock": "UPDATE sb_messages SET locked = 1 WHERE entity = ? AND seq = ?",
    "sb_unlock": "UPDATE sb_messages SET locked = 0 WHERE entity = ? AND seq = ?",
    "sb_state": "INSERT OR REPLACE INTO sb_sessions (entity, session_id, state) VALUES (?,?,?)",
    "sb_unstate": "DELETE FROM sb_sessions WHERE entity = ? AND session_id = ?",
    "sb_value": "INSERT OR REPLACE INTO sb_values (key, value) VALUES (?,?)",
    "sb_unvalue": "DELETE FROM sb_values WHERE key = ?",
}

_MARKS = ("sb_lock", "sb_unlock")
_ROW_OPS = frozenset({"sb_put", "sb_del", "sb_settle", *_MARKS})


def coalesce_lock_marks(
    ops: list[tuple[str, tuple[Any, ...]]],
) -> list[tuple[str, tuple[Any, ...]]]:
    """``ops`` with the same end state and fewer statements: a lock mark that a later change
    of the same row overrides (another mark, a rewrite, a removal) is dropped, and the marks
    left go last, one run per kind. A receive marks every message it hands out and a complete
    removes it soon after, so a commit group alternates marks and removals; unsorted, each
    would be a statement of its own. Moving a mark is safe because nothing later in the group
    touches its row (an entity's removal later in the group leaves it nothing to update)."""
    if not any(kind in _MARKS for kind, _ in ops):
        return ops
    last: dict[tuple[Any, Any], int] = {}
    for i, (kind, args) in enumerate(ops):
        if kind in _ROW_OPS:
            last[(args[0], args[1])] = i
    out: list[tuple[str, tuple[Any, ...]]] = []
    marks: dict[str, list[tuple[str, tuple[Any, ...]]]] = {kind: [] for kind in _MARKS}
    for i, op in enumerate(ops):
        kind, args = op
        if kind not in marks:
            out.append(op)
        elif last[(args[0], args[1])] == i:
            marks[kind].append(op)
    for kind in _MARKS:
        out += marks[kind]
    return out


_DLQ = "$deadletterqueue"
_SUBSCRIPTIONS = "/subscriptions/"


def under(path: str, parent: str) -> bool:
    """Whether ``path`` is ``parent`` or hangs off it: its dead-letter sub-queue, a topic's
    subscriptions (and theirs), a subscription's rules. A queue named ``a/b`` does not hang
    off a queue ``a``."""
    path, parent = path.lower(), parent.lower()
    if path == parent:
        return True
    if not path.startswith(parent + "/"):
        return False
    rest = path[len(parent) + 1 :]
    if rest == _DLQ or rest.startswith("subscriptions/"):
        return True
    return rest.startswith("rules/") and _SUBSCRIPTIONS in parent


def register_functions(conn: sqlite3.Connection) -> None:
    conn.create_function("sb_under", 2, under, deterministic=True)


def upgrade_schema(conn: sqlite3.Connection) -> None:
    """Bring a store written before ``sb_messages.locked`` existed up to date (its messages
    count as unlocked)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(sb_messages)")}
    if "locked" not in columns:
        conn.execute("ALTER TABLE sb_messages ADD COLUMN locked INTEGER NOT NULL DEFAULT 0")


@dataclass
class SbLoaded:
    """What the namespace saved, in the order it is to be restored."""

    entities: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    messages: list[tuple[str, Stored]] = field(default_factory=list)
    locked: set[tuple[str, int]] = field(default_factory=set)  # (entity, seq) marked locked
    sessions: list[tuple[str, str, bytes]] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.entities or self.messages or self.sessions or self.values)


def load_servicebus(conn: sqlite3.Connection) -> SbLoaded:
    loaded = SbLoaded()
    for path, data in conn.execute("SELECT path, data FROM sb_entities ORDER BY rowid"):
        loaded.entities.append((path, json.loads(data)))
    for entity, seq, body, header, locked in conn.execute(
        "SELECT entity, seq, body, header, locked FROM sb_messages ORDER BY entity, seq"
    ):
        loaded.messages.append((entity, decode_stored(seq, body, header)))
        if locked:
            loaded.locked.add((entity, seq))
    for entity, session_id, state in conn.execute(
        "SELECT entity, session_id, state FROM sb_sessions ORDER BY entity, session_id"
    ):
        loaded.sessions.append((entity, session_id, bytes(state)))
    loaded.values = dict(conn.execute("SELECT key, value FROM sb_values").fetchall())
    return loaded


class SbStoreJournal:
    """Implements ``SbJournal`` on the node's store: each change is appended to the store's
    pending changes (committed by the node's group commit, see ``qmgr.node.committer``). A
    message is encoded when the change is made, so later changes to it in memory do not leak
    into an earlier change."""

    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    def entity_saved(self, path: str, data: dict[str, Any]) -> None:
        self._store.append("sb_save", (path, json.dumps(data, separators=(",", ":"))))

    def entity_deleted(self, path: str) -> None:
        self._store.append("sb_drop", (path,))
        self._store.append("sb_drop_messages", (path,))
        self._store.append("sb_drop_sessions", (path,))

    def message_added(self, entity: str, stored: Stored) -> None:
        body = stored.message.body
        self._store.append("sb_put", (entity, stored.sequence_number, body, encode_stored(stored)))

    message_updated = message_added

    def message_removed(self, entity: str, sequence_number: int) -> None:
        self._store.append("sb_del", (entity, sequence_number))

    def message_settled(self, entity: str, sequence_number: int) -> None:
        self._store.append("sb_settle", (entity, sequence_number))

    def message_locked(self, entity: str, sequence_number: int) -> None:
        self._store.append("sb_lock", (entity, sequence_number))

    def message_unlocked(self, entity: str, sequence_number: int) -> None:
        self._store.append("sb_unlock", (entity, sequence_number))

    def session_state_saved(self, entity: str, session_id: str, state: bytes | None) -> None:
        if state is None:
            self._store.append("sb_unstate", (entity, session_id))
        else:
            self._store.append("sb_state", (entity, session_id, state))

    def value_saved(self, key: str, value: str) -> None:
        """An empty ``value`` deletes ``key``."""
        if value:
            self._store.append("sb_value", (key, value))
        else:
            self._store.append("sb_unvalue", (key,))
