"""The options of the "qmgr" Spark data source, checked once on the driver and turned into
frozen dataclasses before any message is sent or read.

Every mistake is a :class:`QmgrSourceError` naming the option and what it should be."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from qmgr.launcher.registry import resolve

SESSION_MODES = ("none", "all", "sequenced")
SESSION_RECEIVERS = 4  # Service Bus sessions one read holds at once (over all its partitions)
MAX_PARTITIONS = 16
RECEIVE_MODES = ("peek_lock", "receive_and_delete")
SECURITY_OPTIONS = ("tls_ca", "tls_cert", "tls_key", "user", "password")
WRITE_OPTIONS = frozenset(
    {"node", "topic", "batch_size", "rate", "persistent", "ack_log", "sent_property", "window"}
    | set(SECURITY_OPTIONS)
)
READ_OPTIONS = frozenset(
    {
        "node",
        "servicebus",
        "subscription",
        "queue",
        "topic",
        "idle",
        "max_messages",
        "sessions",
        "sequence_property",
        "receive_mode",
        "batch_size",
        "source",
        "partitions",
    }
    | set(SECURITY_OPTIONS)
)
EMULATOR_KEY = "SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE"


class QmgrSourceError(ValueError):
    """A "qmgr" data source option (or the DataFrame written) cannot be used."""

    def __init__(self, text: str) -> None:
        super().__init__(f"qmgr data source: {text}")


@dataclass(frozen=True)
class Security:
    """How the partitions reach an MQ node (see :class:`qmgr.client.QueueManagerClient`)."""

    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    user: str | None = None
    password: str | None = None


@dataclass(frozen=True)
class WriteOptions:
    node: str  # as given (a name or HOST:PORT)
    address: str  # HOST:PORT
    topic: str | None
    batch_size: int
    rate: float  # messages per second per partition, 0 = as fast as possible
    persistent: bool
    ack_log: str | None
    sent_property: str | None  # a property set to time.time_ns() at send
    window: int
    security: Security


@dataclass(frozen=True)
class MqSource:
    """One MQ queue (a durable subscription's queue or a named queue) drained in order."""

    label: str  # the `source` column
    address: str
    queue: str  # for a subscription: its queue, found on the driver before reading
    subscription: str | None
    security: Security


@dataclass(frozen=True)
class SbSource:
    """One Service Bus queue or topic subscription drained through azure-servicebus."""

    label: str
    connection_string: str
    queue: str | None
    topic: str | None
    subscription: str | None
    sessions: str
    sequence_property: str
    receive_mode: str
    receivers: int = SESSION_RECEIVERS  # sessions held at once (sessions all or sequenced)


@dataclass(frozen=True)
class ReadOptions:
    sources: tuple[MqSource | SbSource, ...]  # one partition each, in this order
    idle: float
    max_messages: int | None
    batch_size: int


def _unknown(options: Mapping[str, str], known: frozenset[str]) -> None:
    unknown = sorted(k for k in options if k.lower() not in known)
    if unknown:
        raise QmgrSourceError(
            f"unknown option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )


def _get(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name)
    return None if value is None or value == "" else str(value)


def _int(options: Mapping[str, str], name: str, default: int | None, low: int) -> int | None:
    text = _get(options, name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if value < low:
        raise QmgrSourceError(f"option {name} must be an integer >= {low}, got {text!r}")
    return value


def _float(options: Mapping[str, str], name: str, default: float, *, positive: bool) -> float:
    text = _get(options, name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        what = "a number > 0" if positive else "a number >= 0"
        raise QmgrSourceError(f"option {name} must be {what}, got {text!r}")
    return value


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    text = _get(options, name)
    if text is None:
        return default
    if text.lower() in ("true", "yes", "1"):
        return True
    if text.lower() in ("false", "no", "0"):
        return False
    raise QmgrSourceError(f"option {name} must be true or false, got {text!r}")


def _choice(options: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    text = (_get(options, name) or choices[0]).lower()
    if text not in choices:
        raise QmgrSourceError(f"option {name} must be one of {', '.join(choices)}, got {text!r}")
    return text


def _names(options: Mapping[str, str], name: str) -> list[str]:
    text = _get(options, name)
    if text is None:
        return []
    names = [n.strip() for n in text.split(",")]
    if not all(names):
        raise QmgrSourceError(f"option {name} has an empty name in {text!r}")
    return names


def node_address(node: str | None) -> str:
    """HOST:PORT for the ``node`` option (a HOST:PORT or a node registered on this machine)."""
    if node is None:
        raise QmgrSourceError("option node is required (HOST:PORT or a local node's name)")
    try:
        return resolve(node)
    except LookupError as exc:
        raise QmgrSourceError(f"unknown node {node!r}: {exc}") from None


def security(options: Mapping[str, str]) -> Security:
    return Security(*(_get(options, name) for name in SECURITY_OPTIONS))


def write_options(options: Mapping[str, str]) -> WriteOptions:
    _unknown(options, WRITE_OPTIONS)
    node = _get(options, "node")
    address = node_address(node)
    assert node is not None
    sent_property = _get(options, "sent_property")
    return WriteOptions(
        node=node,
        address=address,
        topic=_get(options, "topic"),
        batch_size=_int(options, "batch_size", 100, 1) or 100,
        rate=_float(options, "rate", 0.0, positive=False),
        persistent=_bool(options, "persistent", True),
        ack_log=_get(options, "ack_log"),
        sent_property=sent_property,
        window=_int(options, "window", 8, 1) or 8,
        security=security(options),
    )


def connection_string(servicebus: str) -> str:
    """A connection string for the ``servicebus`` option: itself, or the emulator's for a
    node's Service Bus port given as HOST:PORT."""
    if "=" in servicebus:
        return servicebus
    if ":" not in servicebus:
        raise QmgrSourceError(
            f"option servicebus must be a connection string or HOST:PORT, got {servicebus!r}"
        )
    return f"Endpoint=sb://{servicebus};{EMULATOR_KEY};UseDevelopmentEmulator=true;"


def _mq_sources(options: Mapping[str, str], label: str | None) -> list[MqSource]:
    node = _get(options, "node")
    address = node_address(node)
    subs, queues = _names(options, "subscription"), _names(options, "queue")
    if bool(subs) == bool(queues):
        raise QmgrSourceError("an MQ read needs either option subscription or option queue")
    sec = security(options)
    if queues:
        return [MqSource(label or f"mq:{node}/queue/{q}", address, q, None, sec) for q in queues]
    return [MqSource(label or f"mq:{node}/subscription/{s}", address, "", s, sec) for s in subs]


def _sb_sources(options: Mapping[str, str], label: str | None) -> list[SbSource]:
    conn = connection_string(_get(options, "servicebus") or "")
    sessions = _choice(options, "sessions", SESSION_MODES)
    mode = _choice(options, "receive_mode", RECEIVE_MODES)
    seq_prop = _get(options, "sequence_property") or "LoadSeq"
    queues, topic = _names(options, "queue"), _get(options, "topic")
    subs = _names(options, "subscription")
    if queues and (topic or subs):
        raise QmgrSourceError("a Service Bus read takes option queue, or topic + subscription")
    if not queues and not (topic and subs):
        raise QmgrSourceError("a Service Bus read needs option queue, or topic + subscription")

    def source(label_default: str, queue: str | None, sub: str | None) -> SbSource:
        return SbSource(
            label or label_default,
            conn,
            queue,
            topic if sub else None,
            sub,
            sessions,
            seq_prop,
            mode,
        )

    if queues:
        return [source(f"sb:{q}", q, None) for q in queues]
    return [source(f"sb:{topic}/subscriptions/{s}", None, s) for s in subs]


def read_options(options: Mapping[str, str]) -> ReadOptions:
    _unknown(options, READ_OPTIONS)
    has_node, has_sb = _get(options, "node") is not None, _get(options, "servicebus") is not None
    if has_node == has_sb:
        raise QmgrSourceError("a read needs exactly one of option node (MQ) or servicebus")
    label = _get(options, "source")
    sources: list[MqSource | SbSource] = []
    if has_node:
        for name in ("sessions", "sequence_property", "receive_mode", "topic"):
            if _get(options, name) is not None:
                raise QmgrSourceError(f"option {name} applies to Service Bus reads only")
        sources.extend(_mq_sources(options, label))
    else:
        for name in SECURITY_OPTIONS:
            if _get(options, name) is not None:
                raise QmgrSourceError(
                    f"option {name} applies to MQ reads only (a Service Bus connection "
                    "string carries its own credentials)"
                )
        sources.extend(_sb_sources(options, label))
    if sources and isinstance(sources[0], SbSource) and sources[0].sessions == "sequenced":
        for name, value in (("max_messages", None), ("receive_mode", "peek_lock")):
            if _get(options, name) not in (None, value):
                raise QmgrSourceError(
                    f"option {name} does not apply to sessions=sequenced (every session is "
                    "drained, peek-lock, deferring early arrivals)"
                )
    if label is not None and len(sources) > 1:
        raise QmgrSourceError("option source labels one source; this read has several")
    max_messages = _int(options, "max_messages", None, 1)
    return ReadOptions(
        sources=tuple(_partitioned(options, sources, max_messages)),
        idle=_float(options, "idle", 2.0, positive=True),
        max_messages=max_messages,
        batch_size=_int(options, "batch_size", 100, 1) or 100,
    )


def _partitioned(
    options: Mapping[str, str], sources: list[MqSource | SbSource], max_messages: int | None
) -> list[MqSource | SbSource]:
    """Each session source read by ``partitions`` partitions (Spark tasks: processes of their
    own, so the SDK's per-message work is not held to one interpreter), each holding its share
    of the :data:`SESSION_RECEIVERS` sessions at once; a session is read by one of them at a
    time (its lock), so each session's order is kept."""
    count = _int(options, "partitions", 1, 1) or 1
    if count == 1:
        return sources
    if count > MAX_PARTITIONS:
        raise QmgrSourceError(f"option partitions must be at most {MAX_PARTITIONS}, got {count}")
    if not all(isinstance(src, SbSource) and src.sessions != "none" for src in sources):
        raise QmgrSourceError(
            "option partitions applies to Service Bus reads with sessions (all or sequenced): "
            "an entity without sessions is read in its order by one partition"
        )
    if max_messages is not None:
        raise QmgrSourceError("option max_messages needs partitions = 1 (one budget)")
    receivers = max(1, SESSION_RECEIVERS // count)
    return [
        replace(src, receivers=receivers)
        for src in sources
        if isinstance(src, SbSource)
        for _ in range(count)
    ]
