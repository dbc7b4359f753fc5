"""MQSC on a cluster member: the cluster commands, and clustered topic definitions that must
reach the full repositories before the command answers.

- DEFINE/ALTER/DELETE TOPIC run locally first; if that changed a clustered definition hosted
  here, the change is proposed to the repository. When the repository rejects it (a conflicting
  CLROUTE, CLROUTE changed while clustered ...) the local change is undone and the command fails
  with the MQRCCF reason: a failed command changes nothing. When the repository is only
  unavailable (no full repository reachable, or no Raft quorum) the command succeeds with a
  warning: the local object is kept, shown CLSTATE(PENDING), and sent in the background until
  the repository takes it (CLSTATE(INVALID) and an error in the log if it then refuses it).
- DEFINE/ALTER/DELETE CHANNEL CHLTYPE(CLUSRCVR|CLUSSDR): see ``chlcmds``; a CLUSRCVR's
  workload attributes (CLWLRANK, CLWLPRTY, CLWLWGHT, NETPRTY) are published in the member's
  CLUSQMGR record.
- STOP / START CHANNEL(<cluster>.<member>) for the cluster-sender channel to a member.
- SUSPEND / RESUME QMGR CLUSTER(..), REFRESH QMGR TYPE(PROXYSUB), RESET CLUSTER ACTION(FORCEREMOVE).
- REFRESH CLUSTER(name) REPOS(NO|YES): on a partial repository the watched copy is rebuilt from a
  full repository and the proxies are sent again; on a full repository REPOS(YES) is refused
  (MQ's AMQ9406) and REPOS(NO) changes nothing, its Raft-replicated copy being the repository.
- DISPLAY CLUSQMGR, CHSTATUS, TCLUSTER, CHANNEL, and DISPLAY SUB SUBTYPE(PROXY|ALL) with the
  proxy subscriptions received from other members (plain DISPLAY SUB hides them).

:func:`register` puts these in the node's MQSC table (:mod:`qmgr.core.admin.dispatch`): the
cluster's own commands, which a queue manager outside a cluster does not support, and wrappers
in front of the commands a member runs its own way (the channel definitions are
``chlcmds``'s, in a cluster or not).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING

from cluster.local_defs import clroute_change
from cluster.records import ChannelStatus, Member
from cluster.repository import ApplyResult, Cmd, ErrorCode, RepoError
from cluster.topics import TopicObject
from qmgr.core.admin.dispatch import CommandHandler, MqscTable, Reply, guarded, not_supported
from qmgr.core.admin.execute import execute_command
from qmgr.core.admin.manager import display_qmgr
from qmgr.core.admin.queues import name_matches
from qmgr.core.admin.records import Record, date_time, select, yes_no
from qmgr.core.admin.subs import display_sub
from qmgr.core.admin.topics import display_topic
from qmgr.core.errors import MQError
from qmgr.mqsc import MqscCommand
from qmgr.node.cluster.items import XMITQ_PREFIX
from qmgr.node.cluster.repolink import RaftLink

if TYPE_CHECKING:
    from qmgr.node.cluster.agent import ClusterAgent
    from qmgr.node.runtime import NodeRuntime

PROXY_DEST = "SYSTEM.INTER.QMGR.PUBS"


def _error(reason: str, text: str, code: int | None = None) -> list[Record]:
    number = f" ({code:X})" if code is not None else ""
    return [
        Record(
            "AMQ8101E",
            f"IBM MQ error{number} has occurred: {reason}.",
            [("REASON", reason), ("DETAIL", text)],
        )
    ]


def _failed(code: str, text: str, reason: str) -> list[Record]:
    """runmqsc's message for a failed channel command, with the PCF reason it stands for."""
    return [Record(code, text, [("REASON", reason), ("DETAIL", reason)])]


def _rejected(result: ApplyResult) -> list[Record]:
    err = result.error
    assert err is not None
    return _error(err.code.value, err.message, err.reason)


def channel_name(cluster: str, qmgr: str) -> str:
    return f"{cluster}.{qmgr}"


class ClusterAdmin:
    """The cluster's MQSC commands on one member (see :func:`register`)."""

    def __init__(self, agent: ClusterAgent) -> None:
        self.agent = agent

    def alter_qlocal(self, cmd: MqscCommand) -> Reply:
        """ALTER QLOCAL: a transmission queue's MAXDEPTH here, any other queue as usual."""
        if (cmd.name or "").startswith(XMITQ_PREFIX):
            return self._xmitq(cmd)
        return execute_command(self.agent.qm, cmd)

    def _xmitq(self, cmd: MqscCommand) -> Reply:
        """ALTER QLOCAL(SYSTEM.CLUSTER.TRANSMIT.<peer>) MAXDEPTH(n): the only attribute of a
        transmission queue that can be changed here."""
        other = sorted(k for k in cmd.params if k != "MAXDEPTH")
        if other or "MAXDEPTH" not in cmd.params:
            return False, _error(
                "MQRCCF_PARM_SYNTAX_ERROR",
                f"only MAXDEPTH can be altered on a transmission queue (not {', '.join(other)})",
            )
        peer = (cmd.name or "")[len(XMITQ_PREFIX) :]
        if not peer or (
            self.agent.address_of(peer) is None and peer not in self.agent.channels.channels
        ):
            return False, _error(
                "MQRC_UNKNOWN_OBJECT_NAME", f"queue {cmd.name} does not exist (no such member)"
            )
        self.agent.set_xmitq_maxdepth(peer, int(str(cmd.params["MAXDEPTH"])))
        return True, [Record("AMQ8008I", "IBM MQ queue changed.")]

    # ---------------------------------------------------------------- changes

    async def suspend_resume(self, cmd: MqscCommand, suspend: bool) -> Reply:
        """SUSPEND / RESUME QMGR CLUSTER(name)."""
        agent = self.agent
        if cmd.params.get("CLUSTER") != agent.cluster:
            return False, _error(
                "MQRCCF_CLUSTER_NAME_ERROR", f"this queue manager is in cluster {agent.cluster}"
            )
        op = Cmd.suspend_member if suspend else Cmd.resume_member
        result = await agent.propose(op(agent.name))
        if not result.ok:
            return False, _rejected(result)
        word = "Suspend" if suspend else "Resume"
        return True, [
            Record(
                "AMQ8559I" if suspend else "AMQ8560I",
                f"{word} Queue Manager Cluster command accepted.",
            )
        ]

    async def stop_start(self, cmd: MqscCommand, stop: bool) -> Reply:
        """STOP / START CHANNEL for a cluster-sender channel (``<cluster>.<member>``)."""
        agent = self.agent
        name = cmd.name or ""
        peer = agent.peer_of_channel(name)
        if peer is None:
            return False, _failed(
                "AMQ8147E", f"IBM MQ object {name} not found.", "MQRCCF_CHANNEL_NOT_FOUND"
            )
        ch = agent.channels.channel(peer)
        if stop:
            if ch.stopped:
                return False, _failed(
                    "AMQ9533E",
                    f"Channel '{name}' is not currently active.",
                    "MQRCCF_CHANNEL_NOT_ACTIVE",
                )
            await agent.channels.stop_operator(peer)
            return True, [Record("AMQ8019I", "Stop IBM MQ channel accepted.")]
        if not ch.stopped and ch.status is ChannelStatus.RUNNING:
            return False, _failed(
                "AMQ9514E", f"Channel '{name}' is in use.", "MQRCCF_CHANNEL_IN_USE"
            )
        await agent.channels.start_operator(peer)
        return True, [Record("AMQ8018I", "Start IBM MQ channel accepted.")]

    def refresh_qmgr(self, cmd: MqscCommand) -> Reply:
        """REFRESH QMGR TYPE(PROXYSUB): the proxy subscriptions sent to the members again."""
        n = self.agent.refresh_proxies()
        return True, [Record("AMQ8726I", f"Refresh queue manager accepted ({n} proxies).")]

    async def refresh_cluster(self, cmd: MqscCommand) -> Reply:
        agent = self.agent
        if not name_matches(cmd.name or "", agent.cluster):
            return False, _error(
                "MQRCCF_CLUSTER_NAME_ERROR", f"this queue manager is in cluster {agent.cluster}"
            )
        repos = cmd.params.get("REPOS") == "YES"
        accepted = Record("AMQ8441I", "Refresh Cluster command accepted.")
        if agent.settings.full_repository:
            if repos:
                return False, _failed(
                    "AMQ9406E",
                    f"REFRESH CLUSTER REPOS(YES) is not allowed on a full repository "
                    f"of cluster {agent.cluster}.",
                    "MQRCCF_REPOS_NAME_CONFLICT",
                )
            # the Raft-replicated copy is the repository itself: nothing to rebuild
            return True, [accepted]
        synced, n = await agent.refresh_cluster(repos)
        if not synced:
            accepted = Record(
                "AMQ8441I",
                "Refresh Cluster command accepted (no full repository answered yet; "
                "the local view is kept until one does).",
            )
        return True, [accepted, Record("AMQ8726I", f"{n} proxy subscriptions sent again.")]

    async def reset_cluster(self, cmd: MqscCommand) -> Reply:
        agent = self.agent
        if not agent.settings.full_repository:
            return False, _error(
                "MQRCCF_NOT_A_REPOSITORY", "RESET CLUSTER runs on a full repository"
            )
        result = await agent.propose(
            Cmd.force_remove(cmd.params.get("QMNAME"), cmd.params.get("QMID"))
        )
        if not result.ok:
            return False, _rejected(result)
        return True, [Record("AMQ8559I", "Reset Cluster command accepted.")]

    async def change_topic(self, cmd: MqscCommand) -> Reply:
        """DEFINE, ALTER or DELETE TOPIC, then its clustered definition to the repository."""
        agent = self.agent
        qm = agent.qm
        name = cmd.name or ""
        before: TopicObject | None = qm.topics.get(name)
        ok, records = execute_command(qm, cmd)
        if not ok:
            return ok, records
        refusal = clroute_change(before, qm.topics.get(name), agent.cluster)
        if refusal:  # refused here, also while the repository is unavailable
            self._undo_topic(name, before)
            error = RepoError(ErrorCode.CLROUTE_NOT_ALTERABLE, refusal)
            return False, _rejected(ApplyResult(error=error))
        result = await agent.reconcile({name})
        if result.ok:
            if result.warnings:
                records += [Record("AMQ9883W", w) for w in result.warnings]
            return True, records
        if result.unavailable:
            agent.retry_soon()
            detail = result.error.message if result.error is not None else ""
            text = (
                f"TOPIC({name}) is kept here with CLSTATE(PENDING): the cluster repository "
                f"cannot take the change now and it is sent again until it does ({detail})."
            )
            return True, [*records, Record("AMQ9883W", text, [("CLSTATE", "PENDING")])]
        self._undo_topic(name, before)  # the repository refused it
        await agent.reconcile({name})
        return False, _rejected(result)

    def _undo_topic(self, name: str, before: TopicObject | None) -> None:
        qm = self.agent.qm
        try:
            if before is None:
                if qm.topics.get(name) is not None:
                    qm.delete_topic(name)
            else:
                qm.define_topic(before, replace=True)
        except MQError:
            pass
        self.agent.local_topics_changed({name})

    # ---------------------------------------------------------------- displays

    def display_qmgr(self, cmd: MqscCommand) -> list[Record]:
        """DISPLAY QMGR, plus (qmgr's own extension, on full repositories) RAFTSTATE,
        RAFTLEADER and RAFTRELAYED: this replica's Raft role, the leader's Raft address and
        how many changes it relayed to the members without a quorum, not committed yet."""
        records = display_qmgr(self.agent.qm, cmd)
        link = self.agent.link
        if isinstance(link, RaftLink) and ("ALL" in cmd.params or not cmd.requested):
            status = link.status()
            records[0].attrs += [
                ("RAFTSTATE", str(status["state"]).upper()),
                ("RAFTLEADER", str(status["leader"] or "")),
                ("RAFTRELAYED", str(status["relayed"])),
            ]
        return records

    def display_clusqmgr(self, cmd: MqscCommand) -> list[Record]:
        agent = self.agent
        pattern = cmd.name or "*"
        statuses = agent.channel_statuses()
        defined = agent.rt.channels

        def deftype(m: Member) -> str:
            """CLUSRCVR for this queue manager; CLUSSDRB for a full repository reached through
            a CLUSSDR defined here (and auto-defined too); CLUSSDRA otherwise."""
            if m.name == agent.name:
                return "CLUSRCVR"
            if m.is_full_repository and defined.manual_sender(
                m.address, channel_name(agent.cluster, m.name)
            ):
                return "CLUSSDRB"
            return "CLUSSDRA"

        out = []
        known: set[str] = set()
        for m in agent.repository.members():
            known |= {m.address, channel_name(agent.cluster, m.name)}
            if not name_matches(pattern, m.name):
                continue
            me = m.name == agent.name
            status = ChannelStatus.RUNNING if me else statuses.get(m.name, ChannelStatus.INACTIVE)
            date, time_ = date_time(m.clusdate_ms / 1000.0) if m.clusdate_ms else ("", "")
            attrs = [
                ("CLUSQMGR", m.name),
                ("CHANNEL", channel_name(agent.cluster, m.name)),
                ("CLUSTER", agent.cluster),
                ("CLUSDATE", date),
                ("CLUSTIME", time_),
                ("CLWLPRTY", str(m.workload.clwlprty)),
                ("CLWLRANK", str(m.workload.clwlrank)),
                ("CLWLWGHT", str(m.workload.clwlwght)),
                ("CONNAME", m.address),
                ("DEFTYPE", deftype(m)),
                ("NETPRTY", str(m.workload.netprty)),
                ("QMID", m.qmid),
                ("QMTYPE", m.role.value),
                ("STATUS", status.value),
                ("SUSPEND", yes_no(m.suspended)),
                ("XMITQ", "" if me else f"SYSTEM.CLUSTER.TRANSMIT.{m.name}"),
            ]
            show_all = "ALL" in cmd.params or not (cmd.generic or cmd.requested)
            summary = ("CLUSTER", "CHANNEL", *cmd.requested)
            out.append(
                Record(
                    "AMQ8441I",
                    "Display Cluster Queue Manager details.",
                    select(attrs, 1, summary, show_all),
                )
            )
        out += defined.pending(known, pattern, ChannelStatus.RETRYING.value)
        return _matched(out, pattern, f"cluster queue manager {pattern} not found")

    def display_chstatus(self, cmd: MqscCommand) -> list[Record]:
        agent = self.agent
        pattern = cmd.name or "*"
        out = []
        for peer, ch in sorted(agent.channels.channels.items()):
            name = channel_name(agent.cluster, peer)
            if not name_matches(pattern, name):
                continue
            attrs = [
                ("CHANNEL", name),
                ("CHLTYPE", "CLUSSDR"),
                ("CONNAME", ch.address or (agent.address_of(peer) or "")),
                ("CURRENT", ""),
                ("RQMNAME", peer),
                ("STATUS", ch.status.value),
                ("SUBSTATE", "MQGET" if ch.status is ChannelStatus.RUNNING else ""),
                ("XMITQ", ch.xmitq),
                ("MSGS", str(ch.sm.acked)),
                ("BATCHES", str(ch.sm.batches)),
                ("XQMSGSA", str(ch.depth)),
                ("MAXDEPTH", str(ch.sm.maxdepth)),
                ("INDOUBT", yes_no(ch.sm.in_doubt)),
                ("LSTERROR", ch.last_error),
            ]
            out.append(Record("AMQ8417I", "Display Channel Status details.", attrs))
        for peer_in in sorted(agent.receiver.peers.values(), key=lambda p: (p.name, p.qmid)):
            name = channel_name(agent.cluster, agent.name)
            if not peer_in.connected or not name_matches(pattern, name):
                continue
            attrs = [
                ("CHANNEL", name),
                ("CHLTYPE", "CLUSRCVR"),
                ("CONNAME", peer_in.address),
                ("CURRENT", ""),
                ("RQMNAME", peer_in.name),
                ("RQMID", peer_in.qmid),
                ("STATUS", ChannelStatus.RUNNING.value),
                ("MSGS", str(peer_in.items)),
                ("LSTSEQNO", f"{peer_in.committed[0]}.{peer_in.committed[1]}"),
            ]
            out.append(Record("AMQ8417I", "Display Channel Status details.", attrs))
        return _matched(out, pattern, f"no status found for channel {pattern}")

    def display_tcluster(self, cmd: MqscCommand) -> list[Record]:
        agent = self.agent
        pattern = cmd.name or "*"
        out = []
        held = set()
        pending = agent.pending_changes()
        for t in agent.repository.topics():
            if not name_matches(pattern, t.name):
                continue
            held.add((t.name, t.qmgr))
            member = agent.repository.member(t.qmgr)
            state = agent.clstate(t.name, pending) if t.qmgr == agent.name else t.clstate
            attrs = [
                ("TOPIC", t.name),
                ("TYPE", "CLUSTER"),
                ("TOPICSTR", t.topic_str),
                ("CLUSTER", t.cluster),
                ("CLROUTE", t.clroute.value),
                ("CLUSQMGR", t.qmgr),
                ("QMID", member.qmid if member is not None else ""),
                ("CLSTATE", state.value),
                ("PUB", t.attrs.get("PUB", "ASPARENT")),
                ("SUB", t.attrs.get("SUB", "ASPARENT")),
                ("PUBSCOPE", t.attrs.get("PUBSCOPE", "ASPARENT")),
                ("SUBSCOPE", t.attrs.get("SUBSCOPE", "ASPARENT")),
                ("DESCR", t.descr),
            ]
            out.append(Record("AMQ8633I", "Display topic details.", attrs))
        for name, obj in sorted(agent.local_clustered().items()):
            if (name, agent.name) in held or not name_matches(pattern, name):
                continue
            attrs = [
                ("TOPIC", name),
                ("TYPE", "CLUSTER"),
                ("TOPICSTR", obj.topic_str),
                ("CLUSTER", agent.cluster),
                ("CLROUTE", obj.attrs.get("CLROUTE", "DIRECT")),
                ("CLUSQMGR", agent.name),
                ("CLSTATE", agent.clstate(name, pending | {name}).value),
            ]
            out.append(Record("AMQ8633I", "Display topic details.", attrs))
        return _matched(out, pattern, f"clustered topic {pattern} not found")

    def display_topic(self, cmd: MqscCommand) -> list[Record]:
        """DISPLAY TOPIC; with CLUSINFO also the clustered definitions that match, as
        TYPE(CLUSTER) records with their CLUSQMGR and CLSTATE (as DISPLAY TCLUSTER)."""
        qm = self.agent.qm
        if "CLUSINFO" not in cmd.params:
            return display_topic(qm, cmd)
        out: list[Record] = []
        for part in (partial(display_topic, qm), self.display_tcluster):
            with contextlib.suppress(MQError):
                out += part(cmd)
        pattern = cmd.name or "*"
        return _matched(out, pattern, f"topic object {pattern} does not exist")

    def display_sub(self, cmd: MqscCommand) -> list[Record]:
        qm = self.agent.qm
        subtype = cmd.params.get("SUBTYPE") or "USER"
        if subtype not in ("PROXY", "ALL") or cmd.params.get("DURABLE") == "YES":
            return display_sub(qm, cmd)
        out: list[Record] = []
        if subtype == "ALL":
            try:
                out = display_sub(qm, cmd)
            except MQError:
                out = []
        pattern = cmd.name or "*"
        agent = self.agent
        for peer, topic in agent.table.entries():
            name = f"SYSTEM.PROXY.{peer} {agent.cluster} {topic}"
            if not name_matches(pattern, name):
                continue
            sub_id = hashlib.sha256(f"{peer}\0{topic}".encode()).hexdigest()[:48].upper()
            attrs = [
                ("SUB", name),
                ("SUBID", sub_id),
                ("SUBTYPE", "PROXY"),
                ("TOPICSTR", topic),
                ("DEST", PROXY_DEST),
                ("DESTQMGR", peer),
                ("DURABLE", "NO"),
                ("SUBSCOPE", "ALL"),
            ]
            out.append(Record("AMQ8096I", "IBM MQ subscription inquired.", attrs))
        return _matched(
            out, pattern, f"subscription {pattern} does not exist", "MQRC_NO_SUBSCRIPTION"
        )


def _matched(
    out: list[Record], pattern: str, message: str, reason: str = "MQRC_UNKNOWN_OBJECT_NAME"
) -> list[Record]:
    """What DISPLAY found: nothing for a name without a trailing ``*`` is ``reason``."""
    if not out and not pattern.endswith("*"):
        raise MQError(reason, message)
    return out


_Act = Callable[[ClusterAdmin, MqscCommand], Reply | Awaitable[Reply]]


def _shown(display: Callable[[ClusterAdmin, MqscCommand], list[Record]]) -> _Act:
    return lambda admin, cmd: guarded(partial(display, admin))(cmd)


# the cluster's own commands: not supported on a queue manager outside a cluster
_CLUSTER_ONLY: dict[tuple[str, str], _Act] = {
    ("SUSPEND", "QMGR"): partial(ClusterAdmin.suspend_resume, suspend=True),
    ("RESUME", "QMGR"): partial(ClusterAdmin.suspend_resume, suspend=False),
    ("STOP", "CHANNEL"): partial(ClusterAdmin.stop_start, stop=True),
    ("START", "CHANNEL"): partial(ClusterAdmin.stop_start, stop=False),
    ("REFRESH", "QMGR"): ClusterAdmin.refresh_qmgr,
    ("REFRESH", "CLUSTER"): ClusterAdmin.refresh_cluster,
    ("RESET", "CLUSTER"): ClusterAdmin.reset_cluster,
    ("DISPLAY", "CHSTATUS"): _shown(ClusterAdmin.display_chstatus),
    ("DISPLAY", "TCLUSTER"): _shown(ClusterAdmin.display_tcluster),
}

# commands a member runs its own way; outside a cluster they do what they did before
_IN_CLUSTER: dict[tuple[str, str], _Act] = {
    ("DEFINE", "TOPIC"): ClusterAdmin.change_topic,
    ("ALTER", "TOPIC"): ClusterAdmin.change_topic,
    ("DELETE", "TOPIC"): ClusterAdmin.change_topic,
    ("ALTER", "QLOCAL"): ClusterAdmin.alter_qlocal,
    ("DISPLAY", "TOPIC"): _shown(ClusterAdmin.display_topic),
    ("DISPLAY", "SUB"): _shown(ClusterAdmin.display_sub),
    ("DISPLAY", "QMGR"): _shown(ClusterAdmin.display_qmgr),
    ("DISPLAY", "CLUSQMGR"): _shown(ClusterAdmin.display_clusqmgr),
}


def register(table: MqscTable[CommandHandler], rt: NodeRuntime) -> None:
    """The cluster's commands in a node's table. Whether the node is in a cluster is looked
    up when a command runs: a node joins one later when its cluster channels are defined."""

    def clustered(act: _Act, otherwise: CommandHandler) -> CommandHandler:
        def handler(cmd: MqscCommand) -> Reply | Awaitable[Reply]:
            agent = rt.agent
            return otherwise(cmd) if agent is None else act(agent.admin, cmd)

        return handler

    for (verb, obj), act in _CLUSTER_ONLY.items():
        table.register(verb, obj, clustered(act, not_supported))
    for (verb, obj), act in _IN_CLUSTER.items():
        table.wrap(verb, obj, partial(clustered, act))
