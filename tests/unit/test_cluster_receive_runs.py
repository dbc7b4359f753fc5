"""A batch a node receives on a cluster channel ends exactly as the same items received one
batch each: consecutive publications of one topic that came one way are applied as a run
(``ClusterAgent.receive``), and that must not change what is delivered, dead-lettered or
refused, nor the channel's position, for any mix of topics, routes, retained publications,
undeliverable items, proxy changes, duplicates resent after a reconnect, and a subscription
queue or dead-letter queue that fills in the middle of a run."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.routing import Purpose
from cluster.topics import TopicObject
from qmgr.core.clock import ManualClock
from qmgr.core.errors import MQError
from qmgr.core.message import Message
from qmgr.core.queue import QueueDef
from qmgr.node.cluster.agent import ClusterAgent
from qmgr.node.cluster.items import Forwarded, Item
from qmgr.node.config import ClusterSettings, NodeConfig
from qmgr.node.runtime import NodeRuntime

SENDER, QMID = "PUB1", "QPUB1"
TOPICS = ["Direct/a", "Direct/b", "Other"]


@dataclass(frozen=True)
class Spec:
    """One item: a publication (topic, route, persistence, retained, broken) or a proxy."""

    topic: str
    via: tuple[str, ...]  # the route before the sender
    persistent: bool
    retain: bool
    problem: bool
    proxy: bool


specs = st.builds(
    Spec,
    topic=st.sampled_from(TOPICS),
    via=st.sampled_from([(), ("HOSTX",)]),
    persistent=st.booleans(),
    retain=st.integers(0, 9).map(lambda n: n == 0),
    problem=st.integers(0, 9).map(lambda n: n == 0),
    proxy=st.integers(0, 9).map(lambda n: n == 0),
)


@dataclass(frozen=True)
class Scenario:
    depth: int  # MAXDEPTH of the subscriptions' queues
    dlq_depth: int
    npmsgdlv: str
    resent: int  # items of the batch the node already applied (a resend after a reconnect)
    items: tuple[Spec, ...]


scenarios = st.builds(
    Scenario,
    depth=st.integers(0, 12),
    dlq_depth=st.integers(0, 4),
    npmsgdlv=st.sampled_from(["ALL", "ALLAVAIL"]),
    resent=st.integers(0, 3),
    items=st.lists(specs, min_size=1, max_size=25).map(tuple),
)


def node(s: Scenario) -> tuple[NodeRuntime, ClusterAgent]:
    settings = ClusterSettings("CL", join=("127.0.0.1:1",), insecure=True)
    config = NodeConfig("SUB1", "127.0.0.1", 0, None, cluster=settings, insecure=True)
    rt = NodeRuntime(config, clock=ManualClock(1_000.0))
    agent = ClusterAgent(rt, settings, "127.0.0.1:9")
    qm = rt.qm
    qm.define_queue(QueueDef("DLQ", maxdepth=s.dlq_depth))
    qm.attrs.deadq = "DLQ"
    qm.define_topic(TopicObject("DIRECT", "Direct", {"NPMSGDLV": s.npmsgdlv}))
    for i, topic in enumerate(["Direct/#", "Direct/a", "Other"]):
        qm.define_queue(QueueDef(f"Q{i}", maxdepth=s.depth))
        qm.subscribe(topic, name=f"S{i}", dest=f"Q{i}", durable=True)
    agent.hello(QMID, SENDER, "127.0.0.1:2", ["Direct/#", "Other"])
    return rt, agent


def items(s: Scenario) -> list[Item]:
    out = []
    for i, spec in enumerate(s.items):
        key = (1, i + 1)
        if spec.proxy:
            out.append(Item(key, proxy=(f"Proxy/{i}", True)))
            continue
        msg = Message(f"{i:048d}", b"body %d" % i, {"n": i}, spec.persistent, 4, 0.0, None)
        fwd = Forwarded(spec.topic, msg, (*spec.via, SENDER), Purpose.DELIVER, retain=spec.retain)
        problem = ("MQRC_PRIORITY_ERROR", "priority 12 is not 0-9") if spec.problem else None
        out.append(Item(key, publication=fwd, problem=problem))
    return out


def state(rt: NodeRuntime, agent: ClusterAgent) -> dict[str, Any]:
    qm = rt.qm
    queues = {}
    for name in ["DLQ", "Q0", "Q1", "Q2"]:
        queues[name] = [
            (m.message_id, m.body, sorted(m.properties.items()), m.persistent, m.priority, m.topic)
            for m in qm.browse(name, limit=1000)
        ]
    inbound = agent.receiver.peers[QMID]
    return {
        "queues": queues,
        "applied": inbound.applied,
        "items": inbound.items,
        "proxies": sorted(agent.table.topics(SENDER)),
        "retained": sorted(qm.pubsub.retained),
        "pub_counts": dict(qm.pubsub.pub_counts),
    }


def apply(agent: ClusterAgent, batches: list[list[Item]]) -> str:
    """Each batch in turn until one fails: the reason name of the error that ended it."""
    for batch in batches:
        try:
            agent.receive(QMID, batch)
        except MQError as exc:
            return exc.reason_name
    return ""


@settings(max_examples=300, deadline=None)
@given(scenarios)
def test_a_batch_applied_in_runs_ends_as_its_items_applied_one_batch_each(s: Scenario) -> None:
    async def run() -> None:
        whole_rt, whole = node(s)
        each_rt, each = node(s)
        first = items(s)
        resent = min(s.resent, len(first))
        # the node already applied the first ``resent`` items (they come again)
        for agent in (whole, each):
            apply(agent, [first[:resent]])
        err_whole = apply(whole, [items(s)])
        err_each = apply(each, [[item] for item in items(s)])
        assert err_whole == err_each
        assert state(whole_rt, whole) == state(each_rt, each)

    asyncio.run(run())
