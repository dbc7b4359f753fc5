"""Quick-command rough edges, against real `qmgr start` processes."""

from __future__ import annotations

import json
from collections.abc import Callable

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


def _table_columns(table: str) -> dict[str, str]:
    """Each column of a rich table (box drawing) with its folded lines joined back up."""
    rows = [line for line in table.splitlines() if line.startswith(("┃", "│"))]
    header = [cell.strip() for cell in rows[0].strip("┃").split("┃")]
    parts: dict[str, list[str]] = {name: [] for name in header}
    for line in rows[1:]:
        for name, cell in zip(header, line.strip("│").split("│"), strict=True):
            parts[name].append(cell.strip())
    return {name: "".join(cells) for name, cells in parts.items()}


def test_sb_peek_shows_long_subjects_properties_and_bodies_whole_when_piped(
    node_factory: Callable[..., NodeProcess],
) -> None:
    node = node_factory("QM1", args=("--servicebus",))
    subject = "Prices/Fruit/Apples/Granny-Smith/Organic/Imported/From/New-Zealand/Via/Rotterdam"
    route = "PUB1,HOSTA1,SB1," + ",".join(f"HOP{n}" for n in range(20))
    body = "".join(str(n % 10) for n in range(300))
    assert node.cli("sb", "queue", "create", "QM1", "orders").returncode == 0
    sent = node.cli(
        "sb", "send", "QM1", "orders", body, "--subject", subject,
        "-p", f"qmgr.route={route}", "-p", f"MQTopicString={subject}",
    )  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    res = node.cli("sb", "peek", "QM1", "orders")
    assert res.returncode == 0, res.stderr
    assert "…" not in res.stdout and "..." not in res.stdout
    columns = _table_columns(res.stdout)
    assert columns["subject"] == subject
    assert columns["body"] == body
    props = json.dumps({"qmgr.route": route, "MQTopicString": subject})
    assert columns["properties"] == props.replace(" ", "")
    assert "cut" not in res.stderr
    (peeked,) = json.loads(node.cli("sb", "peek", "QM1", "orders", "-o", "json").stdout)
    assert peeked["subject"] == subject and peeked["body"] == body
