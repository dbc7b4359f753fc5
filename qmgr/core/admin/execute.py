"""Run one MQSC command: parse, dispatch, and turn every failure into an error record.

A command that fails changes nothing: parsing and validation happen before any change, and each
domain operation checks before it acts.
"""

from __future__ import annotations

from collections.abc import Callable

from qmgr.core.admin import manager, queues, subs, topics
from qmgr.core.admin.records import Record, error_record
from qmgr.core.errors import MQError
from qmgr.core.qmgr import QueueManager
from qmgr.mqsc import MqscCommand, MqscError, parse_command

Handler = Callable[[QueueManager, MqscCommand], list[Record]]

HANDLERS: dict[tuple[str, str], Handler] = {
    ("DEFINE", "QLOCAL"): queues.define_qlocal,
    ("ALTER", "QLOCAL"): queues.alter_qlocal,
    ("DELETE", "QLOCAL"): queues.delete_qlocal,
    ("CLEAR", "QLOCAL"): queues.clear_qlocal,
    ("DISPLAY", "QLOCAL"): queues.display_queue,
    ("DISPLAY", "QUEUE"): queues.display_queue,
    ("DISPLAY", "QSTATUS"): queues.display_qstatus,
    ("DEFINE", "QMODEL"): queues.define_qmodel,
    ("ALTER", "QMODEL"): queues.alter_qmodel,
    ("DELETE", "QMODEL"): queues.delete_qmodel,
    ("DISPLAY", "QMODEL"): queues.display_qmodel,
    ("DEFINE", "TOPIC"): topics.define_topic,
    ("ALTER", "TOPIC"): topics.alter_topic,
    ("DELETE", "TOPIC"): topics.delete_topic,
    ("DISPLAY", "TOPIC"): topics.display_topic,
    ("DISPLAY", "TPSTATUS"): topics.display_tpstatus,
    ("CLEAR", "TOPICSTR"): topics.clear_topicstr,
    ("DEFINE", "SUB"): subs.define_sub,
    ("ALTER", "SUB"): subs.alter_sub,
    ("DELETE", "SUB"): subs.delete_sub,
    ("DISPLAY", "SUB"): subs.display_sub,
    ("DISPLAY", "SBSTATUS"): subs.display_sbstatus,
    ("DISPLAY", "QMGR"): manager.display_qmgr,
    ("ALTER", "QMGR"): manager.alter_qmgr,
    ("DISPLAY", "PUBSUB"): manager.display_pubsub,
}


def execute_command(
    qm: QueueManager, cmd: MqscCommand, extra: dict[tuple[str, str], Handler] | None = None
) -> tuple[bool, list[Record]]:
    handler = (extra or {}).get((cmd.verb, cmd.obj or "")) or HANDLERS.get(
        (cmd.verb, cmd.obj or "")
    )
    if handler is None:
        return False, [
            Record(
                "AMQ8569E",
                f"Command not supported by this queue manager: {cmd.verb} {cmd.obj or ''}".rstrip()
                + ".",
            )
        ]
    try:
        return True, handler(qm, cmd)
    except MQError as exc:
        return False, [error_record(exc, cmd.name or "")]


def execute(
    qm: QueueManager, text: str, extra: dict[tuple[str, str], Handler] | None = None
) -> tuple[bool, list[Record]]:
    """Parse and run one MQSC command; returns (succeeded, records)."""
    try:
        cmd = parse_command(text)
    except MqscError as exc:
        return False, [Record(exc.code, exc.message, [("POSITION", str(exc.position))])]
    return execute_command(qm, cmd, extra)
