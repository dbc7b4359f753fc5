"""A partial repository's copy kept record by record in a real SQLite store: what a change
writes is what it changed, and the copy read back at start is the copy kept; a store written
as one JSON value is read once and rewritten record by record."""

from __future__ import annotations

import json
from pathlib import Path

from cluster.records import RepoEvent
from cluster.repository import ClusterRepository, Cmd
from qmgr.node.cluster.viewstore import VIEW_KEY, load_view, save_view
from qmgr.store.sqlite import SqliteStore


def _commit(store: SqliteStore) -> int:
    ops, _ = store.take()
    store.commit(ops)
    return len(ops)


def _reopen(path: Path) -> ClusterRepository | None:
    store = SqliteStore(path)
    loaded = store.load()
    store.close()
    snapshot, legacy = load_view("CL", loaded.objects, loaded.kv)
    assert not legacy
    return None if snapshot is None else ClusterRepository.from_snapshot(snapshot)


def test_each_change_writes_the_records_it_changed_and_reads_back(tmp_path: Path) -> None:
    repo = ClusterRepository("CL")
    store = SqliteStore(tmp_path)
    store.load()
    events: list[RepoEvent] = []
    commands = [Cmd.join_member("FR1", "FR1_1", "a:1", "REPOS"), Cmd.join_member("H", "H_1", "a:2")]
    commands += [Cmd.define_topic(f"T{i}", "H", f"T/{i}", "CL", "TOPICHOST") for i in range(500)]
    for cmd in commands:
        events += repo.apply(cmd).events
    save_view(store, events, repo)
    _commit(store)
    altered = repo.apply(Cmd.alter_topic("T7", "H", {}, "changed")).events
    save_view(store, altered, repo)
    assert _commit(store) == 2  # the altered definition and the revision: not 502 records
    deleted = repo.apply(Cmd.delete_topic("T8", "H")).events
    save_view(store, deleted, repo)
    _commit(store)
    store.close()
    again = _reopen(tmp_path)
    assert again == repo


def test_a_copy_kept_as_one_value_is_read_and_rewritten_record_by_record(tmp_path: Path) -> None:
    repo = ClusterRepository("CL")
    repo.apply(Cmd.join_member("FR1", "FR1_1", "a:1", "REPOS"))
    repo.apply(Cmd.join_member("H", "H_1", "a:2"))
    repo.apply(Cmd.define_topic("T", "H", "T", "CL", "TOPICHOST"))
    store = SqliteStore(tmp_path)
    store.load()
    store.set_value(VIEW_KEY, json.dumps(repo.to_snapshot()))
    _commit(store)
    store.close()
    store = SqliteStore(tmp_path)
    loaded = store.load()
    snapshot, legacy = load_view("CL", loaded.objects, loaded.kv)
    assert legacy and snapshot is not None
    copy = ClusterRepository.from_snapshot(snapshot)
    assert copy == repo
    save_view(store, [], copy, rewrite=True)
    _commit(store)
    store.close()
    assert _reopen(tmp_path) == repo
