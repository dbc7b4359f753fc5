"""The load job's Service Bus session drain (qmgr.spark.drain with sessions = "all"), one
partition read without Spark, with the real azure-servicebus SDK against a real node: sessions
read at once on several receivers, each in its order; max_messages over all of them; a late
duplicate still read by the wait that ends the drain; a partition closed early leaves what it
had not handed over."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Any

import pytest

pytest.importorskip("azure.servicebus")

from azure.servicebus import ServiceBusClient, ServiceBusMessage  # noqa: E402

from qmgr.client.sequenced import SESSION_QUIET  # noqa: E402
from qmgr.spark.drain import SESSION_RECEIVERS, drain  # noqa: E402
from qmgr.spark.options import SbSource  # noqa: E402
from tests.integration import test_sb_admin_http as admin_http  # noqa: E402
from tests.integration.conftest import NodeProcess  # noqa: E402
from tests.integration.test_sb_admin_http import _admin, _conn  # noqa: E402

sb_node = admin_http.sb_node
_quiet_insecure_warning = admin_http._quiet_insecure_warning

SESSIONS, PER_SESSION = 6, 120


def _source(node: NodeProcess) -> SbSource:
    return SbSource(
        label="sb:sessions",
        connection_string=_conn(node),
        queue="sessions",
        topic=None,
        subscription=None,
        sessions="all",
        sequence_property="LoadSeq",
        receive_mode="peek_lock",
    )


def _send(node: NodeProcess, messages: list[ServiceBusMessage]) -> None:
    with (
        ServiceBusClient.from_connection_string(_conn(node)) as client,
        client.get_queue_sender("sessions") as sender,
    ):
        for i in range(0, len(messages), 100):
            sender.send_messages(messages[i : i + 100])


def _message(session: str, n: int) -> ServiceBusMessage:
    return ServiceBusMessage(
        f"{session}-{n}", session_id=session, application_properties={"LoadSeq": n}
    )


def _fill(node: NodeProcess) -> None:
    _admin(node).create_queue("sessions", requires_session=True)
    _send(
        node,
        [_message(f"s{k}", n) for n in range(1, PER_SESSION + 1) for k in range(SESSIONS)],
    )


def _active(node: NodeProcess) -> int:
    return int(_admin(node).get_queue_runtime_properties("sessions").active_message_count)


def _per_session(rows: list[Any]) -> dict[str, list[int]]:
    seqs: dict[str, list[int]] = defaultdict(list)
    for row in rows:
        seqs[row[10]].append(int(row[3]["LoadSeq"]))
    return dict(seqs)


def test_sessions_are_read_at_once_each_in_its_order(sb_node: NodeProcess) -> None:
    _fill(sb_node)
    rows = list(drain(_source(sb_node), 2.0, None, 25))
    expected = {f"s{k}": list(range(1, PER_SESSION + 1)) for k in range(SESSIONS)}
    assert _per_session(rows) == expected  # every message once, each session in its order
    # several receivers held sessions at once: the rows of some sessions interleave
    spans = {}
    for i, row in enumerate(rows):
        first, _ = spans.get(row[10], (i, i))
        spans[row[10]] = (first, i)
    ordered = sorted(spans.values())
    assert SESSION_RECEIVERS > 1
    pairs = zip(ordered, ordered[1:], strict=False)
    assert any(b_first < a_last for (_, a_last), (b_first, _) in pairs)
    assert _active(sb_node) == 0


def test_max_messages_holds_over_sessions_read_at_once(sb_node: NodeProcess) -> None:
    _fill(sb_node)
    rows = list(drain(_source(sb_node), 2.0, 130, 25))
    assert len(rows) == 130
    for numbers in _per_session(rows).values():  # a prefix of each session, in order
        assert numbers == list(range(1, len(numbers) + 1))
    assert _active(sb_node) == SESSIONS * PER_SESSION - 130


def test_a_late_duplicate_is_read_by_the_wait_that_ends_the_drain(sb_node: NodeProcess) -> None:
    """Once every session went quiet and was left, a copy of an earlier message sent to one
    of them (as a redelivery after a fault sends it) within ``idle`` is still read."""
    _fill(sb_node)
    rows: list[Any] = []
    reader = threading.Thread(target=lambda: rows.extend(drain(_source(sb_node), 8.0, None, 25)))
    reader.start()
    deadline = time.monotonic() + 60
    while len(rows) < SESSIONS * PER_SESSION and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(rows) == SESSIONS * PER_SESSION
    time.sleep(4 * SESSION_QUIET)  # the sessions were left: the receivers wait for another
    _send(sb_node, [_message("s2", 7)])
    reader.join(60)
    assert not reader.is_alive()
    numbers = _per_session(rows)["s2"]
    assert numbers == [*range(1, PER_SESSION + 1), 7]
    assert _active(sb_node) == 0


def test_a_partition_closed_early_leaves_what_it_had_not_handed_over(
    sb_node: NodeProcess,
) -> None:
    _fill(sb_node)
    rows = drain(_source(sb_node), 2.0, None, 25)
    taken = [next(rows) for _ in range(60)]
    rows.close()  # Spark stopped reading the partition (a failed task)
    total = SESSIONS * PER_SESSION
    assert _active(sb_node) >= total - 60  # completed: at most the rows handed over
    rest = list(drain(_source(sb_node), 2.0, None, 25))
    seen = _per_session(taken + rest)
    for k in range(SESSIONS):  # nothing lost; what was handed but not completed comes again
        assert set(seen[f"s{k}"]) == set(range(1, PER_SESSION + 1))
    assert len(taken) + len(rest) >= total
    assert _active(sb_node) == 0
