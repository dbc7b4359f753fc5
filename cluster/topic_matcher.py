"""TopicMatcher: subscription patterns in a trie over topic levels (pure).

Each trie node has one child per next level, keyed by the level text; a level that is exactly
``+`` or ``#`` keys the wildcard child (a literal level such as ``a#`` is just another key).
Matching a topic walks the trie level by level keeping the set of live nodes, like an automaton:
cost depends on the topic's depth and on the branches that match, not on how many patterns are
stored. Patterns are not validated here; callers validate subscription strings first.

Bounded work: each level visits each live node once, so a match costs at most O(trie nodes ×
topic levels). Live nodes that can no longer make a difference are dropped: once a ``#`` node is
live it stays live (it absorbs any further levels), so every ancestor reaching it through a
pass-through chain (one child, no pattern ending there) is *dominated*: whatever that ancestor
could still match, the ``#`` node matches too. Dominated nodes are dropped for the rest of the
match and the closure over ``#`` chains stops at them, so ``#/#/#/…`` and ``#/+/#/+/…``
subscriptions cost O(trie nodes + topic levels) instead of their product.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

from cluster.topic_strings import MULTI_LEVEL, SEPARATOR, SINGLE_LEVEL

K = TypeVar("K", bound=Hashable)


class _Node(Generic[K]):
    __slots__ = ("children", "keys", "is_hash", "parent")

    def __init__(self, is_hash: bool, parent: _Node[K] | None) -> None:
        self.children: dict[str, _Node[K]] = {}
        self.keys: set[K] | None = None
        self.is_hash = is_hash  # reached through a '#' edge: may absorb further levels
        self.parent = parent


def _with_closure(node: _Node[K], out: set[_Node[K]], dominated: set[_Node[K]]) -> None:
    """Add ``node`` and, for each ``#`` child chain, the nodes where ``#`` matches no level.

    A ``#`` node entering the live set marks the ancestors it dominates. The chain below a
    dominated node leads only to dominated nodes or to the live ``#`` node that dominates them,
    so the walk stops there.
    """
    while node not in out and node not in dominated:
        out.add(node)
        if node.is_hash:
            _dominate(node, dominated)
        nxt = node.children.get(MULTI_LEVEL)
        if nxt is None:
            return
        node = nxt


def _dominate(node: _Node[K], dominated: set[_Node[K]]) -> None:
    """Mark the pass-through ancestors of the live ``#`` node ``node`` as dominated.

    A dominated node stays dominated for the whole match (its dominator stays live, or is itself
    dominated by a deeper live ``#`` node), so each trie node is marked at most once per match.
    """
    parent = node.parent
    while (
        parent is not None
        and parent not in dominated
        and len(parent.children) == 1
        and not parent.keys
    ):
        dominated.add(parent)
        parent = parent.parent


class TopicMatcher(Generic[K]):
    """Maps subscription patterns to keys; ``match(topic)`` finds every key whose pattern matches.

    Several keys may share one pattern, and one key may be stored under several patterns.
    """

    def __init__(self) -> None:
        self._root: _Node[K] = _Node(False, None)
        self._by_pattern: dict[str, set[K]] = {}
        self._count = 0

    def add(self, pattern: str, key: K) -> None:
        """Store ``key`` under ``pattern`` (no effect if the pair is already stored)."""
        keys = self._by_pattern.get(pattern)
        if keys is not None:
            if key not in keys:
                keys.add(key)
                self._count += 1
            return
        node = self._root
        for level in pattern.split(SEPARATOR):
            child = node.children.get(level)
            if child is None:
                child = _Node(level == MULTI_LEVEL, node)
                node.children[level] = child
            node = child
        keys = {key}
        node.keys = keys
        self._by_pattern[pattern] = keys
        self._count += 1

    def discard(self, pattern: str, key: K) -> bool:
        """Remove the pair; True if it was stored. Trie nodes left empty are pruned."""
        keys = self._by_pattern.get(pattern)
        if keys is None or key not in keys:
            return False
        keys.discard(key)
        self._count -= 1
        if keys:
            return True
        del self._by_pattern[pattern]
        path: list[tuple[_Node[K], str]] = []
        node = self._root
        for level in pattern.split(SEPARATOR):
            path.append((node, level))
            node = node.children[level]
        node.keys = None
        for parent, level in reversed(path):
            child = parent.children[level]
            if child.keys is not None or child.children:
                break
            del parent.children[level]
        return True

    def match(self, topic: str) -> set[K]:
        """Every key whose pattern matches ``topic`` (topic-based wildcard scheme)."""
        dominated: set[_Node[K]] = set()
        states: set[_Node[K]] = set()
        _with_closure(self._root, states, dominated)
        if dominated:
            states -= dominated
        for level in topic.split(SEPARATOR):
            marked = len(dominated)
            nxt: set[_Node[K]] = set()
            for node in states:
                children = node.children
                if children:
                    child = children.get(level)
                    if child is not None:
                        _with_closure(child, nxt, dominated)
                    child = children.get(SINGLE_LEVEL)
                    if child is not None:
                        _with_closure(child, nxt, dominated)
                if node.is_hash:
                    nxt.add(node)  # '#' absorbs this level too
            if not nxt:
                return set()
            if len(dominated) != marked:
                nxt -= dominated
            states = nxt
        result: set[K] = set()
        for node in states:
            if node.keys:
                result.update(node.keys)
        return result

    def keys_for(self, pattern: str) -> set[K]:
        """The keys stored under exactly ``pattern`` (a copy; empty if none)."""
        return set(self._by_pattern.get(pattern, ()))

    def has(self, pattern: str, key: K) -> bool:
        """True if ``key`` is stored under ``pattern``."""
        keys = self._by_pattern.get(pattern)
        return keys is not None and key in keys

    def patterns(self) -> set[str]:
        """Every pattern that has at least one key."""
        return set(self._by_pattern)

    def pairs(self) -> Iterator[tuple[str, K]]:
        """Every stored (pattern, key) pair, in no particular order."""
        for pattern, keys in self._by_pattern.items():
            for key in keys:
                yield pattern, key

    def node_count(self) -> int:
        """Number of trie nodes including the root (diagnostics: shows that pruning works)."""
        count = 0
        stack = [self._root]
        while stack:
            node = stack.pop()
            count += 1
            stack.extend(node.children.values())
        return count

    def clear(self) -> None:
        """Remove every pair."""
        self._root = _Node(False, None)
        self._by_pattern.clear()
        self._count = 0

    def __len__(self) -> int:
        """Number of stored (pattern, key) pairs."""
        return self._count

    def __repr__(self) -> str:
        return f"TopicMatcher({self._count} pairs, {len(self._by_pattern)} patterns)"
