"""What the SQLite store costs per persistent message, as it was (JSON headers, every change
written) against as it is, in one run.

Run: .venv/bin/python bench/bench_store.py [--messages N] [--batch B] [--rounds R] [--fsync]

Each measurement drives a real SqliteStore on a fresh file through what a node does for a
stream of persistent publications: per batch of B publications, ``message_added`` for every
copy (one per subscriber queue) and ``message_removed`` for every copy as it is delivered, with
a group commit after each (removals in the next group) or one for both (removals in the same
group: delivered, or confirmed by the peer, before the group was written, which is most of
them on a busy node). Properties are a small typical set (a string, an int32, a 64-bit int, a
float) shared by a publication's copies; bodies are 100 bytes.

Cases: 1 copy per publication (one durable subscriber, or one transmission queue) and 4 copies
(four subscriber queues), each with removals in the next group and in the same group. Each
case runs "former" (JSON headers, every change written) and "binary" (binary headers, a
message added and removed within one group never written), alternated within a round (the
order flips each round); figures are medians over the rounds. Printed per case, in µs per
publication: process CPU time (encode, collect, SQLite's inserts and deletes), wall time, and
the CPU time to load (read and decode) the rows of a full file; the header sizes are printed
first. Without --fsync commits use synchronous=OFF, so the figures show the CPU the store
spends rather than the disk's flush latency (which a group shares and which is the same for
both forms).

Asserts nothing about speed; the machine may be shared, so compare only figures of one run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from qmgr.core.message import Message  # noqa: E402
from qmgr.core.values import Int32, Properties  # noqa: E402
from qmgr.store.codec import (  # noqa: E402
    encode_header,
    encode_json_header,
    encode_json_properties,
)
from qmgr.store.sqlite import _SQL, Op, SqliteStore  # noqa: E402


class FormerStore(SqliteStore):
    """The store as it was before the binary form: headers as JSON text, and every change of
    a group written (runs of one kind batched with executemany)."""

    _last_json: tuple[object, list[list[Any]]] = (None, [])

    def _header(self, msg: Message) -> bytes:
        if msg.properties is not self._last_json[0]:  # as before: shared by the copies
            self._last_json = (msg.properties, encode_json_properties(msg.properties))
        # TEXT: SQLite keeps it as text and it is read back as str, like an old row
        return encode_json_header(msg, self._last_json[1])  # type: ignore[return-value]

    def message_added(self, queue: str, msg: Message) -> None:
        self.append("add", (msg.sequence, queue, msg.message_id, msg.body, self._header(msg)))

    def commit(self, ops: list[Op]) -> None:
        if not ops:
            return
        c = self._conn
        c.execute("BEGIN")
        i = 0
        while i < len(ops):
            kind = ops[i][0]
            j = i
            while j < len(ops) and ops[j][0] == kind:
                j += 1
            c.executemany(_SQL[kind], [args for _, args in ops[i:j]])
            i = j
        c.execute("COMMIT")


def publications(n: int) -> list[Message]:
    out = []
    for i in range(n):
        props: Properties = {
            "app": "orders",
            "n": Int32(i % 1000),
            "id": 10**12 + i,
            "amount": 12.5,
        }
        out.append(
            Message(
                f"{i:024x}",
                bytes(100),
                props,
                True,
                4,
                put_time=1.7e9 + i,
                correl_id=b"c" * 24,
                topic="Bench/orders/eu",
            )
        )
    return out


def copies_of(pubs: list[Message], fanout: int, first_seq: int) -> list[list[tuple[str, Message]]]:
    seq = first_seq
    out = []
    for pub in pubs:
        row = []
        for q in range(fanout):
            seq += 1
            row.append((f"SUBQ.{q}", pub.copy(sequence=seq, sub_user_data=f"user{q}")))
        out.append(row)
    return out


def run_once(
    make: Callable[[Path], SqliteStore],
    pubs: list[list[tuple[str, Message]]],
    batch: int,
    fsync: bool,
    same_group: bool,
) -> tuple[float, float, float, int]:
    """(cpu µs per publication, wall µs per publication, load cpu µs per publication, header size)"""
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        store = make(Path(tmp))
        store.load()
        if not fsync:
            store._conn.execute("PRAGMA synchronous=OFF")
            store._full = True  # keep the store from switching it back
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for start in range(0, len(pubs), batch):
            chunk = pubs[start : start + batch]
            for row in chunk:
                for queue, msg in row:
                    store.message_added(queue, msg)
            if not same_group:
                store.commit(store.take()[0])
            for row in chunk:
                for queue, msg in row:
                    store.message_removed(queue, msg)
            store.commit(store.take()[0])
        cpu = (time.process_time() - cpu0) / len(pubs) * 1e6
        wall = (time.perf_counter() - wall0) / len(pubs) * 1e6
        # a full file: every copy still on its queue, then loaded as a restart would
        for row in pubs:
            for queue, msg in row:
                store.message_added(queue, msg)
        ops = store.take()[0]
        size = len(ops[0][1][4])
        store.commit(ops)
        store.close()
        again = make(Path(tmp))
        t0 = time.process_time()
        loaded = again.load()
        load = (time.process_time() - t0) / len(pubs) * 1e6
        assert len(loaded.messages) == sum(len(r) for r in pubs)
        again.close()
    return cpu, wall, load, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20_000, help="publications per run")
    parser.add_argument("--batch", type=int, default=100, help="publications per commit")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--fsync", action="store_true", help="commits flush (synchronous=FULL)")
    args = parser.parse_args()
    pubs = publications(args.messages)
    sample = copies_of(pubs[:1], 1, 0)[0][0][1]
    print(
        f"store cost per publication: {args.messages:,} publications, batches of {args.batch}, "
        f"{args.rounds} rounds, {'fsync' if args.fsync else 'synchronous=OFF'}; headers "
        f"{len(encode_json_header(sample))} B JSON, {len(encode_header(sample))} B binary"
    )
    makers: dict[str, Callable[[Path], SqliteStore]] = {
        "former": FormerStore,
        "binary": SqliteStore,
    }
    cases = [
        (1, False, "1 copy, removed in the next group"),
        (1, True, "1 copy, removed in the same group"),
        (4, False, "4 copies, removed in the next group"),
        (4, True, "4 copies, removed in the same group"),
    ]
    for fanout, same_group, label in cases:
        rows = copies_of(pubs, fanout, 0)
        figures: dict[str, list[tuple[float, float, float, int]]] = {k: [] for k in makers}
        for r in range(args.rounds):
            order = list(makers) if r % 2 == 0 else list(reversed(makers))
            for name in order:
                figures[name].append(
                    run_once(makers[name], rows, args.batch, args.fsync, same_group)
                )
        print(f"{label} (µs per publication: add, commit, remove):")
        med = {}
        for name, runs in figures.items():
            cpu, wall, load = (statistics.median(f[i] for f in runs) for i in range(3))
            med[name] = (cpu, wall, load)
            print(f"  {name:7s} cpu {cpu:6.2f}  wall {wall:6.2f}  load {load:6.2f}")
        f, b = med["former"], med["binary"]
        print(
            f"  binary/former: cpu {b[0] / f[0]:.2f}x  wall {b[1] / f[1]:.2f}x  "
            f"load {b[2] / f[2]:.2f}x"
        )


if __name__ == "__main__":
    main()
