"""How `qmgr sub` knows that a subscription it made is in place across the cluster.

A cluster member queues a subscription's proxy subscriptions for the topic hosts (or, for a
CLROUTE(DIRECT) topic, every member) on its cluster-sender channels while it makes the
subscription, and a member acknowledges what it received only once it applied it. So once each
cluster-sender channel of the node has had acknowledged everything that waited on it just after
the subscription was made (DISPLAY CHSTATUS: MSGS acknowledged, XQMSGSA waiting), the topic hosts
hold the proxy subscriptions and a publication sent to any of them reaches the subscription.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PROPAGATION_WAIT = 15.0  # seconds `qmgr sub` waits for its proxy subscriptions to arrive
POLL = 0.05


@dataclass(frozen=True)
class Sender:
    """One cluster-sender channel as DISPLAY CHSTATUS shows it."""

    channel: str
    cluster: str
    status: str
    acknowledged: int  # MSGS: items the member acknowledged since the node started
    waiting: int  # XQMSGSA: items queued or sent and not yet acknowledged
    error: str  # LSTERROR

    def describe(self) -> str:
        why = f": {self.error}" if self.error else ""
        return f"{self.channel} {self.status}{why}, {self.waiting} waiting"


def senders(client: Any) -> dict[str, Sender] | None:
    """The node's cluster-sender channels by name; None when it cannot tell (the call failed, or
    the user may not run MQSC there)."""
    from qmgr.client import MQClientError

    try:
        ok, records = client.mqsc_ok("DISPLAY CHSTATUS(*) ALL")
    except MQClientError:
        return None
    if not ok:
        return None
    out: dict[str, Sender] = {}
    for record in records:
        a = record.attrs
        if a.get("CHLTYPE") != "CLUSSDR":
            continue
        channel, peer = a.get("CHANNEL", ""), a.get("RQMNAME", "")
        out[channel] = Sender(
            channel,
            channel[: -len(peer) - 1] if peer and channel.endswith(f".{peer}") else "",
            a.get("STATUS", ""),
            int(a.get("MSGS") or 0),
            int(a.get("XQMSGSA") or 0),
            a.get("LSTERROR", ""),
        )
    return out


@dataclass(frozen=True)
class Propagation:
    """What :func:`wait_delivered` found: the node's cluster (``""`` when it has no
    cluster-sender channel) and the channels that had not delivered in time."""

    cluster: str
    late: tuple[Sender, ...]


def wait_delivered(
    client: Any,
    timeout: float = PROPAGATION_WAIT,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Propagation | None:
    """Wait until every cluster-sender channel of the node behind ``client`` has delivered all
    that waited on it when called, up to ``timeout`` seconds; a STOPPED channel is not waited
    for. None when the node cannot tell (see :func:`senders`)."""
    first = senders(client)
    if first is None:
        return None
    cluster = next((s.cluster for s in first.values() if s.cluster), "")
    # delivered once the member acknowledged as many more items as were waiting, or none wait
    owed = {name: s.acknowledged + s.waiting for name, s in first.items() if s.waiting}
    deadline = clock() + timeout
    late: list[Sender] = []
    while owed:
        now = senders(client)
        if now is None:
            return None
        late = [
            now[name]
            for name, target in owed.items()
            if name in now and now[name].waiting and now[name].acknowledged < target
        ]
        owed = {s.channel: owed[s.channel] for s in late if s.status != "STOPPED"}
        if owed and clock() < deadline:
            sleep(POLL)
        else:
            break
    return Propagation(cluster, tuple(late))
