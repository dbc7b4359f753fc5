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
  never sent are re-planned with the workload algorithm; those already sent (in doubt) wait for
  the host, which acknowledges or de-duplicates them when it is back.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cluster.proxies import ProxyDiff, ProxyPlanner, ProxyTable
from cluster.records import ChannelStatus, ClusterTopology, RepoEvent, Role, WorkloadAttrs
from cluster.repository import ApplyResult, ClusterRepository, Cmd, ErrorCode, RepoError
from cluster.routing import DeliveryPlan, Purpose, branch_candidates
from cluster.topics import TopicObject, TopicObjects
from cluster.workload import QueuedPublication, SendState, WorkloadBalancer, redrive
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
)
from qmgr.node.cluster.outbound import ChannelManager, Identity
from qmgr.node.cluster.plans import PlanCache
from qmgr.node.cluster.repolink import RaftLink, WatchLink
from qmgr.node.config import ClusterSettings

if TYPE_CHECKING:
    from qmgr.node.runtime import NodeRuntime

log = logging.getLogger("qmgr.node.cluster")

CLUSRCVR_KIND = "clusrcvr"
CHANSEQ_KIND = "chanseq"
PROXY_KIND = "proxy"
VIEW_KEY = "cluster.view"


@dataclass
class InboundPeer:
    """The receiving end of one peer's channel."""

    address: str = ""
    last: Key = (0, 0)
    connected: int = 0  # open streams
    items: int = 0


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
        self.inbound: dict[str, InboundPeer] = {}
        self.workload = WorkloadAttrs()
        self.clusrcvr: dict[str, str] = {}
        saved = runtime.loaded_objects
        for name, data in saved.get(CHANSEQ_KIND, {}).items():
            self.inbound[name] = InboundPeer(
                address=str(data.get("address", "")),
                last=(int(data["epoch"]), int(data["seq"])),
            )
        for data in saved.get(PROXY_KIND, {}).values():
            self.table.add(str(data["peer"]), str(data["topic"]))
        for data in saved.get(CLUSRCVR_KIND, {}).values():
            self.clusrcvr = dict(data.get("attrs", {}))
            self.workload = WorkloadAttrs.from_dict(data.get("workload", {}))
        self.link: RaftLink | WatchLink
        if settings.full_repository:
            self.link = RaftLink(settings, runtime.config.data_dir, self._repository_changed)
        else:
            cached = runtime.loaded_kv.get(VIEW_KEY)
            self.link = WatchLink(
                settings,
                self._repository_changed,
                None if cached is None else json.loads(cached),
                self._save_view,
            )
        self.topology = self._build_topology()
        self.planner = ProxyPlanner(self.topology)
        epoch = qm.epoch if runtime.store is not None else int(time.time() * 1000)
        self.channels = ChannelManager(
            Identity(self.name, address, self.cluster),
            qm.journal,
            epoch,
            qm.next_sequence,
            self.address_of,
            self.planner.for_peer,
            self._channel_status,
            runtime.durable,
        )
        self.plans = PlanCache(
            lambda: self.topology, self.table, self.balancer, self.channels.statuses
        )
        self._started = False
        self.admin = ClusterAdmin(self)

    # ------------------------------------------------------------------ start / stop

    def join_command(self) -> dict[str, Any]:
        return Cmd.join_member(
            self.name,
            self.qm.qmid,
            self.address,
            self.role,
            workload=self.workload.to_dict(),
            at=int(time.time() * 1000),
        )

    async def start(self) -> None:
        qm = self.qm
        self._apply_topology()
        for sub in list(qm.pubsub.subs.values()):
            self.planner.subscribe(sub.name, sub.topic_str, scope_qmgr=sub.subscope == "QMGR")
        qm.pubsub.listener = self._subscription_changed
        by_peer: dict[str, list[Item]] = {}
        for queue, msg in self.rt.restored_xmit:
            by_peer.setdefault(queue[len(XMITQ_PREFIX) :], []).append(item_from_stored(msg))
        await self.link.start(self.join_command(), self.settings.join_timeout)
        self._started = True
        self._repository_changed([])
        for peer, items in by_peer.items():
            self.channels.restore(peer, items)
        for peer, _topic in self.planner.full_set():
            self.channels.start_channel(peer)
        await self.reconcile()

    async def stop(self) -> None:
        await self.channels.stop()
        await self.link.stop()

    # ------------------------------------------------------------------ repository

    @property
    def repository(self) -> ClusterRepository:
        return self.link.repository

    def _save_view(self, snapshot: dict[str, Any]) -> None:
        if self.rt.store is not None:
            self.rt.store.set_value(VIEW_KEY, json.dumps(snapshot, separators=(",", ":")))

    def _repository_changed(self, events: list[RepoEvent]) -> None:
        if not self._started:
            return
        self._apply_topology()

    def _build_topology(self) -> ClusterTopology:
        return ClusterTopology.build(self.name, self.link.repository, self.qm.topics.all())

    def _apply_topology(self) -> None:
        """Rebuild the merged topology after the repository or local objects changed."""
        self.topology = self._build_topology()
        self.plans.invalidate()
        pubsub = self.qm.pubsub
        pubsub.topics = self._local_view(self.topology.objects)
        pubsub.topics_changed()
        self._send_diff(self.planner.set_topology(self.topology))

    def _local_view(self, merged: TopicObjects) -> TopicObjects:
        """The merged tree as local applications see it: a remote copy's PUB says whether
        publications are routed through that host, not whether applications here may publish,
        so it is left out (the copies inherit it instead)."""
        local = self.qm.topics
        out = TopicObjects()
        for obj in merged.all():
            if obj.name not in local and "PUB" in obj.attrs:
                attrs = {k: v for k, v in obj.attrs.items() if k != "PUB"}
                obj = TopicObject(obj.name, obj.topic_str, attrs, obj.descr)
            out.put(obj)
        return out

    async def propose(self, command: Mapping[str, Any]) -> ApplyResult:
        return await self.link.propose(command)

    # ------------------------------------------------------------------ local definitions

    def local_clustered(self) -> dict[str, TopicObject]:
        return {
            o.name: o for o in self.qm.topics.all() if o.attrs.get("CLUSTER", "") == self.cluster
        }

    async def reconcile(self) -> ApplyResult:
        """Make the repository's definitions hosted here match the local clustered objects;
        returns the first rejection (or success)."""
        desired = self.local_clustered()
        held = {t.name: t for t in self.repository.topics() if t.qmgr == self.name}
        for name in sorted(held.keys() - desired.keys()):
            result = await self.propose(Cmd.delete_topic(name, self.name))
            if not result.ok and not (
                result.error is not None and result.error.code is ErrorCode.UNKNOWN_OBJECT_NAME
            ):
                return result
        for name, obj in sorted(desired.items()):
            attrs = {k: v for k, v in obj.attrs.items() if k not in ("CLUSTER", "CLROUTE")}
            clroute = obj.attrs.get("CLROUTE", "DIRECT") or "DIRECT"
            current = held.get(name)
            if current is None:
                cmd = Cmd.define_topic(
                    name, self.name, obj.topic_str, self.cluster, clroute, attrs, obj.descr, True
                )
            elif (
                dict(current.attrs) != attrs
                or current.descr != obj.descr
                or current.clroute.value != clroute
            ):
                cmd = Cmd.alter_topic(name, self.name, attrs, obj.descr, clroute)
            else:
                continue
            result = await self.propose(cmd)
            if not result.ok:
                return result
        self._apply_topology()
        return ApplyResult()

    def local_topics_changed(self) -> None:
        self._apply_topology()

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

    # ------------------------------------------------------------------ addresses, status

    def address_of(self, peer: str) -> str | None:
        member = self.repository.member(peer)
        if member is not None and member.address:
            return member.address
        inbound = self.inbound.get(peer)
        return inbound.address if inbound is not None and inbound.address else None

    def channel_statuses(self) -> dict[str, ChannelStatus]:
        return self.channels.statuses()

    def _channel_status(self, peer: str, status: ChannelStatus) -> None:
        self.plans.invalidate()
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

    def publish(self, topic: str, msg: Message, *, retain: bool, scope_qmgr: bool) -> int:
        """A publication from a local application: deliver here and forward as planned."""
        qm = self.qm
        qm.accept_publication(topic, msg)
        plan = self.plans.plan(topic, scope_qmgr=scope_qmgr)
        if plan.rejected:
            raise MQError("MQRC_PUT_INHIBITED", f"'{topic}' is hosted here with PUB(DISABLED)")
        delivered = 0
        if plan.deliver_locally:
            delivered = qm.pubsub.publish(topic, msg, qm.clock.now(), retain=retain)
        self._forward(topic, msg, plan, retain)
        return delivered

    def _forward(self, topic: str, msg: Message, plan: DeliveryPlan, retain: bool) -> None:
        if not plan.forwards:
            return
        assert plan.purpose is not None
        group = self.plans.group(topic) if plan.purpose is Purpose.ROUTE else ""
        for peer in plan.forwards:
            fwd = Forwarded(topic, msg, plan.route, plan.purpose, retain, group)
            self.channels.send_publication(peer, fwd)

    # ------------------------------------------------------------------ receiving

    def hello(self, sender: str, address: str, proxies: Iterable[str]) -> Key:
        """A peer opened its channel: remember its address and take its full proxy set."""
        peer = self.inbound.setdefault(sender, InboundPeer())
        peer.address = address
        peer.connected += 1
        self._save_inbound(sender, peer)
        diff = self.table.replace_all(sender, proxies)
        if diff:
            self.plans.invalidate()
        for _, topic in diff.remove:
            self._proxy_saved(sender, topic, False)
        for _, topic in diff.add:
            self._proxy_saved(sender, topic, True)
        return peer.last

    def _save_inbound(self, sender: str, peer: InboundPeer) -> None:
        data = {"epoch": peer.last[0], "seq": peer.last[1], "address": peer.address}
        self.qm.journal.object_saved(CHANSEQ_KIND, sender, data)

    def _proxy_saved(self, sender: str, topic: str, add: bool) -> None:
        """Proxies received are kept in the store: a restarted host still forwards what it
        holds for a subscriber before that subscriber has reconnected."""
        key = f"{sender}\x00{topic}"
        if add:
            self.qm.journal.object_saved(PROXY_KIND, key, {"peer": sender, "topic": topic})
        else:
            self.qm.journal.object_deleted(PROXY_KIND, key)

    def disconnected(self, sender: str) -> None:
        peer = self.inbound.get(sender)
        if peer is not None:
            peer.connected = max(0, peer.connected - 1)

    def receive(self, sender: str, items: list[Item]) -> tuple[Key, bool]:
        """Apply one batch from ``sender``; returns the highest key applied and whether the
        acknowledgement must wait for a commit. Runs without awaiting, so the batch's journal
        entries and the new channel position are committed together."""
        peer = self.inbound.setdefault(sender, InboundPeer())
        last = peer.last
        persistent = False
        for item in items:
            if item.key <= last:
                continue
            last = item.key
            peer.items += 1
            if item.proxy is not None:
                topic, add = item.proxy
                changed = self.table.add(sender, topic) if add else self.table.remove(sender, topic)
                if changed:
                    self.plans.invalidate()
                    self._proxy_saved(sender, topic, add)
                    persistent = True
            elif item.publication is not None:
                persistent = self._receive_publication(item.publication) or persistent
        peer.last = last
        if persistent:
            self._save_inbound(sender, peer)
        return last, persistent

    def _receive_publication(self, fwd: Forwarded) -> bool:
        plan = self.plans.plan(fwd.topic, fwd.route, fwd.purpose)
        if not plan.route or plan.route[-1] != self.name:  # a loop: dropped
            return False
        if plan.deliver_locally and (fwd.retain or self.qm.pubsub.subscribers(fwd.topic)):
            msg = fwd.message
            props = dict(msg.properties)
            props[ROUTE_PROPERTY] = ",".join(plan.route)
            local = msg.with_properties(props)
            try:
                self.qm.deliver_publication(fwd.topic, local, retain=fwd.retain)
            except MQError as exc:
                log.warning("publication on %s from the cluster not delivered: %s", fwd.topic, exc)
        if plan.forwards:
            assert plan.purpose is not None
            group = self.plans.group(fwd.topic) if plan.purpose is Purpose.ROUTE else ""
            for peer in plan.forwards:
                self.channels.send_publication(peer, fwd.passed_on(plan.route, plan.purpose, group))
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
