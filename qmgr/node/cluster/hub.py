"""A full repository's side of ``Repository.Watch``: each partial repository gets a snapshot
of what it may see, then the changes to that view, computed after every applied command.

A full repository without a Raft quorum still serves watches: its last committed view plus the
changes it relayed (``RaftLink``), the member's join among them, committed when the quorum
returns."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

from cluster.records import RepoEvent
from cluster.repository import partial_events
from qmgr.node.cluster.repolink import RaftLink


class JoinRejected(Exception):
    pass


async def watch(
    link: RaftLink, join: Mapping[str, Any]
) -> AsyncIterator[tuple[dict[str, Any] | None, list[RepoEvent], int]]:
    """Propose the member's join, then yield (snapshot, [], revision) once and
    (None, events, revision) for every change of its partial view, worked out from the changes
    of the whole view (``RaftLink.events_since``), never by comparing whole views; a watch that
    falls further behind than the feed holds gets a new snapshot."""
    name = str(join.get("name", ""))
    result = await link.propose(join)
    later: asyncio.Task[object] | None = None
    if result.unavailable:
        later = asyncio.get_running_loop().create_task(link.propose_until_done(join))
    elif not result.ok:
        raise JoinRejected(str(result.error.message if result.error else "rejected"))
    wake = asyncio.Event()
    link.listeners.append(wake.set)
    try:
        while True:
            repo = link.repository  # already holds the join: its events are applied first
            cursor = link.fed
            held = {n: m for n in repo.partial_members(name) if (m := repo.member(n))}
            yield repo.partial_snapshot(name), [], repo.revision
            while True:
                await wake.wait()
                wake.clear()
                events = link.events_since(cursor)
                if events is None:  # fell behind the feed: a new snapshot
                    break
                cursor += len(events)
                repo = link.repository
                out, held = partial_events(repo, name, events, held)
                if out:
                    yield None, out, repo.revision
    finally:
        link.listeners.remove(wake.set)
        if later is not None:
            later.cancel()
            with contextlib.suppress(BaseException):
                await later
