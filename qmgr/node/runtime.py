"""A running queue manager: the domain, its store, group commit and consumer wake-ups.

At rest, only the node's user may read what it keeps: creating the runtime sets the process
umask to 0o077 (every file the node writes after that, the SQLite database, its -wal and -shm,
the Raft journal and snapshot, is 0600 and every directory 0700), and a data directory made by
an older version is tightened to those modes at start (:func:`make_private_tree`).
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qmgr.core.admin.dispatch import CommandHandler, MqscTable, Reply, Route
from qmgr.core.admin.execute import CORE, bound
from qmgr.core.clock import Clock, SystemClock
from qmgr.core.errors import MQError
from qmgr.core.journal import NullJournal
from qmgr.core.message import Message
from qmgr.core.qmgr import DEAD_LETTER_QUEUE, QueueManager
from qmgr.core.queue import QueueDef
from qmgr.core.subscription import Subscription
from qmgr.node.bridge import Bridges
from qmgr.node.cluster import admin as cluster_admin
from qmgr.node.cluster.chlcmds import ClusterChannels
from qmgr.node.cluster.items import XMITQ_PREFIX
from qmgr.node.committer import Committer
from qmgr.node.config import NodeConfig
from qmgr.node.servicebus import (
    NAMESPACE_KEY,
    ServiceBusHost,
    ServiceBusStartError,
    namespace_name,
    read_config_file,
)
from qmgr.node.signals import QueueSignals
from qmgr.servicebus.errors import ServiceBusError
from qmgr.servicebus.namespace import NamespaceLimits
from qmgr.store import StoreFailed, StoreInUse
from qmgr.store.servicebus import SbLoaded
from qmgr.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from qmgr.node.cluster.agent import ClusterAgent


log = logging.getLogger("qmgr.node")

PRIVATE_UMASK = 0o077


def make_private_tree(root: Path) -> None:
    """Create ``root`` if needed; make it and every directory under it 0700 and every file
    0600 (symbolic links are left alone). Anything there that belongs to another user stops
    the start (SystemExit): its owner could read or replace the node's data."""
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    for path in (root, *root.rglob("*")):
        try:
            st = path.lstat()
        except OSError as exc:  # removed meanwhile
            log.warning("cannot make %s private: %s", path, exc)
            continue
        if st.st_uid != os.getuid():
            raise SystemExit(
                f"qmgr: {path} in the data directory belongs to uid {st.st_uid}, not to this "
                f"user (uid {os.getuid()}): its owner could read or replace the queue "
                "manager's data; give it to this user or use another --data-dir"
            )
        want = 0o700 if stat.S_ISDIR(st.st_mode) else 0o600
        if not stat.S_ISLNK(st.st_mode) and stat.S_IMODE(st.st_mode) != want:
            try:
                os.chmod(path, want)
            except OSError as exc:
                log.warning("cannot make %s private: %s", path, exc)


@dataclass(slots=True)
class Publication:
    """One publication of an application's batch."""

    topic: str
    message: Message
    retain: bool = False
    scope_qmgr: bool = False  # MQPMO_SCOPE_QMGR: local subscribers only


@dataclass(slots=True)
class PublishResult:
    """What ``NodeRuntime.publish_batch`` did: the publications accepted (all unless
    ``error`` stopped the batch part-way), the copies delivered here, the copies sent on to
    other members and to which (name order), and the cluster ("" if none)."""

    accepted: int = 0
    deliveries: int = 0
    forwards: int = 0
    forwarded_to: tuple[str, ...] = ()
    cluster: str = ""
    error: MQError | None = None


class NodeRuntime:
    def __init__(
        self,
        config: NodeConfig,
        *,
        clock: Clock | None = None,
        store_fault_at_commit: int = 0,
    ) -> None:
        """``clock``: the time everything the node stamps and expires is read from (the wall
        clock unless given). ``store_fault_at_commit`` (tests only): the N-th commit fails as
        on a full disk."""
        self.config = config
        self.clock: Clock = clock if clock is not None else SystemClock()
        # Told once when the store fails (the node must stop: see ``Committer``).
        self.on_store_failed: Callable[[StoreFailed], None] | None = None
        self.signals = QueueSignals()
        self.store: SqliteStore | None = None
        self.committer: Committer | None = None
        self.agent: ClusterAgent | None = None
        self.loaded_objects: dict[str, dict[str, dict[str, Any]]] = {}
        self.loaded_kv: dict[str, str] = {}
        self.restored_xmit: list[tuple[str, Message]] = []
        self.servicebus: ServiceBusHost | None = None
        clock = self.clock
        os.umask(PRIVATE_UMASK)
        if config.data_dir is not None:
            make_private_tree(config.data_dir)
            try:
                self.store = SqliteStore(config.data_dir, fail_at_commit=store_fault_at_commit)
            except StoreInUse as exc:
                raise SystemExit(f"qmgr: {config.name}: {exc}") from None
            loaded = self.store.load()
            self.qm = QueueManager(
                config.name,
                clock,
                self.store,
                uid=loaded.uid,
                epoch=loaded.epoch,
                first_sequence=loaded.max_sequence + 1,
            )
            self.loaded_objects = loaded.objects
            self.loaded_kv = loaded.kv
            self._restore(loaded.objects, loaded.messages, loaded.retained)
            self.servicebus = self._host_servicebus(clock, loaded.servicebus)
        else:
            self.qm = QueueManager(config.name, clock, NullJournal())
            self.servicebus = self._host_servicebus(clock, None)
        if DEAD_LETTER_QUEUE not in self.qm.queues:
            self.qm.define_queue(QueueDef(DEAD_LETTER_QUEUE, maxdepth=999_999_999))
        self.qm.set_message_listener(self.signals.notify)
        self.channels = ClusterChannels(self)
        self.bridges = Bridges(self)
        # every MQSC command this node runs: the queue manager's, then what the node adds
        self.commands: MqscTable[CommandHandler] = CORE.mapped(partial(bound, self.qm))
        self.bridges.register(self.commands)
        self.channels.register(self.commands)
        cluster_admin.register(self.commands, self)

    def _restore(
        self,
        objects: dict[str, dict[str, dict[str, Any]]],
        messages: list[Any],
        retained: list[Any],
    ) -> None:
        from qmgr.core.qmgr import topic_from_dict

        qm = self.qm
        now = qm.clock.now()
        for data in objects.get("queue", {}).values():
            qm.restore_queue(QueueDef.from_dict(data))
        for data in objects.get("qmodel", {}).values():
            qm.restore_model(QueueDef.from_dict(data))
        for data in objects.get("topic", {}).values():
            qm.restore_topic(topic_from_dict(data))
        for data in objects.get("sub", {}).values():
            qm.pubsub.restore(Subscription.from_dict(data), now)
        attrs = objects.get("qmgr", {}).get("attrs")
        if attrs:
            for key, value in attrs.items():
                setattr(qm.attrs, key, value)
        for queue, msg in messages:
            q = qm.queues.get(queue)
            if q is not None:
                q.restore(msg)
            elif queue.startswith(XMITQ_PREFIX):
                self.restored_xmit.append((queue, msg))
        for msg in retained:
            qm.pubsub.retained[msg.topic] = msg
        qm.migrate_managed_queues()

    def _host_servicebus(self, clock: Clock, loaded: SbLoaded | None) -> ServiceBusHost | None:
        """The Service Bus namespace of ``--servicebus``/``--servicebus-config``, or the one the
        store holds; None when neither. A Config.json that cannot be used stops the start
        (SystemExit naming the file, the JSON path and the problem)."""
        cfg = self.config
        stored = loaded.values.get(NAMESPACE_KEY) if loaded is not None else None
        if cfg.servicebus is None and cfg.servicebus_config is None and not stored:
            return None
        path = cfg.servicebus_config
        try:
            config = read_config_file(path) if path is not None else None
            name = namespace_name(cfg.servicebus, config, stored, path)
            limits = NamespaceLimits(**dict(cfg.servicebus_limits))
            host = ServiceBusHost(name, clock, self.store, loaded, limits)
            if config is not None:
                try:
                    changes = host.apply(config)
                except ServiceBusError as exc:
                    raise ServiceBusStartError(f"{path}: {exc}") from None
                for change in changes:
                    log.info("%s: %s", path, change)
        except ServiceBusStartError as exc:
            raise SystemExit(f"qmgr: {cfg.name}: {exc}") from None
        return host

    def publish(
        self, topic: str, msg: Message, *, retain: bool = False, scope_qmgr: bool = False
    ) -> int:
        """A publication from a local application (through the cluster when in one); raises
        the MQError that refused it. Returns the copies delivered here."""
        result = self.publish_batch([Publication(topic, msg, retain, scope_qmgr)])
        if result.error is not None:
            raise result.error
        return result.deliveries

    def publish_batch(self, batch: list[Publication]) -> PublishResult:
        """The one publish path of applications' publications: publish ``batch`` in order.
        Every publication is checked first (topic string, PUB(DISABLED) here and in the
        cluster, priority, size) and stamped, so a bad one rejects the batch with nothing
        published (raised). A failure that only shows while delivering (e.g. a full queue
        under PMSGDLV) stops the batch there: the result says how many were accepted and
        carries the error."""
        qm = self.qm
        agent = self.agent
        runs = _runs(batch)
        for topic, scope_qmgr, _, msgs in runs:
            qm.accept_publications(topic, msgs)
            if agent is not None:
                agent.check_publish(topic, scope_qmgr=scope_qmgr)
        if agent is None:
            return self._publish_runs(runs)
        return self._publish_cluster_runs(agent, runs)

    def _publish_runs(self, runs: list[Run]) -> PublishResult:
        """Accepted runs of publications published outside a cluster."""
        result = PublishResult()
        qm = self.qm
        for topic, _, retain, msgs in runs:
            if retain:  # each kept as the topic's retained publication in turn
                published, copies, error = len(msgs), 0, None
                for i, msg in enumerate(msgs):
                    try:
                        copies += qm.publish_accepted(topic, msg, retain=True)
                    except MQError as exc:
                        published, error = i, exc
                        break
            else:
                published, copies, error = qm.publish_accepted_run(topic, msgs)
            result.accepted += published
            result.deliveries += copies
            if error is not None:
                result.error = error
                break
        return result

    def _publish_cluster_runs(self, agent: ClusterAgent, runs: list[Run]) -> PublishResult:
        """Accepted runs of publications published in a cluster."""
        result = PublishResult(cluster=agent.cluster)
        peers: set[str] = set()
        for topic, scope_qmgr, retain, msgs in runs:
            done = agent.publish_run(topic, msgs, scope_qmgr=scope_qmgr, retain=retain)
            result.accepted += done.published
            result.deliveries += done.copies
            result.forwards += done.forwards
            peers |= done.peers
            if done.error is not None:
                result.error = done.error
                break
        result.forwarded_to = tuple(sorted(peers))
        return result

    async def mqsc(self, text: str) -> Reply:
        """Run one MQSC command: parsed once, run by the handler the node's table has for it."""
        routed = self.commands.route(text)
        if not isinstance(routed, Route):
            return routed
        reply = routed.handler(routed.command)
        return reply if isinstance(reply, tuple) else await reply

    def start(self) -> None:
        if self.store is not None:
            self.committer = Committer(self.store, on_failure=self._store_failed)
            self.committer.start()
        if self.servicebus is not None:
            self.servicebus.start()

    def _store_failed(self, failure: StoreFailed) -> None:
        if self.on_store_failed is not None:
            self.on_store_failed(failure)

    @property
    def store_failure(self) -> StoreFailed | None:
        """Why the store failed (the node is stopping), or None."""
        return self.committer.failure if self.committer is not None else None

    def check_serving(self) -> None:
        """Raise ``StoreFailed`` once the store has failed: no call is served any more."""
        failure = self.store_failure
        if failure is not None:
            raise StoreFailed(str(failure))

    async def durable(self, target: int | None = None) -> None:
        """Wait until every change so far (or up to ``target``, a ``position``) is committed
        (no-op without a data directory)."""
        if self.committer is not None:
            await self.committer.durable(target)

    @property
    def position(self) -> int:
        """The journal position reached so far (0 without a data directory)."""
        return self.committer.position if self.committer is not None else 0

    async def stop(self) -> None:
        await self.bridges.stop()
        if self.servicebus is not None:
            await self.servicebus.stop()
        if self.committer is not None:
            await self.committer.stop()
        if self.store is not None:
            self.store.close()


Run = tuple[str, bool, bool, list[Message]]  # topic, scope_qmgr, retain, messages


def _runs(batch: list[Publication]) -> list[Run]:
    """The batch's messages in runs of one topic, scope and retain flag, in order (a
    publisher often sends many to one topic: the topic's checks are made once per run)."""
    runs: list[Run] = []
    key: tuple[str, bool, bool] | None = None
    msgs: list[Message] = []
    for p in batch:
        if (p.topic, p.scope_qmgr, p.retain) != key:
            key = (p.topic, p.scope_qmgr, p.retain)
            msgs = []
            runs.append((*key, msgs))
        msgs.append(p.message)
    return runs
