"""Administered topic objects and attribute resolution over the topic tree (pure).

Resolution (reference docs/mq-semantics.md §3.2), for a topic string T:

- The *chain* of T is every administered object whose TOPICSTR is a level-prefix of T (``Sport``
  is above ``Sport/Football``, not above ``Sports``), nearest first, ending with
  SYSTEM.BASE.TOPIC (TOPICSTR ``''``) unless it has been deleted. It is found by walking T's
  ancestors through a dict from TOPICSTR to object, never by scanning all objects.
- ``admin`` is the first object of the chain (SYSTEM.BASE.TOPIC's name when the chain is empty).
- ASPARENT-style attributes, and the blank-means-inherit ones (CLUSTER, COMMINFO, MDURMDL,
  MNDURMDL), take the first value along the chain that is not ASPARENT / blank; if none is found
  (including ASPARENT or blank on SYSTEM.BASE.TOPIC itself, or SYSTEM.BASE.TOPIC deleted) the
  built-in default from ``BASE_DEFAULTS`` applies.
- ``cluster_object`` is the object that supplied CLUSTER (the clustered point), or None.
- CLROUTE is taken from ``cluster_object`` when the topic is clustered (the routing of a
  clustered branch is the clustered point's); otherwise it is the ``admin`` object's own value
  (it then has no effect).
- PROXYSUB, WILDCARD and CUSTOM are explicit, never inherited: the resolved value is the
  ``admin`` object's own value (missing = the default). Their effect on the subtree is exposed
  separately: ``force_object`` is the nearest object in the chain with PROXYSUB(FORCE) (its
  wildcard proxy covers T, so no individual proxy is needed below it), and ``blocking`` lists the
  objects in the chain with WILDCARD(BLOCK) (see ``ResolvedTopic.wildcard_blocked``).
- A wildcard subscription string resolves at the part before its first wildcard level:
  ``Sport/+/Goals`` resolves at ``Sport``, ``#`` at ``''`` (SYSTEM.BASE.TOPIC).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from cluster.topic_attrs import (
    ASPARENT,
    BASE_DEFAULTS,
    DESCR_MAX,
    EXPLICIT_ATTRS,
    NAME_MAX,
    TOPIC_ATTRS,
    check_attr,
    inherits,
    own_default,
    valid_object_name,
)
from cluster.topic_strings import (
    MAX_TOPIC_LENGTH,
    SEPARATOR,
    ancestors,
    first_wildcard_index,
    is_at_or_above,
    levels,
    wildcard_prefix,
)

BASE_TOPIC_NAME = "SYSTEM.BASE.TOPIC"
_CACHE_LIMIT = 8192
_INHERITING = tuple(sorted(TOPIC_ATTRS - EXPLICIT_ATTRS))


class TopicObjectError(ValueError):
    """A topic object definition or lookup is not valid; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


class TopicObjectNotFound(TopicObjectError, KeyError):
    """No topic object has that name (also a KeyError)."""


def _depth(topic_str: str) -> int:
    return 0 if topic_str == "" else len(levels(topic_str))


@dataclass(frozen=True)
class TopicObject:
    """One administered topic object (``DEFINE TOPIC``), validated on construction.

    ``attrs`` maps attribute names (``TOPIC_ATTRS``) to values as MQSC spells them; a missing
    attribute means ASPARENT (blank for CLUSTER/COMMINFO/MDURMDL/MNDURMDL, the default for the
    explicit CLROUTE/CUSTOM/PROXYSUB/WILDCARD). Use ``value(attr)`` for the object's own value.
    """

    name: str
    topic_str: str
    attrs: Mapping[str, str] = field(default_factory=dict)
    descr: str = ""

    def __post_init__(self) -> None:
        if not valid_object_name(self.name):
            raise TopicObjectError(
                f"topic object name {self.name!r} is not valid "
                f"(1-{NAME_MAX} characters from A-Z a-z 0-9 . / _ %)"
            )
        self._check_topic_str()
        for attr, value in self.attrs.items():
            problem = check_attr(attr, value)
            if problem is not None:
                raise TopicObjectError(f"TOPIC({self.name}): {problem}")
        if len(self.descr) > DESCR_MAX:
            raise TopicObjectError(
                f"TOPIC({self.name}): DESCR is {len(self.descr)} characters; max {DESCR_MAX}"
            )
        object.__setattr__(self, "attrs", MappingProxyType(dict(self.attrs)))

    def _check_topic_str(self) -> None:
        topic = self.topic_str
        if self.name == BASE_TOPIC_NAME:
            if topic != "":
                raise TopicObjectError(f"{BASE_TOPIC_NAME} must have TOPICSTR ''")
            return
        if topic == "":
            raise TopicObjectError(f"TOPIC({self.name}): TOPICSTR is required and cannot be empty")
        if len(topic) > MAX_TOPIC_LENGTH:
            raise TopicObjectError(
                f"TOPIC({self.name}): TOPICSTR is {len(topic)} characters; max {MAX_TOPIC_LENGTH}"
            )
        if "\x00" in topic:
            raise TopicObjectError(f"TOPIC({self.name}): TOPICSTR contains a NUL character")
        if topic.endswith(SEPARATOR):
            raise TopicObjectError(f"TOPIC({self.name}): TOPICSTR cannot end with '/'")
        if first_wildcard_index(topic) is not None:
            raise TopicObjectError(
                f"TOPIC({self.name}): TOPICSTR {topic!r} has a wildcard level ('#' or '+'); "
                "an administered node must be a single topic"
            )

    @property
    def is_base(self) -> bool:
        return self.name == BASE_TOPIC_NAME

    def value(self, attr: str) -> str:
        """This object's own value for ``attr`` (may be ASPARENT / blank), defaults applied."""
        got = self.attrs.get(attr)
        if got is not None:
            return got
        if attr not in TOPIC_ATTRS:
            raise KeyError(attr)
        return own_default(attr, self.is_base)

    def altered(self, changes: Mapping[str, str], descr: str | None = None) -> TopicObject:
        """A copy with ``changes`` applied on top of ``attrs`` (``ALTER TOPIC``)."""
        merged = dict(self.attrs)
        merged.update(changes)
        return TopicObject(
            self.name, self.topic_str, merged, self.descr if descr is None else descr
        )

    def __hash__(self) -> int:
        return hash((self.name, self.topic_str, frozenset(self.attrs.items()), self.descr))


BASE_TOPIC = TopicObject(BASE_TOPIC_NAME, "", BASE_DEFAULTS, "Base topic for ASPARENT resolution")


@dataclass(frozen=True)
class ResolvedTopic:
    """Every attribute of one topic string, resolved (no ASPARENT or inherit-blank left)."""

    topic_str: str
    admin: str
    attrs: Mapping[str, str]
    cluster_object: TopicObject | None
    force_object: TopicObject | None = None
    blocking: tuple[TopicObject, ...] = ()

    def __getitem__(self, attr: str) -> str:
        return self.attrs[attr]

    def __hash__(self) -> int:
        return hash((self.topic_str, self.admin, frozenset(self.attrs.items())))

    @property
    def resolved_at(self) -> str:
        """The topic string the attributes were resolved at (before any wildcard level)."""
        return wildcard_prefix(self.topic_str)

    @property
    def clustered(self) -> bool:
        return self.cluster_object is not None

    @property
    def cluster(self) -> str:
        return self.attrs["CLUSTER"]

    def wildcard_blocked(self, pattern: str) -> bool:
        """True if a WILDCARD(BLOCK) object at or above this topic hides it from ``pattern``.

        A wildcard subscription is *less specific* than an object when its first wildcard level
        comes before the object's last level (``Sport/#`` and ``Sport/+/x`` are less specific
        than ``Sport/Football``; ``Sport/Football/#`` is not). Non-wildcard patterns are never
        blocked. MQ evaluates this when the subscription is created; callers that want that
        exactly should evaluate it then and keep the answer.
        """
        index = first_wildcard_index(pattern)
        if index is None:
            return False
        return any(_depth(obj.topic_str) > index for obj in self.blocking)


class TopicObjects:
    """The administered topic objects of one queue manager, by name and by TOPICSTR."""

    def __init__(self) -> None:
        self._by_name: dict[str, TopicObject] = {BASE_TOPIC_NAME: BASE_TOPIC}
        self._by_str: dict[str, TopicObject] = {"": BASE_TOPIC}
        self._cache: dict[str, ResolvedTopic] = {}

    def put(self, obj: TopicObject) -> None:
        """Define or replace ``obj`` by name.

        Raises TopicObjectError if another object already has the same TOPICSTR, or if an
        object of that name exists with a different TOPICSTR (TOPICSTR cannot be changed:
        delete and redefine).
        """
        current = self._by_name.get(obj.name)
        if current is not None and current.topic_str != obj.topic_str:
            raise TopicObjectError(
                f"TOPIC({obj.name}) has TOPICSTR {current.topic_str!r}; TOPICSTR cannot be "
                "changed (delete and redefine the object)"
            )
        other = self._by_str.get(obj.topic_str)
        if other is not None and other.name != obj.name:
            raise TopicObjectError(
                f"TOPIC({other.name}) already has TOPICSTR {obj.topic_str!r}; "
                f"cannot define TOPIC({obj.name}) there"
            )
        self._by_name[obj.name] = obj
        self._by_str[obj.topic_str] = obj
        self._cache.clear()

    def remove(self, name: str) -> TopicObject:
        """Delete and return the object; TopicObjectNotFound if unknown.

        Removing SYSTEM.BASE.TOPIC makes resolution fall back to the built-in defaults.
        """
        obj = self._by_name.pop(name, None)
        if obj is None:
            raise TopicObjectNotFound(f"topic object {name!r} is not defined")
        del self._by_str[obj.topic_str]
        self._cache.clear()
        return obj

    def get(self, name: str) -> TopicObject | None:
        return self._by_name.get(name)

    def at(self, topic_str: str) -> TopicObject | None:
        """The object whose TOPICSTR is exactly ``topic_str``."""
        return self._by_str.get(topic_str)

    def all(self) -> list[TopicObject]:
        """Every object, sorted by name."""
        return [self._by_name[name] for name in sorted(self._by_name)]

    def objects_below(self, topic_str: str) -> list[TopicObject]:
        """Objects whose TOPICSTR is at or below ``topic_str`` (level-prefix), by TOPICSTR."""
        found = [obj for obj in self._by_str.values() if is_at_or_above(topic_str, obj.topic_str)]
        return sorted(found, key=lambda obj: obj.topic_str)

    def chain(self, topic: str) -> list[TopicObject]:
        """The objects at or above ``topic``'s resolution point, nearest first."""
        by_str = self._by_str
        point = wildcard_prefix(topic)
        return [obj for s in ancestors(point) if (obj := by_str.get(s)) is not None]

    def resolve(self, topic: str) -> ResolvedTopic:
        """Resolve every attribute of ``topic`` (see the module docstring for the rules)."""
        cached = self._cache.get(topic)
        if cached is not None:
            return cached
        chain = self.chain(topic)
        attrs: dict[str, str] = {}
        cluster_object: TopicObject | None = None
        for attr in _INHERITING:
            value = BASE_DEFAULTS[attr]
            for obj in chain:
                own = obj.value(attr)
                if not inherits(attr, own):
                    value = own
                    if attr == "CLUSTER":
                        cluster_object = obj
                    break
            attrs[attr] = value
        admin = chain[0] if chain else None
        for attr in EXPLICIT_ATTRS:
            attrs[attr] = admin.value(attr) if admin is not None else BASE_DEFAULTS[attr]
        if cluster_object is not None:
            attrs["CLROUTE"] = cluster_object.value("CLROUTE")
        force = next((obj for obj in chain if obj.value("PROXYSUB") == "FORCE"), None)
        blocking = tuple(obj for obj in chain if obj.value("WILDCARD") == "BLOCK")
        resolved = ResolvedTopic(
            topic_str=topic,
            admin=admin.name if admin is not None else BASE_TOPIC_NAME,
            attrs=MappingProxyType(attrs),
            cluster_object=cluster_object,
            force_object=force,
            blocking=blocking,
        )
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[topic] = resolved
        return resolved

    def clustered_objects(self) -> list[TopicObject]:
        """Objects with a non-blank CLUSTER, sorted by TOPICSTR."""
        found = [obj for obj in self._by_str.values() if obj.value("CLUSTER") != ""]
        return sorted(found, key=lambda obj: obj.topic_str)

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name


__all__ = [
    "ASPARENT",
    "BASE_TOPIC",
    "BASE_TOPIC_NAME",
    "ResolvedTopic",
    "TopicObject",
    "TopicObjectError",
    "TopicObjectNotFound",
    "TopicObjects",
]
