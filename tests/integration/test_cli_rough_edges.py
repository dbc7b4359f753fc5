"""Quick-command rough edges, against real `qmgr start` processes."""

from __future__ import annotations

import json
from collections.abc import Callable

from qmgr.client import OutgoingMessage
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


def test_get_all_available_takes_every_message_in_batches(node: NodeProcess) -> None:
    """``qmgr get -n 0`` (all available) asked the node for 1,000,000 messages at once, which
    it refuses (at most 10,000 per get): now it takes them batch after batch, browse too."""
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(ALLQ) MAXDEPTH(20000)")
        for start in range(0, 10_005, 1000):
            bodies = range(start, min(10_005, start + 1000))
            qm.put_many("ALLQ", [OutgoingMessage(str(i).encode()) for i in bodies])
    browsed = node.cli("get", "QM1", "ALLQ", "-n", "0", "--browse")
    assert browsed.returncode == 0, browsed.stderr
    assert browsed.stdout.splitlines() == [str(i) for i in range(10_005)]
    taken = node.cli("get", "QM1", "ALLQ", "-n", "0")
    assert taken.returncode == 0, taken.stderr
    assert taken.stdout.splitlines() == [str(i) for i in range(10_005)]
    assert node.cli("get", "QM1", "ALLQ", "-n", "0").returncode == 2  # nothing left
