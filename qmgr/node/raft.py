"""Raft adapter: the full repositories replicate the cluster repository with PySyncObj.

Every full repository (FR) runs one ``RepositoryReplica``: a ``ClusterRepository`` driven by a
PySyncObj group made of the FRs. A change is submitted on any FR; PySyncObj forwards it to the
leader, the leader appends it to the Raft log, and once a majority holds it every replica applies
it, in log order, to its own repository. With 3 FRs the loss of any one changes nothing for
users; with 1 FR there is no fault tolerance.

What goes through Raft is ours, not pickled objects:

- a command is the ``Cmd`` dict sent as one canonical JSON string (``apply`` decodes it; a
  string that is not JSON is rejected like any other bad command, never raised inside Raft);
- snapshots (PySyncObj's log compaction, and the state sent to a member that is too far behind)
  are written by a custom serializer as a JSON file: ``ClusterRepository.to_snapshot()`` plus
  PySyncObj's two last log entries and the member list (command bytes in base64).

PySyncObj still pickles its own framing on the wire: the transport is bound to the node's own
address (``bindAddress``, not 0.0.0.0), and the Raft password (``RaftConfig.password``, which
:func:`qmgr.security.keys.raft_password` derives from the cluster secret: only full repositories
hold that secret, partial repositories hold a member secret that cannot give it) makes PySyncObj
encrypt and authenticate every frame (Fernet) before anything is unpickled; that needs
the ``cryptography`` package (``PASSWORD_SUPPORTED``). Without it a password is refused at
start-up rather than silently ignored. In addition, importing this module installs
:mod:`qmgr.node.raft_pickle`: PySyncObj's unpickler then rebuilds builtin data only, so not even
a member holding the secret (or anyone, on a node run with ``--insecure``) can make it run code.

Timers (``RaftTimers``): PySyncObj batches writes and sends them on its 100 ms append period by
default, so one blocking write takes ~100 ms. The defaults here disable batching (a submit wakes
the Raft thread through a pipe and the leader sends the entry at once) and shorten the
heartbeat, reconnect and leader-fallback times, so a definition commits in milliseconds.

Without a quorum (a member alone after a restart, one of two members down) a replica still
applies its journal up to the commit index it recorded, so it serves its last committed view;
submitted commands wait in PySyncObj's queue (``commandsWaitLeader``) and commit when a leader
is elected again. ``submit`` gives up waiting after its timeout; the command stays queued.

Threads: PySyncObj runs one "tick" thread per replica. It applies commands and calls
``on_events`` (see ``RepositoryReplica``). Its thread stops when the thread that created the
replica exits, so create the replica on a long-lived thread (the node's main thread).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, SyncObjConsumer, replicated
from pysyncobj.encryptor import HAS_CRYPTO
from pysyncobj.node import TCPNode

from cluster.records import RepoEvent
from cluster.repository import ApplyResult, ClusterRepository, ErrorCode, RepoError
from qmgr.node import raft_pickle

raft_pickle.install()

log = logging.getLogger("qmgr.node.raft")

PASSWORD_SUPPORTED: bool = bool(HAS_CRYPTO)
SNAPSHOT_FORMAT = "qmgr-raft-snapshot"
SNAPSHOT_FORMAT_VERSION = 1
JOURNAL_FILE = "raft-journal.bin"
DUMP_FILE = "raft-snapshot.json"

EventSink = Callable[[list[RepoEvent]], None]

_FAIL_NAMES = {
    FAIL_REASON.QUEUE_FULL: "command queue full",
    FAIL_REASON.MISSING_LEADER: "no leader (election in progress or no connection)",
    FAIL_REASON.DISCARDED: "discarded: a new leader committed another command in its place",
    FAIL_REASON.NOT_LEADER: "the leader changed before the command committed",
    FAIL_REASON.LEADER_CHANGED: "the leader changed before the command committed",
    FAIL_REASON.REQUEST_DENIED: "request denied",
    FAIL_REASON.UNKNOWN_OUTCOME: "outcome unknown",
}
_STATES = {0: "follower", 1: "candidate", 2: "leader"}


class RaftError(Exception):
    """Base class for errors of the Raft adapter."""


class RaftUnavailable(RaftError):
    """The command did not commit in time (no leader, no quorum, leader change).

    After a timeout the outcome is unknown: the command may still commit later."""


class RaftConfigError(RaftError, ValueError):
    """The Raft configuration cannot work (bad address, password without cryptography, ...)."""


@dataclass(frozen=True)
class RaftTimers:
    """PySyncObj timing, in seconds (see ``SyncObjConf``); the defaults are tuned for a LAN."""

    tick: float = 0.05  # longest idle wait of the Raft thread (work wakes it at once)
    heartbeat: float = 0.05  # append-entries period; must be < election_min / 3
    election_min: float = 0.4  # a follower that hears nothing for a random time in
    election_max: float = 1.0  # [election_min, election_max] starts an election
    connection_timeout: float = 3.5  # a silent connection is dropped after this
    connection_retry: float = 0.5  # reconnect to a lost partner this often
    leader_fallback: float = 3.0  # a leader cut off from the majority steps down after this
    batch_entries: bool = False  # True: send writes on the heartbeat only (PySyncObj default)

    @staticmethod
    def pysyncobj_defaults() -> RaftTimers:
        """PySyncObj's own defaults (for comparison benchmarks)."""
        return RaftTimers(0.05, 0.1, 0.4, 1.4, 3.5, 5.0, 30.0, True)


@dataclass(frozen=True)
class RaftConfig:
    """One FR's place in the Raft group. ``peers`` may include ``self_addr`` (it is skipped)."""

    self_addr: str
    peers: tuple[str, ...]
    cluster: str
    password: str | None = field(default=None, repr=False)  # never in a log line
    data_dir: Path | None = None  # journal and snapshot files live here when given
    timers: RaftTimers = field(default_factory=RaftTimers)
    compact_after_entries: int = 5000  # log entries kept before a snapshot is taken

    def __post_init__(self) -> None:
        for addr in (self.self_addr, *self.peers):
            _check_address(addr)
        if not self.cluster:
            raise RaftConfigError("the cluster name must not be empty")
        if self.password is not None and not self.password:
            raise RaftConfigError("the cluster password must not be empty (use None for none)")
        if self.compact_after_entries < 2:
            raise RaftConfigError("compact_after_entries must be at least 2")

    @property
    def partners(self) -> tuple[str, ...]:
        """The other members, without duplicates and without ``self_addr``."""
        return tuple(dict.fromkeys(p for p in self.peers if p != self.self_addr))


def _check_address(addr: str) -> None:
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise RaftConfigError(f"a Raft address must be HOST:PORT with a port 1-65535: {addr!r}")


def _encode_entry(entry: Any) -> list[Any]:
    command, idx, term = entry
    return [base64.b64encode(bytes(command)).decode("ascii"), int(idx), int(term)]


def _decode_entry(raw: Any) -> tuple[bytes, int, int]:
    command, idx, term = raw
    return base64.b64decode(command), int(idx), int(term)


class _ReplicatedRepository(SyncObjConsumer):
    """The replicated state: PySyncObj calls ``apply_json`` on every replica, in log order."""

    def __init__(self, cluster: str, on_events: EventSink | None) -> None:
        super().__init__()
        self.cluster = cluster
        self.lock = threading.Lock()
        self.repo = ClusterRepository(cluster)
        self.on_events = on_events
        self.raft_thread: int | None = None

    @replicated
    def apply_json(self, text: str) -> ApplyResult:
        self.raft_thread = threading.get_ident()
        try:
            command = json.loads(text)
        except (TypeError, ValueError) as exc:
            return ApplyResult(error=RepoError(ErrorCode.PARM_VALUE_ERROR, f"not JSON: {exc}"))
        with self.lock:
            result = self.repo.apply(command)
        self._emit(list(result.events))
        return result

    def _emit(self, events: list[RepoEvent]) -> None:
        if events and self.on_events is not None:
            try:
                self.on_events(events)
            except Exception:  # a failing listener must not stall the Raft thread
                log.exception("on_events callback failed")

    # PySyncObj's custom serializer pair: ``raft`` is (last entry, previous entry, members).

    def write_dump(self, path: str, raft: tuple[Any, Any, Any]) -> None:
        last, prev, members = raft
        with self.lock:
            state = self.repo.to_snapshot()
        doc = {
            "format": SNAPSHOT_FORMAT,
            "v": SNAPSHOT_FORMAT_VERSION,
            "repository": state,
            "raft": {
                "last": _encode_entry(last),
                "prev": _encode_entry(prev),
                "members": sorted(str(node.id) for node in members),
            },
        }
        # encoded at once, then written: json.dump writes small pieces, which at 10,000
        # definitions takes four times as long, on the Raft thread (58 -> 14 ms of CPU)
        text = json.dumps(doc, separators=(",", ":"))
        with open(path, "w", encoding="utf-8") as out:
            out.write(text)

    def read_dump(self, path: str) -> tuple[Any, Any, Any]:
        self.raft_thread = threading.get_ident()
        with open(path, encoding="utf-8") as inp:
            doc = json.load(inp)
        if doc.get("format") != SNAPSHOT_FORMAT or doc.get("v") != SNAPSHOT_FORMAT_VERSION:
            raise ValueError(f"{path}: not a version {SNAPSHOT_FORMAT_VERSION} Raft snapshot")
        repo = ClusterRepository.from_snapshot(doc["repository"])
        if repo.cluster != self.cluster:
            log.error(
                "Raft snapshot is for cluster %r, this node is in %r", repo.cluster, self.cluster
            )
        with self.lock:
            old, self.repo = self.repo, repo
        self._emit(old.view().diff(repo.view()))
        raft = doc["raft"]
        members = {TCPNode(addr) for addr in raft["members"]}
        return _decode_entry(raft["last"]), _decode_entry(raft["prev"]), members


class RepositoryReplica:
    """One FR's copy of the cluster repository, kept in step with the others by Raft.

    ``on_events(events)`` is called on every replica for every command that changed something,
    in log order, from PySyncObj's thread: also for entries replayed from the journal at
    restart, and with the difference when a snapshot replaces the state. It must not block and
    must not call ``submit``: the node hops to its event loop
    (``loop.call_soon_threadsafe``) and does its work there.
    """

    def __init__(self, config: RaftConfig, on_events: EventSink | None = None) -> None:
        if config.password is not None and not PASSWORD_SUPPORTED:
            raise RaftConfigError(
                "a Raft cluster password needs the 'cryptography' package, which is not installed"
            )
        self.config = config
        self._state = _ReplicatedRepository(config.cluster, on_events)
        self._tmp_dir: Path | None = None
        if config.data_dir is not None:
            data_dir = Path(config.data_dir)
            data_dir.mkdir(parents=True, exist_ok=True)
            journal: str | None = str(data_dir / JOURNAL_FILE)
        else:  # snapshots still go through our JSON serializer, which needs a file
            data_dir = self._tmp_dir = Path(tempfile.mkdtemp(prefix="qmgr-raft-"))
            journal = None
        t = config.timers
        conf = SyncObjConf(
            password=config.password,
            bindAddress=config.self_addr,
            autoTickPeriod=t.tick,
            appendEntriesPeriod=t.heartbeat,
            raftMinTimeout=t.election_min,
            raftMaxTimeout=t.election_max,
            connectionTimeout=t.connection_timeout,
            connectionRetryTime=t.connection_retry,
            leaderFallbackTimeout=t.leader_fallback,
            appendEntriesUseBatch=t.batch_entries,
            commandsWaitLeader=True,
            journalFile=journal,
            fullDumpFile=str(data_dir / DUMP_FILE),
            serializer=self._state.write_dump,
            deserializer=self._state.read_dump,
            logCompactionMinEntries=config.compact_after_entries,
            dynamicMembershipChange=False,
        )
        try:
            conf.validate()
        except AssertionError as exc:
            self._remove_tmp()
            raise RaftConfigError(f"inconsistent Raft timers: {t}") from exc
        self._sync = SyncObj(config.self_addr, list(config.partners), conf, [self._state])
        if journal is not None:
            self._persist_commit_index_every_tick()
        if not config.partners and not t.batch_entries:
            self._commit_alone_at_once()
        self._closed = False

    def _persist_commit_index_every_tick(self) -> None:
        """PySyncObj keeps the commit index in the journal's meta file, which it writes once a
        second; a replica restarted without a quorum replays its journal up to that index
        only (never an uncommitted entry) and serves that view. Writing the meta file at the
        end of every tick that changed it (after the tick applied the new commits) keeps that
        view as fresh as what this replica has applied, also after kill -9."""
        raft_log = getattr(self._sync, "_SyncObj__raftLog", None)
        store = getattr(raft_log, "onOneSecondTimer", None)  # writes only when changed
        if store is not None:
            self._sync.addOnTickCallback(store)

    def _commit_alone_at_once(self) -> None:
        """A replica alone in its group (one full repository) is its own majority: the tick
        that appends a command commits it at the start of the next tick, which otherwise
        begins only when the poll at its end times out (``RaftTimers.tick``, ~50 ms per
        change). At the end of a tick that appended entries it has not committed, the
        leader wakes its own poll, so the next tick commits them at once (through the log,
        as before). Once per appended entry: a replica that cannot commit (not leader yet)
        is not woken again and again."""
        sync = self._sync
        raft_log = getattr(sync, "_SyncObj__raftLog", None)
        notifier = getattr(sync, "_SyncObj__pipeNotifier", None)
        if raft_log is None or notifier is None:  # another PySyncObj: the tick wait stays
            return
        woken = [0]

        def wake() -> None:
            last = int(raft_log[-1][1])
            if last > woken[0] and last > sync.raftCommitIndex and sync._isLeader():
                woken[0] = last
                notifier.notify()

        sync.addOnTickCallback(wake)

    # ----------------------------------------------------------------- writes

    def submit(self, cmd: Mapping[str, Any], timeout: float = 5.0) -> ApplyResult:
        """Replicate ``cmd`` (a ``Cmd`` dict) and return its result as applied on this replica.

        Blocks until this replica has applied it. Raises ``RaftUnavailable`` when it does not
        commit within ``timeout`` (no leader or quorum: the outcome is then unknown) or when a
        leader change dropped it."""
        text = self._encode(cmd)
        done = threading.Event()
        outcome: list[tuple[Any, int]] = []

        def on_result(result: Any, error: int) -> None:
            outcome.append((result, error))
            done.set()

        self._state.apply_json(text, callback=on_result)
        if not done.wait(timeout):
            raise RaftUnavailable(self._timeout_message(timeout))
        return self._result(*outcome[0])

    async def submit_async(self, cmd: Mapping[str, Any], timeout: float = 5.0) -> ApplyResult:
        """``submit`` for an asyncio caller: waits without blocking the event loop."""
        text = self._encode(cmd)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[tuple[Any, int]] = loop.create_future()

        def settle(result: Any, error: int) -> None:
            if not future.done():
                future.set_result((result, error))

        def on_result(result: Any, error: int) -> None:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(settle, result, error)

        self._state.apply_json(text, callback=on_result)
        try:
            result, error = await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise RaftUnavailable(self._timeout_message(timeout)) from None
        return self._result(result, error)

    def _encode(self, cmd: Mapping[str, Any]) -> str:
        if self._closed:
            raise RaftUnavailable("the Raft replica is closed")
        if self._state.raft_thread == threading.get_ident():
            raise RaftError("submit from the Raft thread (an on_events callback) would deadlock")
        return json.dumps(dict(cmd), sort_keys=True, separators=(",", ":"))

    def _timeout_message(self, timeout: float) -> str:
        return (
            f"no commit within {timeout:g}s (leader {self.leader or 'unknown'}); "
            "the command may still be applied later"
        )

    @staticmethod
    def _result(result: Any, error: int) -> ApplyResult:
        if error != FAIL_REASON.SUCCESS or not isinstance(result, ApplyResult):
            raise RaftUnavailable(_FAIL_NAMES.get(error, f"PySyncObj failure {error}"))
        return result

    # ----------------------------------------------------------------- reads

    def snapshot(self) -> dict[str, Any]:
        """The repository as applied on this replica (``ClusterRepository.to_snapshot``)."""
        with self._state.lock:
            return self._state.repo.to_snapshot()

    def read(self) -> ClusterRepository:
        """A private copy of this replica's repository, for queries."""
        return ClusterRepository.from_snapshot(self.snapshot())

    @property
    def revision(self) -> int:
        """Commands applied on this replica so far."""
        with self._state.lock:
            return self._state.repo.revision

    @property
    def leader(self) -> str | None:
        """The leader this replica last heard of ("host:port"), or None."""
        node = self._sync._getLeader()
        return None if node is None else str(node.id)

    @property
    def quorum_connected(self) -> bool:
        """This replica is connected to enough partners to make a majority with itself (a
        replica alone keeps the leader it last heard of: PySyncObj starts no election while
        it is connected to nobody)."""
        others = list(self._sync.otherNodes)
        connected = sum(1 for node in others if self._sync.isNodeConnected(node))
        return 2 * (connected + 1) > len(others) + 1

    @property
    def is_leader(self) -> bool:
        return bool(self._sync._isLeader())

    @property
    def is_ready(self) -> bool:
        """A leader is known and this replica has applied the log it found at start-up."""
        return self.leader is not None and bool(self._sync.isReady())

    def wait_ready(self, timeout: float) -> None:
        """Wait until ``is_ready``; raises ``RaftUnavailable`` after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self.is_ready:
            if time.monotonic() >= deadline:
                raise RaftUnavailable(f"no Raft leader within {timeout:g}s: {self.status()}")
            time.sleep(0.01)

    def status(self) -> dict[str, Any]:
        """Leader, term, commit index, partners' connection state (for DISPLAY and tests)."""
        raw: dict[str, Any] = {}
        for _ in range(5):  # PySyncObj builds it from dicts its own thread may be changing
            try:
                raw = self._sync.getStatus()
                break
            except RuntimeError:
                continue
        partners = {
            str(node.id): "connected" if self._sync.isNodeConnected(node) else "disconnected"
            for node in sorted(self._sync.otherNodes, key=lambda n: str(n.id))
        }
        with self._state.lock:
            revision = self._state.repo.revision
        return {
            "self": self.config.self_addr,
            "state": _STATES.get(raw.get("state", -1), "unknown"),
            "leader": self.leader,
            "term": self._sync.raftCurrentTerm,
            "commit_index": self._sync.raftCommitIndex,
            "last_applied": self._sync.raftLastApplied,
            "has_quorum": bool(raw.get("has_quorum", False)),
            "quorum_connected": self.quorum_connected,
            "ready": self.is_ready,
            "log_size": raw.get("log_len"),
            "revision": revision,
            "partners": partners,
        }

    # ----------------------------------------------------------------- shutdown

    def close(self) -> None:
        """Stop the Raft thread and close its connections and journal (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._sync.destroy_synchronous()
        self._remove_tmp()

    def _remove_tmp(self) -> None:
        if self._tmp_dir is not None:
            shutil.rmtree(self._tmp_dir, ignore_errors=True)
            self._tmp_dir = None

    def __enter__(self) -> RepositoryReplica:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
