"""Dead-letter queue: where a message goes that cannot reach its destination.

As IBM MQ does with its dead-letter header (MQDLH), the message keeps its body, properties,
persistence, priority and identifiers and gains the header's fields as properties:
``MQDLH.Reason`` (the MQRC number), ``MQDLH.ReasonName``, ``MQDLH.DestQName``,
``MQDLH.DestQMgrName``, ``MQDLH.PutApplName`` and ``MQDLH.PutTime`` (seconds since the epoch,
when it was dead-lettered). The queue is the queue manager's DEADQ, or
SYSTEM.DEAD.LETTER.QUEUE (which always exists on a node) when DEADQ is blank or unknown.
"""

from __future__ import annotations

from qmgr.core.errors import REASONS, MQError
from qmgr.core.message import MAX_PRIORITY, Message
from qmgr.core.qmgr import DEAD_LETTER_QUEUE, QueueManager

REASON = "MQDLH.Reason"
REASON_NAME = "MQDLH.ReasonName"
DEST_Q = "MQDLH.DestQName"
DEST_QMGR = "MQDLH.DestQMgrName"
PUT_APPL = "MQDLH.PutApplName"
PUT_TIME = "MQDLH.PutTime"


def dead_letter_queue_name(qm: QueueManager) -> str:
    deadq = qm.attrs.deadq
    return deadq if deadq and deadq in qm.queues else DEAD_LETTER_QUEUE


def dead_letter(
    qm: QueueManager,
    msg: Message,
    reason_name: str,
    *,
    dest_queue: str,
    dest_qmgr: str = "",
    put_appl: str = "",
) -> Message:
    """Put ``msg`` on the dead-letter queue with a dead-letter header; returns the copy put.
    Raises MQError (e.g. MQRC_Q_FULL) when the dead-letter queue cannot take it."""
    props = dict(msg.properties)
    props[REASON] = REASONS.get(reason_name, 0)
    props[REASON_NAME] = reason_name
    props[DEST_Q] = dest_queue
    props[DEST_QMGR] = dest_qmgr or qm.name
    props[PUT_APPL] = put_appl or qm.name
    now = qm.clock.now()
    props[PUT_TIME] = now
    priority = msg.priority if 0 <= msg.priority <= MAX_PRIORITY else 0
    copy = msg.copy(
        properties=props,
        priority=priority,
        persistent=bool(msg.persistent),
        sequence=qm.next_sequence(),
    )
    queue = qm.queues.get(dead_letter_queue_name(qm))
    if queue is None:
        raise MQError("MQRC_UNKNOWN_OBJECT_NAME", "no dead-letter queue")
    queue.put(copy, now)
    return copy
