"""DEFINE / ALTER / DELETE / DISPLAY CHANNEL for cluster channels, on a node in a cluster or
not yet in one (the way MQ builds every cluster).

- CHLTYPE(CLUSRCVR): this node's own channel: CONNAME is the address it advertises to the
  cluster (blank: the address it listens on), CLWLRANK/CLWLPRTY/CLWLWGHT/NETPRTY its workload
  attributes (published in its CLUSQMGR record once in the cluster).
- CHLTYPE(CLUSSDR): a full repository to join through (like ``--join``). On a node started
  without ``--cluster``, the first moment it has a cluster-receiver and a cluster-sender for
  the same cluster it joins that cluster, without a restart; the join goes on in the
  background while no full repository answers (MQ accepts channel definitions without
  connecting). More cluster-senders add join addresses, DELETE removes one.
- The definitions are kept in the store, so the node rejoins after a restart.
- A full repository stores and shows its cluster-senders; its Raft group stays as started.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from cluster.chldefs import CLUSRCVR, CLUSSDR, WORKLOAD, ChannelDef, ChannelDefError, ChannelDefs
from cluster.records import WorkloadAttrs
from qmgr.core.admin.dispatch import CommandHandler, MqscTable, guarded
from qmgr.core.admin.queues import name_matches
from qmgr.core.admin.records import Record
from qmgr.core.errors import MQError
from qmgr.mqsc import MqscCommand

if TYPE_CHECKING:
    from qmgr.node.runtime import NodeRuntime

log = logging.getLogger("qmgr.node.cluster")

CHLDEF_KIND = "chldef"
TEMP_PREFIX = "SYSTEM.TEMPQMGR."  # MQ's name for a full repository not yet reached


def _refused(reason: str, text: str) -> list[Record]:
    return [
        Record(
            "AMQ8101E",
            f"IBM MQ error has occurred: {reason}.",
            [("REASON", reason), ("DETAIL", text)],
        )
    ]


class ClusterChannels:
    """The cluster channel definitions of one node and the commands on them."""

    def __init__(self, runtime: NodeRuntime) -> None:
        self.rt = runtime
        fixed = runtime.config.cluster.cluster if runtime.config.cluster is not None else ""
        stored = runtime.loaded_objects.get(CHLDEF_KIND, {}).values()
        self.defs = ChannelDefs.load(stored, fixed)
        # set by the server: why this node could not join a cluster ("" when it can), and
        # the join of the cluster the definitions name
        self.join_problem: Callable[[str], str] = lambda cluster: ""
        self.join: Callable[[], Awaitable[None]] | None = None

    def register(self, table: MqscTable[CommandHandler]) -> None:
        """DEFINE, ALTER, DELETE and DISPLAY CHANNEL, in a cluster or not; DISPLAY CLUSQMGR
        with the full repositories the cluster-senders name (the cluster wraps it once the
        node is in one)."""
        table.register("DEFINE", "CHANNEL", self.define)
        table.register("ALTER", "CHANNEL", self.define)
        table.register("DELETE", "CHANNEL", self.delete)
        table.register("DISPLAY", "CHANNEL", guarded(self.display))
        table.register("DISPLAY", "CLUSQMGR", guarded(self.display_pending))

    def display_pending(self, cmd: MqscCommand) -> list[Record]:
        pattern = cmd.name or "*"
        out = self.pending(set(), pattern, "INACTIVE")
        if not out and not pattern.endswith("*"):
            raise MQError("MQRC_UNKNOWN_OBJECT_NAME", f"cluster queue manager {pattern} not found")
        return out

    # ------------------------------------------------------------------ changes

    async def define(self, cmd: MqscCommand) -> tuple[bool, list[Record]]:
        name = cmd.name or ""
        agent = self.rt.agent
        implicit = self._implicit_receiver()
        if implicit is not None and cmd.verb == "ALTER" and name == implicit.name:
            self.defs.put(implicit)  # the cluster-receiver a --cluster start gave it
        try:
            new = self.defs.check(cmd.verb, name, cmd.params)
        except ChannelDefError as exc:
            return False, _refused(exc.reason, exc.text)
        problem = self.join_problem(new.cluster) if agent is None else ""
        if problem:
            return False, _refused("MQRCCF_COMMAND_FAILED", problem)
        if agent is not None and new.chltype == CLUSRCVR:
            changes = {k: int(str(v)) for k, v in cmd.params.items() if k in WORKLOAD and v}
            attrs = {"CONNAME": new.conname, "DESCR": new.descr}
            result = await agent.set_clusrcvr(name, changes, attrs)
            if not result.ok:
                assert result.error is not None
                return False, _refused(result.error.code.value, result.error.message)
            new = ChannelDef(
                name, CLUSRCVR, new.cluster, new.conname, new.descr, agent.workload.to_dict()
            )
        else:
            problems = self._workload_problems(new)
            if problems:
                return False, _refused("MQRCCF_PARM_SYNTAX_ERROR", problems)
        self._store(new)
        if agent is not None and new.chltype == CLUSSDR:
            agent.set_join_addresses(self.defs.join_addresses())
        records = [
            Record(
                "AMQ8014I" if cmd.verb == "DEFINE" else "AMQ8016I",
                f"IBM MQ channel {'created' if cmd.verb == 'DEFINE' else 'changed'}.",
            )
        ]
        if agent is None and self.defs.ready() and self.join is not None:
            await self.join()
            waiting = self._not_joined()
            if waiting:
                records.append(Record("AMQ9202W", waiting))
        return True, records

    def _not_joined(self) -> str:
        """Why the node is not in its cluster yet ("" once a full repository answered)."""
        agent = self.rt.agent
        if agent is None:
            return f"the queue manager could not join cluster {self.defs.cluster} (see its log)"
        synced, reason = agent.joined()
        if synced:
            return ""
        return (
            f"no full repository of cluster {agent.cluster} has answered yet at "
            f"{', '.join(self.defs.join_addresses())}{f' ({reason})' if reason else ''}; the "
            "queue manager joins when one does"
        )

    @staticmethod
    def _workload_problems(d: ChannelDef) -> str:
        return "; ".join(WorkloadAttrs().with_changes(d.workload).problems())

    def _implicit_receiver(self) -> ChannelDef | None:
        """A member started with ``--cluster`` has a cluster-receiver without a definition
        (named ``<cluster>.<qmgr>`` unless ALTER named it)."""
        agent = self.rt.agent
        if agent is None or self.defs.receiver() is not None:
            return None
        name = agent.clusrcvr.get("CHANNEL") or f"{agent.cluster}.{agent.name}"
        descr = agent.clusrcvr.get("DESCR", "")
        return ChannelDef(name, CLUSRCVR, agent.cluster, "", descr)  # CONNAME: where it listens

    def delete(self, cmd: MqscCommand) -> tuple[bool, list[Record]]:
        name = cmd.name or ""
        d = self.defs.defs.get(name)
        chltype = cmd.params.get("CHLTYPE")
        if d is None or (chltype is not None and chltype != d.chltype):
            return False, [
                Record(
                    "AMQ8147E",
                    f"IBM MQ object {name} not found.",
                    [
                        ("REASON", "MQRCCF_CHANNEL_NOT_FOUND"),
                        ("DETAIL", "MQRCCF_CHANNEL_NOT_FOUND"),
                    ],
                )
            ]
        agent = self.rt.agent
        if d.chltype == CLUSRCVR and agent is not None:
            return False, _refused(
                "MQRCCF_CHANNEL_IN_USE",
                f"{name} is this queue manager's cluster-receiver channel in cluster "
                f"{agent.cluster}; it stays while the queue manager is in the cluster (RESET "
                "CLUSTER ACTION(FORCEREMOVE) on a full repository removes a member)",
            )
        self.defs.remove(name)
        self.rt.qm.journal.object_deleted(CHLDEF_KIND, name)
        if agent is not None:
            agent.set_join_addresses(self.defs.join_addresses())
        return True, [Record("AMQ8015I", "IBM MQ channel deleted.")]

    def _store(self, d: ChannelDef) -> None:
        self.defs.put(d)
        self.rt.qm.journal.object_saved(CHLDEF_KIND, d.name, d.to_dict())

    # ------------------------------------------------------------------ displays

    def display(self, cmd: MqscCommand) -> list[Record]:
        pattern = cmd.name or "*"
        wanted = cmd.params.get("CHLTYPE") or "ALL"
        agent = self.rt.agent
        shown = list(self.defs.defs.values())
        implicit = self._implicit_receiver()
        if implicit is not None:
            shown.append(implicit)
        out = []
        for d in sorted(shown, key=lambda d: d.name):
            if not name_matches(pattern, d.name) or wanted not in ("ALL", d.chltype):
                continue
            attrs = [
                ("CHANNEL", d.name),
                ("CHLTYPE", d.chltype),
                ("CLUSTER", d.cluster),
                ("TRPTYPE", "TCP"),
                ("CONNAME", d.conname or (agent.address if agent is not None else "")),
            ]
            if d.chltype == CLUSRCVR:
                w = agent.workload.to_dict() if agent is not None else dict(d.workload)
                attrs += [(k, str(w.get(k, default))) for k, default in _WORKLOAD_DEFAULTS]
            attrs.append(("DESCR", d.descr))
            out.append(Record("AMQ8414I", "Display Channel details.", attrs))
        if not out and not pattern.endswith("*"):
            raise MQError("MQRC_UNKNOWN_OBJECT_NAME", f"channel {pattern} not found")
        return out

    def manual_sender(self, address: str, channel: str) -> bool:
        """Whether a cluster-sender defined here leads to this full repository (by its
        address or by its cluster-receiver channel's name)."""
        return any(address in d.addresses or d.name == channel for d in self.defs.senders())

    def pending(self, known: set[str], pattern: str, status: str) -> list[Record]:
        """DISPLAY CLUSQMGR entries of the cluster-senders whose full repository is not (yet)
        known: MQ shows them as SYSTEM.TEMPQMGR.<conname> with DEFTYPE(CLUSSDR)."""
        out = []
        for d in self.defs.senders():
            if known & {d.name, *d.addresses}:
                continue
            host, _, port = d.addresses[0].rpartition(":")
            qmname = f"{TEMP_PREFIX}{host}({port})"
            if not name_matches(pattern, qmname):
                continue
            attrs = [
                ("CLUSQMGR", qmname),
                ("CHANNEL", d.name),
                ("CLUSTER", d.cluster),
                ("CONNAME", d.conname),
                ("DEFTYPE", CLUSSDR),
                ("QMTYPE", "REPOS"),
                ("STATUS", status),
            ]
            out.append(Record("AMQ8441I", "Display Cluster Queue Manager details.", attrs))
        return out


_WORKLOAD_DEFAULTS = (("CLWLPRTY", 0), ("CLWLRANK", 0), ("CLWLWGHT", 50), ("NETPRTY", 0))
