"""How a node holds the cluster repository.

- A full repository runs a Raft replica (``RaftLink``): changes are proposed to it and applied,
  in log order, to the node's copy. It starts even without a Raft quorum (serving its last
  committed view, its own join queued until a quorum commits it).
- A proposal waits at most ``PENDING_WAIT`` seconds for its commit. A full repository that
  cannot commit it then (no Raft quorum: the other of two full repositories is down, or most of
  three) *relays* it, as an MQ full repository goes on working while the other one is down: if
  the change applies to what this repository serves, it is added to the view served to the
  members (``RaftLink.repository``: the committed view plus the relayed changes, in the order
  they came) and answered as accepted, with a warning saying it is not committed yet. It stays
  queued in Raft; when a quorum returns the log settles it, and the relayed copy is dropped
  (committed: the log holds it; refused, for example a conflicting definition made on the other
  side of the outage: it disappears from the members' views, and the member that made it sees
  it refused when it sends it again, CLSTATE(INVALID) as in MQ). Relayed changes live in this
  process only: a full repository restarted before the quorum returns forgets them, and the
  members whose changes they were send them again when their view no longer holds them.
- A change that does not apply to the served view, or that no full repository could take
  (none reachable), is ``unavailable`` (``ErrorCode.REPOS_UNAVAILABLE``), not a rejection: the
  caller keeps its change and sends it again (``ClusterAgent``).
- A partial repository (``WatchLink``) joins through one of the full repositories it was given
  (``--join``) or has since learnt of, receives a snapshot of what it may see and then every
  change, and fails over to another full repository when its stream breaks. Its copy is kept in
  the node's store, so with every full repository down it still routes with what it knew.
- Every watch and proposal proves who this node is (``Dialer``); with a cluster secret the
  full repository proves it is a member too, and a snapshot is taken (with the full
  repositories' addresses it lists) only from a server the snapshot itself lists as a full
  repository. A first join the cluster refuses (wrong secret or certificate, a name taken by
  another QMID) fails the start with the reason.
- REFRESH CLUSTER (``WatchLink.refresh``): the watch is restarted, so the node re-joins and the
  next snapshot replaces its whole copy; with REPOS(YES) that snapshot is asked of the
  ``--join`` addresses only (the full repositories it had learnt are forgotten until the
  snapshot lists them again).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import grpc

from cluster.records import RepoEvent
from cluster.repository import ApplyResult, ClusterRepository, ErrorCode, RepoError
from qmgr.node.config import ClusterSettings
from qmgr.node.raft import RaftConfig, RaftUnavailable, RepositoryReplica
from qmgr.rpc.peer_client import Dialer, Refusal, RepositoryClient, TransportError

log = logging.getLogger("qmgr.node.repository")

ChangeSink = Callable[[list[RepoEvent]], None]
PROPOSE_TIMEOUT = 5.0
PENDING_WAIT = 3.0  # longest wait for a commit before a change is answered as still pending
NO_QUORUM_WAIT = 0.1  # the wait with no majority connected before a change is relayed
ELECTION_WAIT = 1.0  # the wait while a leader is being elected (it takes well under it)
START_WAIT = 3.0  # a full repository waits this long for a Raft leader, then serves anyway
QUEUED_FOR = 300.0  # a submitted command is waited for this long before it is submitted anew
FEED_MAX = 100_000  # events kept for the watches; one further behind gets a new snapshot
RELAYED_MAX = 10_000  # relayed, uncommitted changes held at once; past it: ``unavailable``
RELAYED_WARNING = (
    "no Raft quorum of full repositories: {fr} relayed this change to the members; it is "
    "committed when a quorum is back"
)


def _unavailable(text: str) -> ApplyResult:
    return ApplyResult(error=RepoError(ErrorCode.REPOS_UNAVAILABLE, text))


class RaftLink:
    """A full repository's replica (create it on the main thread)."""

    def __init__(
        self,
        settings: ClusterSettings,
        data_dir: Path | None,
        on_change: ChangeSink,
        name: str = "",
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.on_change = on_change
        self.name = name or settings.raft_address
        config = RaftConfig(
            self_addr=settings.raft_address,
            peers=settings.raft_peers,
            cluster=settings.cluster,
            password=settings.secret.raft_password if settings.secret else None,
            data_dir=data_dir / "raft" if data_dir is not None else None,
        )
        self.replica = RepositoryReplica(config, on_events=self._events)
        self.committed = ClusterRepository(settings.cluster)
        # what members are served: ``committed`` plus the relayed changes (module docstring)
        self.repository = self.committed
        # every change of the served view as events, for the watches (``events_since``)
        self.feed: list[RepoEvent] = []
        self.fed = 0  # events ever put in the feed (the last ``len(feed)`` of them are held)
        self.listeners: list[Callable[[], None]] = []
        self._join_task: asyncio.Task[None] | None = None
        # commands submitted and not yet committed, by their JSON: the same command proposed
        # again (a pending definition retried during an outage) waits for the queued one
        # instead of queueing another copy
        self._queued: dict[str, asyncio.Task[ApplyResult]] = {}
        # relayed commands (accepted without a quorum), by their JSON, in the order they came;
        # each has a task that submits it until the log decides it
        self._relayed: dict[str, Mapping[str, Any]] = {}
        self._settling: dict[str, asyncio.Task[None]] = {}

    def _events(self, events: list[RepoEvent]) -> None:  # on PySyncObj's thread
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self._apply, events)

    def _apply(self, events: list[RepoEvent]) -> None:
        """Events the replica applied (in log order): applied to this copy as they come, so a
        change costs the same whatever the size of the repository."""
        for event in events:
            self.committed.apply_event(event)
        self.committed.revision = self.replica.revision
        if self._relayed:
            self._serve()
        else:
            self._publish(events)

    def _reload(self) -> None:
        """Take the replica's whole state (at start)."""
        self.committed = self.replica.read()
        self._serve()

    def _serve(self) -> None:
        """Rebuild the served view (committed + relayed); tell the difference."""
        old = self.repository
        served = self.committed
        if self._relayed:
            served = ClusterRepository.from_snapshot(self.committed.to_snapshot())
            for command in self._relayed.values():
                served.apply(command)  # one the log has applied (or refused) changes nothing
        self.repository = served
        self._publish(old.view().diff(served.view()))

    def _publish(self, events: list[RepoEvent]) -> None:
        """Tell the node and the watches of changes of the served view."""
        self.feed += events
        self.fed += len(events)
        if len(self.feed) > 2 * FEED_MAX:
            del self.feed[:-FEED_MAX]
        self.on_change(events)
        for listener in list(self.listeners):
            listener()

    def events_since(self, cursor: int) -> list[RepoEvent] | None:
        """The served view's events after the first ``cursor`` ever fed (None: some are no
        longer held; the caller starts again from a snapshot)."""
        start = self.fed - len(self.feed)
        if cursor < start:
            return None
        return self.feed[cursor - start :]

    @property
    def relayed(self) -> int:
        """Changes relayed to the members and not yet committed."""
        return len(self._relayed)

    async def start(self, join: Mapping[str, Any], timeout: float) -> None:
        """Serve at once: without a quorum this replica answers with its last committed view
        (PySyncObj applies its journal up to the commit index it recorded, never further) and
        its own join waits in the background until a quorum commits it."""
        try:
            await self.loop.run_in_executor(None, self.replica.wait_ready, min(timeout, START_WAIT))
        except RaftUnavailable:
            result = _unavailable("no Raft quorum yet")
        else:
            result = await self.commit(join)
        if result.unavailable:
            log.warning(
                "no Raft quorum: serving the last committed cluster view; changes the members "
                "send are relayed to them and committed when a quorum of full repositories is "
                "back"
            )
            self._join_task = self.loop.create_task(self._join_later(join))
        elif not result.ok:
            raise RuntimeError(f"cannot join cluster: {result.error}")
        self._reload()

    async def _join_later(self, join: Mapping[str, Any]) -> None:
        result = await self.propose_until_done(join)
        if result.ok:
            log.info("this full repository's join is committed")
        else:
            log.error("the cluster refused this full repository's join: %s", result.error)

    async def propose(self, command: Mapping[str, Any], wait: float = PENDING_WAIT) -> ApplyResult:
        """``commit``; if it does not commit within ``wait`` seconds, relay it (see the module
        docstring): accepted with a warning when it applies to the served view, else
        ``unavailable``."""
        if not self.replica.quorum_connected:
            wait = min(wait, NO_QUORUM_WAIT)  # no majority to commit it: relayed at once
        elif self.replica.leader is None:
            wait = min(wait, ELECTION_WAIT)  # an election under way
        result = await self.commit(command, wait)
        if not result.unavailable:
            return result
        return self._relay(command, result)

    def _relay(self, command: Mapping[str, Any], unavailable: ApplyResult) -> ApplyResult:
        key = _key(command)
        warning = RELAYED_WARNING.format(fr=self.name)
        if key in self._relayed:
            return ApplyResult(warnings=(warning,))
        if len(self._relayed) >= RELAYED_MAX:
            return unavailable
        trial = ClusterRepository.from_snapshot(self.repository.to_snapshot())
        result = trial.apply(command)
        if not result.ok:  # the log decides it when the quorum is back
            return unavailable
        self._relayed[key] = command
        self._settling[key] = self.loop.create_task(self._settle(key, command))
        log.warning("relayed without a Raft quorum (not committed yet): %s", key)
        self.repository = trial
        self._publish(list(result.events))
        return ApplyResult(result.events, None, (*result.warnings, warning))

    async def _settle(self, key: str, command: Mapping[str, Any]) -> None:
        """Submit a relayed command until the log decides it, then stop relaying it."""
        try:
            result = await self.propose_until_done(command)
        except asyncio.CancelledError:
            raise
        except Exception:  # never leave it relayed for ever
            log.exception("settling a relayed change failed: %s", key)
            result = ApplyResult()
        if result.error is not None:
            log.error(
                "a change relayed without a Raft quorum was refused when the quorum committed "
                "it (%s: %s); the members no longer see it: %s",
                result.error.code.value,
                result.error.message,
                key,
            )
        self._settling.pop(key, None)
        self._relayed.pop(key, None)
        self._serve()

    async def commit(self, command: Mapping[str, Any], wait: float = PENDING_WAIT) -> ApplyResult:
        """Submit through Raft and wait at most ``wait`` seconds for the commit (through an
        election if one is under way). Without a quorum the command stays queued in
        PySyncObj and commits when the quorum returns; the caller gets an ``unavailable``
        result meanwhile. The node's commands are idempotent (upserts, defines with REPLACE),
        so sending one again after an unknown outcome is safe."""
        deadline = self.loop.time() + wait
        while True:
            left = max(deadline - self.loop.time(), 0.05)
            try:
                return await asyncio.wait_for(asyncio.shield(self._submitted(command)), left)
            except TimeoutError:
                if self.replica.is_ready and self.replica.quorum_connected:
                    # a leader and a majority, and still no commit: lost, submitted anew
                    self._queued.pop(_key(command), None)
                return _unavailable(
                    f"the cluster repository is unavailable: no commit within {wait:g}s "
                    f"(Raft leader {self.replica.leader or 'unknown'}); the change stays queued"
                )
            except RaftUnavailable as exc:  # dropped (a leader change): submitted again
                if self.loop.time() >= deadline - 0.05:
                    return _unavailable(f"the cluster repository is unavailable: {exc}")
            await asyncio.sleep(0.1)

    def _submitted(self, command: Mapping[str, Any]) -> asyncio.Task[ApplyResult]:
        key = _key(command)
        task = self._queued.get(key)
        if task is None:
            task = self.loop.create_task(self.replica.submit_async(command, QUEUED_FOR))
            self._queued[key] = task

            def done(t: asyncio.Task[ApplyResult]) -> None:
                if self._queued.get(key) is t:
                    del self._queued[key]
                if not t.cancelled():
                    t.exception()  # retrieved: whoever waited has seen it

            task.add_done_callback(done)
        return task

    async def propose_until_done(self, command: Mapping[str, Any]) -> ApplyResult:
        """``commit`` again until the repository accepts or rejects ``command``."""
        while True:
            result = await self.commit(command, PROPOSE_TIMEOUT)
            if not result.unavailable:
                return result
            await asyncio.sleep(0.5)

    def status(self) -> dict[str, Any]:
        return {**self.replica.status(), "relayed": len(self._relayed)}

    async def stop(self) -> None:
        for task in [self._join_task, *self._settling.values(), *self._queued.values()]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        await self.loop.run_in_executor(None, self.replica.close)


def _key(command: Mapping[str, Any]) -> str:
    return json.dumps(dict(command), sort_keys=True, separators=(",", ":"))


class WatchLink:
    """A partial repository's watched copy."""

    def __init__(
        self,
        settings: ClusterSettings,
        dialer: Dialer,
        on_change: ChangeSink,
        cached: Mapping[str, Any] | None,
        save: Callable[[list[RepoEvent], ClusterRepository], None],
    ) -> None:
        self.settings = settings
        self.dialer = dialer
        self.on_change = on_change
        self.repository = (
            ClusterRepository.from_snapshot(cached)
            if cached
            else ClusterRepository(settings.cluster)
        )
        self.had_cache = bool(cached)
        self._save = save
        self.synced = asyncio.Event()
        self.refused = asyncio.Event()  # a full repository refused this node (see reason)
        self.reason = ""
        self._task: asyncio.Task[None] | None = None
        self._join: Mapping[str, Any] = {}
        self._join_list_only = False  # REPOS(YES): until the next snapshot
        # one open channel per full repository for proposals (each call still proves who
        # this node is); dropped when a call on it fails
        self._proposers: dict[str, RepositoryClient] = {}

    def _addresses(self) -> list[str]:
        if self._join_list_only and self.settings.join:
            return list(dict.fromkeys(self.settings.join))
        known = [m.address for m in self.repository.full_repositories() if m.address]
        return list(dict.fromkeys([*self.settings.join, *known]))

    async def start(self, join: Mapping[str, Any], timeout: float) -> None:
        self._join = join
        self._task = asyncio.get_running_loop().create_task(self._run())
        wait = min(timeout, 3.0) if self.had_cache else timeout
        waits = {
            asyncio.ensure_future(self.synced.wait()),
            asyncio.ensure_future(self.refused.wait()),
        }
        await asyncio.wait(waits, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
        for waiter in waits:
            waiter.cancel()
        if self.synced.is_set():
            return
        if self.had_cache:
            log.warning("no full repository reachable; using the cluster view kept on disk")
        elif self.refused.is_set():
            raise RuntimeError(f"no full repository accepted this node: {self.reason}")
        else:
            raise RuntimeError(
                f"no full repository answered within {timeout:g}s at "
                + ", ".join(self.settings.join)
            )

    def set_join(self, join: Mapping[str, Any]) -> None:
        """The join command to use on the next (re)connection."""
        self._join = join

    async def _run(self) -> None:
        attempt = 0
        while True:
            addresses = self._addresses()
            address = addresses[attempt % len(addresses)]
            attempt += 1
            client = RepositoryClient(address, self.dialer)
            try:
                async for snapshot, events, server in client.watch(self._join):
                    if snapshot is not None:
                        new = ClusterRepository.from_snapshot(snapshot)
                        if server not in {m.name for m in new.full_repositories()}:
                            # not (yet) a full repository: nothing of it is taken
                            self._failed(
                                address,
                                f"{server} is not a full repository of cluster "
                                f"{self.settings.cluster}",
                            )
                            break
                        events = self.repository.view().diff(new.view())
                        self.repository = new
                        self._join_list_only = False
                    else:
                        for event in events:
                            self.repository.apply_event(event)
                    self._save(events, self.repository)
                    self.synced.set()
                    self.on_change(events)
            except Refusal as exc:
                self._failed(address, str(exc))
                self.refused.set()
            except (TransportError, OSError) as exc:
                log.info("repository stream from %s ended: %s", address, exc)
            finally:
                with contextlib.suppress(Exception):
                    await client.close()
            await asyncio.sleep(0.2 if attempt % max(1, len(addresses)) else 0.5)

    async def refresh(self, repos: bool, timeout: float) -> bool:
        """REFRESH CLUSTER: end the watch and join again, so a fresh snapshot from a full
        repository replaces the whole local copy (REPOS(YES): asked of the ``--join``
        addresses only). Returns whether the new snapshot arrived within ``timeout``; if not,
        the node keeps its copy and the watch goes on trying in the background."""
        await self.stop()
        self._join_list_only = repos
        self.synced.clear()
        self._task = asyncio.get_running_loop().create_task(self._run())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.synced.wait(), timeout)
        return self.synced.is_set()

    def _failed(self, address: str, reason: str) -> None:
        """Logged once per distinct reason (a refusal repeats on every retry)."""
        text = f"{address}: {reason}"
        if text != self.reason:
            log.error("repository at %s: %s", address, reason)
        self.reason = text

    async def propose(self, command: Mapping[str, Any]) -> ApplyResult:
        """Ask the full repositories in turn; the first that answers decides (one that answers
        without a quorum says ``unavailable``, and keeps the change queued). The channel to
        each is kept open between proposals (no connection set up per change); a call that
        fails on a kept channel as UNAVAILABLE (the full repository restarted since) is made
        once more on a new one before the next full repository is asked."""
        last = "no full repository known"
        for address in self._addresses():
            kept = self._proposers.get(address)
            for client in (kept, None) if kept is not None else (None,):
                if client is None:
                    client = self._proposers[address] = RepositoryClient(address, self.dialer)
                try:
                    return await client.propose(command, PENDING_WAIT + PROPOSE_TIMEOUT)
                except (TransportError, OSError, Refusal) as exc:
                    last = f"{address}: {exc}"
                    await self._drop_proposer(address, client)
                    if client is not kept or not _unreachable(exc):
                        break
        return _unavailable(f"no full repository could take the change ({last})")

    async def _drop_proposer(self, address: str, client: RepositoryClient) -> None:
        if self._proposers.get(address) is client:
            del self._proposers[address]
        with contextlib.suppress(Exception):
            await client.close()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None
        for address, client in list(self._proposers.items()):
            await self._drop_proposer(address, client)


def _unreachable(exc: BaseException) -> bool:
    """A call that failed for want of a connection (not refused, not timed out)."""
    code = getattr(exc, "code", None)
    return isinstance(exc, OSError) or (callable(code) and code() is grpc.StatusCode.UNAVAILABLE)
