"""Subscriptions: what a subscriber asked for and where its publications go."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any


@dataclass(frozen=True)
class Subscription:
    name: str
    sub_id: str  # 48 hex characters
    topic_str: str  # full topic string (TOPICOBJ's string joined with TOPICSTR)
    dest: str  # destination queue
    durable: bool
    managed: bool  # DESTCLAS(MANAGED): the queue was created for this subscription
    subtype: str = "API"  # ADMIN (DEFINE SUB), API (application), PROXY (from a peer)
    topic_obj: str = ""
    dest_qmgr: str = ""
    subscope: str = "ALL"
    userdata: str = ""
    selector: str = ""
    pubprty: str = "ASPUB"
    destcorl: str = ""
    psprop: str = "MSGPROP"
    subuser: str = ""
    wschema: str = "TOPIC"
    created: float = 0.0
    altered: float = 0.0

    @property
    def correl_id(self) -> bytes:
        """CorrelId of delivered copies: DESTCORL if given, else the subscription id."""
        cached: bytes | None = self.__dict__.get("_correl")
        if cached is None:
            cached = bytes.fromhex(self.destcorl or self.sub_id)
            object.__setattr__(self, "_correl", cached)
        return cached

    @property
    def copy_priority(self) -> int:
        """The priority of delivered copies per PUBPRTY: a fixed 0-9, or -1 for the
        publication's own (ASPUB, ASQDEF). Read for every copy, so kept once computed."""
        cached: int | None = self.__dict__.get("_copy_priority")
        if cached is None:
            cached = int(self.pubprty) if self.pubprty.isdigit() else -1
            object.__setattr__(self, "_copy_priority", cached)
        return cached

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Subscription:
        return cls(**data)

    def altered_with(self, **changes: Any) -> Subscription:
        return replace(self, **changes)


@dataclass
class SubscriptionStats:
    """Run-time status shown by DISPLAY SBSTATUS."""

    num_msgs: int = 0
    last_msg: float = 0.0
    resumed: float = 0.0
    active_connections: int = 0
