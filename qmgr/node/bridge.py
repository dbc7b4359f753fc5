"""Bridges at run time: MQSC for them, their stored definitions, and one task per bridge that
moves messages between the MQ side and the Service Bus namespace of the same node.

Exactly once across ``kill -9``: the MQ queues and the namespace journal to one store, and the
committer writes whatever has been collected in one transaction. Each move is one synchronous
step on the event loop, so its two halves always land in the same commit:

- TOSB: the batch is got (destructively) from the bridge subscription's managed queue and sent
  to the entity; if the send is refused the messages are put back where they were (and their
  removal undone in the journal) before anything else runs.
- FROMSB: a batch is received peek-lock from the entity (from a session-enabled one, the
  next available session, locked for the step and released after it); each message is
  published on the topic string and completed. A publication the MQ side refuses (a full queue, PUB(DISABLED)...)
  abandons that message (Service Bus counts the delivery and dead-letters it past
  MaxDeliveryCount), releases the rest of the batch and retries after a pause.

The stable MessageId of each bridged MQ message (see :mod:`qmgr.core.bridge`) lets a Service
Bus entity with duplicate detection absorb a copy that was sent twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from qmgr.core.admin.dispatch import CommandHandler, MqscTable, guarded
from qmgr.core.admin.queues import name_matches
from qmgr.core.admin.records import Record, date_time, select
from qmgr.core.bridge import BridgeDef, check_topic, subscription_name, to_mq, to_servicebus
from qmgr.core.deadletter import dead_letter
from qmgr.core.errors import MQError
from qmgr.core.message import Message
from qmgr.mqsc import MqscCommand
from qmgr.servicebus.errors import Code, ServiceBusError
from qmgr.servicebus.namespace import Namespace, ReceiveMode

if TYPE_CHECKING:
    from qmgr.node.runtime import NodeRuntime

log = logging.getLogger("qmgr.bridge")

KIND = "bridge"  # the store's object kind
BATCH = 100  # messages moved in one step
RETRY = 1.0  # seconds before a bridge that could not move tries again
IDLE = 1.0  # seconds a bridge waits for a wake-up before it looks anyway

# Service Bus refusals that concern the entity (wait and retry), not one message
_ENTITY_PROBLEMS = frozenset({Code.ENTITY_NOT_FOUND, Code.ENTITY_DISABLED, Code.QUOTA_EXCEEDED})

CREATED = Record("AMQ8990I", "Bridge created.")
CHANGED = Record("AMQ8991I", "Bridge changed.")
DELETED = Record("AMQ8992I", "Bridge deleted.")
DISPLAY_ID = ("AMQ8993I", "Display bridge details.")


@dataclass
class BridgeStatus:
    """What DISPLAY BRIDGE shows of a bridge at run time (since the node started)."""

    status: str = "STOPPED"  # RUNNING, RETRYING (LASTERR says why) or STOPPED
    moved: int = 0
    dropped: int = 0  # property names left out (FROMSB) or messages dead-lettered (TOSB)
    last_error: str = ""


class Bridges:
    """The bridges of one node."""

    def __init__(self, runtime: NodeRuntime) -> None:
        self.rt = runtime
        self.defs: dict[str, BridgeDef] = {}
        self.status: dict[str, BridgeStatus] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._wake: dict[str, asyncio.Event] = {}
        self._started = False
        for data in runtime.loaded_objects.get(KIND, {}).values():
            bridge = BridgeDef.from_dict(data)
            self.defs[bridge.name] = bridge
            self.status[bridge.name] = BridgeStatus()
        if runtime.servicebus is not None:
            runtime.servicebus.listen(self._servicebus_changed)

    # ------------------------------------------------------------------ life cycle

    def start(self) -> None:
        """Start moving (once the node can route publications: after it joined its cluster)."""
        self._started = True
        for name in self.defs:
            self._launch(name)

    async def stop(self) -> None:
        self._started = False
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _launch(self, name: str) -> None:
        if not self._started or name in self._tasks:
            return
        self._wake[name] = asyncio.Event()
        self._tasks[name] = asyncio.get_running_loop().create_task(self._run(name))

    def _halt(self, name: str) -> None:
        task = self._tasks.pop(name, None)
        if task is not None:
            task.cancel()
        self._wake.pop(name, None)

    def _servicebus_changed(self) -> None:
        for name, event in self._wake.items():
            bridge = self.defs.get(name)
            if bridge is not None and bridge.direction == "FROMSB":
                event.set()

    @property
    def namespace(self) -> Namespace:
        if self.rt.servicebus is None:
            raise MQError(
                "MQRC_ENVIRONMENT_ERROR",
                f"queue manager {self.rt.qm.name} hosts no Service Bus namespace "
                "(start it with --servicebus)",
            )
        return self.rt.servicebus.namespace

    # ------------------------------------------------------------------ moving

    async def _run(self, name: str) -> None:
        status = self.status[name]
        while True:
            bridge = self.defs.get(name)
            if bridge is None:
                return
            try:
                if bridge.direction == "TOSB":
                    moved = self._to_servicebus(bridge, status)
                else:
                    moved = self._from_servicebus(bridge, status)
            except (MQError, ServiceBusError) as exc:
                self._retrying(bridge, status, str(exc))
                moved = -1
            except Exception as exc:  # a bug must not end the bridge silently
                log.exception("bridge %s failed", name)
                self._retrying(bridge, status, f"{type(exc).__name__}: {exc}")
                moved = -1
            if moved > 0:
                status.moved += moved
                await asyncio.sleep(0)  # let the node serve others between batches
            elif moved < 0:
                await asyncio.sleep(RETRY)
            else:
                await self._idle(bridge)

    async def _idle(self, bridge: BridgeDef) -> None:
        if bridge.direction == "TOSB":
            sub = self.rt.qm.pubsub.subs.get(bridge.subscription)
            if sub is not None:
                await self.rt.signals.wait(sub.dest, IDLE)
                return
        event = self._wake.get(bridge.name)
        if event is None:
            await asyncio.sleep(IDLE)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), IDLE)
        event.clear()

    def _retrying(self, bridge: BridgeDef, status: BridgeStatus, why: str) -> None:
        if status.status != "RETRYING" or status.last_error != why:
            log.warning("bridge %s cannot move messages, retrying: %s", bridge.name, why)
        status.status = "RETRYING"
        status.last_error = why

    def _to_servicebus(self, bridge: BridgeDef, status: BridgeStatus) -> int:
        """One batch from the subscription's queue to the entity; the count moved, 0 when
        there was nothing, -1 when the entity refused (the messages stay)."""
        qm = self.rt.qm
        ns = self.namespace
        sub = qm.pubsub.subs.get(bridge.subscription)
        if sub is None:
            raise MQError("MQRC_NO_SUBSCRIPTION", f"subscription {bridge.subscription} is gone")
        queue = qm.queue(sub.dest)
        if queue.depth == 0:
            status.status = "RUNNING"
            return 0
        now = qm.clock.now()
        msgs = queue.get_batch(now, BATCH)
        if not msgs:
            return 0
        batch = [to_servicebus(m, sessprop=bridge.sessprop, now=now) for m in msgs]
        try:
            ns.send(bridge.sb_entity, batch)
        except ServiceBusError as exc:
            self._put_back(sub.dest, msgs)
            if exc.code in _ENTITY_PROBLEMS:
                self._retrying(bridge, status, str(exc))
                return -1
            return self._one_by_one(bridge, status, sub.dest)
        self._sent(status)
        return len(msgs)

    def _one_by_one(self, bridge: BridgeDef, status: BridgeStatus, queue_name: str) -> int:
        """A batch was refused for one of its messages: send them singly; a message Service
        Bus refuses goes to the dead-letter queue (never a retry loop)."""
        qm = self.rt.qm
        ns = self.namespace
        queue = qm.queue(queue_name)
        moved = 0
        for _ in range(BATCH):
            now = qm.clock.now()
            got = queue.get_batch(now, 1)
            if not got:
                break
            msg = got[0]
            try:
                ns.send(bridge.sb_entity, [to_servicebus(msg, sessprop=bridge.sessprop, now=now)])
            except ServiceBusError as exc:
                if exc.code in _ENTITY_PROBLEMS:
                    self._put_back(queue_name, got)
                    self._retrying(bridge, status, str(exc))
                    return moved or -1
                reason = (
                    "MQRC_MSG_TOO_BIG_FOR_Q"
                    if exc.code is Code.MESSAGE_SIZE_EXCEEDED
                    else "MQRC_PUBLICATION_FAILURE"
                )
                try:
                    dead_letter(qm, msg.copy(), reason, dest_queue=bridge.sb_entity)
                except MQError:
                    self._put_back(queue_name, got)
                    self._retrying(bridge, status, f"{exc}; the dead-letter queue refused it")
                    return moved or -1
                status.dropped += 1
                status.last_error = f"message {msg.message_id} dead-lettered: {exc}"
                log.warning("bridge %s: %s", bridge.name, status.last_error)
                continue
            moved += 1
        self._sent(status)
        return moved

    def _put_back(self, queue_name: str, msgs: list[Message]) -> None:
        """Undo a get: the messages go back first in their queue, and into the journal."""
        queue = self.rt.qm.queue(queue_name)
        for msg in reversed(msgs):
            queue.return_front(msg)
            if msg.persistent and not queue.definition.temporary:
                self.rt.qm.journal.message_added(queue_name, msg)

    def _sent(self, status: BridgeStatus) -> None:
        status.status = "RUNNING"
        if self.rt.servicebus is not None:
            self.rt.servicebus.changed()

    def _from_servicebus(self, bridge: BridgeDef, status: BridgeStatus) -> int:
        """One batch from the entity published on the topic string; the count moved, 0 when
        there was nothing, -1 when the MQ side refused one (it is abandoned, the rest released)."""
        ns = self.namespace
        session = None
        if ns.check_receiver(bridge.sb_entity):  # session-enabled: the next available session
            lock = ns.accept_session(bridge.sb_entity, None)
            if lock is None:
                status.status = "RUNNING"
                return 0
            session = lock.session_id
        try:
            return self._publish_batch(bridge, status, session)
        finally:
            if session is not None:
                ns.release_session(bridge.sb_entity, session)

    def _publish_batch(self, bridge: BridgeDef, status: BridgeStatus, session: str | None) -> int:
        ns = self.namespace
        clock = self.rt.qm.clock
        got = ns.receive(bridge.sb_entity, BATCH, ReceiveMode.PEEK_LOCK, session=session)
        if not got:
            status.status = "RUNNING"
            return 0
        moved = 0
        try:
            for i, stored in enumerate(got):
                token = stored.lock_token
                assert token is not None
                inbound = to_mq(stored, now=clock.now())
                try:
                    self.rt.publish(bridge.topic_str, inbound.message)
                except MQError as exc:
                    ns.abandon(bridge.sb_entity, token)
                    for rest in got[i + 1 :]:
                        if rest.lock_token is not None:
                            ns.release(bridge.sb_entity, rest.lock_token)
                    self._retrying(bridge, status, str(exc))
                    return moved or -1
                ns.complete(bridge.sb_entity, token)
                status.dropped += len(inbound.dropped)
                moved += 1
        finally:
            if self.rt.servicebus is not None:
                self.rt.servicebus.changed()
        status.status = "RUNNING"
        return moved

    # ------------------------------------------------------------------ MQSC

    def register(self, table: MqscTable[CommandHandler]) -> None:
        """DEFINE, ALTER, DELETE and DISPLAY BRIDGE."""
        table.register("DEFINE", "BRIDGE", guarded(self._define))
        table.register("ALTER", "BRIDGE", guarded(self._alter))
        table.register("DELETE", "BRIDGE", guarded(self._delete))
        table.register("DISPLAY", "BRIDGE", guarded(self._display))

    def _check_entity(self, bridge: BridgeDef) -> None:
        """The entity must exist and suit the direction (a queue or topic to send to; a queue
        or subscription to receive from); checked before anything changes."""
        ns = self.namespace
        try:
            if bridge.direction == "TOSB":
                ns.check_sender(bridge.sb_entity)
            else:
                ns.check_receiver(bridge.sb_entity)
        except ServiceBusError as exc:
            if exc.code is Code.ENTITY_DISABLED:
                return  # the bridge waits until it is enabled
            reason = (
                "MQRC_UNKNOWN_OBJECT_NAME"
                if exc.code is Code.ENTITY_NOT_FOUND
                else "MQRC_OPTIONS_ERROR"
            )
            raise MQError(reason, f"Service Bus: {exc}") from None

    def _define(self, cmd: MqscCommand) -> list[Record]:
        name = cmd.name or ""
        existing = self.defs.get(name)
        if existing is not None:
            if "REPLACE" not in cmd.params:
                raise MQError("MQRC_OBJECT_ALREADY_EXISTS", f"bridge {name} exists")
            if cmd.params.get("DIRECTION") != existing.direction:
                raise MQError(
                    "MQRC_OPTIONS_ERROR",
                    f"bridge {name} is DIRECTION({existing.direction}); DIRECTION cannot be "
                    "changed: delete the bridge and define it again",
                )
            self._alter(cmd)
            return [CHANGED]
        now = self.rt.qm.clock.now()
        bridge = BridgeDef(
            name=name,
            direction="TOSB" if cmd.params.get("DIRECTION") == "TOSB" else "FROMSB",
            topic_str=cmd.params.get("TOPICSTR") or "",
            sb_entity=cmd.params.get("SBENTITY") or "",
            sessprop=cmd.params.get("SESSPROP") or "",
            descr=cmd.params.get("DESCR") or "",
            created=now,
            altered=now,
        )
        check_topic(bridge)
        self._check_entity(bridge)
        qm = self.rt.qm
        if bridge.direction == "TOSB":
            sub = qm.pubsub.subs.get(bridge.subscription)
            if sub is not None and sub.topic_str != bridge.topic_str:
                raise MQError(
                    "MQRC_SUB_ALREADY_EXISTS",
                    f"subscription {bridge.subscription} exists on topic '{sub.topic_str}'",
                )
            qm.subscribe(
                bridge.topic_str,
                name=bridge.subscription,
                durable=True,
                subtype="ADMIN",
                userdata=f"bridge {name} to Service Bus {bridge.sb_entity}",
            )
        self._save(bridge)
        self.status[name] = BridgeStatus()
        self._launch(name)
        return [CREATED]

    def _alter(self, cmd: MqscCommand) -> list[Record]:
        bridge = self._find(cmd.name or "")
        changes: dict[str, str] = {}
        for key, attr in (
            ("TOPICSTR", "topic_str"),
            ("SBENTITY", "sb_entity"),
            ("SESSPROP", "sessprop"),
            ("DESCR", "descr"),
        ):
            if key in cmd.params:
                changes[attr] = cmd.params[key] or ""
        new = bridge.altered_with(altered=self.rt.qm.clock.now(), **changes)
        if new.direction == "TOSB" and new.topic_str != bridge.topic_str:
            raise MQError(
                "MQRC_OPTIONS_ERROR",
                f"TOPICSTR of TOSB bridge {bridge.name} cannot be altered (its subscription "
                f"{bridge.subscription} is on '{bridge.topic_str}'); delete and define it again",
            )
        if new.direction == "FROMSB" and new.sessprop:
            raise MQError("MQRC_OPTIONS_ERROR", "SESSPROP is valid only with DIRECTION(TOSB)")
        check_topic(new)
        if new.sb_entity != bridge.sb_entity:
            self._check_entity(new)
        self._save(new)
        self.status.setdefault(new.name, BridgeStatus()).last_error = ""
        wake = self._wake.get(new.name)
        if wake is not None:
            wake.set()
        return [CHANGED]

    def _delete(self, cmd: MqscCommand) -> list[Record]:
        bridge = self._find(cmd.name or "")
        qm = self.rt.qm
        if bridge.direction == "TOSB" and bridge.subscription in qm.pubsub.subs:
            qm.unsubscribe(bridge.subscription)
        self._halt(bridge.name)
        del self.defs[bridge.name]
        self.status.pop(bridge.name, None)
        qm.journal.object_deleted(KIND, bridge.name)
        return [DELETED]

    def _save(self, bridge: BridgeDef) -> None:
        self.defs[bridge.name] = bridge
        self.rt.qm.journal.object_saved(KIND, bridge.name, bridge.to_dict())

    def _find(self, name: str) -> BridgeDef:
        bridge = self.defs.get(name)
        if bridge is None:
            raise MQError("MQRC_UNKNOWN_OBJECT_NAME", f"bridge {name} does not exist")
        return bridge

    def _display(self, cmd: MqscCommand) -> list[Record]:
        pattern = cmd.name or "*"
        direction = cmd.params.get("DIRECTION")
        found = [
            b
            for n, b in sorted(self.defs.items())
            if name_matches(pattern, n) and (direction is None or b.direction == direction)
        ]
        if not found and not pattern.endswith("*"):
            raise MQError("MQRC_UNKNOWN_OBJECT_NAME", f"bridge {pattern} does not exist")
        show_all = "ALL" in cmd.params or not (cmd.generic or cmd.requested)
        summary = ("DIRECTION", "TOPICSTR", "SBENTITY", "STATUS", *cmd.requested)
        return [Record(*DISPLAY_ID, select(self.attrs(b), 1, summary, show_all)) for b in found]

    def attrs(self, bridge: BridgeDef) -> list[tuple[str, str]]:
        status = self.status.get(bridge.name) or BridgeStatus()
        crdate, crtime = date_time(bridge.created)
        altdate, alttime = date_time(bridge.altered)
        depth = ""
        sub = ""
        if bridge.direction == "TOSB":
            sub = bridge.subscription
            found = self.rt.qm.pubsub.subs.get(sub)
            queue = self.rt.qm.queues.get(found.dest) if found is not None else None
            depth = str(queue.depth) if queue is not None else ""
        return [
            ("BRIDGE", bridge.name),
            ("DIRECTION", bridge.direction),
            ("TOPICSTR", bridge.topic_str),
            ("SBENTITY", bridge.sb_entity),
            ("SESSPROP", bridge.sessprop),
            ("DESCR", bridge.descr),
            ("SUB", sub),
            ("STATUS", status.status if self._started else "STOPPED"),
            ("MSGS", str(status.moved)),
            ("DROPPED", str(status.dropped)),
            ("CURDEPTH", depth),
            ("LASTERR", status.last_error),
            ("ALTDATE", altdate),
            ("ALTTIME", alttime),
            ("CRDATE", crdate),
            ("CRTIME", crtime),
        ]


__all__ = ["Bridges", "BridgeStatus", "subscription_name"]
