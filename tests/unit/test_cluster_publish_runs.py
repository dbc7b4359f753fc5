"""Publications a cluster member's applications send in one batch end exactly as the same
publications each published on its own (``ClusterAgent.publish``): runs of one topic are
planned and delivered here once (``ClusterAgent.publish_run``), and that must not change what
is delivered here, what is queued for each member and under which keys, which topic host each
publication goes to (and the workload balancer's state after them), what a full transmission
queue refuses or drops (NPMSGDLV, PMSGDLV), which publication a topic retains, nor the error
that ends the batch."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.records import RepoEvent
from cluster.repository import Cmd
from cluster.topics import TopicObject
from qmgr.core.clock import ManualClock
from qmgr.core.errors import MQError
from qmgr.core.message import Message
from qmgr.core.queue import QueueDef
from qmgr.node.cluster.agent import ClusterAgent
from qmgr.node.config import ClusterSettings, NodeConfig
from qmgr.node.runtime import NodeRuntime, Publication

TOPICS = ["Direct/a", "Direct/b", "Local/c", "Hosted/h", "Hosted/i"]
HOSTS = ["HOSTA", "HOSTB"]


@dataclass(frozen=True)
class Scenario:
    xmitq_depth: int  # MAXDEPTH of the transmission queues to SUB2 and HOSTA (others large)
    local_depth: int  # MAXDEPTH of the local subscription's queue
    npmsgdlv: str
    pmsgdlv: str
    publications: tuple[tuple[str, bool, bool], ...]  # (topic, persistent, retain)


scenarios = st.builds(
    Scenario,
    xmitq_depth=st.integers(1, 12),
    local_depth=st.integers(0, 12),
    npmsgdlv=st.sampled_from(["ALL", "ALLAVAIL"]),
    pmsgdlv=st.sampled_from(["ALL", "ALLAVAIL"]),
    publications=st.lists(
        st.tuples(st.sampled_from(TOPICS), st.booleans(), st.integers(0, 5).map(lambda n: n == 0)),
        min_size=1,
        max_size=20,
    ).map(tuple),
)


def node(s: Scenario) -> tuple[NodeRuntime, ClusterAgent]:
    settings = ClusterSettings("CL", join=("127.0.0.1:1",), insecure=True)
    config = NodeConfig("PUB1", "127.0.0.1", 0, None, cluster=settings, insecure=True)
    rt = NodeRuntime(config, clock=ManualClock(1_000.0))
    agent = ClusterAgent(rt, settings, "127.0.0.1:9")
    rt.agent = agent
    qm = rt.qm
    repo = agent.link.repository
    events: list[RepoEvent] = []
    for name in ["PUB1", "SUB1", "SUB2", "HOSTX", *HOSTS]:
        events += repo.apply(Cmd.join_member(name, f"{name}_1", "127.0.0.1:3")).events
    attrs = {"NPMSGDLV": s.npmsgdlv, "PMSGDLV": s.pmsgdlv}
    events += repo.apply(Cmd.define_topic("DIR", "HOSTX", "Direct", "CL", "DIRECT", attrs)).events
    for host in HOSTS:  # one topic hosted twice: each publication goes to the host chosen
        events += repo.apply(
            Cmd.define_topic("HOSTED", host, "Hosted", "CL", "TOPICHOST", attrs)
        ).events
    agent._apply_topology(events)
    qm.define_topic(TopicObject("LOCAL", "Local", attrs))
    qm.define_queue(QueueDef("QL", maxdepth=s.local_depth))
    qm.subscribe("Direct/a", name="SL", dest="QL", durable=True)
    qm.subscribe("Hosted/h", name="SH", dest="QL", durable=True)
    agent.hello("Q_SUB1", "SUB1", "127.0.0.1:4", ["Direct/#"])
    agent.hello("Q_SUB2", "SUB2", "127.0.0.1:5", ["Direct/a"])
    for i, host in enumerate(HOSTS):
        agent.hello(f"Q_{host}", host, f"127.0.0.1:{6 + i}", ["Hosted/#"])
    agent.channels.set_maxdepth("SUB2", s.xmitq_depth)
    agent.channels.set_maxdepth("HOSTA", s.xmitq_depth)
    # the plans kept after a first publication on each topic (and the balancer's state)
    for topic in TOPICS:
        agent.plans.plan(topic)
    assert agent.plans.hosted("Hosted/h") is not None
    return rt, agent


def messages(s: Scenario) -> list[Publication]:
    return [
        Publication(topic, Message("", b"m%d" % i, {"i": i}, persistent, 4), retain)
        for i, (topic, persistent, retain) in enumerate(s.publications)
    ]


def one_by_one(rt: NodeRuntime, agent: ClusterAgent, batch: list[Publication]) -> Any:
    """The batch as the per-publication path publishes it (checked and stamped first)."""
    for p in batch:
        rt.qm.accept_publications(p.topic, [p.message])
    accepted = deliveries = forwards = 0
    peers: set[str] = set()
    for p in batch:
        try:
            delivered, sent_to = agent.publish(
                p.topic, p.message, retain=p.retain, scope_qmgr=False, accepted=True
            )
        except MQError as exc:
            return accepted, deliveries, forwards, tuple(sorted(peers)), exc.reason_name
        accepted += 1
        deliveries += delivered
        forwards += len(sent_to)
        peers.update(sent_to)
    return accepted, deliveries, forwards, tuple(sorted(peers)), ""


def state(rt: NodeRuntime, agent: ClusterAgent) -> dict[str, Any]:
    queued = {
        peer: [
            (
                item.key,
                item.publication.topic,
                item.publication.message.body,
                item.publication.persistent,
                item.persistent,
            )
            for item in ch.sm.pending
            if item.publication is not None
        ]
        for peer, ch in agent.channels.channels.items()
    }
    local = [(m.body, m.topic) for m in rt.qm.browse("QL", limit=1000)]
    retained = {topic: m.body for topic, m in rt.qm.pubsub.retained.items()}
    return {
        "queued": queued,
        "local": local,
        "dropped": agent.dropped,
        "retained": retained,
        "balancer": agent.balancer.factors("HOSTED"),
    }


@settings(max_examples=300, deadline=None)
@given(scenarios)
def test_a_batch_published_in_runs_ends_as_each_publication_on_its_own(s: Scenario) -> None:
    async def run() -> None:
        whole_rt, whole = node(s)
        each_rt, each = node(s)
        result = whole_rt.publish_batch(messages(s))
        got = (
            result.accepted,
            result.deliveries,
            result.forwards,
            result.forwarded_to,
            result.error.reason_name if result.error else "",
        )
        assert got == one_by_one(each_rt, each, messages(s))
        assert state(whole_rt, whole) == state(each_rt, each)
        for agent in (whole, each):
            await agent.channels.stop()

    asyncio.run(run())
