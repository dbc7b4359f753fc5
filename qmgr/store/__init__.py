"""Persistence: SQLite (WAL) files under a node's data directory, behind a narrow interface."""
