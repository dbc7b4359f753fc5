"""The cluster agent of a node: joins the pure cluster modules to the queue manager, the
repository link and the channels.

- Topology: this node's topic objects merged with the clustered definitions it can see
  (``ClusterTopology``); the queue manager resolves topic attributes on the merged tree, so a
  clustered object defined elsewhere governs publications and subscriptions here too.
- Proxies: every local subscription change goes through ``ProxyPlanner``; the resulting (peer,
  topic) additions and withdrawals travel on the channels. A channel's hello carries the full
  set for that peer, so a restarted peer (or this node after a restart) is resynchronised.
- Publications: ``plan_publication`` decides local delivery and the forwarded copies; the copies
  go on the channels with the route fingerprint and their purpose.
- Re-drive: when the channel to a topic host fails, the publications queued for it that were
  never sent are re-planned with the workload algorithm; those already sent (in doubt, also
  after a restart: see the sent mark in ``outbound``) wait for the host, which acknowledges or
  de-duplicates them when it is back.
- Receiving: the pure ``ChannelReceiver`` keeps each sender's position by QMID; a batch advances
  per item, and an item that cannot be delivered (invalid values, a delivery the publication
  rules fail, a full transmission queue when passing it on) goes to the dead-letter queue with a
  dead-letter header instead of failing the batch.
- Identity: with the cluster secret this node answers challenges (``challenger``) and proves
  itself on every channel and repository call it opens (``dialer``); with TLS and a cluster CA
  its member certificate does too, and callers must present theirs (``member_certificates``).
- Back-pressure: a publication from a local application meets a full transmission queue as MQ
  rules say (PMSGDLV/NPMSGDLV ALLAVAIL: not sent to that peer; otherwise MQRC_Q_FULL and nothing
  delivered).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from cluster.channel import LEGACY, ChannelReceiver, InboundState, Verdict, legacy_qmid
from cluster.local_defs import Change, changes_to_send, local_clstate
from cluster.proxies import ProxyDiff, ProxyPlanner, ProxyTable
from cluster.records import (
    ChannelStatus,
    ClRoute,
    ClState,
    RepoEvent,
    Role,
    WorkloadAttrs,
)
from cluster.repository import ApplyResult, ClusterRepository, Cmd, ErrorCode, RepoError
from cluster.routing import DeliveryPlan, Purpose, branch_candidates
from cluster.topics import TopicObject, TopicObjects, topic_matches
from cluster.topology import TopologyIndex
from cluster.workload import (
    HostCandidate,
    QueuedPublication,
    SendState,
    WorkloadBalancer,
    redrive,
)
from qmgr.core.deadletter import dead_letter
from qmgr.core.errors import MQError
from qmgr.core.message import Message
from qmgr.core.subscription import Subscription
from qmgr.node.cluster.admin import ClusterAdmin
from qmgr.node.cluster.items import (
    ROUTE_PROPERTY,
    XMITQ_PREFIX,
    Forwarded,
    Item,
    Key,
    item_from_stored,
    xmitq,
)
from qmgr.node.cluster.outbound import SENT_KIND, STOPPED_KIND, ChannelManager, Identity
from qmgr.node.cluster.plans import PlanCache
from qmgr.node.cluster.repolink import RaftLink, WatchLink
from qmgr.node.cluster.viewstore import load_view, save_view
from qmgr.node.config import ClusterSettings, TlsSettings
from qmgr.rpc.peer_client import Dialer
from qmgr.security.member import Challenger, member_key

if TYPE_CHECKING:
    from qmgr.node.runtime import NodeRuntime

log = logging.getLogger("qmgr.node.cluster")

CLUSRCVR_KIND = "clusrcvr"
CHANSEQ_KIND = "chanseq"
PROXY_KIND = "proxy"
XMITQ_KIND = "xmitq"  # transmission queue attributes (MAXDEPTH)
REFRESH_WAIT = 5.0  # REFRESH CLUSTER answers once the new snapshot is in, or after this long
RETRY_MIN = 0.5  # pending definitions are sent again after this long, doubling up to RETRY_MAX
RETRY_MAX = 5.0
ROUTE_TEXTS_MAX = 4096  # routes kept as the text of a delivered copy's route property
BACKGROUND_WAIT = 3.0  # a join from channel definitions waits this long before going on


def _tls_material(tls: TlsSettings | None) -> tuple[bytes, bytes, bytes | None] | None:
    """The node's certificate, key and cluster CA (PEM), presented on the channels it opens."""
    if tls is None:
        return None
    return (
        tls.cert.read_bytes(),
        tls.key.read_bytes(),
        tls.ca.read_bytes() if tls.ca is not None else None,
    )


def _stored_name(qmid: str) -> str:
    """Name of the stored channel state of a sender QMID (by name before QMIDs were known)."""
    return qmid.removeprefix(LEGACY)


@dataclass(slots=True)
class RunPublished:
    """What ``ClusterAgent.publish_run`` did: the publications published (all unless
    ``error`` stopped the run), the copies delivered here, the copies sent to other members
    and to which."""

    published: int
    copies: int = 0
    forwards: int = 0
    peers: set[str] = field(default_factory=set)
    error: MQError | None = None


class ClusterAgent:
    def __init__(self, runtime: NodeRuntime, settings: ClusterSettings, address: str) -> None:
        self.rt = runtime
        self.qm = qm = runtime.qm
        self.settings = settings
        self.cluster = settings.cluster
        self.name = qm.name
        self.address = address
        self.role = Role.REPOS if settings.full_repository else Role.NORMAL
        if settings.full_repository:
            qm.attrs.repos = settings.cluster
        self.balancer = WorkloadBalancer()
        self.table = ProxyTable()
        self.receiver = ChannelReceiver()
        self.dropped = 0  # non-persistent publications not passed on (full transmission queue)
        self._route_texts: dict[tuple[str, ...], str] = {}  # a plan's route, joined
        self.workload = WorkloadAttrs()
        self.clusrcvr: dict[str, str] = {}
        saved = runtime.loaded_objects
        for name, data in saved.get(CHANSEQ_KIND, {}).items():
            qmid = str(data.get("qmid") or legacy_qmid(name))
            self.receiver.load(
                qmid,
                str(data.get("name", name)),
                str(data.get("address", "")),
                (int(data["epoch"]), int(data["seq"])),
            )
        for data in saved.get(PROXY_KIND, {}).values():
            self.table.add(str(data["peer"]), str(data["topic"]))
        xmitq_maxdepth = {
            peer: int(data["maxdepth"]) for peer, data in saved.get(XMITQ_KIND, {}).items()
        }
        for data in saved.get(CLUSRCVR_KIND, {}).values():
            self.clusrcvr = dict(data.get("attrs", {}))
            self.workload = WorkloadAttrs.from_dict(data.get("workload", {}))
        key = member_key(settings.secret.member, self.cluster) if settings.secret else None
        # the server side of member authentication (qmgr.rpc.peer_auth)
        self.challenger = Challenger(key, self.cluster, self.name) if key is not None else None
        tls = runtime.config.tls
        self.member_certificates = tls is not None and tls.ca is not None
        self.dialer = Dialer.make(self.name, self.cluster, key, _tls_material(tls))
        self.link: RaftLink | WatchLink
        if settings.full_repository:
            self.link = RaftLink(
                settings, runtime.config.data_dir, self._repository_changed, qm.name
            )
        else:
            cached, self._view_rewrite = load_view(
                settings.cluster, runtime.loaded_objects, runtime.loaded_kv
            )
            self.link = WatchLink(
                settings, self.dialer, self._repository_changed, cached, self._save_view
            )
        self.index = TopologyIndex(self.name, self.link.repository, qm.topics.all())
        self.topology = self.index.topology
        self.planner = ProxyPlanner(self.topology)
        epoch = qm.epoch if runtime.store is not None else int(runtime.clock.now() * 1000)
        self.channels = ChannelManager(
            Identity(self.name, address, self.cluster, qm.qmid),
            qm.journal,
            epoch,
            qm.next_sequence,
            self.address_of,
            self.planner.for_peer,
            self._channel_status,
            runtime.durable,
            self._undeliverable,
            self.dialer,
        )
        self.channels.maxdepths.update(xmitq_maxdepth)
        self.plans = PlanCache(
            lambda: self.topology, self.table, self.balancer, self.channels.statuses
        )
        self._started = False
        # local clustered definitions the repository could not take yet (CLSTATE(PENDING)),
        # and those it refused when they were sent again later (CLSTATE(INVALID): the reason)
        self.unsent: set[str] = set()
        self.invalid: dict[str, str] = {}
        # definitions a full repository took (relayed, perhaps by one this node does not
        # watch) that this node's view does not show yet: sent again until it does
        self.unconfirmed: set[str] = set()
        self._reconciling = asyncio.Lock()
        self._retry_wake = asyncio.Event()
        self._retry_task: asyncio.Task[None] | None = None
        self.start_join = settings.join
        self.admin = ClusterAdmin(self)

    # ------------------------------------------------------------------ start / stop

    def join_command(self) -> dict[str, Any]:
        return Cmd.join_member(
            self.name,
            self.qm.qmid,
            self.address,
            self.role,
            workload=self.workload.to_dict(),
            at=int(self.rt.clock.now() * 1000),
        )

    async def start(self, background: bool = False) -> None:
        """Join the cluster and start the channels. ``background`` (a join made with DEFINE
        CHANNEL, or rejoining from those definitions after a restart): when no full repository
        answers in time the node goes on without waiting, and joins when one does."""
        qm = self.qm
        self.channels.load_stopped(self.rt.loaded_objects.get(STOPPED_KIND, {}))
        self._apply_topology()
        for sub in list(qm.pubsub.subs.values()):
            self.planner.subscribe(sub.name, sub.topic_str, scope_qmgr=sub.subscope == "QMGR")
        qm.pubsub.listener = self._subscription_changed
        # The transmission queues come back before the first await: from then on the Peer
        # service may hand this node publications to pass on (it serves while the join below
        # waits for a full repository), queued with keys of this start's epoch. A restored
        # item queued after such an item was sent would go out below the key its receiver
        # already applied, and be dropped there as a duplicate: acknowledged, then lost.
        by_peer: dict[str, list[Item]] = {}
        for queue, msg in self.rt.restored_xmit:
            by_peer.setdefault(queue[len(XMITQ_PREFIX) :], []).append(item_from_stored(msg))
        marks = self.rt.loaded_objects.get(SENT_KIND, {})
        for peer, items in by_peer.items():
            mark = marks.get(peer, {})
            self.channels.restore(peer, items, (int(mark.get("epoch", 0)), int(mark.get("seq", 0))))
        try:
            wait = self.settings.join_timeout
            await self.link.start(
                self.join_command(), min(wait, BACKGROUND_WAIT) if background else wait
            )
        except RuntimeError as exc:
            if not background:
                raise
            log.warning("joining cluster %s in the background: %s", self.cluster, exc)
        self._started = True
        self._apply_topology()  # from scratch: changes seen while joining were not applied
        for peer, _topic in self.planner.full_set():
            self.channels.start_channel(peer)
        self._retry_task = asyncio.get_running_loop().create_task(self._retry_pending())
        self._retry_wake.set()  # definitions made while the node was down, if any

    def joined(self) -> tuple[bool, str]:
        """Whether a full repository has answered this node, and the last refusal if any."""
        if isinstance(self.link, WatchLink):
            return self.link.synced.is_set(), self.link.reason
        return True, ""

    def set_join_addresses(self, defined: tuple[str, ...]) -> None:
        """The full repositories to join through: ``--join`` and the CLUSSDR channels defined
        (kept as they were if that leaves none and no full repository is known)."""
        join = tuple(dict.fromkeys([*self.start_join, *defined]))
        if not join and not self.repository.full_repositories():
            return
        self.settings = replace(self.settings, join=join)
        if isinstance(self.link, WatchLink):
            self.link.settings = self.settings

    async def stop(self) -> None:
        if self._retry_task is not None:
            self._retry_task.cancel()
            with contextlib.suppress(BaseException):
                await self._retry_task
        await self.channels.stop()
        await self.link.stop()

    # ------------------------------------------------------------------ repository

    @property
    def repository(self) -> ClusterRepository:
        return self.link.repository

    def _save_view(self, events: list[RepoEvent], repo: ClusterRepository) -> None:
        if self.rt.store is not None:
            save_view(self.rt.store, events, repo, rewrite=self._view_rewrite)
            self._view_rewrite = False

    def _repository_changed(self, events: list[RepoEvent]) -> None:
        if not self._started:
            return
        self._apply_topology(events)
        # a re-synced watch or a commit: the repository may take the unsent ones now; and a
        # view that no longer holds a definition it held (a change relayed by a full
        # repository that restarted before committing it, or refused when it was committed)
        # needs it sent again
        own = {e.topic.name for e in events if e.topic is not None and e.topic.qmgr == self.name}
        check = own | self.unconfirmed
        pending = self.pending_changes(check) if check else set()
        self.unconfirmed &= pending  # the view now holds those it did not
        if self.unsent or pending - self.invalid.keys():
            self._retry_wake.set()

    def _apply_topology(
        self, events: list[RepoEvent] | None = None, local: Collection[str] = ()
    ) -> None:
        """Bring the merged topology, the local view of it and the proxy plan up to date after
        the repository changed (``events``) or local objects did (``local``: their names);
        both None/empty: from scratch. A change costs what it touches (``TopologyIndex``,
        ``ProxyPlanner.update_topology``), not the number of definitions."""
        index = self.index
        index.set_repository(self.link.repository)
        pubsub = self.qm.pubsub
        if events is None and not local:
            self.index = index = TopologyIndex(
                self.name, self.link.repository, self.qm.topics.all()
            )
            self.topology = index.topology
            self.plans.invalidate()
            pubsub.topics = self._local_view(self.topology.objects)
            pubsub.topics_changed()
            self._send_diff(self.planner.set_topology(self.topology))
            return
        names, members = index.changed_names(events or ())
        if local:
            index.set_local(local, {n: o for n in local if (o := self.qm.topics.get(n))})
            names.update(local)
        changed, touched = index.update(names, members)
        self.topology = index.topology
        if not changed and not members:
            return
        self.plans.invalidate()
        view = pubsub.topics
        for name in changed:
            if view.get(name) is not None:
                view.remove(name)
        for name in sorted(changed):
            obj = self.topology.objects.get(name)
            if obj is not None:
                view.put(self._as_seen_here(obj))
        pubsub.topics_changed()
        strs = touched | {o.topic_str for n in changed if (o := self.topology.objects.get(n))}
        self._send_diff(self.planner.update_topology(self.topology, changed, strs, members))

    def _local_view(self, merged: TopicObjects) -> TopicObjects:
        """The merged tree as local applications see it (``_as_seen_here``)."""
        out = TopicObjects()
        for obj in merged.all():
            out.put(self._as_seen_here(obj))
        return out

    def _as_seen_here(self, obj: TopicObject) -> TopicObject:
        """A remote copy's PUB says whether publications are routed through that host, not
        whether applications here may publish (they may unless every host's copy is disabled:
        ``check_publish``), so it is left out (the copies inherit it instead)."""
        if obj.name not in self.qm.topics and "PUB" in obj.attrs:
            attrs = {k: v for k, v in obj.attrs.items() if k != "PUB"}
            return TopicObject(obj.name, obj.topic_str, attrs, obj.descr)
        return obj

    async def propose(self, command: Mapping[str, Any]) -> ApplyResult:
        return await self.link.propose(command)

    # ------------------------------------------------------------------ local definitions

    def local_clustered(self, names: Collection[str] | None = None) -> dict[str, TopicObject]:
        """This queue manager's own clustered objects (``names``: those of them only)."""
        topics = self.qm.topics
        objects = topics.all() if names is None else [o for n in names if (o := topics.get(n))]
        return {o.name: o for o in objects if o.attrs.get("CLUSTER", "") == self.cluster}

    def _changes(self, names: Collection[str] | None = None) -> list[Change]:
        """The commands that make the repository hold the local clustered objects as they are
        (``names``: for those only, at the cost of those only)."""
        repo = self.repository
        if names is None:
            held = repo.hosted_by(self.name)
        else:
            held = [d for n in names if (d := repo.definition(n, self.name)) is not None]
        return changes_to_send(self.name, self.cluster, self.local_clustered(names), held)

    def pending_changes(self, names: Collection[str] | None = None) -> set[str]:
        """Names of local clustered definitions the repository does not hold as they are
        (``names``: among those only)."""
        return {c.name for c in self._changes(names)}

    def clstate(self, name: str, pending: Collection[str]) -> ClState:
        """CLSTATE of this queue manager's own definition ``name`` (``pending``: from
        ``pending_changes``)."""
        return local_clstate(name, pending, self.invalid)

    async def reconcile(
        self, names: Collection[str] | None = None, *, background: bool = False
    ) -> ApplyResult:
        """Send the changes that make the repository's definitions hosted here match the
        local clustered objects (``names``: those only). Returns the first rejection, else an
        ``unavailable`` result if the repository could not take a change now (that name and
        those after it stay in ``unsent`` and are sent again in the background), else success
        with the repository's warnings. ``background``: a rejection does not stop the others
        and marks the local definition CLSTATE(INVALID) with an error in the log."""
        if names is not None:  # the local objects of these names may have changed
            self._apply_topology([], names)
        async with self._reconciling:
            changes = self._changes(names)
            warnings: list[str] = []
            outcome: ApplyResult | None = None
            for i, change in enumerate(changes):
                result = await self.propose(change.command)
                err = result.error
                if change.delete and err is not None and err.code is ErrorCode.UNKNOWN_OBJECT_NAME:
                    result = ApplyResult()
                if result.ok:
                    self.unsent.discard(change.name)
                    self.invalid.pop(change.name, None)
                    if self.pending_changes({change.name}):
                        self.unconfirmed.add(change.name)
                    warnings += result.warnings
                elif result.unavailable:
                    self.unsent.update(c.name for c in changes[i:])
                    outcome = outcome or result
                    break
                elif background:
                    self._invalid(change.name, result)
                else:
                    self.unsent.discard(change.name)
                    outcome = result
                    break
        return outcome or ApplyResult(warnings=tuple(warnings))

    def _invalid(self, name: str, result: ApplyResult) -> None:
        """The repository refused a change sent again later (a conflict found after the
        command had answered): the local definition is shown CLSTATE(INVALID), as MQ does."""
        self.unsent.discard(name)
        self.unconfirmed.discard(name)
        assert result.error is not None
        text = f"{result.error.code.value}: {result.error.message}"
        if self.invalid.get(name) != text:
            log.error(
                "clustered TOPIC(%s) of this queue manager is CLSTATE(INVALID): the cluster "
                "repository refused it (%s)",
                name,
                text,
            )
        self.invalid[name] = text

    def retry_soon(self) -> None:
        """Send the pending definitions again now (and then on a backoff until they are in)."""
        self._retry_wake.set()

    async def _retry_pending(self) -> None:
        delay = RETRY_MIN
        while True:
            waiting = self.unsent or self.unconfirmed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._retry_wake.wait(), delay if waiting else None)
            self._retry_wake.clear()
            try:
                await self.reconcile(background=True)
                if self.unconfirmed:
                    self.unconfirmed &= self.pending_changes(self.unconfirmed)
            except Exception:  # the loop must go on: the definitions are still to be sent
                log.exception("sending the pending clustered definitions failed")
            waiting = self.unsent or self.unconfirmed
            delay = min(delay * 2, RETRY_MAX) if waiting else RETRY_MIN

    def local_topics_changed(self, names: Collection[str] | None = None) -> None:
        """Local topic objects changed (``names``: those only; None: any)."""
        self._apply_topology(None if names is None else [], names or ())

    # ------------------------------------------------------------------ proxies

    def _subscription_changed(self, change: str, sub: Subscription) -> None:
        if change == "add":
            diff = self.planner.subscribe(
                sub.name,
                sub.topic_str,
                scope_qmgr=sub.subscope == "QMGR",
                char_wildcard=sub.wschema == "CHAR",
            )
        else:
            diff = self.planner.unsubscribe(sub.name)
        self._send_diff(diff)

    def _send_diff(self, diff: ProxyDiff) -> None:
        if not diff or not self._started:
            return
        for peer, topic in diff.remove:
            self.channels.send_proxy(peer, topic, False)
        for peer, topic in diff.add:
            self.channels.send_proxy(peer, topic, True)

    def refresh_proxies(self) -> int:
        """REFRESH QMGR TYPE(PROXYSUB): send every proxy again."""
        pairs = self.planner.full_set()
        for peer, topic in pairs:
            self.channels.send_proxy(peer, topic, True)
        return len(pairs)

    async def refresh_cluster(self, repos: bool) -> tuple[bool, int]:
        """REFRESH CLUSTER on a partial repository: the watched copy is rebuilt from a fresh
        snapshot (``WatchLink.refresh``), routes and the proxy plan are recomputed from it, and
        every proxy subscription is sent again. Returns whether the snapshot arrived and how
        many proxies were sent."""
        assert isinstance(self.link, WatchLink)
        synced = await self.link.refresh(repos, min(self.settings.join_timeout, REFRESH_WAIT))
        self._apply_topology()
        return synced, self.refresh_proxies()

    # ------------------------------------------------------------------ addresses, status

    def address_of(self, peer: str) -> str | None:
        member = self.repository.member(peer)
        if member is not None and member.address:
            return member.address
        inbound = self.receiver.by_name(peer)
        return inbound.address if inbound is not None and inbound.address else None

    def set_xmitq_maxdepth(self, peer: str, maxdepth: int) -> None:
        self.channels.set_maxdepth(peer, maxdepth)
        self.qm.journal.object_saved(XMITQ_KIND, peer, {"maxdepth": maxdepth})

    def _undeliverable(self, peer: str, item: Item, reason: str, text: str) -> None:
        """A queued publication that cannot be sent at all (it cannot be encoded): it goes to
        this node's dead-letter queue instead of blocking its channel."""
        assert item.publication is not None
        pub = item.publication
        log.error("publication on %s for %s dead-lettered: %s (%s)", pub.topic, peer, reason, text)
        try:
            dead_letter(
                self.qm,
                pub.message.copy(topic=pub.topic),
                reason,
                dest_queue=xmitq(peer),
                dest_qmgr=peer,
            )
        except MQError as exc:
            log.error("publication on %s for %s discarded: %s", pub.topic, peer, exc)

    def peer_of_channel(self, channel: str) -> str | None:
        """The member a cluster-sender channel name (``<cluster>.<member>``) leads to, if this
        node has or may have such a channel."""
        prefix = f"{self.cluster}."
        if not channel.startswith(prefix):
            return None
        peer = channel[len(prefix) :]
        if peer == self.name:
            return None
        if peer in self.channels.channels or self.address_of(peer) is not None:
            return peer
        return None

    def channel_statuses(self) -> dict[str, ChannelStatus]:
        return self.channels.statuses()

    def _channel_status(self, peer: str, status: ChannelStatus, reason: str) -> None:
        self.plans.invalidate()
        if status is ChannelStatus.RUNNING:
            log.info("channel to %s is %s", peer, status)
        if status in (ChannelStatus.RETRYING, ChannelStatus.STOPPED):
            self._redrive(peer)

    def _redrive(self, dead: str) -> None:
        ch = self.channels.channels.get(dead)
        if ch is None:
            return
        items = ch.take_unsent(
            lambda i: i.publication is not None and i.publication.purpose is Purpose.ROUTE
        )
        if not items:
            return
        statuses = self.channel_statuses()
        queued = []
        candidates = {}
        for item in items:
            pub = item.publication
            assert pub is not None
            queued.append(QueuedPublication(str(item.key), dead, SendState.UNSENT, pub.group))
            if pub.group not in candidates:
                candidates[pub.group] = branch_candidates(
                    self.topology, pub.group, (self.name,), statuses
                )
        plan = redrive(queued, dead, candidates, self.balancer)
        back = []
        for item in items:
            target = plan.reassign.get(str(item.key))
            if target is None:
                back.append(item)
            else:
                self.channels.move(item, dead, target)
        if back:
            ch.put_back(back)

    # ------------------------------------------------------------------ publications

    def publish(
        self, topic: str, msg: Message, *, retain: bool, scope_qmgr: bool, accepted: bool = False
    ) -> tuple[int, tuple[str, ...]]:
        """A publication from a local application (``accepted``: already taken by
        ``QueueManager.accept_publication``): deliver here and forward as planned. Returns
        the copies delivered here and the members a copy was sent to."""
        qm = self.qm
        if not accepted:
            qm.accept_publication(topic, msg)
        plan = self.plans.plan(topic, scope_qmgr=scope_qmgr)
        if plan.rejected:
            raise self._put_inhibited(topic)
        forwards = self._room(topic, msg, plan.forwards)
        delivered = 0
        if plan.deliver_locally:
            delivered = qm.publish_accepted(topic, msg, retain=retain)
        self._forward(topic, msg, plan, forwards, retain)
        return delivered, forwards

    def publish_run(
        self, topic: str, msgs: list[Message], *, scope_qmgr: bool, retain: bool = False
    ) -> RunPublished:
        """Publications from local applications that ``QueueManager.accept_publications``
        took, published in order as ``publish`` would each, until one fails. Not retained,
        with a plan kept and room for all of them on every transmission queue it may go to,
        the run is planned and delivered here once; a plan that sends each publication to a
        host the workload algorithm chooses (``_publish_hosted``) makes the same choices, in
        the same order, as one at a time. Otherwise one at a time."""
        plan = self.plans.fixed(topic, scope_qmgr=scope_qmgr)
        if plan is None and not retain:
            hosted = self.plans.hosted(topic, scope_qmgr)
            if hosted is not None:
                return self._publish_hosted(topic, msgs, scope_qmgr, *hosted)
        if (
            retain  # each kept as the topic's retained publication in turn
            or plan is None
            or plan.rejected
            or not self.channels.room(plan.forwards, len(msgs))
        ):
            return self._publish_each(topic, msgs, scope_qmgr, retain)
        done = RunPublished(len(msgs))
        if plan.deliver_locally:
            done.published, done.copies, done.error = self.qm.publish_accepted_run(topic, msgs)
        peers = plan.forwards
        if peers and done.published:
            for msg in msgs[: done.published]:
                self._forward(topic, msg, plan, peers, False)
            done.forwards = done.published * len(peers)
            done.peers.update(peers)
        return done

    def _publish_hosted(
        self,
        topic: str,
        msgs: list[Message],
        scope_qmgr: bool,
        plan: DeliveryPlan,
        candidates: list[HostCandidate],
        group: str,
    ) -> RunPublished:
        """A run whose plan sends each publication to one host of ``candidates``: delivered
        here once, then each publication delivered here gets its host from the workload
        algorithm in turn. One at a time, ``publish`` chooses before it delivers here, so a
        publication that fails here has had its choice made too: so it has in the run (the
        balancer's state ends the same). Every candidate's transmission queue must have room
        for the whole run (whichever host each gets, none is refused as full) and some host
        must be eligible; otherwise one at a time."""
        names = [c.name for c in candidates]
        if not msgs or not self.channels.room(names, len(msgs)):
            return self._publish_each(topic, msgs, scope_qmgr, False)
        first = self.plans.choose(candidates, group)
        if first is None:  # no host may be used: ``publish`` plans afresh and says why
            return self._publish_each(topic, msgs, scope_qmgr, False)
        done = RunPublished(len(msgs))
        if plan.deliver_locally:
            done.published, done.copies, done.error = self.qm.publish_accepted_run(topic, msgs)
        chosen = [first]
        for _ in range(done.published - 1 + (done.error is not None)):
            host = self.plans.choose(candidates, group)
            assert host is not None  # the same candidates, the same shortlist
            chosen.append(host)
        for msg, host in zip(msgs[: done.published], chosen, strict=False):
            self._forward(topic, msg, plan, (host,), False)
        done.forwards = done.published
        done.peers.update(chosen[: done.published])
        return done

    def _publish_each(
        self, topic: str, msgs: list[Message], scope_qmgr: bool, retain: bool
    ) -> RunPublished:
        done = RunPublished(0)
        for msg in msgs:
            try:
                delivered, peers = self.publish(
                    topic, msg, retain=retain, scope_qmgr=scope_qmgr, accepted=True
                )
            except MQError as exc:
                done.error = exc
                break
            done.published += 1
            done.copies += delivered
            done.forwards += len(peers)
            done.peers.update(peers)
        return done

    def check_publish(self, topic: str, *, scope_qmgr: bool) -> None:
        """Raise MQRC_PUT_INHIBITED if ``publish`` would refuse ``topic`` (checked for a whole
        batch before any of it is published)."""
        if self.plans.refused(topic, scope_qmgr):
            raise self._put_inhibited(topic)

    def _put_inhibited(self, topic: str) -> MQError:
        point = self.topology.clustered_point(self.topology.objects.resolve(topic))
        name = point.name if point is not None else topic
        if point is not None and self.topology.local_host(name) is not None:
            return MQError("MQRC_PUT_INHIBITED", f"'{topic}' is hosted here with PUB(DISABLED)")
        return MQError(
            "MQRC_PUT_INHIBITED", f"'{topic}': every host of {name} has it PUB(DISABLED)"
        )

    def _room(self, topic: str, msg: Message, peers: tuple[str, ...]) -> tuple[str, ...]:
        """The peers whose transmission queue takes a publication from an application. A full
        one fails the publication (MQRC_Q_FULL) unless the topic's PMSGDLV (persistent) or
        NPMSGDLV is ALLAVAIL, which delivers to the others only."""
        full = self.channels.full_among(peers)
        if not full:
            return peers
        policy = self.qm.pubsub.policy(topic)
        rule = policy.pmsgdlv if msg.persistent else policy.npmsgdlv
        if rule != "ALLAVAIL":
            raise MQError(
                "MQRC_Q_FULL",
                f"{xmitq(full[0])} is full (MAXDEPTH {self.channels.maxdepth_of(full[0])})",
            )
        return tuple(p for p in peers if p not in full)

    def _forward(
        self, topic: str, msg: Message, plan: DeliveryPlan, peers: tuple[str, ...], retain: bool
    ) -> None:
        if not peers:
            return
        assert plan.purpose is not None
        group = self.plans.group(topic) if plan.purpose is Purpose.ROUTE else ""
        fwd = Forwarded(topic, msg, plan.route, plan.purpose, retain, group)  # one for all
        for peer in peers:
            self.channels.send_publication(peer, fwd)

    # ------------------------------------------------------------------ receiving

    def hello(self, qmid: str, sender: str, address: str, proxies: Iterable[str]) -> Key:
        """A peer opened its channel: remember its address and take its full proxy set.
        Returns the last key committed from that QMID (the caller made sure everything applied
        so far is committed and told the receiver)."""
        key, forgotten = self.receiver.hello(qmid, sender, address)
        for old in forgotten:
            log.info("%s has a new QMID %s: state of %s forgotten", sender, qmid, old)
            self.qm.journal.object_deleted(CHANSEQ_KIND, _stored_name(old))
        self._save_inbound(self.receiver.peers[qmid])
        diff = self.table.replace_all(sender, proxies)
        if diff:
            self.plans.invalidate()
        for _, topic in diff.remove:
            self._proxy_saved(sender, topic, False)
        for _, topic in diff.add:
            self._proxy_saved(sender, topic, True)
            self._send_retained(sender, topic)
        return key

    def _save_inbound(self, state: InboundState) -> None:
        data = {
            "qmid": state.qmid,
            "name": state.name,
            "epoch": state.applied[0],
            "seq": state.applied[1],
            "address": state.address,
        }
        self.qm.journal.object_saved(CHANSEQ_KIND, state.qmid, data)

    def _proxy_saved(self, sender: str, topic: str, add: bool) -> None:
        """Proxies received are kept in the store: a restarted host still forwards what it
        holds for a subscriber before that subscriber has reconnected."""
        key = f"{sender}\x00{topic}"
        if add:
            self.qm.journal.object_saved(PROXY_KIND, key, {"peer": sender, "topic": topic})
        else:
            self.qm.journal.object_deleted(PROXY_KIND, key)

    def disconnected(self, qmid: str) -> None:
        self.receiver.disconnected(qmid)

    def receive(self, qmid: str, items: list[Item]) -> tuple[Key, bool]:
        """Apply one batch from ``qmid``, in order; returns the highest key applied and
        whether the acknowledgement must wait for a commit. Runs without awaiting, so the
        batch's journal entries and the new channel position are committed together. An item
        that cannot be delivered is dead-lettered; if even that fails (MQError), the items
        before it stay applied and the error ends the channel (the sender retries from it).
        Consecutive publications of one topic that came one way (a stream publisher's) are
        applied as a run: planned once and delivered by ``deliver_publication_run``."""
        rx = self.receiver
        state = rx.peers[qmid]
        persistent = False
        try:
            i, n = 0, len(items)
            while i < n:
                item = items[i]
                fwd = item.publication
                if (
                    fwd is not None
                    and i + 1 < n
                    and _runs_on(item, fwd)
                    and _same_run(items[i + 1], fwd)
                    and rx.offer(qmid, item.key, None) is Verdict.DELIVER  # so are the next
                ):
                    j = i + 2
                    while j < n and _same_run(items[j], fwd):
                        j += 1
                    persistent = self._receive_run(qmid, items[i:j]) or persistent
                    i = j
                else:
                    persistent = self._receive_item(qmid, state.name, item) or persistent
                    i += 1
        finally:
            if persistent:
                self._save_inbound(state)
            key = rx.batch_end(qmid, self.rt.position if persistent else None)
        return key, persistent

    def _receive_item(self, qmid: str, sender: str, item: Item) -> bool:
        rx = self.receiver
        verdict = rx.offer(qmid, item.key, item.problem[0] if item.problem else None)
        if verdict is Verdict.DUPLICATE:
            return False
        persistent = False
        if verdict is Verdict.DEAD_LETTER:
            assert item.publication is not None and item.problem is not None
            persistent = self._dead_letter(item.publication, *item.problem)
        elif item.proxy is not None:
            persistent = self._receive_proxy(sender, *item.proxy)
        elif item.publication is not None:
            persistent = self._receive_publication(item.publication)
        rx.done(qmid, item.key)
        return persistent

    def _receive_run(self, qmid: str, run: list[Item]) -> bool:
        """Items of one run (see ``receive``), none seen before: delivered here together and
        passed on one by one, when their plan is one kept that chooses no host (workload
        balancing chooses for each publication). From a publication the local subscriptions cannot take (a full
        queue, say) on, they are applied one at a time, as ``receive`` applies any item."""
        first = run[0].publication
        assert first is not None
        plan = self.plans.fixed(first.topic, first.route, first.purpose)
        if plan is None:  # not planned yet, refused, or a host chosen for each: one at a time
            return self._receive_each(qmid, run)
        if not plan.route or plan.route[-1] != self.name:  # a loop: dropped
            self.receiver.done(qmid, run[-1].key, len(run))
            return False
        fwds = [item.publication for item in run]
        applied = len(run)
        if plan.deliver_locally and self.qm.pubsub.subscribers(first.topic):
            route_text = self._route_text(plan.route)
            msgs = [f.delivered(route_text) for f in fwds if f is not None]
            applied, _, _ = self.qm.deliver_publication_run(first.topic, msgs)
        persistent = False
        for fwd in fwds[:applied]:
            assert fwd is not None
            self._pass_on(fwd, plan)
            persistent = persistent or fwd.persistent
        if applied:
            self.receiver.done(qmid, run[applied - 1].key, applied)
        if applied < len(run):
            persistent = self._receive_each(qmid, run[applied:]) or persistent
        return persistent

    def _receive_each(self, qmid: str, items: list[Item]) -> bool:
        sender = self.receiver.peers[qmid].name
        persistent = False
        for item in items:
            persistent = self._receive_item(qmid, sender, item) or persistent
        return persistent

    def _receive_proxy(self, sender: str, topic: str, add: bool) -> bool:
        changed = self.table.add(sender, topic) if add else self.table.remove(sender, topic)
        if changed:
            self.plans.invalidate()
            self._proxy_saved(sender, topic, add)
        sent = self._send_retained(sender, topic) if add else False
        return changed or sent

    def _send_retained(self, peer: str, proxy: str) -> bool:
        """A proxy subscription was made or refreshed by ``peer``: send it the retained
        publications held here that it matches and that this node distributes (it hosts their
        topic, or the topic is DIRECT-routed), one copy each, marked as retained copies. Returns
        whether a persistent one was queued."""
        persistent = False
        topology = self.topology
        for topic, held in list(self.qm.pubsub.retained.items()):
            if not topic_matches(proxy, topic):
                continue
            resolved = topology.objects.resolve(topic)
            point = topology.clustered_point(resolved)
            if point is None or resolved["PUBSCOPE"] == "QMGR":
                continue
            if (
                topology.route_of(point) is not ClRoute.DIRECT
                and topology.local_host(point.name) is None
            ):
                continue
            msg = held.copy(topic="", retained=False)
            props = dict(msg.properties)
            props.pop(ROUTE_PROPERTY, None)
            fwd = Forwarded(
                topic,
                msg.with_properties(props),
                (self.name,),
                Purpose.DELIVER,
                True,
                retained_copy=True,
            )
            self.channels.send_publication(peer, fwd)
            persistent = persistent or fwd.persistent
        return persistent

    def _dead_letter(self, fwd: Forwarded, reason: str, text: str, peer: str = "") -> bool:
        """Put a publication received from the cluster on the dead-letter queue (its
        destination: the topic, or the transmission queue to ``peer``); raises MQError when
        the dead-letter queue cannot take it."""
        origin = fwd.route[0] if fwd.route else ""
        log.warning(
            "publication on %s from %s dead-lettered: %s (%s)", fwd.topic, origin, reason, text
        )
        msg = fwd.message.copy(topic=fwd.topic)
        dead_letter(
            self.qm,
            msg,
            reason,
            dest_queue=xmitq(peer) if peer else fwd.topic,
            dest_qmgr=peer,
            put_appl=origin,
        )
        return bool(msg.persistent)

    def _cannot_pass_on(self, fwd: Forwarded, peer: str) -> None:
        """The transmission queue to ``peer`` is full: a persistent publication goes to the
        dead-letter queue (MQRC_Q_FULL); a non-persistent one too, unless the topic's
        NPMSGDLV is ALLAVAIL, which lets it be lost for that peer."""
        if not fwd.persistent:
            try:
                rule = self.qm.pubsub.policy(fwd.topic).npmsgdlv
            except MQError:
                rule = "ALLAVAIL"
            if rule == "ALLAVAIL":
                self.dropped += 1
                return
        self._dead_letter(fwd, "MQRC_Q_FULL", f"{xmitq(peer)} is full", peer)

    def _receive_publication(self, fwd: Forwarded) -> bool:
        try:
            plan = self.plans.plan(fwd.topic, fwd.route, fwd.purpose)
        except MQError as exc:
            return self._dead_letter(fwd, exc.reason_name, exc.text)
        if not plan.route or plan.route[-1] != self.name:  # a loop: dropped
            return False
        persistent = fwd.persistent
        if fwd.retained_copy:
            return self._receive_retained(fwd, plan)
        if plan.deliver_locally and (fwd.retain or self.qm.pubsub.subscribers(fwd.topic)):
            local = fwd.delivered(self._route_text(plan.route))
            try:
                self.qm.deliver_publication(fwd.topic, local, retain=fwd.retain)
            except MQError as exc:
                cause = exc.__cause__ if isinstance(exc.__cause__, MQError) else exc
                return self._dead_letter(fwd, cause.reason_name, exc.text)
        self._pass_on(fwd, plan)
        return persistent

    def _route_text(self, route: tuple[str, ...]) -> str:
        """``ROUTE_PROPERTY``'s value for a plan's route (joined once per route)."""
        text = self._route_texts.get(route)
        if text is None:
            if len(self._route_texts) >= ROUTE_TEXTS_MAX:
                self._route_texts.clear()
            text = self._route_texts[route] = ",".join(route)
        return text

    def _pass_on(self, fwd: Forwarded, plan: DeliveryPlan) -> None:
        """Send a received publication on to the peers ``plan`` forwards it to."""
        if not plan.forwards:
            return
        assert plan.purpose is not None
        group = self.plans.group(fwd.topic) if plan.purpose is Purpose.ROUTE else ""
        for peer in plan.forwards:
            if self.channels.full(peer):
                self._cannot_pass_on(fwd, peer)
                continue
            self.channels.send_publication(peer, fwd.passed_on(plan.route, plan.purpose, group))

    def _receive_retained(self, fwd: Forwarded, plan: DeliveryPlan) -> bool:
        """A retained publication a host sent for this node's proxy subscription: kept as the
        retained copy here and given to the subscriptions that lack it; never passed on."""
        if not plan.deliver_locally:
            return False
        props = dict(fwd.message.properties)
        props[ROUTE_PROPERTY] = ",".join(plan.route)
        try:
            self.qm.receive_retained(fwd.topic, fwd.message.with_properties(props))
        except MQError as exc:
            return self._dead_letter(fwd, exc.reason_name, exc.text)
        return fwd.persistent

    # ------------------------------------------------------------------ workload attributes

    async def set_clusrcvr(
        self, channel: str, changes: Mapping[str, int], attrs: Mapping[str, str]
    ) -> ApplyResult:
        """DEFINE/ALTER CHANNEL(..) CHLTYPE(CLUSRCVR): keep the attributes and publish the
        workload ones in this member's record."""
        workload = self.workload.with_changes(changes)
        problems = workload.problems()
        if problems:
            return ApplyResult(error=RepoError(ErrorCode.ATTR_VALUE_ERROR, "; ".join(problems)))
        result = await self.propose(Cmd.set_workload(self.name, **workload.to_dict()))
        if result.ok:
            self.workload = workload
            self.clusrcvr = {**self.clusrcvr, **attrs, "CHANNEL": channel}
            self.qm.journal.object_saved(
                CLUSRCVR_KIND,
                self.name,
                {"attrs": self.clusrcvr, "workload": workload.to_dict()},
            )
            if isinstance(self.link, WatchLink):
                self.link.set_join(self.join_command())
        return result


def _runs_on(item: Item, fwd: Forwarded) -> bool:
    """Whether ``item`` (carrying ``fwd``) may start a run: a publication to be delivered
    as any other (not retained, not a host's retained copy, nothing wrong with it)."""
    return item.problem is None and not fwd.retain and not fwd.retained_copy


def _same_run(item: Item, first: Forwarded) -> bool:
    """Whether ``item`` continues the run ``first`` began: the same topic, route and purpose."""
    fwd = item.publication
    return (
        fwd is not None
        and _runs_on(item, fwd)
        and fwd.topic == first.topic
        and fwd.route == first.route
        and fwd.purpose is first.purpose
    )
