"""A process using qmgr's client starts programs with fork-based ``subprocess`` calls (as
PySpark starts its JVM: ``preexec_fn``) while its gRPC channels are busy, and every child
runs its program. With gRPC's fork support on (grpcio's default), grpcio 1.80 and later abort
some such children in its post-fork handler ("epoll_wait error: Bad file descriptor") before
they exec: Spark's gateway then "exited before sending its port number"."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tests.integration.conftest import NodeProcess

CHILD = textwrap.dedent(
    """
    import signal, subprocess, sys, threading
    from qmgr.client import QueueManagerClient

    address, rounds = sys.argv[1], int(sys.argv[2])
    stop = False

    def busy():
        with QueueManagerClient(address) as qm:
            while not stop:
                qm.put("FORKQ", b"x")
                qm.get("FORKQ")

    threads = [threading.Thread(target=busy) for _ in range(2)]
    for t in threads:
        t.start()
    failed = []
    try:
        for _ in range(rounds):
            done = subprocess.run(
                ["/bin/true"],
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
                stderr=subprocess.PIPE,
            )
            if done.returncode != 0:
                failed.append((done.returncode, done.stderr.decode(errors="replace")[-200:]))
    finally:
        stop = True
        for t in threads:
            t.join()
    print(len(failed), failed[:2])
    """
)


def test_programs_started_by_fork_while_channels_are_busy_all_run(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(FORKQ)")
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, node.address, "200"],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("0 "), done.stdout
