"""TopicMatcher: subscription patterns in a trie over topic levels (pure).

Each trie node has one child per next level, keyed by the level text; a level that is exactly
``+`` or ``#`` keys the wildcard child (a literal level such as ``a#`` is just another key).
Matching a topic walks the trie level by level keeping the set of live nodes, like an automaton:
cost depends on the topic's depth and on the branches that match, not on how many patterns are
stored. Patterns are not validated here; callers validate subscription strings first.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

from cluster.topic_strings import MULTI_LEVEL, SEPARATOR, SINGLE_LEVEL

K = TypeVar("K", bound=Hashable)


class _Node(Generic[K]):
    __slots__ = ("children", "keys", "is_hash")

    def __init__(self, is_hash: bool) -> None:
        self.children: dict[str, _Node[K]] = {}
        self.keys: set[K] | None = None
        self.is_hash = is_hash  # reached through a '#' edge: may absorb further levels


def _with_closure(node: _Node[K], out: set[_Node[K]]) -> None:
    """Add ``node`` and, for each ``#`` child chain, the nodes where ``#`` matches no level."""
    while node not in out:
        out.add(node)
        nxt = node.children.get(MULTI_LEVEL)
        if nxt is None:
            return
        node = nxt


class TopicMatcher(Generic[K]):
    """Maps subscription patterns to keys; ``match(topic)`` finds every key whose pattern matches.

    Several keys may share one pattern, and one key may be stored under several patterns.
    """

    def __init__(self) -> None:
        self._root: _Node[K] = _Node(False)
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
                child = _Node(level == MULTI_LEVEL)
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
        states: set[_Node[K]] = set()
        _with_closure(self._root, states)
        for level in topic.split(SEPARATOR):
            nxt: set[_Node[K]] = set()
            for node in states:
                children = node.children
                if children:
                    child = children.get(level)
                    if child is not None:
                        _with_closure(child, nxt)
                    child = children.get(SINGLE_LEVEL)
                    if child is not None:
                        _with_closure(child, nxt)
                if node.is_hash:
                    nxt.add(node)  # '#' absorbs this level too
            if not nxt:
                return set()
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
        self._root = _Node(False)
        self._by_pattern.clear()
        self._count = 0

    def __len__(self) -> int:
        """Number of stored (pattern, key) pairs."""
        return self._count

    def __repr__(self) -> str:
        return f"TopicMatcher({self._count} pairs, {len(self._by_pattern)} patterns)"
