"""Run one MQSC command against a queue manager: the queue manager's own commands in one
dispatch table (:data:`CORE`), and every failure turned into an error record.

A command that fails changes nothing: parsing and validation happen before any change, and each
domain operation checks before it acts.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from qmgr.core.admin import manager, queues, subs, topics
from qmgr.core.admin.dispatch import MqscTable, Reply, Route, guarded, not_supported
from qmgr.core.admin.records import Record
from qmgr.core.qmgr import QueueManager
from qmgr.mqsc import MqscCommand

Handler = Callable[[QueueManager, MqscCommand], list[Record]]

CORE: MqscTable[Handler] = MqscTable()
"""The commands on the queue manager's own objects: queues, model queues, topics,
subscriptions, the queue manager and its publish/subscribe engine."""

for _verb, _obj, _handler in (
    ("DEFINE", "QLOCAL", queues.define_qlocal),
    ("ALTER", "QLOCAL", queues.alter_qlocal),
    ("DELETE", "QLOCAL", queues.delete_qlocal),
    ("CLEAR", "QLOCAL", queues.clear_qlocal),
    ("DISPLAY", "QLOCAL", queues.display_queue),
    ("DISPLAY", "QUEUE", queues.display_queue),
    ("DISPLAY", "QSTATUS", queues.display_qstatus),
    ("DEFINE", "QMODEL", queues.define_qmodel),
    ("ALTER", "QMODEL", queues.alter_qmodel),
    ("DELETE", "QMODEL", queues.delete_qmodel),
    ("DISPLAY", "QMODEL", queues.display_qmodel),
    ("DEFINE", "TOPIC", topics.define_topic),
    ("ALTER", "TOPIC", topics.alter_topic),
    ("DELETE", "TOPIC", topics.delete_topic),
    ("DISPLAY", "TOPIC", topics.display_topic),
    ("DISPLAY", "TPSTATUS", topics.display_tpstatus),
    ("CLEAR", "TOPICSTR", topics.clear_topicstr),
    ("DEFINE", "SUB", subs.define_sub),
    ("ALTER", "SUB", subs.alter_sub),
    ("DELETE", "SUB", subs.delete_sub),
    ("DISPLAY", "SUB", subs.display_sub),
    ("DISPLAY", "SBSTATUS", subs.display_sbstatus),
    ("DISPLAY", "QMGR", manager.display_qmgr),
    ("ALTER", "QMGR", manager.alter_qmgr),
    ("DISPLAY", "PUBSUB", manager.display_pubsub),
):
    CORE.register(_verb, _obj, _handler)


def bound(qm: QueueManager, handler: Handler) -> Callable[[MqscCommand], Reply]:
    """``handler`` run on ``qm``, answering with a reply (an MQError as its error record)."""
    return guarded(partial(handler, qm))


def execute_command(qm: QueueManager, cmd: MqscCommand) -> Reply:
    """Run an already parsed command with the queue manager's own handler."""
    handler = CORE.handler(cmd)
    if handler is None:
        return not_supported(cmd)
    return bound(qm, handler)(cmd)


def execute(qm: QueueManager, text: str) -> Reply:
    """Parse and run one MQSC command; returns (succeeded, records)."""
    routed = CORE.route(text)
    if not isinstance(routed, Route):
        return routed
    return bound(qm, routed.handler)(routed.command)
