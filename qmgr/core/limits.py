"""MQ's limits on what an application may send, checked where input enters (pure).

- priority: 0-9, or -1 "as the queue's or topic's DEFPRTY" (MQPRI_PRIORITY_AS_Q_DEF); anything
  else is MQRC_PRIORITY_ERROR (MQ accepts a priority above MAXPRTY with a warning and caps it;
  this queue manager rejects it instead, so no out-of-range value gets past the edge);
- time to live: unlimited (0 here, MQEI_UNLIMITED in MQ) or positive and at most MQMD Expiry's
  maximum, 999,999,999 tenths of a second; anything else is MQRC_EXPIRY_ERROR;
- object names (queues, topic objects) at most 48 characters (MQ_Q_NAME_LENGTH,
  MQ_TOPIC_NAME_LENGTH), topic strings and subscription names at most 10,240 (MQ_TOPIC_STR_LENGTH
  and the MQSD SubName limit used by MQSC);
- message property names: dot-separated identifiers of at most 4,095 characters; names starting
  with "MQ" (any case) are reserved for the queue manager (MQTopicString, MQIsRetained...).
"""

from __future__ import annotations

import math

from qmgr.core.errors import MQError
from qmgr.core.message import MAX_PRIORITY

PRIORITY_AS_DEFAULT = -1
MAX_TTL_SECONDS = 999_999_999 / 10  # MQMD Expiry is in tenths of a second
MAX_TTL_MS = 999_999_999 * 100
MAX_OBJECT_NAME_LENGTH = 48
MAX_TOPIC_STRING_LENGTH = 10_240
MAX_SUB_NAME_LENGTH = 10_240
MAX_PROPERTY_NAME_LENGTH = 4_095
MAX_BATCH = 10_000  # messages or publications in one request, messages in one delivery


def check_priority(priority: int) -> None:
    if priority != PRIORITY_AS_DEFAULT and not 0 <= priority <= MAX_PRIORITY:
        raise MQError("MQRC_PRIORITY_ERROR", f"priority {priority} is not 0-9 (or -1, as default)")


def check_ttl(seconds: float) -> None:
    if not (math.isfinite(seconds) and 0 <= seconds <= MAX_TTL_SECONDS):
        raise MQError(
            "MQRC_EXPIRY_ERROR",
            f"time to live {seconds}s is not 0 (unlimited) or 0-{MAX_TTL_SECONDS:.1f}s",
        )


def check_object_name(name: str, what: str = "queue") -> None:
    if len(name) > MAX_OBJECT_NAME_LENGTH:
        raise MQError(
            "MQRC_OBJECT_NAME_ERROR",
            f"{what} name of {len(name)} characters is longer than {MAX_OBJECT_NAME_LENGTH}",
        )


def check_topic_string(topic: str) -> None:
    if len(topic) > MAX_TOPIC_STRING_LENGTH:
        raise MQError(
            "MQRC_TOPIC_STRING_ERROR",
            f"topic string of {len(topic)} characters is longer than {MAX_TOPIC_STRING_LENGTH}",
        )


def check_sub_name(name: str) -> None:
    if len(name) > MAX_SUB_NAME_LENGTH:
        raise MQError(
            "MQRC_SUB_NAME_ERROR",
            f"subscription name of {len(name)} characters is longer than {MAX_SUB_NAME_LENGTH}",
        )


def check_property_name(name: str) -> None:
    ok = 0 < len(name) <= MAX_PROPERTY_NAME_LENGTH and all(
        part.isidentifier() for part in name.split(".")
    )
    if not ok:
        raise MQError("MQRC_PROPERTY_NAME_ERROR", f"property name {name[:64]!r} is not valid")
    if name[:2].upper() == "MQ":
        raise MQError(
            "MQRC_PROPERTY_NAME_ERROR", f"property name {name[:64]!r} is reserved (MQ prefix)"
        )


def check_batch(count: int, what: str = "messages") -> None:
    if count > MAX_BATCH:
        raise MQError("MQRC_OPTIONS_ERROR", f"{count} {what} in one request (at most {MAX_BATCH})")
