"""Messages as they sit on queues and travel through the publish/subscribe engine."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from qmgr.core.values import Properties

MAX_PRIORITY = 9


class SharedEncoding:
    """What every copy of one publication has in common, encoded once by the edge that sends
    its copies and reused for each (opaque to the core: it only hands the cell from
    a publication to its copies)."""

    __slots__ = ("data", "used")

    def __init__(self) -> None:
        self.data: bytes | None = None
        self.used = False  # a copy was encoded (the next one makes ``data``)


@dataclass(slots=True)
class Message:
    """One message. ``properties`` may be shared between the copies of one publication and is
    never mutated in place; per-copy publication data lives in its own fields."""

    message_id: str
    body: bytes
    properties: Properties = field(default_factory=dict)
    persistent: bool | None = False  # None: as the queue or topic default (DEFPSIST)
    priority: int = 0  # -1: as the queue or topic default (DEFPRTY)
    ttl: float = 0.0  # time to live in seconds as given by the sender; 0 = unlimited
    expiry: float | None = None  # absolute time (seconds since the epoch) or None
    correl_id: bytes = b""
    put_time: float = 0.0
    backout_count: int = 0
    reply_to_queue: str = ""
    # Publication data added to delivered copies (MQTopicString, MQSubUserData, MQIsRetained).
    topic: str = ""
    sub_user_data: str = ""
    retained: bool = False
    sequence: int = 0  # node-local order of arrival; also the store's key
    # The copies of one publication share this cell (``PubSub`` sets it); a changed copy
    # (``copy``, ``with_properties``) starts without one. A cache, not part of the value.
    shared: SharedEncoding | None = field(default=None, compare=False, repr=False)

    def expired(self, now: float) -> bool:
        return self.expiry is not None and now >= self.expiry

    def copy(self, **changes: object) -> Message:
        return replace(self, shared=None, **changes)  # type: ignore[arg-type]

    def with_properties(self, properties: Properties) -> Message:
        """A copy with other properties (``copy`` without its generic cost)."""
        return Message(
            self.message_id,
            self.body,
            properties,
            self.persistent,
            self.priority,
            self.ttl,
            self.expiry,
            self.correl_id,
            self.put_time,
            self.backout_count,
            self.reply_to_queue,
            self.topic,
            self.sub_user_data,
            self.retained,
            self.sequence,
        )

    @property
    def size(self) -> int:
        return len(self.body)

    def publication_properties(self) -> Properties:
        """The properties an application sees: the message's own plus MQ's publication ones."""
        if not self.topic:
            return self.properties
        props: Properties = dict(self.properties)
        props["MQTopicString"] = self.topic
        if self.sub_user_data:
            props["MQSubUserData"] = self.sub_user_data
        if self.retained:
            props["MQIsRetained"] = True
        return props
