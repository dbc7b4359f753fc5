"""kill -9 of a topic host holding publications for a subscriber node: after the restart it
sends what it held before anything it receives anew, so every acknowledged persistent
publication reaches the durable subscriber exactly once (the kill-host scenario).

A restarted host serves its Peer port while it is still joining the cluster (its partial
repository waits for a full repository, with the view kept on disk, for up to 3 s). A publisher
whose channel comes back in that window routes new publications to it again, and the host
passes them on to the subscriber node with keys of its new epoch. The publications restored
from its transmission queue carry keys of the old epoch, lower than those: sent after them,
the subscriber node took them for duplicates and dropped them (the Spark kill-host scenario
lost the few publications the host held at the kill). The test makes the window certain: the
subscriber node is down while the host takes publications for it, and the full repository is
frozen (SIGSTOP) while the host restarts.
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from pathlib import Path

from qmgr.client import OutgoingMessage
from qmgr.launcher.poll import wait_for
from tests.integration.cluster_nodes import Cluster, ClusterNode

TOPIC = "Prices/Fruit/Apples"
ROUTE = "qmgr.route"


def _held(node: ClusterNode) -> dict[str, int]:
    """Publications on each of ``node``'s transmission queues."""
    return {peer: int(s.get("XQMSGSA", "0")) for peer, s in node.chstatus().items()}


def test_restarted_host_sends_what_it_held_before_what_it_receives_anew(tmp_path: Path) -> None:
    cl = Cluster(tmp_path).start(["FR1"], ["HOSTA1", "HOSTA2", "PUB1", "SUB1"])
    fr1 = cl["FR1"].proc
    assert fr1 is not None
    try:
        cl.two_hosts_and_a_subscription(("HOSTA1", "HOSTA2"), "Prices/#", "ALL")
        acknowledged: list[str] = []

        def publish(bodies: list[str]) -> None:
            cl["PUB1"].c.publish_many(
                [(TOPIC, OutgoingMessage(b, persistent=True)) for b in bodies]
            )
            acknowledged.extend(bodies)

        # HOSTA1 takes its share and holds it for SUB1, which is down
        cl["SUB1"].kill()
        publish([f"held-{i}" for i in range(20)])
        wait_for(
            lambda: _held(cl["HOSTA1"]).get("SUB1"),
            20.0,
            what="HOSTA1 holding its share for SUB1",
            retry=Exception,
        )
        cl["HOSTA1"].kill()
        cl["SUB1"].start()
        # the restarted HOSTA1 waits for FR1 while PUB1's channel to it comes back
        stop = threading.Event()

        def stream() -> None:
            n = 0
            while not stop.is_set():
                publish([f"new-{n}"])
                n += 1
                time.sleep(0.02)

        publisher = threading.Thread(target=stream)
        publisher.start()
        try:
            fr1.send_signal(signal.SIGSTOP)
            try:
                cl["HOSTA1"].start()
            finally:
                fr1.send_signal(signal.SIGCONT)
            wait_for(
                lambda: cl["PUB1"].chstatus().get("HOSTA1", {}).get("STATUS") == "RUNNING",
                20.0,
                what="PUB1 routing through the restarted HOSTA1",
                retry=Exception,
            )
            time.sleep(0.5)  # a few more publications through both hosts
        finally:
            stop.set()
            publisher.join(30)
        publish(["last"])

        sub = cl["SUB1"].c.subscribe("Prices/#", name="ALL", durable=True)
        received: list[str] = []
        routes: dict[str, str] = {}  # body -> the host it came through

        def take(timeout: float) -> int:
            batch = sub.receive_batch(timeout=timeout)
            for m in batch:
                received.append(m.body.decode())
                routes[m.body.decode()] = str(m.properties[ROUTE]).split(",")[1]
            return len(batch)

        while not set(acknowledged) <= set(received) and take(10):
            pass
        # whatever is still to come is on a transmission queue: once they are all empty, a
        # late duplicate would already be on SUB1's queue
        for name in ("PUB1", "HOSTA1", "HOSTA2"):
            wait_for(
                lambda name=name: not any(_held(cl[name]).values()),
                20.0,
                what=f"{name}'s transmission queues empty",
                retry=Exception,
            )
        while take(1):
            pass
        sub.close()
        counts = Counter(received)
        missing = [b for b in acknowledged if b not in counts]
        assert not missing, f"{len(missing)} acknowledged publications lost: {missing}"
        duplicates = sorted(k for k, v in counts.items() if v > 1)
        assert not duplicates, f"duplicates: {duplicates}"
        assert set(counts) == set(acknowledged)
        # HOSTA1 held a share, and routed new publications after its restart (the window)
        via = Counter((b.partition("-")[0], host) for b, host in routes.items())
        assert via["held", "HOSTA1"] and via["new", "HOSTA1"], via
    finally:
        if fr1.poll() is None:
            fr1.send_signal(signal.SIGCONT)
        cl.stop()
