"""Benchmark: TopicMatcher.match against a naive scan of every pattern, in the same run.

Run with ``.venv/bin/python bench/bench_topics.py``. For 10, 1,000 and 100,000 subscriptions
(a mix of exact strings, '+' and '#' patterns) it prints matches per second for the trie and for
the scan, and their ratio. Figures vary from run to run; compare the ratios.

Then pathological subscriptions (``#/#/#/…``, ``#/+/#/+/…``, ``#/a/a/…``, ``#/a/+/a/+/…``,
near the 10,240 character limit) against a 5,000-level topic: milliseconds per match.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cluster.topics import TopicMatcher, topic_matches  # noqa: E402

SIZES = (10, 1_000, 100_000)
MIN_SECONDS = 0.5


def make_patterns(count: int, rng: random.Random) -> list[str]:
    """Roughly 70% exact, 20% with '+', 10% with '#', over a 4-level tree."""
    patterns = []
    for _ in range(count):
        parts = [
            f"region{rng.randrange(20)}",
            f"site{rng.randrange(50)}",
            f"device{rng.randrange(200)}",
            f"metric{rng.randrange(10)}",
        ]
        roll = rng.random()
        if roll < 0.2:
            parts[rng.randrange(1, 4)] = "+"
        elif roll < 0.3:
            cut = rng.randrange(1, 4)
            parts = parts[:cut] + ["#"]
        patterns.append("/".join(parts))
    return patterns


def make_topics(count: int, rng: random.Random) -> list[str]:
    return [
        f"region{rng.randrange(20)}/site{rng.randrange(50)}/"
        f"device{rng.randrange(200)}/metric{rng.randrange(10)}"
        for _ in range(count)
    ]


def rate(fn: Callable[[str], object], topics: list[str]) -> tuple[float, int]:
    """Matches per second: run over ``topics`` repeatedly until MIN_SECONDS have passed."""
    done = 0
    start = time.perf_counter()
    while True:
        for topic in topics:
            fn(topic)
        done += len(topics)
        elapsed = time.perf_counter() - start
        if elapsed >= MIN_SECONDS:
            return done / elapsed, done


def main() -> None:
    rng = random.Random(42)
    print(f"{'subs':>8} {'trie match/s':>14} {'scan match/s':>14} {'ratio':>9}  avg hits")
    for size in SIZES:
        patterns = make_patterns(size, rng)
        matcher: TopicMatcher[int] = TopicMatcher()
        for key, pattern in enumerate(patterns):
            matcher.add(pattern, key)
        pairs = list(enumerate(patterns))

        def scan(topic: str, pairs: list[tuple[int, str]] = pairs) -> set[int]:
            return {key for key, pattern in pairs if topic_matches(pattern, topic)}

        topics = make_topics(2000, rng)
        for topic in topics[:20]:  # both must agree before they are timed
            assert matcher.match(topic) == scan(topic), topic
        hits = sum(len(matcher.match(t)) for t in topics) / len(topics)
        trie_rate, _ = rate(matcher.match, topics)
        scan_topics = topics if size <= 1_000 else topics[:5]
        scan_rate, _ = rate(scan, scan_topics)
        print(
            f"{size:>8,} {trie_rate:>14,.0f} {scan_rate:>14,.0f} "
            f"{trie_rate / scan_rate:>8,.1f}x  {hits:.2f}"
        )

    pathological()


def pathological() -> None:
    print("\npathological subscription, one match against a 5,000-level topic:")
    topic = "/".join(["a"] * 5000)
    cases = {
        "#/#/#/... (5,000 levels)": "/".join(["#"] * 5000),
        "#/+/#/+/... (5,000 levels)": "/".join(["#", "+"] * 2500),
        "a/#/a/#/... (5,000 levels)": "/".join(["a", "#"] * 2500),
        "#/a/a/a/... (5,000 levels)": "/".join(["#"] + ["a"] * 4999),
        "#/a/+/a/+/... (5,000 levels)": "/".join(["#"] + ["a", "+"] * 2499 + ["a"]),
    }
    for name, pattern in cases.items():
        matcher: TopicMatcher[int] = TopicMatcher()
        matcher.add(pattern, 1)
        matcher.add("#", 2)
        start = time.perf_counter()
        found = matcher.match(topic)
        elapsed = time.perf_counter() - start
        assert found == {1, 2}, name
        print(f"  {name:<30} {elapsed * 1000:>10,.1f} ms")


if __name__ == "__main__":
    main()
