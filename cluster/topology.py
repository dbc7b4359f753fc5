"""A node's ``ClusterTopology`` kept current name by name, so that a change of one clustered
definition costs the same with 10 or 10,000 definitions in the cluster.

``ClusterTopology.build`` merges the node's own topic objects with the clustered definitions
it can see: its own objects first, then the copies of other names in the order (``defined``
revision, name, hosting queue manager), each taking its TOPICSTR unless an object placed
before it holds it. ``TopologyIndex.update(names)`` gives the same result for a change that
touched only ``names``: each is placed again (its earliest copy whose TOPICSTR no earlier
object holds), and every name that can be affected is placed again in turn: those with copies
at a TOPICSTR freed or taken or whose holder moved in that order (the same object placed
from another copy), and an object displaced by one earlier in that order. The
objects, hosts and members are kept in place: the ``ClusterTopology`` handed out is always the
current one (its ``objects`` change as ``update`` runs).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from types import MappingProxyType

from cluster.records import ClusterTopology, EventKind, RepoEvent, TopicHost
from cluster.repository import ClusterRepository
from cluster.topics import TopicObject, TopicObjectError, TopicObjects

Priority = tuple[int, int, str, str]
LOCAL: Priority = (0, 0, "", "")  # a node's own object comes before every remote copy


class TopologyIndex:
    """See the module docstring."""

    def __init__(
        self, local: str, repository: ClusterRepository, local_objects: Iterable[TopicObject]
    ) -> None:
        self.local = local
        self.repository = repository
        self._own: dict[str, TopicObject] = {o.name: o for o in local_objects}
        self.objects = TopicObjects()
        self._hosts: dict[str, tuple[TopicHost, ...]] = {}
        # member -> the names whose hosts include it: a member's removal touches those only
        self._host_of: dict[str, set[str]] = {}
        self._priority: dict[str, Priority] = {}
        for obj in self._own.values():  # as ClusterTopology.build places them
            self.objects.put(obj)
            self._priority[obj.name] = LOCAL
        for copy in sorted(repository.topics(), key=lambda t: (t.defined, t.name, t.qmgr)):
            if copy.name in self.objects:
                continue
            try:
                self.objects.put(
                    TopicObject(copy.name, copy.topic_str, copy.object_attrs(), copy.descr)
                )
            except TopicObjectError:
                continue
            self._priority[copy.name] = (1, copy.defined, copy.name, copy.qmgr)
        for obj in self.objects.all():
            self._set_hosts(obj.name)
        self.topology = self._topology(repository)

    def _topology(self, repository: ClusterRepository) -> ClusterTopology:
        members = frozenset(m.name for m in repository.members()) | {self.local}
        hosts = MappingProxyType(self._hosts)
        return ClusterTopology(self.local, repository.cluster, self.objects, hosts, members)

    # ------------------------------------------------------------------ changes

    def changed_names(self, events: Iterable[RepoEvent]) -> tuple[set[str], bool]:
        """The object names ``events`` can change the placement or hosts of, and whether the
        members changed."""
        names: set[str] = set()
        members = False
        for event in events:
            if event.topic is not None:
                names.add(event.topic.name)
            elif event.member is not None:
                members = True
                names.update(t.name for t in self.repository.hosted_by(event.member.name))
                if event.kind is EventKind.MEMBER_REMOVED:  # its copies: gone already
                    names.update(self._host_of.get(event.member.name, ()))
        return names, members

    def set_repository(self, repository: ClusterRepository) -> None:
        """A new repository object (``update`` must then be given every name)."""
        self.repository = repository

    def set_local(self, names: Collection[str], local_objects: Mapping[str, TopicObject]) -> None:
        """The node's own objects ``names`` changed (``local_objects``: all of them now)."""
        for name in names:
            obj = local_objects.get(name)
            if obj is None:
                self._own.pop(name, None)
            else:
                self._own[name] = obj

    def update(self, names: Iterable[str], members: bool = False) -> tuple[set[str], set[str]]:
        """Place ``names`` again (see the module docstring); ``members``: the members changed.
        Returns every name whose object or hosts changed, and every TOPICSTR an object left
        or took."""
        work = set(names)
        changed: set[str] = set()
        touched: set[str] = set()
        while work:
            name = min(work)  # any order gives the same result; this one is reproducible
            work.discard(name)
            before = self.objects.get(name)
            earlier = self._priority.get(name)
            after, prio = self._choose(name)
            if before is not None and before is not after:
                self.objects.remove(name)
                self._priority.pop(name, None)
                touched.add(before.topic_str)
                work.update(self._names_at(before.topic_str) - {name})
            if after is not None and self.objects.get(name) is not after:
                occupant = self.objects.at(after.topic_str)
                if occupant is not None and occupant.name != name:
                    self.objects.remove(occupant.name)  # placed after this one: displaced
                    self._priority.pop(occupant.name, None)
                    work.add(occupant.name)
                    changed.add(occupant.name)
                self.objects.put(after)
                touched.add(after.topic_str)
                work.update(self._names_at(after.topic_str) - {name})
            if after is not None:
                if before is after and prio != earlier:
                    # the same object now placed from another copy, later in the order: a
                    # name it kept from its TOPICSTR may come before it now
                    work.update(self._names_at(after.topic_str) - {name})
                self._priority[name] = prio
            if before is not after:
                changed.add(name)
            if self._set_hosts(name):
                changed.add(name)
        if members:
            self.topology = self._topology(self.repository)
        return changed, touched

    def _names_at(self, topic_str: str) -> set[str]:
        names = {t.name for t in self.repository.at_topic_str(topic_str)}
        placed = self.objects.at(topic_str)
        if placed is not None:
            names.add(placed.name)
        return names

    def _choose(self, name: str) -> tuple[TopicObject | None, Priority]:
        """The object ``name`` must have now: its own, or its earliest copy whose TOPICSTR no
        object placed before it holds (the object in place is kept when it is that one)."""
        own = self._own.get(name)
        if own is not None:
            return self._kept(name, own), LOCAL
        copies = sorted(self.repository.definitions(name), key=lambda t: (t.defined, t.qmgr))
        for copy in copies:
            prio = (1, copy.defined, copy.name, copy.qmgr)
            occupant = self.objects.at(copy.topic_str)
            if (
                occupant is not None
                and occupant.name != name
                and self._priority.get(occupant.name, LOCAL) < prio
            ):
                continue
            try:
                obj = TopicObject(copy.name, copy.topic_str, copy.object_attrs(), copy.descr)
            except TopicObjectError:
                continue
            return self._kept(name, obj), prio
        return None, LOCAL

    def _kept(self, name: str, obj: TopicObject) -> TopicObject:
        current = self.objects.get(name)
        return current if current == obj else obj

    def _set_hosts(self, name: str) -> bool:
        obj = self.objects.get(name)
        found: tuple[TopicHost, ...] = ()
        if (
            obj is not None
            and obj.value("CLUSTER") == self.repository.cluster
            and obj.value("CLROUTE") == "TOPICHOST"
        ):
            found = tuple(self.repository.topic_hosts(obj.name, obj.topic_str))
        before = self._hosts.get(name, ())
        if found == before:
            return False
        for host in before:
            _unlink(self._host_of, host.qmgr, name)
        for host in found:
            self._host_of.setdefault(host.qmgr, set()).add(name)
        if found:
            self._hosts[name] = found
        else:
            del self._hosts[name]
        return True


def _unlink(index: dict[str, set[str]], qmgr: str, name: str) -> None:
    names = index.get(qmgr)
    if names is not None:
        names.discard(name)
        if not names:
            del index[qmgr]
