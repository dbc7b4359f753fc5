"""Proxy-subscription bookkeeping (pure): which proxies a node must hold at which peers, and
which peers a host must forward a publication to.

Subscribing side (``ProxyPlanner``), reference docs/mq-semantics.md §2.1, §2.2,
§3.3-§3.5:

- Local subscriptions are aggregated: one proxy per distinct *proxy topic string* per
  destination peer, created with the first local subscription that needs it and withdrawn with
  the last one (duplicates never produce a second proxy).
- Destinations of a subscription: resolve its topic (a wildcard subscription resolves at the
  part before its first wildcard level). Not clustered in this cluster -> none. SUBSCOPE(QMGR)
  (resolved on the topic, or asked for by the subscriber) -> none. CLROUTE(TOPICHOST) -> the
  hosts of that clustered object only (PUB(DISABLED) hosts included: a new host must learn the
  proxies before it is enabled, §2.5). CLROUTE(DIRECT) -> every member. Never this node.
- A wildcard subscription above every clustered point (``#``, ``Sport/#`` when ``Sport/Football``
  and ``Sport/Tennis`` are the clustered points) resolves to a non-clustered node and sends no
  proxy: it receives local publications only.
- Character-wildcard subscriptions (WSCHEMA(CHAR)) are proxied as topic wildcards: the level
  holding an unescaped ``*`` or ``?`` and everything after it become ``#``.
- PROXYSUB(FORCE) on an object inside a clustered branch: every node sends the wildcard proxy
  ``<TOPICSTR>/#`` to that branch's destinations even with no local subscription, and drops its
  individual proxies that the wildcard proxy covers at the same peer.
- Every change (subscribe, unsubscribe, a new topology: definitions, hosts or members changed)
  returns a ``ProxyDiff`` of (peer, topic) pairs to add and to remove. A new host simply appears
  as new pairs in the diff; ``full_set``/``for_peer`` give everything to (re)send after a
  restart or a REFRESH QMGR TYPE(PROXYSUB).

Choices where MQ leaves it open:

- A wildcard subscription at or below a clustered point whose pattern can also match topics
  under a *nested* clustered object (another object with its own CLUSTER, deeper in the tree)
  is proxied to that nested object's destinations too, so it sees the publications routed
  through the nested branch's hosts. WILDCARD(BLOCK) is left to local delivery.
- PUB(ASPARENT) on a remote copy counts as enabled (see ``ClusterTopic.pub_enabled``).

Receiving side (``ProxyTable``): proxies received per origin peer, kept in a ``TopicMatcher``
so that matching a publication costs the depth of its topic, never a scan of all proxies.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass

from cluster.char_wildcards import char_as_topic_pattern
from cluster.records import ClusterTopology
from cluster.topics import (
    TopicMatcher,
    TopicObject,
    is_at_or_above,
    is_wildcard,
    levels,
    wildcard_prefix,
)

ProxyPair = tuple[str, str]
"""(peer queue manager name, proxy topic string)."""


@dataclass(frozen=True)
class ProxyDiff:
    """Proxies to create and to cancel, each a sorted tuple of (peer, topic string)."""

    add: tuple[ProxyPair, ...] = ()
    remove: tuple[ProxyPair, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.add or self.remove)

    def by_peer(self) -> dict[str, tuple[list[str], list[str]]]:
        """peer -> (topics to add, topics to remove), peers sorted."""
        out: dict[str, tuple[list[str], list[str]]] = {}
        for peer, topic in self.add:
            out.setdefault(peer, ([], []))[0].append(topic)
        for peer, topic in self.remove:
            out.setdefault(peer, ([], []))[1].append(topic)
        return dict(sorted(out.items()))

    @staticmethod
    def between(old: set[ProxyPair], new: set[ProxyPair]) -> ProxyDiff:
        return ProxyDiff(tuple(sorted(new - old)), tuple(sorted(old - new)))


def proxy_topic(topic_str: str, char_wildcard: bool = False) -> str:
    """The topic string a proxy for this subscription carries.

    Topic-scheme subscriptions are proxied unchanged. For WSCHEMA(CHAR), the first level with
    an unescaped ``*``/``?`` and everything after it become ``#``: ``/aaa/bbb/c*d`` ->
    ``/aaa/bbb/#``.
    """
    if not char_wildcard:
        return topic_str
    return char_as_topic_pattern(topic_str)


def may_match_at_or_below(pattern: str, topic: str) -> bool:
    """True if ``pattern`` can match ``topic`` or some topic below it (topic scheme)."""
    pat = levels(pattern)
    end = len(pat)

    def closure(states: set[int]) -> set[int]:
        out = set(states)
        stack = list(states)
        while stack:
            pos = stack.pop()
            if pos < end and pat[pos] == "#" and pos + 1 not in out:
                out.add(pos + 1)
                stack.append(pos + 1)
        return out

    states = closure({0})
    for level in levels(topic) if topic != "" else []:
        nxt: set[int] = set()
        for pos in states:
            if pos == end:
                continue
            token = pat[pos]
            if token == "#":
                nxt.add(pos)
            elif token == "+" or token == level:
                nxt.add(pos + 1)
        states = closure(nxt)
        if not states:
            return False
    return bool(states)


def _forced_topic(obj: TopicObject) -> str:
    return "#" if obj.topic_str == "" else obj.topic_str + "/#"


@dataclass(frozen=True)
class LocalSub:
    """A local subscription as far as proxies are concerned."""

    topic_str: str
    scope_qmgr: bool = False
    char_wildcard: bool = False

    @property
    def proxy_topic(self) -> str:
        return proxy_topic(self.topic_str, self.char_wildcard)


class ProxyPlanner:
    """The proxies this node must hold at its peers, kept as a set of (peer, topic) pairs."""

    def __init__(self, topology: ClusterTopology) -> None:
        self._topology = topology
        self._subs: dict[Hashable, LocalSub] = {}
        self._count: dict[str, int] = {}  # proxy topic -> proxy-eligible local subscriptions
        self._dest: dict[str, frozenset[str]] = {}  # cache for topics in _count
        self._forced: dict[str, list[str]] = {}  # peer -> forced prefixes (TOPICSTR of FORCE)
        self._forced_pairs: set[ProxyPair] = set()
        self._force_names: set[str] = set()  # objects with PROXYSUB(FORCE)
        self._current: set[ProxyPair] = set()
        self._find_forced()
        self._compute_forced()
        self._current = self._desired()

    # ---------------------------------------------------------------- changes

    def subscribe(
        self,
        sub_id: Hashable,
        topic_str: str,
        *,
        scope_qmgr: bool = False,
        char_wildcard: bool = False,
    ) -> ProxyDiff:
        """Add (or replace) local subscription ``sub_id``."""
        removed = self._drop(sub_id)
        added: set[ProxyPair] = set()
        sub = LocalSub(topic_str, scope_qmgr, char_wildcard)
        self._subs[sub_id] = sub
        if not scope_qmgr:
            topic = sub.proxy_topic
            self._count[topic] = self._count.get(topic, 0) + 1
            if self._count[topic] == 1:
                self._dest[topic] = self.destinations(topic)
                added = self._pairs_for(topic)
                self._current.update(added)
        return ProxyDiff(tuple(sorted(added - removed)), tuple(sorted(removed - added)))

    def unsubscribe(self, sub_id: Hashable) -> ProxyDiff:
        """Remove local subscription ``sub_id`` (unknown ids give an empty diff)."""
        return ProxyDiff(remove=tuple(sorted(self._drop(sub_id))))

    def set_topology(self, topology: ClusterTopology) -> ProxyDiff:
        """Recompute every destination for new definitions, hosts or members."""
        self._topology = topology
        self._find_forced()
        self._compute_forced()
        self._dest = {topic: self.destinations(topic) for topic in self._count}
        return self._settle()

    def update_topology(
        self,
        topology: ClusterTopology,
        names: Iterable[str],
        topic_strs: Iterable[str],
        members: bool = False,
    ) -> ProxyDiff:
        """``set_topology`` for a change that touched only the objects ``names`` (hosts
        included) at the TOPICSTRs ``topic_strs`` (those they left too), or the members: only
        the proxy topics such a change can move are worked out again, so the cost follows the
        subscriptions, not the number of objects."""
        self._topology = topology
        for name in names:
            obj = topology.objects.get(name)
            if obj is not None and obj.value("PROXYSUB") == "FORCE":
                self._force_names.add(name)
            else:
                self._force_names.discard(name)
        self._compute_forced()
        strs = tuple(topic_strs)
        for topic in self._count:
            if members or _moved_by(topic, strs):
                self._dest[topic] = self.destinations(topic)
        return self._settle()

    def _settle(self) -> ProxyDiff:
        desired = self._desired()
        diff = ProxyDiff.between(self._current, desired)
        self._current = desired
        return diff

    def _drop(self, sub_id: Hashable) -> set[ProxyPair]:
        """Forget a subscription; return the pairs withdrawn with it (already removed)."""
        sub = self._subs.pop(sub_id, None)
        if sub is None or sub.scope_qmgr:
            return set()
        topic = sub.proxy_topic
        self._count[topic] -= 1
        if self._count[topic] > 0:
            return set()
        del self._count[topic]
        gone = self._pairs_for(topic)
        del self._dest[topic]
        self._current.difference_update(gone)
        return gone

    # ---------------------------------------------------------------- queries

    @property
    def topology(self) -> ClusterTopology:
        return self._topology

    def full_set(self) -> list[ProxyPair]:
        """Every proxy this node must hold, sorted (to re-send after a restart)."""
        return sorted(self._current)

    def for_peer(self, peer: str) -> frozenset[str]:
        """The proxy topics this node must hold at ``peer`` (e.g. a new host)."""
        return frozenset(t for p, t in self._current if p == peer)

    def subscriptions(self) -> Mapping[Hashable, LocalSub]:
        return dict(self._subs)

    def destinations(self, topic: str) -> frozenset[str]:
        """Peers a proxy for ``topic`` goes to under the current topology (rules above)."""
        topo = self._topology
        resolved = topo.objects.resolve(topic)
        if resolved["SUBSCOPE"] == "QMGR":
            return frozenset()
        point = topo.clustered_point(resolved)
        if point is None:
            return frozenset()
        dest = set(topo.destinations(point))
        if is_wildcard(topic):
            for obj in topo.objects.objects_below(wildcard_prefix(topic)):
                if obj.name == point.name or not may_match_at_or_below(topic, obj.topic_str):
                    continue
                nested = topo.objects.resolve(obj.topic_str)
                if topo.clustered_point(nested) is obj and nested["SUBSCOPE"] != "QMGR":
                    dest.update(topo.destinations(obj))
        return frozenset(dest)

    # ---------------------------------------------------------------- internals

    def _pairs_for(self, topic: str) -> set[ProxyPair]:
        prefix = wildcard_prefix(topic)
        return {
            (peer, topic)
            for peer in self._dest.get(topic, ())
            if not any(is_at_or_above(f, prefix) for f in self._forced.get(peer, ()))
        }

    def _find_forced(self) -> None:
        self._force_names = {
            o.name for o in self._topology.objects.all() if o.value("PROXYSUB") == "FORCE"
        }

    def _compute_forced(self) -> None:
        topo = self._topology
        forced: dict[str, list[str]] = {}
        pairs: set[ProxyPair] = set()
        for name in sorted(self._force_names):
            obj = topo.objects.get(name)
            if obj is None:
                continue
            resolved = topo.objects.resolve(obj.topic_str)
            point = topo.clustered_point(resolved)
            if point is None or resolved["SUBSCOPE"] == "QMGR":
                continue
            for peer in topo.destinations(point):
                forced.setdefault(peer, []).append(obj.topic_str)
                pairs.add((peer, _forced_topic(obj)))
        self._forced = forced
        self._forced_pairs = pairs

    def _desired(self) -> set[ProxyPair]:
        desired = set(self._forced_pairs)
        for topic in self._count:
            desired.update(self._pairs_for(topic))
        return desired


def _moved_by(topic: str, topic_strs: tuple[str, ...]) -> bool:
    """Whether objects changing at ``topic_strs`` can change where proxy ``topic`` goes: one
    at or above its resolution point, or (a wildcard) one below it."""
    point = wildcard_prefix(topic)
    wild = is_wildcard(topic)
    return any(is_at_or_above(s, point) or (wild and is_at_or_above(point, s)) for s in topic_strs)


class ProxyTable:
    """Proxies received from peers: ``match(topic)`` gives the peers to forward to."""

    def __init__(self) -> None:
        self._matcher: TopicMatcher[str] = TopicMatcher()
        self._by_peer: dict[str, set[str]] = {}

    def add(self, peer: str, topic: str) -> bool:
        """Record a proxy; False if it was already held (proxies are idempotent)."""
        topics = self._by_peer.setdefault(peer, set())
        if topic in topics:
            return False
        topics.add(topic)
        self._matcher.add(topic, peer)
        return True

    def remove(self, peer: str, topic: str) -> bool:
        """Cancel a proxy; False if it was not held."""
        topics = self._by_peer.get(peer)
        if topics is None or topic not in topics:
            return False
        topics.discard(topic)
        if not topics:
            del self._by_peer[peer]
        self._matcher.discard(topic, peer)
        return True

    def replace_all(self, peer: str, topics: Iterable[str]) -> ProxyDiff:
        """Make ``peer``'s proxies exactly ``topics`` (a peer re-sent its full set)."""
        new = set(topics)
        old = set(self._by_peer.get(peer, ()))
        for topic in sorted(old - new):
            self.remove(peer, topic)
        for topic in sorted(new - old):
            self.add(peer, topic)
        return ProxyDiff.between({(peer, t) for t in old}, {(peer, t) for t in new})

    def drop_peer(self, peer: str) -> frozenset[str]:
        """Forget every proxy from ``peer`` (it left the cluster); returns what was held."""
        topics = frozenset(self._by_peer.get(peer, ()))
        for topic in topics:
            self.remove(peer, topic)
        return topics

    def match(self, topic: str) -> set[str]:
        """Peers holding at least one proxy that matches published ``topic``."""
        return self._matcher.match(topic)

    def topics(self, peer: str) -> frozenset[str]:
        return frozenset(self._by_peer.get(peer, ()))

    def peers(self) -> list[str]:
        return sorted(self._by_peer)

    def entries(self) -> list[ProxyPair]:
        """Every (peer, topic), sorted (DISPLAY SUB(*) SUBTYPE(PROXY))."""
        return sorted((p, t) for p, topics in self._by_peer.items() for t in topics)

    def __len__(self) -> int:
        return len(self._matcher)
