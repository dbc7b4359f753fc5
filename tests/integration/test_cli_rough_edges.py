"""Quick-command rough edges, against real `qmgr start` processes."""

from __future__ import annotations

from tests.integration.conftest import NodeProcess


def test_put_priority_orders_the_queue(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(PRIQ) DEFPRTY(5)")
    assert node.cli("put", "QM1", "PRIQ", "low", "--priority", "1").returncode == 0
    assert node.cli("put", "QM1", "PRIQ", "as-queue-default").returncode == 0
    assert node.cli("put", "QM1", "PRIQ", "high", "--priority", "9").returncode == 0
    assert node.cli("put", "QM1", "PRIQ", "zero", "--priority", "0").returncode == 0
    res = node.cli("get", "QM1", "PRIQ", "-n", "4")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["high", "as-queue-default", "low", "zero"]


def test_put_priority_out_of_range_is_refused(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(PRIQ)")
    for bad in ("10", "-1"):
        res = node.cli("put", "QM1", "PRIQ", "x", "--priority", bad)
        assert res.returncode == 2
        assert "--priority" in res.stderr
    assert node.cli("get", "QM1", "PRIQ").returncode == 2
