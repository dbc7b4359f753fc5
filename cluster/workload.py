"""Topic-host choice: MQ's cluster workload management algorithm applied to topic hosts (pure).

When a publication on a queue manager that does not host a TOPICHOST-routed topic must be sent
to one of the hosts, the choice is the one MQ makes for clustered queues (reference
docs/mq-semantics.md §2.3). Topic objects carry no CLWL attributes, so what the algorithm
sees of a host is its cluster-receiver channel attributes (CLWLRANK, CLWLPRTY, CLWLWGHT,
NETPRTY, kept on its CLUSQMGR record), its SUSPEND state, the PUB attribute of its copy of the
topic definition, and the status of the channel from this node to it. The steps, in order:

1. drop hosts whose definition is PUB(DISABLED) ("publications are not routed through a host
   whose definition is PUB(DISABLED)");
2. keep the highest CLWLRANK. This is applied *before* channel availability, so a higher-ranked
   host whose channel is down is still chosen and publications queue for it;
3. prefer RESUMED hosts over SUSPENDED ones (suspended hosts are used only when all are);
4. channel status classes, best first: INACTIVE or RUNNING; BINDING, INITIALIZING, STARTING or
   STOPPING; RETRYING; REQUESTING, PAUSED or STOPPED. Keep the best class present;
5. keep the highest NETPRTY, then the highest CLWLPRTY. Applied *after* status, so a lower
   priority host takes over when the higher priority hosts' channels fail (failover);
6. choose the least recently used: each host has a sequence factor; the lowest wins, ties go to
   the one chosen longest ago, then to the lowest name. The winner's factor grows by
   1000/CLWLWGHT (exact fractions, no rounding), so equal weights give exact round robin and
   weights 1:2 give a 1:2 split.

Steps MQ has that do not apply to topics: CLWLUSEQ (a queue attribute), "already sent to" (for
cluster PCF flows only) and CLWLMRUC (default 999 999 999, i.e. no limit: not modelled).

Choices where MQ leaves it open:

- LRU state is kept per *group* (the node uses the topic object name), because MQ resets the
  factors when the destination set or their attributes change, and different topics have
  different host sets: one shared state would reset on every call.
- The reset signature is the candidate set with rank, priority, weight, network priority, suspend
  and PUB state; channel status is *not* part of it (it flaps; resetting on every flap would
  break the rotation).
- A host that returns after being skipped (channel down, suspended ...) does not get a burst of
  catch-up traffic: its factor is first raised to the factor of the last host chosen (the
  group's "virtual time", as in weighted fair queueing). In steady state this never changes a
  choice; it only stops a returning host from being chosen many times in a row.

Publications queued for a host that dies (``redrive``): MQ's generic rule is that messages bound
to a failed destination wait for it and unbound ones are re-driven through the workload
algorithm; publications are routed per message (bind NOTFIXED, never bound). The rule here is
**"re-drive if not yet sent"**:

- ACKNOWLEDGED (the dead host confirmed the batch): done, never sent again - it is the host's job
  now, and resending would duplicate it;
- IN_DOUBT (sent in a batch the host did not confirm): waits for the host, like an in-doubt MQ
  batch, because the host may already have forwarded it. Only when the host is no longer a
  candidate at all (its definition deleted, or the member removed) is it re-driven, and then
  it is reported in ``in_doubt_redriven`` so the node marks it as a possible duplicate (copies
  carry the origin's publication id, so receivers discard a second copy);
- UNSENT: chosen again with the workload algorithm, where the dead host's channel status is
  whatever the node reports (RETRYING/STOPPED). If the algorithm still picks the dead host
  (it is the only host, or it has the highest CLWLRANK) the publication waits for it, exactly
  as MQ keeps messages on the transmission queue for a higher-ranked destination.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from typing import Any

from cluster.records import ChannelStatus, TopicHost

_CLASS: Mapping[ChannelStatus, int] = {
    ChannelStatus.INACTIVE: 0,
    ChannelStatus.RUNNING: 0,
    ChannelStatus.BINDING: 1,
    ChannelStatus.INITIALIZING: 1,
    ChannelStatus.STARTING: 1,
    ChannelStatus.STOPPING: 1,
    ChannelStatus.RETRYING: 2,
    ChannelStatus.REQUESTING: 3,
    ChannelStatus.PAUSED: 3,
    ChannelStatus.STOPPED: 3,
}
WEIGHT_SCALE = 1000


def channel_class(status: ChannelStatus) -> int:
    """0 (best: INACTIVE/RUNNING) to 3 (worst: REQUESTING/PAUSED/STOPPED)."""
    return _CLASS[status]


@dataclass(frozen=True)
class HostCandidate:
    """One possible destination as the workload algorithm sees it."""

    name: str
    rank: int = 0
    priority: int = 0
    weight: int = 50
    netprty: int = 0
    suspended: bool = False
    channel: ChannelStatus = ChannelStatus.INACTIVE
    pub_enabled: bool = True

    @staticmethod
    def from_host(
        host: TopicHost, channel: ChannelStatus = ChannelStatus.INACTIVE
    ) -> HostCandidate:
        """A candidate from a topic host record plus the node's channel status to it."""
        return HostCandidate(
            name=host.qmgr,
            rank=host.workload.clwlrank,
            priority=host.workload.clwlprty,
            weight=host.workload.clwlwght,
            netprty=host.workload.netprty,
            suspended=host.suspended,
            channel=channel,
            pub_enabled=host.pub_enabled,
        )


def _keep_max(items: list[HostCandidate], key: str) -> list[HostCandidate]:
    best = max(getattr(c, key) for c in items)
    return [c for c in items if getattr(c, key) == best]


def shortlist(candidates: Sequence[HostCandidate]) -> list[HostCandidate]:
    """Steps 1-5: the hosts the least-recently-used choice is made among (input order kept)."""
    items = [c for c in candidates if c.pub_enabled]
    if not items:
        return []
    items = _keep_max(items, "rank")
    resumed = [c for c in items if not c.suspended]
    if resumed:
        items = resumed
    best_class = min(channel_class(c.channel) for c in items)
    items = [c for c in items if channel_class(c.channel) == best_class]
    items = _keep_max(items, "netprty")
    return _keep_max(items, "priority")


def _signature(candidates: Sequence[HostCandidate]) -> tuple[tuple[object, ...], ...]:
    return tuple(
        sorted(
            (c.name, c.rank, c.priority, c.weight, c.netprty, c.suspended, c.pub_enabled)
            for c in candidates
        )
    )


# Factors are kept as integers in units of 1/_UNITS, so that 1000/CLWLWGHT is exact for every
# weight 1-99 without Fraction arithmetic on the publication path.
_UNITS = math.lcm(*range(1, 100))
_STEP = {w: WEIGHT_SCALE * _UNITS // w for w in range(1, 100)}


@dataclass
class _Group:
    signature: tuple[tuple[object, ...], ...]
    factor: dict[str, int] = field(default_factory=dict)
    last_used: dict[str, int] = field(default_factory=dict)
    counter: int = 0
    vtime: int = 0


class WorkloadBalancer:
    """Least-recently-used state per group; ``choose`` is deterministic for a given history."""

    def __init__(self) -> None:
        self._groups: dict[str, _Group] = {}
        # candidates -> (shortlist, signature); candidates repeat publication after publication
        self._memo: dict[tuple[HostCandidate, ...], tuple[list[HostCandidate], tuple[Any, ...]]]
        self._memo = {}

    def choose(self, candidates: Sequence[HostCandidate], group: str = "") -> HostCandidate | None:
        """The host for one publication, or None if no host may be used (all PUB(DISABLED)).

        Updates the group's LRU state (only the chosen host's factor grows).
        """
        key = tuple(candidates)
        memo = self._memo.get(key)
        if memo is None:
            if len(self._memo) > 4096:
                self._memo.clear()
            memo = self._memo[key] = (shortlist(candidates), _signature(candidates))
        short, signature = memo
        if not short:
            return None
        state = self._groups.get(group)
        if state is None or state.signature != signature:
            state = self._groups[group] = _Group(signature)
        vtime = state.vtime
        factor = state.factor
        last_used = state.last_used
        best = short[0]
        best_key = (max(factor.get(best.name, 0), vtime), last_used.get(best.name, 0), best.name)
        for c in short[1:]:
            k = (max(factor.get(c.name, 0), vtime), last_used.get(c.name, 0), c.name)
            if k < best_key:
                best, best_key = c, k
        start = best_key[0]
        state.vtime = start
        weight = best.weight
        factor[best.name] = start + (_STEP.get(weight) or WEIGHT_SCALE * _UNITS // max(1, weight))
        state.counter += 1
        last_used[best.name] = state.counter
        return best

    def reset(self, group: str | None = None) -> None:
        """Forget the LRU state of one group (all groups if None)."""
        if group is None:
            self._groups.clear()
        else:
            self._groups.pop(group, None)

    def factors(self, group: str = "") -> dict[str, Fraction]:
        """Current sequence factors of a group (diagnostics and tests)."""
        state = self._groups.get(group)
        if state is None:
            return {}
        return {name: Fraction(value, _UNITS) for name, value in state.factor.items()}


class SendState(StrEnum):
    """Where a publication queued for a host stands on the channel."""

    UNSENT = "UNSENT"
    IN_DOUBT = "IN_DOUBT"
    ACKNOWLEDGED = "ACKNOWLEDGED"


@dataclass(frozen=True)
class QueuedPublication:
    """A publication this node assigned to topic host ``host``; ``group`` = topic object name."""

    pub_id: str
    host: str
    state: SendState
    group: str = ""


@dataclass(frozen=True)
class RedrivePlan:
    """What to do with the dead host's publications (see the module docstring)."""

    reassign: Mapping[str, str]
    wait: tuple[str, ...]
    done: tuple[str, ...]
    in_doubt_redriven: frozenset[str] = frozenset()


def redrive(
    queued: Sequence[QueuedPublication],
    dead_host: str,
    candidates: Mapping[str, Sequence[HostCandidate]],
    balancer: WorkloadBalancer,
) -> RedrivePlan:
    """Re-plan the publications queued for ``dead_host``, in queue order.

    ``candidates`` maps each group to its current hosts, with the node's channel status (the
    dead host, if still a host, should show RETRYING or STOPPED). Publications for other hosts
    are ignored. An ACKNOWLEDGED publication is never reassigned.
    """
    reassign: dict[str, str] = {}
    wait: list[str] = []
    done: list[str] = []
    in_doubt: set[str] = set()
    for pub in queued:
        if pub.host != dead_host:
            continue
        if pub.state is SendState.ACKNOWLEDGED:
            done.append(pub.pub_id)
            continue
        group_hosts = candidates.get(pub.group, ())
        still_host = any(c.name == dead_host for c in group_hosts)
        if pub.state is SendState.IN_DOUBT and still_host:
            wait.append(pub.pub_id)
            continue
        chosen = balancer.choose(group_hosts, pub.group)
        if chosen is None or chosen.name == dead_host:
            wait.append(pub.pub_id)
            continue
        reassign[pub.pub_id] = chosen.name
        if pub.state is SendState.IN_DOUBT:
            in_doubt.add(pub.pub_id)
    return RedrivePlan(reassign, tuple(wait), tuple(done), frozenset(in_doubt))
