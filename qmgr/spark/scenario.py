"""A load scenario: one TOML file, parsed and checked once into frozen dataclasses.

Every problem in the file is collected and reported together (:class:`ScenarioError`)::

    name = "two-hosts"                  # optional: defaults to the file's stem
    description = "..."                 # optional
    topology = "topology-two-hosts.toml"  # required: a topology file (as for `qmgr cluster
                                        # up`), relative to this file

    [load]
    nodes = ["PUB1"]                    # required: publishers connect here (publisher i to
                                        # nodes[i % len(nodes)])
    topics = ["Prices/Fruit/Apples"]    # required: publisher i publishes on topics[i % len]
    publishers = 4                      # how many publishers (Spark partitions), default 1
    messages = 1000                     # messages per publisher, default 1000
    rate = 0                            # messages/s per publisher, 0 = as fast as possible
    persistent = true                   # default true
    batch_size = 100                    # messages per publish batch, default 100
    payload = 64                        # body size in bytes, default 64
    properties = { Kind = ["A", "B"] }  # more message properties: a string for every
                                        # publisher, or a list (publisher i: list[i % len])

    [[subscription]]                    # one table per measured subscription
    name = "SUB1"                       # required, unique: the subscriber in the metrics
    node = "SUB1"                       # required: the node that holds it
    topic = "Prices/#"                  # required: the MQ topic pattern it receives
    # an MQ subscription (the default): the job defines it as a durable subscription
    # (DEFINE SUB ... DESTCLAS(MANAGED)) before the load and drains it afterwards;
    # a Service Bus one: the entity the node's namespace holds, fed from `topic` (a bridge):
    servicebus = "prices/subscriptions/ordered"   # "TOPIC/subscriptions/SUB" or a queue
    sessions = "none"                   # "none" | "all" | "sequenced" (Service Bus only)
    partitions = 1                      # sessions read by this many Spark tasks at once
                                        # (sessions "all" or "sequenced" only)

    [drain]
    idle = 3.0                          # seconds with nothing new before a drain ends
    settle = 0.0                        # seconds to wait after the load before draining

    [fault]
    kill = { node = "HOSTA1", after = 0.4, restart = 1.0 }
    # kill -9 the node once 40% of the messages are acknowledged; start it again on the
    # same data `restart` seconds later (leave restart out to leave it down)
"""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from qmgr.launcher.topology import ProblemsError, TopologyError, _kind, load_topology
from qmgr.spark.options import MAX_PARTITIONS

# Names of the properties the job gives every injected message (the contract of the load job).
RUN = "LoadRun"  # the run id
PUBLISHER = "LoadPublisher"  # the publisher id
SEQ = "LoadSeq"  # 1, 2, 3... per publisher
SENT_NS = "LoadSentNs"  # time.time_ns() when the message was sent

Sessions = Literal["none", "all", "sequenced"]
SESSIONS: tuple[Sessions, ...] = ("none", "all", "sequenced")
TOP_KEYS = ("name", "description", "topology", "load", "subscription", "drain", "fault")
LOAD_KEYS = (
    "nodes",
    "topics",
    "publishers",
    "messages",
    "rate",
    "persistent",
    "batch_size",
    "payload",
    "properties",
)
SUB_KEYS = ("name", "node", "topic", "servicebus", "sessions", "partitions")
DRAIN_KEYS = ("idle", "settle")
FAULT_KEYS = ("kill",)
KILL_KEYS = ("node", "after", "restart")
MAX_PUBLISHERS = 1000


class ScenarioError(ProblemsError):
    """A scenario that cannot be used."""

    WHAT = "scenario"


@dataclass(frozen=True)
class Load:
    nodes: tuple[str, ...]
    topics: tuple[str, ...]
    publishers: int = 1
    messages: int = 1000
    rate: float = 0.0
    persistent: bool = True
    batch_size: int = 100
    payload: int = 64
    properties: tuple[tuple[str, tuple[str, ...]], ...] = ()  # name, value per publisher

    @property
    def total(self) -> int:
        return self.publishers * self.messages

    def node_of(self, publisher: int) -> str:
        return self.nodes[publisher % len(self.nodes)]

    def topic_of(self, publisher: int) -> str:
        return self.topics[publisher % len(self.topics)]


@dataclass(frozen=True)
class Subscription:
    name: str
    node: str
    topic: str
    servicebus: str | None = None  # the Service Bus entity; None: an MQ subscription
    sessions: Sessions = "none"
    partitions: int = 1  # Spark tasks reading its sessions at once

    @property
    def kind(self) -> str:
        return "servicebus" if self.servicebus else "mq"

    @property
    def mq_name(self) -> str:
        """The name of the durable MQ subscription the job defines for it."""
        return f"LOAD.{self.name}"


@dataclass(frozen=True)
class Drain:
    idle: float = 3.0
    settle: float = 0.0


@dataclass(frozen=True)
class Kill:
    node: str
    after: float  # fraction of the messages acknowledged before the kill
    restart: float | None = None  # seconds until the node starts again; None: never


@dataclass(frozen=True)
class Scenario:
    name: str
    topology: Path
    load: Load
    subscriptions: tuple[Subscription, ...]
    description: str = ""
    drain: Drain = Drain()
    kill: Kill | None = None
    source: str = ""


def load_scenario(path: Path) -> Scenario:
    """The scenario in ``path`` (its topology file is checked too)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(str(path), [f"cannot be read: {exc}"]) from None
    return parse_scenario(text, str(path), path.parent, default_name=path.stem)


def parse_scenario(
    text: str,
    source: str = "<scenario>",
    directory: Path | None = None,
    *,
    default_name: str = "scenario",
) -> Scenario:
    """Parse and check a scenario; ScenarioError lists every problem found. The topology file
    must exist and parse, and every node the scenario names must be in it."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(source, [f"not valid TOML: {exc}"]) from None
    problems: list[str] = []
    _unknown(data, TOP_KEYS, "", problems)
    name = _text(data.get("name", default_name), "name", "", problems) or default_name
    description = _text(data.get("description", ""), "description", "", problems) or ""
    topology_path, node_names = _topology(data.get("topology"), directory, problems)
    load = _load(data.get("load"), problems)
    subs = _subscriptions(data.get("subscription"), problems)
    drain = _drain(data.get("drain", {}), problems)
    kill = _fault(data.get("fault", {}), problems)
    if node_names is not None:
        raw = data.get("load", {}).get("nodes") if isinstance(data.get("load"), dict) else None
        raw = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
        named = [("load.nodes", n) for n in raw if isinstance(n, str)]
        named += [(f"subscription {s.name}", s.node) for s in subs]
        named += [("fault.kill", kill.node)] if kill else []
        for where, node in named:
            if node not in node_names:
                problems.append(
                    f"{where}: node '{node}' is not in the topology{_hint(node, node_names)}"
                )
    if problems or load is None or topology_path is None:
        raise ScenarioError(source, problems or ["incomplete"])
    return Scenario(
        name=name,
        topology=topology_path,
        load=load,
        subscriptions=tuple(subs),
        description=description,
        drain=drain,
        kill=kill,
        source=source,
    )


# -- sections -------------------------------------------------------------------------------------


def _topology(
    value: Any, directory: Path | None, problems: list[str]
) -> tuple[Path | None, set[str] | None]:
    if value is None:
        problems.append("'topology' (the topology file) is missing")
        return None, None
    if not isinstance(value, str) or not value:
        problems.append(f"'topology' must be a file name, got {_kind(value)}")
        return None, None
    path = Path(value)
    if not path.is_absolute() and directory is not None:
        path = directory / path
    if not path.is_file():
        problems.append(f"topology file {path} does not exist")
        return path, None
    try:
        topology = load_topology(path)
    except TopologyError as exc:
        problems.extend(f"topology: {p}" for p in exc.problems)
        return path, None
    return path, {n.name for n in topology.nodes}


def _load(value: Any, problems: list[str]) -> Load | None:
    if not isinstance(value, dict):
        problems.append("[load] is missing" if value is None else "'load' must be a table")
        return None
    _unknown(value, LOAD_KEYS, "load", problems)
    before = len(problems)
    nodes = _names(value.get("nodes"), "load.nodes", problems)
    topics = _names(value.get("topics"), "load.topics", problems)
    for topic in topics:
        if "#" in topic.split("/") or "+" in topic.split("/"):
            problems.append(f"load.topics: '{topic}' has a wildcard; publish on topic strings")
    publishers = _int(value.get("publishers", 1), "load.publishers", 1, MAX_PUBLISHERS, problems)
    messages = _int(value.get("messages", 1000), "load.messages", 1, 10**9, problems)
    batch = _int(value.get("batch_size", 100), "load.batch_size", 1, 10_000, problems)
    payload = _int(value.get("payload", 64), "load.payload", 0, 4 * 1024 * 1024, problems)
    rate = _number(value.get("rate", 0), "load.rate", problems)
    properties = _properties(value.get("properties", {}), problems)
    persistent = value.get("persistent", True)
    if not isinstance(persistent, bool):
        problems.append(f"load.persistent must be true or false, got {_kind(persistent)}")
    if len(problems) > before:
        return None
    return Load(
        nodes=tuple(nodes),
        topics=tuple(topics),
        publishers=publishers,
        messages=messages,
        rate=rate,
        persistent=bool(persistent),
        batch_size=batch,
        payload=payload,
        properties=properties,
    )


def _properties(value: Any, problems: list[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        problems.append(f"load.properties must be a table, got {_kind(value)}")
        return ()
    out = []
    for name, values in value.items():
        if name in (RUN, PUBLISHER, SEQ, SENT_NS):
            problems.append(f"load.properties: {name} is set by the job")
            continue
        if isinstance(values, str):
            values = [values]
        if (
            not isinstance(values, list)
            or not values
            or not all(isinstance(v, str) for v in values)
        ):
            problems.append(
                f"load.properties.{name} must be a string or a non-empty list of strings"
            )
            continue
        out.append((name, tuple(values)))
    return tuple(out)


def _subscriptions(value: Any, problems: list[str]) -> list[Subscription]:
    if value is None or value == []:
        problems.append("no measured subscription: add at least one [[subscription]] table")
        return []
    if not isinstance(value, list):
        problems.append("'subscription' must be an array of tables ([[subscription]])")
        return []
    subs: list[Subscription] = []
    for i, table in enumerate(value, 1):
        where = f"subscription {i}"
        if not isinstance(table, dict):
            problems.append(f"{where}: must be a table, got {_kind(table)}")
            continue
        _unknown(table, SUB_KEYS, where, problems)
        before = len(problems)
        name = _text(table.get("name"), "name", where, problems, required=True)
        node = _text(table.get("node"), "node", where, problems, required=True)
        topic = _text(table.get("topic"), "topic", where, problems, required=True)
        entity = _text(table.get("servicebus"), "servicebus", where, problems)
        sessions = table.get("sessions", "none")
        if sessions not in SESSIONS:
            problems.append(
                f"{where}: sessions must be one of {', '.join(SESSIONS)}, got {sessions!r}"
            )
        elif sessions != "none" and not entity:
            problems.append(
                f"{where}: sessions apply to a Service Bus subscription (servicebus = ...)"
            )
        partitions = table.get("partitions", 1)
        if (
            isinstance(partitions, bool)
            or not isinstance(partitions, int)
            or not 1 <= partitions <= MAX_PARTITIONS
        ):
            problems.append(
                f"{where}: partitions must be an integer from 1 to {MAX_PARTITIONS}, "
                f"got {partitions!r}"
            )
        elif partitions > 1 and sessions not in ("all", "sequenced"):
            problems.append(
                f'{where}: partitions apply to Service Bus sessions (sessions = "all" or '
                '"sequenced"): without sessions one partition reads the entity in its order'
            )
        if name and any(s.name == name for s in subs):
            problems.append(f"{where}: duplicate name '{name}'")
        if len(problems) > before or not (name and node and topic):
            continue
        subs.append(Subscription(name, node, topic, entity or None, sessions, partitions))
    return subs


def _drain(value: Any, problems: list[str]) -> Drain:
    if not isinstance(value, dict):
        problems.append("'drain' must be a table")
        return Drain()
    _unknown(value, DRAIN_KEYS, "drain", problems)
    idle = _number(value.get("idle", Drain.idle), "drain.idle", problems)
    settle = _number(value.get("settle", Drain.settle), "drain.settle", problems)
    if idle <= 0:
        problems.append("drain.idle must be more than 0 seconds")
    return Drain(idle=idle, settle=settle)


def _fault(value: Any, problems: list[str]) -> Kill | None:
    if not isinstance(value, dict):
        problems.append("'fault' must be a table")
        return None
    _unknown(value, FAULT_KEYS, "fault", problems)
    kill = value.get("kill")
    if kill is None:
        return None
    if not isinstance(kill, dict):
        problems.append('fault.kill must be a table: { node = "NAME", after = 0.4 }')
        return None
    _unknown(kill, KILL_KEYS, "fault.kill", problems)
    before = len(problems)
    node = _text(kill.get("node"), "node", "fault.kill", problems, required=True)
    after = _number(kill.get("after", 0.5), "fault.kill.after", problems)
    if not 0 <= after < 1:
        problems.append(f"fault.kill.after must be a fraction in [0, 1), got {after}")
    restart = kill.get("restart")
    if restart is not None:
        restart = _number(restart, "fault.kill.restart", problems)
    if len(problems) > before or not node:
        return None
    return Kill(node=node, after=after, restart=restart)


# -- values ---------------------------------------------------------------------------------------


def _unknown(
    table: dict[str, Any], known: tuple[str, ...], where: str, problems: list[str]
) -> None:
    for key in table:
        if key not in known:
            prefix = f"{where}: " if where else ""
            problems.append(f"{prefix}unknown key '{key}'{_hint(key, known)}")


def _hint(word: str, choices: Any) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _text(
    value: Any, what: str, where: str, problems: list[str], *, required: bool = False
) -> str | None:
    prefix = f"{where}: " if where else ""
    if value is None:
        if required:
            problems.append(f"{prefix}'{what}' is missing")
        return None
    if not isinstance(value, str) or (required and not value):
        problems.append(f"{prefix}'{what}' must be a non-empty string, got {_kind(value)}")
        return None
    return value


def _names(value: Any, what: str, problems: list[str]) -> list[str]:
    if value is None:
        problems.append(f"{what} is missing")
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        problems.append(f"{what} must be a non-empty list of strings")
        return []
    return list(value)


def _int(value: Any, what: str, low: int, high: int, problems: list[str]) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        problems.append(f"{what} must be an integer, got {_kind(value)}")
        return low
    if not low <= value <= high:
        problems.append(f"{what} must be between {low} and {high}, got {value}")
        return low
    return value


def _number(value: Any, what: str, problems: list[str]) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
        problems.append(f"{what} must be a number of at least 0, got {value!r}")
        return 0.0
    return float(value)
