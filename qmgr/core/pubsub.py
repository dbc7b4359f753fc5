"""Local publish/subscribe: matching publications to subscriptions and delivering copies.

Rules (IBM MQ, single queue manager):
- a publication is delivered once to every subscription whose topic string matches it
  (``#``/``+`` wildcards), carrying MQTopicString (and MQSubUserData when the subscription has
  USERDATA);
- PUB(DISABLED) on the resolved topic rejects the publication (MQRC_PUT_INHIBITED), SUB(DISABLED)
  rejects new subscriptions (MQRC_SUB_INHIBITED), a durable subscription needs DURSUB(YES);
- persistence and priority "as default" resolve from DEFPSIST and DEFPRTY of the topic;
- a copy that cannot be put is handled by PMSGDLV / NPMSGDLV: ALL fails the whole publication if
  any copy fails, ALLDUR if a copy to a durable subscription fails, ALLAVAIL never; USEDLQ(YES)
  tries the dead-letter queue first. Nothing is delivered when the publication fails;
- WILDCARD(BLOCK) on an administered topic keeps wildcard subscriptions made above it from
  receiving its publications;
- WSCHEMA(CHAR) subscriptions match the full topic string character by character (``*`` any
  characters including ``/``, ``?`` one character, ``%`` escapes; ``cluster.char_wildcards``).
  The level trie cannot hold them, so they are kept in their own list and scanned once per
  distinct publication topic (the result is cached with the trie's until subscriptions change):
  the cost is O(number of character-wildcard subscriptions) per new topic string. For WILDCARD
  (BLOCK) a character-wildcard subscription counts as the topic pattern that covers it (the
  level of its first ``*``/``?`` becomes ``#``);
- a subscription with a SELECTOR receives only the publications its selector is TRUE for
  (``qmgr.core.selection``);
- one retained publication is kept per topic string; a new subscription receives the retained
  copies of the topics it matches first, flagged MQIsRetained, unless it asked for new
  publications only. Only persistent retained publications survive a restart;
- a retained publication a topic host sends for a new proxy subscription (``receive_retained``)
  is kept here as this queue manager's retained copy and goes only to the matching
  subscriptions that do not have it yet: none when the same publication (MessageId) is already
  retained here (they got it then), never to one made with new publications only.

Per-topic publication statistics (DISPLAY TPSTATUS NUMPUBS, LPUBDATE/LPUBTIME) are bounded in
the spirit of MQ's TREELIFE, which removes unused non-administrative topic nodes: once more than
``TOPIC_STATS_LIMIT`` topic strings have counters, those of topics with no subscription and no
retained publication are dropped; if more than ``TOPIC_STATS_HARD_LIMIT`` remain, the least
recently published are dropped too.

Each delivered copy keeps the publication's MessageId; CorrelId is the subscription's DESTCORL
or SUBID, priority follows PUBPRTY (ASPUB keeps the publication's).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cluster.char_wildcards import char_as_topic_pattern, char_matches, has_char_wildcard
from cluster.topics import (
    ResolvedTopic,
    TopicMatcher,
    TopicObjects,
    TopicStringError,
    is_wildcard,
    levels,
    topic_matches,
    validate_publish_topic,
)
from qmgr.core.errors import MQError
from qmgr.core.journal import Journal
from qmgr.core.message import Message, SharedEncoding
from qmgr.core.queue import LocalQueue
from qmgr.core.selection import selects
from qmgr.core.subscription import Subscription, SubscriptionStats

TOPIC_STATS_LIMIT = 10_000
TOPIC_STATS_HARD_LIMIT = 100_000


@dataclass(frozen=True)
class TopicPolicy:
    """What a publication on one topic string needs to know, resolved once and cached."""

    pub_enabled: bool
    defpsist: bool
    defprty: int
    pmsgdlv: str
    npmsgdlv: str
    usedlq: bool
    resolved: ResolvedTopic
    blocks_wildcards: bool = False  # some topic object above has WILDCARD(BLOCK)


def fixed_depth(pattern: str) -> int:
    """Number of leading levels of a subscription pattern before its first wildcard level."""
    n = 0
    for level in levels(pattern):
        if level in ("#", "+"):
            break
        n += 1
    return n


def fixed_prefix(pattern: str) -> str:
    return "/".join(levels(pattern)[: fixed_depth(pattern)])


class PubSub:
    def __init__(
        self,
        topics: TopicObjects,
        queues: dict[str, LocalQueue],
        journal: Journal,
        next_sequence: Callable[[], int],
    ) -> None:
        self.topics = topics
        self._queues = queues
        self._journal = journal
        self._next_sequence = next_sequence
        self.subs: dict[str, Subscription] = {}
        self.by_id: dict[str, str] = {}
        self.stats: dict[str, SubscriptionStats] = {}
        self._matcher: TopicMatcher[str] = TopicMatcher()
        self._char_subs: dict[str, str] = {}  # WSCHEMA(CHAR) subscription name -> pattern
        self.retained: dict[str, Message] = {}
        self.new_only: set[str] = set()  # subscriptions made with new publications only
        self._policies: dict[str, TopicPolicy] = {}
        self._matches: dict[str, list[Subscription]] = {}
        # topic string -> its policy and subscriptions: one lookup for each publication
        self._routes: dict[str, tuple[TopicPolicy, list[Subscription]]] = {}
        self.pub_counts: dict[str, int] = {}
        self.last_pub: dict[str, float] = {}
        self._stats_bound = TOPIC_STATS_LIMIT  # prune the counters when they pass this
        self.dead_letter_queue: Callable[[], LocalQueue | None] = lambda: None
        # Told of every subscription added ("add") or removed ("remove"), e.g. for proxies.
        self.listener: Callable[[str, Subscription], None] | None = None

    def _tell(self, change: str, sub: Subscription) -> None:
        if self.listener is not None:
            self.listener(change, sub)

    # -- topic policy ---------------------------------------------------------------------

    def topics_changed(self) -> None:
        """Forget cached resolutions after a topic object was defined, altered or deleted."""
        self._policies.clear()
        self._forget_matches()

    def _forget_matches(self) -> None:
        self._matches.clear()
        self._routes.clear()

    def _route(self, topic: str) -> tuple[TopicPolicy, list[Subscription]]:
        """The policy and subscriptions of a publication topic, cached until either changes."""
        route = self._routes.get(topic)
        if route is None:
            route = (self.policy(topic), self.subscribers(topic))
            if len(self._routes) > 100_000:
                self._routes.clear()
            self._routes[topic] = route
        return route

    def policy(self, topic: str) -> TopicPolicy:
        """The resolved policy of a (valid) publication topic, cached until topics change."""
        cached = self._policies.get(topic)
        if cached is not None:
            return cached
        self.validate_topic(topic)
        r = self.topics.resolve(topic)
        policy = TopicPolicy(
            pub_enabled=r["PUB"] == "ENABLED",
            defpsist=r["DEFPSIST"] == "YES",
            defprty=int(r["DEFPRTY"]),
            pmsgdlv=r["PMSGDLV"],
            npmsgdlv=r["NPMSGDLV"],
            usedlq=r["USEDLQ"] == "YES",
            resolved=r,
            blocks_wildcards=bool(r.blocking),
        )
        if len(self._policies) > 100_000:
            self._policies.clear()
        self._policies[topic] = policy
        return policy

    # -- subscriptions ---------------------------------------------------------------------

    def check_subscribe(self, topic: str, durable: bool, wschema: str = "TOPIC") -> ResolvedTopic:
        """Raise the MQ error a subscription to ``topic`` would meet; return the resolved
        attributes of its topic (e.g. MDURMDL/MNDURMDL, the models of its managed queue).
        A WSCHEMA(CHAR) pattern resolves at the levels before its first ``*``/``?``."""
        if wschema == "CHAR":
            covering = char_as_topic_pattern(topic)
            r = self.topics.resolve(
                fixed_prefix(covering) if has_char_wildcard(topic) else covering
            )
        else:
            r = self.topics.resolve(fixed_prefix(topic) if is_wildcard(topic) else topic)
        if r["SUB"] != "ENABLED":
            raise MQError("MQRC_SUB_INHIBITED", f"subscriptions to '{topic}' are SUB(DISABLED)")
        if durable and r["DURSUB"] != "YES":
            raise MQError(
                "MQRC_DURABILITY_NOT_ALLOWED",
                f"durable subscriptions to '{topic}' need DURSUB(YES)",
            )
        return r

    def add(self, sub: Subscription, now: float, *, new_publications_only: bool = False) -> int:
        """Register ``sub``; deliver matching retained publications; return how many."""
        self._forget_matches()
        self.subs[sub.name] = sub
        self.by_id[sub.sub_id] = sub.name
        self.stats.setdefault(sub.name, SubscriptionStats(resumed=now))
        self._index(sub)
        if sub.durable:
            self._journal.object_saved("sub", sub.name, sub.to_dict())
        if new_publications_only:
            self.new_only.add(sub.name)
        self._tell("add", sub)
        if new_publications_only:
            return 0
        return self.deliver_retained(sub, now)

    def replace(self, sub: Subscription) -> None:
        self._forget_matches()
        old = self.subs[sub.name]
        self._unindex(old)
        self.subs[sub.name] = sub
        self._index(sub)
        if sub.durable:
            self._journal.object_saved("sub", sub.name, sub.to_dict())
        self._tell("remove", old)
        self._tell("add", sub)

    def restore(self, sub: Subscription, now: float) -> None:
        self._forget_matches()
        self.subs[sub.name] = sub
        self.by_id[sub.sub_id] = sub.name
        self.stats[sub.name] = SubscriptionStats(resumed=now)
        self._index(sub)
        self._tell("add", sub)

    def remove(self, name: str) -> Subscription:
        self._forget_matches()
        sub = self.subs.pop(name)
        self.new_only.discard(name)
        self.by_id.pop(sub.sub_id, None)
        self.stats.pop(name, None)
        self._unindex(sub)
        if sub.durable:
            self._journal.object_deleted("sub", name)
        self._tell("remove", sub)
        return sub

    def _index(self, sub: Subscription) -> None:
        if sub.wschema == "CHAR":
            self._char_subs[sub.name] = sub.topic_str
        else:
            self._matcher.add(sub.topic_str, sub.name)

    def _unindex(self, sub: Subscription) -> None:
        if sub.wschema == "CHAR":
            self._char_subs.pop(sub.name, None)
        else:
            self._matcher.discard(sub.topic_str, sub.name)

    @staticmethod
    def sub_matches(sub: Subscription, topic: str) -> bool:
        """True if ``sub`` (either wildcard scheme) matches publication ``topic``."""
        if sub.wschema == "CHAR":
            return char_matches(sub.topic_str, topic)
        return topic_matches(sub.topic_str, topic)

    def deliver_retained(self, sub: Subscription, now: float) -> int:
        n = 0
        for topic, msg in list(self.retained.items()):
            n += self._give_retained(sub, topic, msg, now)
        return n

    def _give_retained(self, sub: Subscription, topic: str, msg: Message, now: float) -> int:
        if not (
            self.sub_matches(sub, topic)
            and not self._blocked(sub, topic)
            and selects(sub.selector, msg)
        ):
            return 0
        copy = self._copy_for(sub, msg, topic, now, self._shared(msg))
        copy.retained = True
        queue = self._queues.get(sub.dest)
        if queue is None:
            return 0
        try:
            queue.put(copy, now)
        except MQError:
            return 0
        return 1

    def receive_retained(self, topic: str, msg: Message, now: float) -> int:
        """A retained publication sent by a topic host because a proxy subscription was made
        (rules in the module docstring); returns the copies delivered."""
        self.validate_topic(topic)
        held = self.retained.get(topic)
        if held is not None and held.message_id == msg.message_id:
            return 0
        self._retain(topic, msg)
        n = 0
        for sub in self.subscribers(topic):
            if sub.name not in self.new_only:
                n += self._give_retained(sub, topic, msg, now)
        return n

    def subscribers(self, topic: str) -> list[Subscription]:
        """The subscriptions matching a publication topic (cached until subscriptions change)."""
        subs = self._matches.get(topic)
        if subs is None:
            subs = self.matching(topic)
            if len(self._matches) > 100_000:
                self._forget_matches()
            self._matches[topic] = subs
        return subs

    def matching(self, topic: str) -> list[Subscription]:
        found = [self.subs[name] for name in self._matcher.match(topic)]
        if self._char_subs:
            found.extend(
                self.subs[name]
                for name, pattern in self._char_subs.items()
                if char_matches(pattern, topic)
            )
        return found

    # -- publish ---------------------------------------------------------------------------

    def validate_topic(self, topic: str) -> None:
        try:
            validate_publish_topic(topic)
        except TopicStringError as exc:
            raise MQError("MQRC_TOPIC_STRING_ERROR", str(exc)) from exc

    def open_policy(self, topic: str) -> TopicPolicy:
        """The policy of a topic an application publishes to, which must be PUB(ENABLED)."""
        policy = self.policy(topic)
        if not policy.pub_enabled:
            raise MQError("MQRC_PUT_INHIBITED", f"publications to '{topic}' are PUB(DISABLED)")
        return policy

    def publish(self, topic: str, msg: Message, now: float, *, retain: bool = False) -> int:
        """Deliver ``msg`` (already prepared) to every matching local subscription; returns the
        number of copies delivered."""
        policy, subs = self._route(topic)
        queues = self._queues
        blocks = policy.blocks_wildcards
        plan: list[tuple[LocalQueue, Message, Subscription]] = []
        failures: list[tuple[Subscription, Message, MQError]] = []
        # copies planned per destination queue, counted only when several subscriptions
        # could share one (a queue's depth check must see them all)
        planned: dict[str, int] | None = None
        shared = None  # a single copy has nothing to share
        if len(subs) > 1:
            planned = {}
            shared = self._shared(msg)
        for sub in subs:
            if blocks and self._blocked(sub, topic, policy):
                continue
            if sub.selector and not selects(sub.selector, msg):
                continue
            copy = self._copy_for(sub, msg, topic, now, shared)
            queue = queues.get(sub.dest)
            try:
                if queue is None:
                    raise MQError("MQRC_UNKNOWN_OBJECT_NAME", f"queue {sub.dest} does not exist")
                if planned is None:
                    queue.check_put(copy)
                else:
                    queue.check_put(copy, 1 + planned.get(sub.dest, 0))
            except MQError as exc:
                # without its traceback: the traceback holds this frame, which holds
                # ``failures``; that cycle would keep every refused copy until a full GC
                failures.append((sub, copy, exc.with_traceback(None)))
                continue
            plan.append((queue, copy, sub))
            if planned is not None:
                planned[sub.dest] = planned.get(sub.dest, 0) + 1
        if failures:
            plan.extend(self._handle_failures(failures, msg, policy))
        stats_of = self.stats
        for queue, copy, sub in plan:
            queue.put(copy, now, check=False)
            stats = stats_of.get(sub.name)
            if stats is not None:
                stats.num_msgs += 1
                stats.last_msg = now
        if retain:
            self._retain(topic, msg)
        self.pub_counts[topic] = self.pub_counts.get(topic, 0) + 1
        self.last_pub[topic] = now
        if len(self.pub_counts) > self._stats_bound:
            self.prune_topic_stats()
        return len(plan)

    def publish_run(
        self, topic: str, msgs: Sequence[Message], now: float
    ) -> tuple[int, int, MQError | None]:
        """Publish ``msgs`` (prepared, none retained) to ``topic`` in order, each as
        ``publish`` would. Returns how many were published, the copies delivered, and the
        error that stopped the run at the first publication that could not be (None when
        all were). A topic with one subscription and no selector, the common case of a
        stream of publications, is routed once for the whole run."""
        policy, subs = self._route(topic)
        if not subs or not msgs:
            self._count_run(topic, None, len(msgs), now)
            return len(msgs), 0, None
        sub = subs[0] if len(subs) == 1 else None
        queue = self._queues.get(sub.dest) if sub is not None else None
        if (
            sub is None
            or queue is None
            or sub.selector
            or (policy.blocks_wildcards and self._blocked(sub, topic, policy))
        ):
            return self._publish_each(topic, msgs, now)
        if not queue.fits(len(msgs), max(len(m.body) for m in msgs)):
            # one at a time: ``publish`` applies the topic's rules to each refused copy
            return self._publish_each(topic, msgs, now)
        priority = sub.copy_priority
        correl_id = sub.correl_id
        userdata = sub.userdata
        next_sequence = self._next_sequence
        queue.put_run(
            [
                Message(
                    msg.message_id,
                    msg.body,
                    msg.properties,
                    msg.persistent,
                    msg.priority if priority < 0 else priority,
                    msg.ttl,
                    msg.expiry,
                    correl_id,
                    now,
                    0,
                    msg.reply_to_queue,
                    topic,
                    userdata,
                    False,
                    next_sequence(),
                )
                for msg in msgs
            ],
            now,
        )
        self._count_run(topic, sub, len(msgs), now)
        return len(msgs), len(msgs), None

    def _publish_each(
        self, topic: str, msgs: Sequence[Message], now: float
    ) -> tuple[int, int, MQError | None]:
        copies = 0
        for i, msg in enumerate(msgs):
            try:
                copies += self.publish(topic, msg, now)
            except MQError as exc:
                return i, copies, exc.with_traceback(None)
        return len(msgs), copies, None

    def _count_run(self, topic: str, sub: Subscription | None, n: int, now: float) -> None:
        """The statistics of ``n`` publications to ``topic`` delivered to ``sub`` alone (to
        no subscription: None)."""
        if not n:
            return
        stats = self.stats.get(sub.name) if sub is not None else None
        if stats is not None:
            stats.num_msgs += n
            stats.last_msg = now
        self.pub_counts[topic] = self.pub_counts.get(topic, 0) + n
        self.last_pub[topic] = now
        if len(self.pub_counts) > self._stats_bound:
            self.prune_topic_stats()

    def prune_topic_stats(self) -> None:
        """Drop the counters of unused topic strings (see the module docstring); the next
        pruning happens when the counters have doubled, so its cost is spread thin."""
        for topic in list(self.pub_counts):
            if topic not in self.retained and not self.matching(topic):
                del self.pub_counts[topic]
                self.last_pub.pop(topic, None)
        if len(self.pub_counts) > TOPIC_STATS_HARD_LIMIT:
            by_age = sorted(self.last_pub, key=self.last_pub.__getitem__)
            for topic in by_age[: len(by_age) - TOPIC_STATS_HARD_LIMIT // 2]:
                del self.pub_counts[topic]
                del self.last_pub[topic]
        self._stats_bound = max(TOPIC_STATS_LIMIT, 2 * len(self.pub_counts))

    def _handle_failures(
        self,
        failures: list[tuple[Subscription, Message, MQError]],
        msg: Message,
        policy: TopicPolicy,
    ) -> list[tuple[LocalQueue, Message, Subscription]]:
        rule = policy.pmsgdlv if msg.persistent else policy.npmsgdlv
        rescued: list[tuple[LocalQueue, Message, Subscription]] = []
        for sub, copy, exc in failures:
            dlq = self.dead_letter_queue() if policy.usedlq else None
            if dlq is not None:
                try:
                    dlq.check_put(copy, 1 + sum(1 for q, _, _ in rescued if q is dlq))
                    rescued.append((dlq, copy, sub))
                    continue
                except MQError:
                    pass
            if rule == "ALL" or (rule == "ALLDUR" and sub.durable):
                raise MQError(
                    "MQRC_PUBLICATION_FAILURE",
                    f"publication not delivered to subscription {sub.name}: {exc.text}",
                ) from exc
        return rescued

    def _blocked(self, sub: Subscription, topic: str, policy: TopicPolicy | None = None) -> bool:
        pattern = sub.topic_str
        if sub.wschema == "CHAR":
            if not has_char_wildcard(pattern):  # ``#``, ``+`` are plain characters here
                return False
            pattern = char_as_topic_pattern(pattern)
        if not is_wildcard(pattern):
            return False
        return (policy or self.policy(topic)).resolved.wildcard_blocked(pattern)

    def _copy_for(
        self,
        sub: Subscription,
        msg: Message,
        topic: str,
        now: float,
        shared: SharedEncoding | None,
    ) -> Message:
        """The copy put on the subscriber's queue (sharing the publication's encoding cell
        ``shared`` with its other copies, when it has others). As MQ documents for a publication a queue
        manager forwards to a subscriber, PutDate/PutTime are when it puts the copy there (so
        on the destination queue manager, the copy's arrival), not the publisher's put."""
        priority = sub.copy_priority
        if priority < 0:
            priority = msg.priority
        return Message(
            msg.message_id,
            msg.body,
            msg.properties,
            msg.persistent,
            priority,
            msg.ttl,
            msg.expiry,
            sub.correl_id,
            now,
            0,
            msg.reply_to_queue,
            topic,
            sub.userdata,
            False,
            self._next_sequence(),
            shared,
        )

    @staticmethod
    def _shared(msg: Message) -> SharedEncoding:
        """The encoding cell the copies of ``msg`` share."""
        shared = msg.shared
        if shared is None:
            shared = msg.shared = SharedEncoding()
        return shared

    def _retain(self, topic: str, msg: Message) -> None:
        old = self.retained.get(topic)
        kept = msg.copy(topic=topic)
        self.retained[topic] = kept
        if kept.persistent:
            self._journal.retained_saved(topic, kept)
        elif old is not None and old.persistent:
            self._journal.retained_deleted(topic)

    def clear_retained(self, topic: str) -> bool:
        old = self.retained.pop(topic, None)
        if old is not None and old.persistent:
            self._journal.retained_deleted(topic)
        return old is not None
