"""Persistence: SQLite (WAL) files under a node's data directory, behind a narrow interface."""

from __future__ import annotations


class StoreFailed(Exception):
    """The store could not commit: nothing since the last commit is durable and the node is
    stopping (fail-stop). Callers waiting for durability get this instead of success."""


class StoreInUse(Exception):
    """The data directory's database is held by another process: the node does not start."""
