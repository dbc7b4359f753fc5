"""kill -9 of a publishing node and of its topic host: the publications the publisher had
already sent to that host (in doubt) come back from its store after the restart and wait for
that host; they are never re-driven to the other host, so nothing arrives twice and nothing
acknowledged is lost."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

from qmgr.client import OutgoingMessage
from qmgr.launcher.poll import wait_for
from tests.integration.cluster_nodes import Cluster


def test_publisher_crash_with_its_host_down_no_duplicates_nothing_lost(tmp_path: Path) -> None:
    cl = Cluster(tmp_path).start(["FR1"], ["HOST1", "HOST2", "PUB1", "SUB1"])
    try:
        cl.two_hosts_and_a_subscription(("HOST1", "HOST2"), "Prices/Crash", "CRASH")
        sub = cl["SUB1"].c.subscribe("Prices/Crash", name="CRASH", durable=True)
        acknowledged: list[str] = []
        stop = threading.Event()

        def publish() -> None:
            client = cl["PUB1"].c
            n = 0
            while not stop.is_set():
                bodies = [str(n + i) for i in range(50)]
                try:
                    client.publish_many(
                        [("Prices/Crash", OutgoingMessage(b, persistent=True)) for b in bodies]
                    )
                except Exception:
                    return  # the node was killed: this batch is not acknowledged
                acknowledged.extend(bodies)
                n += 50

        publisher = threading.Thread(target=publish)
        publisher.start()
        received: list[str] = []

        def take(timeout: float) -> int:
            batch = sub.receive_batch(timeout=timeout)
            received.extend(m.body.decode() for m in batch)
            return len(batch)

        while len(received) < 1500:
            assert take(20), "nothing arrived before the crash"
        cl["PUB1"].kill()  # its acknowledgements from the hosts not yet committed are lost
        cl["HOST1"].kill()
        stop.set()
        publisher.join(30)
        cl["PUB1"].start()  # HOST1 is down: only never-sent publications may go to HOST2
        wait_for(
            lambda: cl["PUB1"].chstatus().get("HOST1", {}).get("STATUS") == "RETRYING",
            20.0,
            what="PUB1's channel to HOST1 retrying",
            retry=Exception,
        )
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            take(0.5)
        cl["HOST1"].start()  # in-doubt publications are resent to it and de-duplicated
        while take(5):
            pass
        cl["PUB1"].c.publish("Prices/Crash", OutgoingMessage("marker", persistent=True))
        while "marker" not in received:
            assert take(20), "the marker did not arrive"
        while take(3):
            pass
        sub.close()
        counts = Counter(received)
        duplicates = sorted((k for k, v in counts.items() if v > 1), key=int_or_marker)
        assert not duplicates, f"{len(duplicates)} duplicates: {duplicates[:20]}"
        missing = set(acknowledged) - set(counts)
        assert not missing, f"{len(missing)} acknowledged publications lost"
        assert received[-1] == "marker"
        assert len(acknowledged) >= 1500
    finally:
        cl.stop()


def int_or_marker(body: str) -> int:
    return int(body) if body.isdigit() else -1
