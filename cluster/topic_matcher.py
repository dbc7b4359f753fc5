"""TopicMatcher: subscription patterns in a trie over topic levels (pure).

Each trie node has one child per next level, keyed by the level text; a level that is exactly
``+`` or ``#`` keys the wildcard child (a literal level such as ``a#`` is just another key).
Matching a topic walks the trie level by level keeping the set of live nodes, like an automaton:
cost depends on the topic's depth and on the branches that match, not on how many patterns are
stored. Patterns are not validated here; callers validate subscription strings first.

Bounded work: each level visits each live node once, so a match costs at most O(trie nodes ×
topic levels). A pattern contributes at most one live node until its first ``#`` and at most
one per level of the rest, so patterns with more than ``deep_levels`` (32) levels after their
first ``#`` are kept out of the trie (``#/a/a/a/…`` would keep one live node per ``a``) and
matched one by one, greedily (``_LevelGlob``): the runs of levels between two ``#`` have a
fixed length, so each is taken at its leftmost place after the previous one (the last one
anchored at the end), found with ``str.find`` over the topic's levels. ``#/#/#/…``,
``#/+/#/+/…`` and ``#/a/a/a/…`` subscriptions then cost about O(topic length).
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


DEEP_LEVELS = 32


class _Levels:
    """A topic's levels encoded once for ``_LevelGlob``: ``/l0/l1/…/ln-1/``, where every
    level starts after a '/' at ``bounds[i]`` (levels never contain '/')."""

    __slots__ = ("text", "bounds", "index", "count")

    def __init__(self, topic: str) -> None:
        parts = topic.split(SEPARATOR)
        self.text = SEPARATOR + topic + SEPARATOR
        self.count = len(parts)
        bounds = [0]
        for part in parts:
            bounds.append(bounds[-1] + len(part) + 1)
        self.bounds = bounds
        self.index = {position: level for level, position in enumerate(bounds)}


class _Run:
    """A fixed-length run of pattern levels between two ``#``: literal pieces at level offsets
    (each encoded as ``/x/y/``) with ``+`` levels between them."""

    __slots__ = ("length", "pieces", "anchor")

    def __init__(self, levels: list[str]) -> None:
        self.length = len(levels)
        pieces: list[tuple[int, int, str]] = []  # (level offset, level count, encoded text)
        start = 0
        for i in range(len(levels) + 1):
            if i == len(levels) or levels[i] == SINGLE_LEVEL:
                if i > start:
                    text = SEPARATOR + SEPARATOR.join(levels[start:i]) + SEPARATOR
                    pieces.append((start, i - start, text))
                start = i + 1
        self.pieces = tuple(pieces)
        self.anchor = max(range(len(pieces)), key=lambda k: len(pieces[k][2]), default=0)

    def at(self, topic: _Levels, level: int) -> bool:
        bounds = topic.bounds
        return all(topic.text.startswith(text, bounds[level + off]) for off, _, text in self.pieces)

    def find(self, topic: _Levels, level: int, end: int) -> int:
        """The first level >= ``level`` where the run matches, ending at or before ``end``."""
        last = end - self.length
        if last < level:
            return -1
        if not self.pieces:
            return level
        offset, count, text = self.pieces[self.anchor]
        stop = topic.bounds[last + offset + count] + 1
        while True:
            found = topic.text.find(text, topic.bounds[level + offset], stop)
            if found < 0:
                return -1
            start = topic.index[found] - offset
            if self.at(topic, start):
                return start
            level = start + 1


class _LevelGlob:
    """One pattern matched greedily: runs separated by ``#`` (see the module docstring)."""

    __slots__ = ("runs",)

    def __init__(self, pattern: str) -> None:
        runs: list[list[str]] = [[]]
        for level in pattern.split(SEPARATOR):
            if level == MULTI_LEVEL:
                runs.append([])
            else:
                runs[-1].append(level)
        self.runs = tuple(_Run(run) for run in runs)

    def matches(self, topic: _Levels) -> bool:
        first = self.runs[0]
        if len(self.runs) == 1:
            return topic.count == first.length and first.at(topic, 0)
        last = self.runs[-1]
        end = topic.count - last.length
        if end < first.length or not first.at(topic, 0):
            return False
        level = first.length
        for run in self.runs[1:-1]:
            start = run.find(topic, level, end)
            if start < 0:
                return False
            level = start + run.length
        return last.at(topic, end)


class TopicMatcher(Generic[K]):
    """Maps subscription patterns to keys; ``match(topic)`` finds every key whose pattern matches.

    Several keys may share one pattern, and one key may be stored under several patterns.
    """

    def __init__(self, deep_levels: int = DEEP_LEVELS) -> None:
        self._root: _Node[K] = _Node(False)
        self._by_pattern: dict[str, set[K]] = {}
        self._deep: dict[str, _LevelGlob] = {}  # patterns matched one by one (not in the trie)
        self._deep_levels = deep_levels
        self._count = 0

    def _is_deep(self, levels: list[str]) -> bool:
        """More than ``deep_levels`` levels after the first ``#`` (before it, a pattern keeps at
        most one live node in the trie; from it on, up to one per level)."""
        if len(levels) <= self._deep_levels or MULTI_LEVEL not in levels:
            return False
        return len(levels) - levels.index(MULTI_LEVEL) - 1 > self._deep_levels

    def add(self, pattern: str, key: K) -> None:
        """Store ``key`` under ``pattern`` (no effect if the pair is already stored)."""
        keys = self._by_pattern.get(pattern)
        if keys is not None:
            if key not in keys:
                keys.add(key)
                self._count += 1
            return
        keys = {key}
        self._by_pattern[pattern] = keys
        self._count += 1
        levels = pattern.split(SEPARATOR)
        if self._is_deep(levels):
            self._deep[pattern] = _LevelGlob(pattern)
            return
        node = self._root
        for level in levels:
            child = node.children.get(level)
            if child is None:
                child = _Node(level == MULTI_LEVEL)
                node.children[level] = child
            node = child
        node.keys = keys

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
        if self._deep.pop(pattern, None) is not None:
            return True
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
        result: set[K] = set()
        if self._deep:
            levels = _Levels(topic)
            for pattern, glob in self._deep.items():
                if glob.matches(levels):
                    result.update(self._by_pattern[pattern])
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
                return result
            states = nxt
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
        self._deep.clear()
        self._count = 0

    def __len__(self) -> int:
        """Number of stored (pattern, key) pairs."""
        return self._count

    def __repr__(self) -> str:
        return f"TopicMatcher({self._count} pairs, {len(self._by_pattern)} patterns)"
