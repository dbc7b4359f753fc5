"""The queue manager: queues, topic objects, subscriptions, publish, units of work.

All methods run on one thread (the node's event loop) and return at once; waiting is the
node's business (it is told through ``on_message`` when a queue gets a message).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from cluster.topics import (
    BASE_TOPIC_NAME,
    TopicObject,
    TopicObjectError,
    TopicObjects,
    TopicStringError,
    validate_subscription_topic,
)
from qmgr.core import limits
from qmgr.core.clock import Clock
from qmgr.core.errors import MQError
from qmgr.core.journal import Journal, NullJournal
from qmgr.core.message import Message
from qmgr.core.pubsub import PubSub
from qmgr.core.queue import DEFAULT_MODEL_MAXDEPTH, LocalQueue, QueueDef
from qmgr.core.subscription import Subscription

DEAD_LETTER_QUEUE = "SYSTEM.DEAD.LETTER.QUEUE"
DURABLE_MODEL = "SYSTEM.DURABLE.MODEL.QUEUE"
NDURABLE_MODEL = "SYSTEM.NDURABLE.MODEL.QUEUE"


def system_models() -> dict[str, QueueDef]:
    """The model queues every queue manager has: managed subscription queues are made from
    them (topic attributes MDURMDL and MNDURMDL name them). Their MAXDEPTH bounds what an
    unread subscription holds; a change made with ALTER QMODEL is stored."""
    return {
        DURABLE_MODEL: QueueDef(
            DURABLE_MODEL,
            descr="Model for managed queues of durable subscriptions",
            maxdepth=DEFAULT_MODEL_MAXDEPTH,
            defpsist=True,
            extra={"DEFTYPE": "PERMDYN"},
        ),
        NDURABLE_MODEL: QueueDef(
            NDURABLE_MODEL,
            descr="Model for managed queues of non-durable subscriptions",
            maxdepth=DEFAULT_MODEL_MAXDEPTH,
            extra={"DEFTYPE": "TEMPDYN"},
        ),
    }


@dataclass
class QmgrAttrs:
    """Queue manager attributes (DISPLAY QMGR / ALTER QMGR)."""

    descr: str = ""
    deadq: str = ""
    maxmsgl: int = 4_194_304
    psmode: str = "ENABLED"
    psclus: str = "ENABLED"
    treelife: int = 1800
    clwluseq: str = "LOCAL"
    clwlmruc: int = 999_999_999
    defclxq: str = "SCTQ"
    repos: str = ""
    extra: dict[str, str] = field(default_factory=dict)


@dataclass
class UnitOfWork:
    """Messages got under syncpoint, oldest first; ``owner`` is the connection (or stream)
    that opened it, empty for one not tied to a connection."""

    owner: str = ""
    got: deque[tuple[str, Message]] = field(default_factory=deque)


def managed_queue_name(sub_id: str, durable: bool) -> str:
    """The managed queue of subscription ``sub_id``: SYSTEM.MANAGED.DURABLE.<24 hex> (47
    characters) or SYSTEM.MANAGED.NDURABLE.<24 hex> (48), within MQ's 48-character object names.
    The hex is the id's epoch and the low 64 bits of its counter, unique on this queue manager."""
    kind = "DURABLE" if durable else "NDURABLE"
    return f"SYSTEM.MANAGED.{kind}.{sub_id[8:16]}{sub_id[-16:]}"


class QueueManager:
    def __init__(
        self,
        name: str,
        clock: Clock,
        journal: Journal | None = None,
        *,
        uid: str = "0" * 8,
        epoch: int = 0,
        first_sequence: int = 1,
    ) -> None:
        self.name = name
        self.clock = clock
        self.journal: Journal = journal or NullJournal()
        self.uid = uid[:8].rjust(8, "0")
        self.epoch = epoch
        self.qmid = f"{name}_{self.uid}"
        self.attrs = QmgrAttrs()
        self.queues: dict[str, LocalQueue] = {}
        self.models: dict[str, QueueDef] = system_models()  # QMODEL definitions
        self.topics = TopicObjects()
        self._seq = first_sequence - 1
        self._ids = 0
        self._id_prefix: str | None = None
        self.pubsub = PubSub(self.topics, self.queues, self.journal, self.next_sequence)
        self.pubsub.dead_letter_queue = lambda: self.queues.get(self.attrs.deadq)
        self.uows: dict[str, UnitOfWork] = {}
        self.on_message: Callable[[str], None] | None = None
        self.started = clock.now()

    # -- identifiers ------------------------------------------------------------------------

    def next_sequence(self) -> int:
        self._seq += 1
        return self._seq

    def new_id(self) -> str:
        """A 48-hex-character identifier unique to this queue manager across restarts."""
        self._ids += 1
        prefix = self._id_prefix
        if prefix is None:  # uid and epoch are fixed for the queue manager's life
            prefix = self._id_prefix = f"{self.uid}{self.epoch:08x}"
        return f"{prefix}{self._ids:032x}"

    # -- queues -----------------------------------------------------------------------------

    def queue(self, name: str) -> LocalQueue:
        q = self.queues.get(name)
        if q is None:
            raise MQError("MQRC_UNKNOWN_OBJECT_NAME", f"queue {name} does not exist")
        return q

    def define_queue(self, definition: QueueDef, *, replace: bool = False) -> LocalQueue:
        existing = self.queues.get(definition.name)
        if definition.name in self.models:
            raise MQError("MQRC_OBJECT_ALREADY_EXISTS", f"{definition.name} is a model queue")
        now = self.clock.now()
        if existing is not None:
            if not replace:
                raise MQError("MQRC_OBJECT_ALREADY_EXISTS", f"queue {definition.name} exists")
            existing.definition = definition.altered_with(
                created=existing.definition.created, altered=now
            )
            self.journal.object_saved("queue", definition.name, existing.definition.to_dict())
            return existing
        q = LocalQueue(definition.altered_with(created=now, altered=now), self.journal)
        q.on_put = self.on_message
        self.queues[definition.name] = q
        if not definition.temporary:
            self.journal.object_saved("queue", definition.name, q.definition.to_dict())
        return q

    def alter_queue(self, name: str, **changes: Any) -> LocalQueue:
        q = self.queue(name)
        q.definition = q.definition.altered_with(altered=self.clock.now(), **changes)
        self.journal.object_saved("queue", name, q.definition.to_dict())
        return q

    def delete_queue(self, name: str, *, purge: bool = False) -> None:
        q = self.queue(name)
        in_use = [s.name for s in self.pubsub.subs.values() if s.dest == name]
        if in_use:
            raise MQError("MQRC_OBJECT_IN_USE", f"queue {name} is used by subscription {in_use[0]}")
        if q.uncommitted:
            raise MQError("MQRC_OBJECT_IN_USE", f"queue {name} has uncommitted messages")
        if q.depth and not purge:
            raise MQError("MQRC_Q_NOT_EMPTY", f"queue {name} is not empty (use PURGE)")
        q.clear()
        del self.queues[name]
        self.journal.object_deleted("queue", name)

    def restore_queue(self, definition: QueueDef) -> LocalQueue:
        q = LocalQueue(definition, self.journal)
        q.on_put = self.on_message
        self.queues[definition.name] = q
        return q

    # -- model queues -----------------------------------------------------------------------

    def model(self, name: str) -> QueueDef:
        model = self.models.get(name)
        if model is None:
            raise MQError("MQRC_UNKNOWN_OBJECT_NAME", f"model queue {name} does not exist")
        return model

    def define_model(self, definition: QueueDef, *, replace: bool = False) -> QueueDef:
        if definition.name in self.queues:
            raise MQError("MQRC_OBJECT_ALREADY_EXISTS", f"{definition.name} is a local queue")
        existing = self.models.get(definition.name)
        if existing is not None and not replace:
            raise MQError("MQRC_OBJECT_ALREADY_EXISTS", f"model queue {definition.name} exists")
        now = self.clock.now()
        created = existing.created if existing is not None else now
        model = definition.altered_with(created=created, altered=now)
        return self._save_model(model)

    def alter_model(self, name: str, **changes: Any) -> QueueDef:
        return self._save_model(self.model(name).altered_with(altered=self.clock.now(), **changes))

    def _save_model(self, model: QueueDef) -> QueueDef:
        self.models[model.name] = model
        self.journal.object_saved("qmodel", model.name, model.to_dict())
        return model

    def delete_model(self, name: str) -> None:
        self.model(name)
        if name in system_models():
            raise MQError("MQRC_OBJECT_IN_USE", f"{name} is a system model queue")
        del self.models[name]
        self.journal.object_deleted("qmodel", name)

    def restore_model(self, definition: QueueDef) -> None:
        self.models[definition.name] = definition

    def set_message_listener(self, listener: Callable[[str], None]) -> None:
        self.on_message = listener
        for q in self.queues.values():
            q.on_put = listener

    # -- messages ---------------------------------------------------------------------------

    def accept(
        self, msg: Message, defpsist: bool, defprty: int, now: float | None = None
    ) -> Message:
        """Check and stamp a message arriving from an application: id, time, defaults, expiry.
        Priority and time to live out of MQ's ranges are refused (the last line of defence
        behind the edge's validation): nothing past here holds such a value. ``now``: the
        put time (the clock's when not given; a batch's messages may share one reading)."""
        priority = msg.priority
        if priority != limits.PRIORITY_AS_DEFAULT and not 0 <= priority <= limits.MAX_PRIORITY:
            limits.check_priority(priority)
        ttl = msg.ttl
        if ttl:  # 0 is unlimited; anything else (NaN included) is checked
            limits.check_ttl(ttl)
        size = len(msg.body)
        if size > self.attrs.maxmsgl:
            raise MQError(
                "MQRC_MSG_TOO_BIG_FOR_Q",
                f"message of {size} bytes exceeds the queue manager's MAXMSGL",
            )
        if now is None:
            now = self.clock.now()
        if not msg.message_id:
            msg.message_id = self.new_id()
        if msg.persistent is None:
            msg.persistent = defpsist
        if priority == limits.PRIORITY_AS_DEFAULT:
            msg.priority = defprty
        msg.put_time = now
        msg.expiry = now + ttl if ttl > 0 else None
        self._seq += 1
        msg.sequence = self._seq
        return msg

    def put(self, queue: str, msgs: list[Message]) -> list[Message]:
        """Put a batch on one queue: all or none."""
        q = self.queue(queue)
        d = q.definition
        for msg in msgs:
            self.accept(msg, d.defpsist, d.defprty)
        for i, msg in enumerate(msgs):
            q.check_put(msg, i + 1)
        now = self.clock.now()
        for msg in msgs:
            q.put(msg, now, check=False)
        return msgs

    def get(
        self,
        queue: str,
        *,
        unit_of_work: str = "",
        owner: str = "",
        message_id: str = "",
        correl_id: bytes = b"",
        limit: int = 1,
        size: Callable[[Message], int] | None = None,
        max_bytes: int = 0,
        first_max_bytes: int = 0,
    ) -> list[Message]:
        """Get up to ``limit`` messages (under syncpoint in ``unit_of_work`` when given, which
        then belongs to ``owner``). With ``size``, messages that would take the batch past
        ``max_bytes`` stay on the queue (the first one only has to fit ``first_max_bytes``
        when that is given)."""
        q = self.queue(queue)
        now = self.clock.now()
        uow = self._enlist(unit_of_work, owner) if unit_of_work else None
        if not message_id and not correl_id:
            out = q.get_batch(
                now,
                limit,
                size=size,
                max_bytes=max_bytes,
                first_max_bytes=first_max_bytes,
                journal_removal=uow is None,
            )
        else:
            out = []
            total = 0
            while len(out) < limit:
                if max_bytes:
                    nxt = q.peek(now, message_id, correl_id)
                    if nxt is None:
                        break
                    total += len(nxt.body) if size is None else size(nxt)
                    if total > (max_bytes if out else first_max_bytes or max_bytes):
                        break
                msg = q.get(
                    now, message_id=message_id, correl_id=correl_id, journal_removal=uow is None
                )
                if msg is None:
                    break
                out.append(msg)
                if message_id:
                    break
        if uow is not None and out:
            q.uncommitted += len(out)
            uow.got.extend(zip(repeat(queue), out, strict=False))
        return out

    def _enlist(self, unit_of_work: str, owner: str) -> UnitOfWork:
        uow = self._owned(unit_of_work, owner)
        if uow is None:
            uow = self.uows[unit_of_work] = UnitOfWork(owner)
        return uow

    def _owned(self, unit_of_work: str, owner: str) -> UnitOfWork | None:
        uow = self.uows.get(unit_of_work)
        if uow is not None and uow.owner != owner:
            raise MQError(
                "MQRC_HCONN_ERROR", f"unit of work {unit_of_work} belongs to another connection"
            )
        return uow

    def browse(self, queue: str, *, after: int = 0, limit: int = 1) -> list[Message]:
        return self.queue(queue).browse(self.clock.now(), after, limit)

    def commit(self, unit_of_work: str, *, owner: str = "", count: int | None = None) -> int:
        """Commit the unit of work (only its ``count`` oldest messages when given: the rest
        stay in it). Raises MQRC_HCONN_ERROR when it belongs to another connection."""
        uow = self._owned(unit_of_work, owner)
        if uow is None:
            return 0
        got = uow.got
        n = len(got) if count is None else min(count, len(got))
        name = ""
        q: LocalQueue | None = None
        run = 0  # messages of ``q`` in a row
        pop = got.popleft
        for _ in range(n):
            qname, msg = pop()
            if qname != name:
                if q is not None:
                    q.uncommitted -= run
                name, q, run = qname, self.queues.get(qname), 0
            run += 1
            if msg.persistent and q is not None:
                q.discard_stored(msg)
        if q is not None:
            q.uncommitted -= run
        if not got:
            del self.uows[unit_of_work]
        return n

    def backout(self, unit_of_work: str, *, owner: str = "", counted: int | None = None) -> int:
        """Return got messages to their queues (in their original order) with the backout
        count raised (only for the ``counted`` oldest when given: the others were never seen
        by the application); a message whose count reaches BOTHRESH moves to BOQNAME if that
        queue exists and accepts it. Raises MQRC_HCONN_ERROR when it belongs to another
        connection."""
        uow = self._owned(unit_of_work, owner)
        if uow is None:
            return 0
        del self.uows[unit_of_work]
        now = self.clock.now()
        n = len(uow.got)
        for i, (qname, msg) in enumerate(reversed(uow.got)):
            q = self.queues.get(qname)
            if q is None:
                continue
            q.uncommitted -= 1
            if counted is not None and n - 1 - i >= counted:
                q.return_front(msg)
                continue
            msg.backout_count += 1
            d = q.definition
            target = self.queues.get(d.boqname) if d.boqname else None
            if target is not None and d.bothresh > 0 and msg.backout_count >= d.bothresh:
                try:
                    target.check_put(msg)
                except MQError:
                    pass
                else:
                    q.discard_stored(msg)
                    target.put(msg, now, check=False)
                    continue
            q.return_front(msg)
            if msg.persistent and not d.temporary:
                self.journal.message_updated(qname, msg)
        return len(uow.got)

    def untake(self, unit_of_work: str, count: int, *, owner: str = "") -> list[Message]:
        """Put the ``count`` messages last got in ``unit_of_work`` back where they were, as if
        they had never been got (no backout count): they turned out not to fit a response.
        Returns them."""
        uow = self._owned(unit_of_work, owner)
        if uow is None:
            return []
        out = []
        for _ in range(min(count, len(uow.got))):
            qname, msg = uow.got.pop()
            out.append(msg)
            q = self.queues.get(qname)
            if q is not None:
                q.uncommitted -= 1
                q.dequeued -= 1
                q.return_front(msg)
        if not uow.got:
            del self.uows[unit_of_work]
        return out

    def backout_owned(self, owner: str) -> int:
        """Back out every unit of work that ``owner`` opened (its connection ended)."""
        names = [name for name, uow in self.uows.items() if uow.owner == owner]
        return sum(self.backout(name, owner=owner) for name in names)

    # -- topics -----------------------------------------------------------------------------

    def define_topic(self, obj: TopicObject, *, replace: bool = False) -> None:
        existing = self.topics.get(obj.name)
        if existing is not None and not replace:
            raise MQError("MQRC_OBJECT_ALREADY_EXISTS", f"topic object {obj.name} exists")
        if existing is not None and existing.topic_str != obj.topic_str:
            raise MQError("MQRC_TOPIC_STRING_ERROR", f"TOPICSTR of {obj.name} cannot be changed")
        try:
            self.topics.put(obj)
        except (TopicObjectError, TopicStringError) as exc:
            raise MQError("MQRC_TOPIC_STRING_ERROR", str(exc)) from exc
        self.pubsub.topics_changed()
        self.journal.object_saved("topic", obj.name, topic_to_dict(obj))

    def delete_topic(self, name: str) -> None:
        if self.topics.get(name) is None:
            raise MQError("MQRC_UNKNOWN_OBJECT_NAME", f"topic object {name} does not exist")
        self.topics.remove(name)
        self.pubsub.topics_changed()
        self.journal.object_deleted("topic", name)

    def restore_topic(self, obj: TopicObject) -> None:
        self.topics.put(obj)
        self.pubsub.topics_changed()

    # -- subscriptions ----------------------------------------------------------------------

    def subscribe(
        self,
        topic: str,
        *,
        name: str = "",
        durable: bool = False,
        dest: str = "",
        subtype: str = "API",
        new_publications_only: bool = False,
        **attrs: Any,
    ) -> tuple[Subscription, bool]:
        """Create a subscription, or resume the durable one called ``name``. Returns the
        subscription and whether it was resumed."""
        limits.check_topic_string(topic)
        limits.check_sub_name(name)
        limits.check_object_name(dest)
        try:
            validate_subscription_topic(topic)
        except TopicStringError as exc:
            raise MQError("MQRC_TOPIC_STRING_ERROR", str(exc)) from exc
        if name and name in self.pubsub.subs:
            existing = self.pubsub.subs[name]
            if existing.topic_str != topic:
                raise MQError(
                    "MQRC_SUB_ALREADY_EXISTS",
                    f"subscription {name} exists on topic '{existing.topic_str}'",
                )
            self.pubsub.stats[name].resumed = self.clock.now()
            return existing, True
        resolved = self.pubsub.check_subscribe(topic, durable, attrs.get("wschema", "TOPIC"))
        managed = not dest
        if managed:  # made from the model queue the topic names (MDURMDL / MNDURMDL)
            model = self.model(resolved["MDURMDL" if durable else "MNDURMDL"])
        else:
            self.queue(dest)
        sub_id = self.new_id()
        now = self.clock.now()
        if managed:
            dest = managed_queue_name(sub_id, durable)
            self.define_queue(
                QueueDef(
                    dest,
                    maxdepth=model.maxdepth,
                    maxmsgl=model.maxmsgl,
                    defprty=model.defprty,
                    defpsist=durable,
                    bothresh=model.bothresh,
                    boqname=model.boqname,
                    managed=True,
                    temporary=not durable,
                )
            )
        sub = Subscription(
            name=name or f"{self.name}.{sub_id}",
            sub_id=sub_id,
            topic_str=topic,
            dest=dest,
            durable=durable,
            managed=managed,
            subtype=subtype,
            created=now,
            altered=now,
            **attrs,
        )
        self.pubsub.add(sub, now, new_publications_only=new_publications_only)
        return sub, False

    def migrate_managed_queues(self) -> list[tuple[str, str]]:
        """Rename the managed queues of restored subscriptions whose names are longer than MQ's
        48 characters (``SYSTEM.MANAGED.<kind>.<40 hex>``, made by earlier versions) to
        :func:`managed_queue_name`; their messages move with them and the subscription names
        the new queue. Returns the (old, new) names."""
        renamed: list[tuple[str, str]] = []
        for sub in list(self.pubsub.subs.values()):
            if not sub.managed or len(sub.dest) <= limits.MAX_OBJECT_NAME_LENGTH:
                continue
            old = self.queues.get(sub.dest)
            new_name = managed_queue_name(sub.sub_id, sub.durable)
            if old is None or new_name in self.queues:
                continue
            definition = old.definition.altered_with(name=new_name)
            self.journal.object_saved("queue", new_name, definition.to_dict())
            q = self.restore_queue(definition)
            for msg in old.drain():
                if msg.persistent and not definition.temporary:
                    self.journal.message_removed(old.name, msg)
                    self.journal.message_added(new_name, msg)
                q.restore(msg)
            del self.queues[old.name]
            self.journal.object_deleted("queue", old.name)
            self.pubsub.replace(dataclasses.replace(sub, dest=new_name))
            renamed.append((old.name, new_name))
        return renamed

    def unsubscribe(self, name: str) -> Subscription:
        sub = self.pubsub.subs.get(name)
        if sub is None:
            raise MQError("MQRC_NO_SUBSCRIPTION", f"subscription {name} does not exist")
        q = self.queues.get(sub.dest)
        if sub.managed and q is not None and q.uncommitted:
            raise MQError("MQRC_OBJECT_IN_USE", f"subscription {name} has messages being delivered")
        self.pubsub.remove(name)
        if sub.managed and sub.dest in self.queues:
            q = self.queues[sub.dest]
            q.clear()
            del self.queues[sub.dest]
            if not q.definition.temporary:
                self.journal.object_deleted("queue", sub.dest)
        return sub

    def subscription_by_id(self, sub_id: str) -> Subscription | None:
        name = self.pubsub.by_id.get(sub_id.upper()) or self.pubsub.by_id.get(sub_id.lower())
        return self.pubsub.subs.get(name) if name else None

    # -- publish ----------------------------------------------------------------------------

    def accept_publication(self, topic: str, msg: Message) -> Message:
        """Check a publication from an application and stamp it (id, time, defaults)."""
        self.accept_publications(topic, (msg,))
        return msg

    def accept_publications(self, topic: str, msgs: Sequence[Message]) -> None:
        """Check publications from an application to one topic and stamp them (id, time,
        defaults): the topic is checked once for the run, each message on its own (``accept``).
        The first refused raises; those before it are stamped but published by nobody."""
        limits.check_topic_string(topic)
        if msgs:  # a publication's own checks come before its topic's
            limits.check_priority(msgs[0].priority)
        policy = self.pubsub.open_policy(topic)
        defpsist, defprty = policy.defpsist, policy.defprty
        now = self.clock.now()
        accept = self.accept
        for msg in msgs:
            accept(msg, defpsist, defprty, now)

    def publish(self, topic: str, msg: Message, *, retain: bool = False) -> int:
        """Publish one message; returns the number of copies delivered locally."""
        self.accept_publication(topic, msg)
        return self.publish_accepted(topic, msg, retain=retain)

    def publish_accepted(self, topic: str, msg: Message, *, retain: bool = False) -> int:
        """Deliver a publication ``accept_publication`` took to the local subscriptions;
        returns the copies made."""
        return self.pubsub.publish(topic, msg, self.clock.now(), retain=retain)

    def publish_accepted_run(
        self, topic: str, msgs: Sequence[Message]
    ) -> tuple[int, int, MQError | None]:
        """Deliver publications ``accept_publications`` took (none retained) to the local
        subscriptions, in order, until one fails: returns how many were published, the
        copies made, and the error of the one that failed (None when none did)."""
        return self.pubsub.publish_run(topic, msgs, self.clock.now())

    def deliver_publication(self, topic: str, msg: Message, *, retain: bool = False) -> int:
        """Deliver a publication that another queue manager accepted (its id, time, persistence
        and priority are already set) to the local subscriptions; returns the copies made."""
        msg.sequence = self.next_sequence()
        return self.pubsub.publish(topic, msg, self.clock.now(), retain=retain)

    def deliver_publication_run(
        self, topic: str, msgs: Sequence[Message]
    ) -> tuple[int, int, MQError | None]:
        """``deliver_publication`` for each of ``msgs`` (none retained), in order, until one
        fails: returns how many were delivered, the copies made, and the error of the one that
        failed (None when none did); see ``PubSub.publish_run``."""
        next_sequence = self.next_sequence
        for msg in msgs:
            msg.sequence = next_sequence()
        return self.pubsub.publish_run(topic, msgs, self.clock.now())

    def receive_retained(self, topic: str, msg: Message) -> int:
        """Take a retained publication a topic host sent for a proxy subscription (see
        ``PubSub.receive_retained``); returns the copies delivered."""
        msg.sequence = self.next_sequence()
        return self.pubsub.receive_retained(topic, msg, self.clock.now())

    def clear_retained(self, topic: str) -> bool:
        return self.pubsub.clear_retained(topic)


def topic_to_dict(obj: TopicObject) -> dict[str, Any]:
    return {
        "name": obj.name,
        "topic_str": obj.topic_str,
        "attrs": dict(obj.attrs),
        "descr": obj.descr,
    }


def topic_from_dict(data: dict[str, Any]) -> TopicObject:
    return TopicObject(
        name=data["name"], topic_str=data["topic_str"], attrs=data["attrs"], descr=data["descr"]
    )


__all__ = ["BASE_TOPIC_NAME", "DEAD_LETTER_QUEUE", "QueueManager", "QmgrAttrs"]
