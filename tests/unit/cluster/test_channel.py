"""The channel protocol state machine (cluster/channel.py): exactly-once delivery of persistent
items across reconnects, crashes of either end and re-drive to another host."""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cluster.channel import (
    NO_KEY,
    ChannelReceiver,
    ChannelSender,
    Key,
    Remove,
    Send,
    StatusChange,
    Verdict,
    legacy_qmid,
)
from cluster.records import ChannelStatus

HOSTS = ("R1", "R2")


@dataclass(eq=False)
class It:
    """A persistent publication item on a transmission queue."""

    key: Key
    pid: int
    sent: bool = False
    poison: bool = False
    durable: bool = True

    @property
    def persistent(self) -> bool:
        return self.durable

    @property
    def counts(self) -> bool:
        return True


@dataclass
class Store:
    """What a node has on disk, and the changes journaled since its last commit."""

    data: dict[str, object] = field(default_factory=dict)
    journal: list[tuple[str, object]] = field(default_factory=list)
    position: int = 0
    committed_position: int = 0

    def write(self, key: str, value: object) -> None:
        self.journal.append((key, value))
        self.position += 1

    def commit(self) -> int:
        for key, value in self.journal:
            if value is None:
                self.data.pop(key, None)
            else:
                self.data[key] = value
        self.journal.clear()
        self.committed_position = self.position
        return self.position

    def crash(self) -> None:
        self.journal.clear()
        self.position = self.committed_position


class Sender:
    """A node publishing persistent items to two topic hosts, as outbound.py drives it."""

    def __init__(self, qmid: str = "S_1") -> None:
        self.qmid = qmid
        self.store = Store()
        self.epoch = 1
        self.seq = 0
        self.channels: dict[str, ChannelSender[It]] = {}
        self.acknowledged: set[int] = set()  # publications whose put was committed
        self.unconfirmed: list[int] = []
        self._restore()

    def _restore(self) -> None:
        self.channels = {h: ChannelSender(batch=3, window=6) for h in HOSTS}
        for host, ch in self.channels.items():
            items = [
                It(tuple(v[0]), v[1])  # type: ignore[index,arg-type]
                for k, v in self.store.data.items()
                if k.startswith(f"xmitq/{host}/")
            ]
            mark = self.store.data.get(f"mark/{host}", NO_KEY)
            ch.restore(items, mark)  # type: ignore[arg-type]

    def next_key(self) -> Key:
        self.seq += 1
        return (self.epoch, self.seq)

    def add(self, host: str, item: It) -> None:
        self.store.write(f"xmitq/{host}/{item.key}", (item.key, item.pid))
        self.channels[host].enqueue(item)

    def publish(self, host: str, pid: int) -> None:
        self.add(host, It(self.next_key(), pid))
        self.unconfirmed.append(pid)

    def publish_np(self, host: str, pid: int) -> None:
        self.channels[host].enqueue(It(self.next_key(), pid, durable=False))

    def remove(self, host: str, action: Remove[It] | StatusChange | None) -> None:
        if isinstance(action, Remove):
            for item in action.items:
                if item.durable:
                    self.store.write(f"xmitq/{host}/{item.key}", None)

    def redrive(self, dead: str) -> None:
        """The channel to ``dead`` failed: its never-sent items go to the other host."""
        other = next(h for h in HOSTS if h != dead)
        for item in self.channels[dead].take_unsent(lambda i: i.durable):
            self.store.write(f"xmitq/{dead}/{item.key}", None)
            self.add(other, It(self.next_key(), item.pid))

    def commit(self) -> None:
        self.store.commit()
        self.acknowledged.update(self.unconfirmed)
        self.unconfirmed.clear()

    def crash(self) -> None:
        self.store.crash()
        self.unconfirmed.clear()
        self.epoch += 1
        self.seq = 0
        self._restore()


class Receiver:
    """A topic host: Peer service + agent.receive, delivering each publication once."""

    def __init__(self) -> None:
        self.store = Store()
        self.rx = ChannelReceiver()
        self.delivered_memory: list[int] = []
        self.puts = 0  # every delivery is a new message on a queue, even of the same item

    def hello(self, qmid: str, name: str) -> Key:
        # (the node also commits everything first; the machine is safe without it)
        key, forgotten = self.rx.hello(qmid, name, "addr")
        for old in forgotten:
            self.store.write(f"state/{old}", None)
        return key

    def apply(self, qmid: str, items: list[tuple[Key, int, bool, bool]]) -> tuple[Key, int]:
        durable = False
        for key, pid, poison, persistent in items:
            verdict = self.rx.offer(qmid, key, "MQRC_PRIORITY_ERROR" if poison else None)
            if verdict is Verdict.DUPLICATE:
                continue
            if not persistent:
                self.delivered_memory.append(pid)
            elif verdict is Verdict.DEAD_LETTER:
                self.store.write(f"dlq/{pid}", pid)
            else:
                # numbered, so an item delivered twice under the same key is seen twice
                self.puts += 1
                self.store.write(f"delivered/{pid}/{qmid}/{key}/{self.puts}", pid)
            durable = durable or persistent
            self.rx.done(qmid, key)
        state = self.rx.peers[qmid]
        if not durable:  # a non-persistent batch: nothing stored, no commit to wait for
            return self.rx.batch_end(qmid, None), 0
        self.store.write(f"state/{qmid}", (state.name, state.applied))
        return self.rx.batch_end(qmid, self.store.position), self.store.position

    def commit(self) -> int:
        position = self.store.commit()
        self.rx.committed(position)
        return position

    def crash(self) -> None:
        self.store.crash()
        self.rx = ChannelReceiver()
        for key, value in self.store.data.items():
            if key.startswith("state/"):
                name, applied = value  # type: ignore[misc]
                self.rx.load(key[len("state/") :], name, "addr", applied)

    def delivered(self) -> list[int]:
        return [v for k, v in self.store.data.items() if k.startswith("delivered/")]  # type: ignore[misc]


@dataclass
class Link:
    """One connection from the sender to a host: batches held until the sender's commit,
    batches on the wire, acknowledgements waiting for the host's commit, acks on the wire."""

    up: bool = False
    held: list[list[tuple[Key, int, bool, bool]]] = field(default_factory=list)
    wire: deque[list[tuple[Key, int, bool, bool]]] = field(default_factory=deque)
    waiting: list[tuple[int, Key]] = field(default_factory=list)
    acks: deque[Key] = field(default_factory=deque)
    stale: deque[list[tuple[Key, int, bool, bool]]] = field(default_factory=deque)


class World:
    def __init__(self) -> None:
        self.sender = Sender()
        self.hosts = {h: Receiver() for h in HOSTS}
        self.links = {h: Link() for h in HOSTS}
        self.pid = 0

    def drop(self, host: str) -> None:
        link = self.links[host]
        # batches already on the wire may still be processed by the host (a stale stream), even
        # after the sender crashed: they left before it
        link.stale.extend(link.wire)
        # batches held for the sender's commit are dropped with the connection, and the
        # channel may connect again before that commit: in the node the driver waits for the
        # commit before it reconnects, unless the wait fails (a store failure), and the machine
        # must be safe either way
        self.links[host] = Link(stale=link.stale)

    def step(self, op: str, host: str) -> None:
        s, link, r = self.sender, self.links[host], self.hosts[host]
        ch = s.channels[host]
        if op == "publish":
            self.pid += 1
            s.publish(host, self.pid)
        elif op == "publish_np":
            self.pid += 1
            s.publish_np(host, self.pid)
        elif op == "connect" and not link.up:
            link.up = True
            for action in ch.hello_answer(r.hello(s.qmid, "S")):
                s.remove(host, action)
        elif op == "pump" and link.up:
            send = ch.next_send()
            if isinstance(send, Send):
                batch = [(i.key, i.pid, i.poison, i.durable) for i in send.items]
                if send.sent_mark is not None:
                    s.store.write(f"mark/{host}", send.sent_mark)
                if send.sent_mark is not None or link.held:
                    # waits for the commit; the driver sends batches in order, so one
                    # queued behind a held batch waits too
                    link.held.append(batch)
                else:
                    link.wire.append(batch)
        elif op == "sender_commit":
            s.commit()
            for h, lk in self.links.items():
                lk.wire.extend(lk.held)
                lk.held.clear()
                del h
        elif op == "deliver" and link.wire:
            key, position = r.apply(s.qmid, link.wire.popleft())
            link.waiting.append((position, key))
        elif op == "deliver_stale" and link.stale:
            r.apply(s.qmid, link.stale.popleft())
        elif op == "receiver_commit":
            position = r.commit()
            link.acks.extend(k for p, k in link.waiting if p <= position)
            link.waiting = [(p, k) for p, k in link.waiting if p > position]
        elif op == "ack" and link.acks:
            s.remove(host, ch.ack(link.acks.popleft()))
        elif op == "send":  # a batch goes all the way to the host
            for sub in ("pump", "sender_commit", "deliver"):
                self.step(sub, host)
        elif op == "lose":
            self.drop(host)
            ch.lost("connection lost")
            s.redrive(host)

    def crash(self, who: str) -> None:
        if who == "sender":
            self.sender.crash()
            for h in HOSTS:
                self.drop(h)
        elif who in self.hosts:
            self.hosts[who].crash()
            self.links[who] = Link()

    def check_at_most_once(self) -> None:
        counts = Counter(p for r in self.hosts.values() for p in r.delivered())
        assert not [p for p, n in counts.items() if n > 1], f"duplicates: {counts}"

    def heal(self) -> None:
        for _ in range(200):
            for h in HOSTS:
                for op in ("connect", "pump", "sender_commit", "deliver", "receiver_commit"):
                    self.step(op, h)
                while self.links[h].acks:
                    self.step("ack", h)
            if all(not ch.depth for ch in self.sender.channels.values()):
                break
        self.sender.commit()


OPS = st.sampled_from(
    [
        "publish",
        "publish",
        "publish_np",
        "connect",
        "pump",
        "pump",
        "sender_commit",
        "deliver",
        "deliver_stale",
        "receiver_commit",
        "ack",
        "lose",
        "send",
        "send",
    ]
)
CRASH = st.sampled_from([None] * 12 + ["sender", "R1", "R2"])


# Found by this test: a batch waiting for the sender's commit of its sent mark is dropped with
# its connection (``lose``: in the node, the wait failed, e.g. a store failure, and the channel
# reconnected); sent again after the reconnect, it used to leave at once (the mark was already
# at its top in memory) while the mark and the re-drive of its items from R1 were still
# uncommitted. The sender crashes, the batch reaches R2 anyway (it was on the wire before the
# crash), and after the restart the items are back on R1's queue as never sent.
REDRIVE_RESENT_BEFORE_COMMIT: list[tuple[str, str, str | None]] = [
    *[("publish", "R1", None)] * 12,
    ("connect", "R2", None),
    ("sender_commit", "R1", None),
    ("lose", "R1", None),
    ("pump", "R2", None),
    ("lose", "R2", None),
    ("connect", "R2", None),
    ("pump", "R2", "sender"),
    ("deliver_stale", "R2", None),
]

# Found by this test too (a loss): publications re-driven from R1 to R2 are committed on R2's
# queue; R2's channel fails and they are re-driven back to R1 (journaled, not committed); after
# the reconnect a non-persistent item with a higher key used to leave without waiting for any
# commit, and R2 committed its key. The sender crashes: the publications are back on R2's queue
# as never sent, with keys below what R2 announces, and its hello answer removed them.
REDRIVE_REMOVAL_OVERTAKEN: list[tuple[str, str, str | None]] = [
    *[("publish", "R1", None)] * 13,
    ("lose", "R1", None),
    ("publish_np", "R2", None),
    ("sender_commit", "R1", None),
    ("lose", "R2", None),
    ("connect", "R2", None),
    ("pump", "R2", None),
    ("deliver", "R2", "sender"),
]


@settings(max_examples=800, deadline=None)
@given(steps=st.lists(st.tuples(OPS, st.sampled_from(HOSTS), CRASH), min_size=20, max_size=80))
@example(steps=REDRIVE_RESENT_BEFORE_COMMIT)
@example(steps=REDRIVE_REMOVAL_OVERTAKEN)
def test_exactly_once_across_reconnects_crashes_and_redrive(
    steps: list[tuple[str, str, str | None]],
) -> None:
    """Whatever the interleaving, with a crash (loss of everything not committed) possible
    between any two steps: no publication is ever delivered twice (an item sent before a crash
    is in doubt and never re-driven to the other host; a host announces only committed keys),
    and once everything is connected again, every publication whose put was committed is
    delivered exactly once."""
    world = World()
    for op, host, crash in steps:
        world.step(op, host)
        world.check_at_most_once()
        if crash is not None:
            world.crash(crash)
            world.check_at_most_once()
    world.heal()
    world.check_at_most_once()
    delivered = Counter(p for r in world.hosts.values() for p in r.delivered())
    missing = world.sender.acknowledged - set(delivered)
    assert not missing, f"acknowledged but never delivered: {sorted(missing)}"


def test_a_non_persistent_batch_does_not_announce_an_uncommitted_persistent_one() -> None:
    world = World()
    for op in ("publish", "connect", "send", "publish_np", "send", "lose", "connect"):
        world.step(op, "R1")
    world.step("sender_commit", "R1")  # the sender took the hello answer as committed
    world.crash("R1")  # the persistent publication was applied on R1, not committed
    world.heal()
    delivered = [p for r in world.hosts.values() for p in r.delivered()]
    assert delivered == [1]


# ------------------------------------------------------------------ sender


def test_restored_items_at_or_below_the_sent_mark_are_in_doubt_and_not_taken() -> None:
    ch: ChannelSender[It] = ChannelSender()
    ch.restore([It((1, 3), 3), It((1, 1), 1), It((1, 2), 2)], (1, 2))
    assert [i.sent for i in ch.pending] == [True, True, False]
    assert ch.in_doubt
    assert [i.pid for i in ch.take_unsent(lambda i: True)] == [3]
    assert [i.pid for i in ch.pending] == [1, 2]


def test_restored_items_leave_before_items_queued_by_the_new_incarnation() -> None:
    """A restarted node may queue new items (its epoch's keys) before its transmission queue
    is restored; the restored items (an earlier epoch) still go first, so the receiver, which
    drops a key not above the highest it applied, never takes them for duplicates."""
    ch: ChannelSender[It] = ChannelSender()
    ch.enqueue(It((2, 1), 21))
    ch.restore([It((1, 4), 14), It((1, 5), 15)], (1, 4))
    ch.hello_answer((1, 3))
    send = ch.next_send()
    assert send is not None and [i.pid for i in send.items] == [14, 15, 21]
    rx = ChannelReceiver()
    rx.hello("S_1", "S", "")
    assert [rx.offer("S_1", i.key, None) for i in send.items] == [Verdict.DELIVER] * 3


def test_a_transmission_queue_is_not_restored_once_a_batch_left() -> None:
    """Restored keys are below everything sent since the restart: queued behind such a batch
    they would reach a receiver that drops them as duplicates (acknowledged, then lost)."""
    ch: ChannelSender[It] = ChannelSender()
    ch.enqueue(It((2, 1), 21))
    ch.hello_answer(NO_KEY)
    assert ch.next_send() is not None
    with pytest.raises(RuntimeError):
        ch.restore([It((1, 4), 14)], (1, 3))
    rx = ChannelReceiver()
    rx.hello("S_1", "S", "")
    rx.done("S_1", (2, 1))
    assert rx.offer("S_1", (1, 4), None) is Verdict.DUPLICATE  # why it must not be


def test_sent_mark_only_for_batches_that_go_beyond_it() -> None:
    ch: ChannelSender[It] = ChannelSender(batch=2)
    assert ch.next_send() is None  # not connected
    for n in range(1, 4):
        ch.enqueue(It((1, n), n))
    ch.hello_answer(NO_KEY)
    first = ch.next_send()
    assert first is not None and first.sent_mark == (1, 2)
    assert [i.pid for i in first.items] == [1, 2]
    ch.lost("gone")
    assert ch.status is ChannelStatus.RETRYING and ch.reason == "gone"
    actions = ch.hello_answer((1, 1))  # the receiver committed 1
    assert isinstance(actions[0], Remove) and [i.pid for i in actions[0].items] == [1]
    again = ch.next_send()
    assert again is not None and [i.pid for i in again.items] == [2, 3]
    assert again.sent_mark == (1, 3)
    again2 = ch.ack((1, 3))
    assert again2 is not None and ch.depth == 0 and ch.acked == 3


def test_a_batch_sent_again_after_a_reconnect_carries_the_sent_mark_again() -> None:
    """The mark handed out on a lost connection may never have been committed (the driver's
    wait for it failed): the batch sent again waits for it to be stored, only once per
    connection, and never with a mark lower than one handed out before."""
    ch: ChannelSender[It] = ChannelSender(batch=2)
    for n in range(1, 6):
        ch.enqueue(It((1, n), n))
    ch.hello_answer(NO_KEY)
    first = ch.next_send()
    assert first is not None and first.sent_mark == (1, 2)
    second = ch.next_send()
    assert second is not None and second.sent_mark == (1, 4)
    ch.lost("gone")  # the driver never got to commit (1, 4) nor send the second batch
    ch.hello_answer(NO_KEY)
    again = ch.next_send()
    assert again is not None and [i.pid for i in again.items] == [1, 2]
    assert again.sent_mark == (1, 4)
    again2 = ch.next_send()
    assert again2 is not None and [i.pid for i in again2.items] == [3, 4]
    assert again2.sent_mark is None  # (1, 4) is stored before the first batch leaves
    last = ch.next_send()
    assert last is not None and last.sent_mark == (1, 5)


def test_a_restored_mark_needs_no_storing_again() -> None:
    ch: ChannelSender[It] = ChannelSender(batch=2)
    ch.restore([It((1, 1), 1), It((1, 2), 2), It((1, 3), 3)], (1, 2))
    ch.hello_answer(NO_KEY)
    again = ch.next_send()
    assert again is not None and [i.pid for i in again.items] == [1, 2]
    assert again.sent_mark is None
    new = ch.next_send()
    assert new is not None and new.sent_mark == (1, 3)
    ch.lost("gone")
    ch.hello_answer((1, 1))
    resent = ch.next_send()
    assert resent is not None and [i.pid for i in resent.items] == [2, 3]
    assert resent.sent_mark == (1, 3)


def test_after_items_were_taken_off_the_next_batch_waits_for_a_commit() -> None:
    """The removal of never-sent items must be committed before a higher key leaves (the
    receiver only remembers its highest key), even in a batch of non-persistent items, and
    again on every later connection (its commit may have failed)."""
    ch: ChannelSender[It] = ChannelSender(batch=2)
    ch.enqueue(It((1, 1), 1))
    ch.enqueue(It((1, 2), 2, durable=False))
    ch.enqueue(It((1, 3), 3, durable=False))
    assert [i.pid for i in ch.take_unsent(lambda i: i.persistent)] == [1]
    ch.hello_answer(NO_KEY)
    first = ch.next_send()
    assert first is not None and [i.pid for i in first.items] == [2, 3]
    assert first.sent_mark == (1, 3)
    ch.enqueue(It((1, 4), 4, durable=False))
    later = ch.next_send()
    assert later is not None and later.sent_mark is None
    ch.lost("gone")
    ch.hello_answer((1, 3))
    again = ch.next_send()
    assert again is not None and [i.pid for i in again.items] == [4]
    assert again.sent_mark == (1, 4)


def test_non_persistent_items_alone_need_no_commit() -> None:
    ch: ChannelSender[It] = ChannelSender(batch=2)
    for n in range(1, 4):
        ch.enqueue(It((1, n), n, durable=False))
    assert ch.take_unsent(lambda i: i.pid == 3) != []  # not stored: nothing to commit
    ch.hello_answer(NO_KEY)
    send = ch.next_send()
    assert send is not None and send.sent_mark is None


def test_window_limits_items_in_flight() -> None:
    ch: ChannelSender[It] = ChannelSender(batch=2, window=2)
    for n in range(1, 6):
        ch.enqueue(It((1, n), n))
    ch.hello_answer(NO_KEY)
    assert ch.next_send() is not None
    assert ch.next_send() is None
    ch.ack((1, 2))
    assert ch.next_send() is not None


def test_maxdepth_counts_publications() -> None:
    ch: ChannelSender[It] = ChannelSender(maxdepth=2)
    ch.enqueue(It((1, 1), 1))
    assert not ch.full
    ch.enqueue(It((1, 2), 2))
    assert ch.full
    taken = ch.take_unsent(lambda i: i.pid == 2)
    assert not ch.full
    ch.put_back(taken)
    assert ch.full
    ch.hello_answer((1, 1))
    assert not ch.full and ch.depth == 1


def test_status_changes_are_reported_once_per_reason() -> None:
    ch: ChannelSender[It] = ChannelSender()
    assert ch.lost("refused") == StatusChange(ChannelStatus.RETRYING, "refused")
    assert ch.lost("refused") is None
    assert ch.lost("timeout") == StatusChange(ChannelStatus.RETRYING, "timeout")
    assert ch.stopped("bad") == StatusChange(ChannelStatus.STOPPED, "bad")
    assert StatusChange(ChannelStatus.RUNNING, "bad") in ch.hello_answer(NO_KEY)


def test_the_last_error_is_shown_until_the_channel_makes_progress() -> None:
    ch: ChannelSender[It] = ChannelSender()
    ch.hello_answer(NO_KEY)
    ch.enqueue(It((1, 1), 1))
    assert ch.next_send() is not None
    ch.lost("MQRC_PUT_INHIBITED")
    # reconnected, the same item fails again: the reason stays visible while RUNNING
    assert StatusChange(ChannelStatus.RUNNING, "MQRC_PUT_INHIBITED") in ch.hello_answer(NO_KEY)
    assert ch.reason == "MQRC_PUT_INHIBITED"
    assert ch.next_send() is not None
    ch.ack((1, 1))
    assert ch.reason == "" and ch.status is ChannelStatus.RUNNING
    # a hello that acknowledges what was in doubt is progress too
    ch.enqueue(It((1, 2), 2))
    ch.next_send()
    ch.lost("timeout")
    assert StatusChange(ChannelStatus.RUNNING, "") in ch.hello_answer((1, 2))


# ------------------------------------------------------------------ receiver


def test_hello_answers_the_committed_key_not_the_applied_one() -> None:
    rx = ChannelReceiver()
    assert rx.hello("S_1", "S", "a") == (NO_KEY, [])
    for n in (1, 2):
        assert rx.offer("S_1", (1, n), None) is Verdict.DELIVER
        rx.done("S_1", (1, n))
    assert rx.batch_end("S_1", 5) == (1, 2)
    assert rx.hello("S_1", "S", "a")[0] == NO_KEY  # applied, not committed
    rx.committed(4)
    assert rx.hello("S_1", "S", "a")[0] == NO_KEY
    rx.committed(5)
    assert rx.hello("S_1", "S", "a")[0] == (1, 2)
    assert rx.offer("S_1", (1, 2), None) is Verdict.DUPLICATE


def test_a_batch_that_changed_nothing_durable_commits_after_what_came_before() -> None:
    rx = ChannelReceiver()
    rx.hello("S_1", "S", "a")
    rx.done("S_1", (1, 1))
    assert rx.batch_end("S_1", None) == (1, 1)  # nothing before it: committed at once
    assert rx.peers["S_1"].committed == (1, 1)
    rx.done("S_1", (1, 2))
    rx.batch_end("S_1", 7)  # persistent: waits for position 7
    rx.done("S_1", (1, 3))
    rx.batch_end("S_1", None)  # non-persistent after it: waits for the same position
    assert rx.peers["S_1"].committed == (1, 1)
    assert len(rx.peers["S_1"].uncommitted) == 1
    rx.committed(7)
    assert rx.peers["S_1"].committed == (1, 3) and not rx.peers["S_1"].uncommitted


def test_a_new_qmid_for_a_known_name_starts_afresh() -> None:
    """A member re-created with an empty store (new QMID, keys from (1, 1) again) is not taken
    for a replay of the old one."""
    rx = ChannelReceiver()
    rx.load("S_old", "S", "a", (7, 900))
    assert rx.offer("S_old", (1, 1), None) is Verdict.DUPLICATE
    key, forgotten = rx.hello("S_new", "S", "b")
    assert key == NO_KEY and forgotten == ["S_old"]
    assert rx.offer("S_new", (1, 1), None) is Verdict.DELIVER
    assert set(rx.peers) == {"S_new"}
    assert rx.by_name("S") is rx.peers["S_new"]


def test_state_stored_by_name_only_is_adopted_by_the_first_qmid() -> None:
    rx = ChannelReceiver()
    rx.load(legacy_qmid("S"), "S", "a", (3, 10))
    key, forgotten = rx.hello("S_1", "S", "a")
    assert key == (3, 10) and forgotten == [legacy_qmid("S")]
    assert rx.offer("S_1", (3, 10), None) is Verdict.DUPLICATE


def test_poison_item_is_dead_lettered_and_the_batch_advances_per_item() -> None:
    """A batch (1, 2=poison, 3) fails after item 1 once; resent, item 1 is a duplicate, item 2
    goes to the dead-letter queue, item 3 is delivered: nothing is delivered twice."""
    r = Receiver()
    r.hello("S_1", "S")
    assert r.rx.offer("S_1", (1, 1), None) is Verdict.DELIVER
    r.rx.done("S_1", (1, 1))  # ... and the delivery of item 2 failed: the stream ended
    r.rx.batch_end("S_1", r.store.position)
    r.apply("S_1", [((1, 1), 1, False, True), ((1, 2), 2, True, True), ((1, 3), 3, False, True)])
    r.commit()
    assert sorted(k for k in r.store.data if not k.startswith("state/")) == [
        "delivered/3/S_1/(1, 3)/1",
        "dlq/2",
    ]
    assert r.rx.peers["S_1"].committed == (1, 3)


def test_stopped_channel_sends_nothing_keeps_in_doubt_items_and_resumes_after_start() -> None:
    ch: ChannelSender[It] = ChannelSender(batch=2)
    for n in range(1, 4):
        ch.enqueue(It((1, n), n))
    ch.hello_answer(NO_KEY)
    first = ch.next_send()
    assert first is not None and [i.pid for i in first.items] == [1, 2]
    assert ch.stopped("operator") == StatusChange(ChannelStatus.STOPPED, "operator")
    assert ch.next_send() is None and ch.depth == 3 and ch.in_doubt
    # the never-sent item may be re-driven, the in-doubt ones wait for the host
    assert [i.pid for i in ch.take_unsent(lambda i: True)] == [3]
    assert ch.started() == StatusChange(ChannelStatus.INACTIVE, "")
    assert ch.next_send() is None  # not connected yet
    actions = ch.hello_answer((1, 1))  # the receiver had committed 1
    assert isinstance(actions[0], Remove) and [i.pid for i in actions[0].items] == [1]
    again = ch.next_send()
    assert again is not None and [i.pid for i in again.items] == [2]
