"""The load job's Service Bus session drain (qmgr.spark.drain with sessions = "all" and
"sequenced"), partitions read without Spark, with the real azure-servicebus SDK against a real
node: sessions read at once on several receivers, each in its order; max_messages over all of
them; a late duplicate still read by the wait that ends the drain; a partition closed early
leaves what it had not handed over; a read in several partitions (processes of their own under
Spark, threads here) reads each session once, in its order."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Any

import pytest

pytest.importorskip("azure.servicebus")

from azure.servicebus import ServiceBusClient, ServiceBusMessage  # noqa: E402

from qmgr.client.sequenced import SESSION_QUIET  # noqa: E402
from qmgr.spark import drain as drain_module  # noqa: E402
from qmgr.spark.drain import drain  # noqa: E402
from qmgr.spark.options import SESSION_RECEIVERS, SbSource, read_options  # noqa: E402
from tests.integration import sb_nodes  # noqa: E402
from tests.integration import test_sb_admin_http as admin_http  # noqa: E402
from tests.integration.conftest import NodeProcess  # noqa: E402
from tests.integration.sb_nodes import unique_name  # noqa: E402
from tests.integration.test_sb_admin_http import _admin, _conn  # noqa: E402

sb_node = sb_nodes.shared_sb_node  # one node for the module, a queue of its own per test
_quiet_insecure_warning = admin_http._quiet_insecure_warning

SESSIONS, PER_SESSION = 6, 120


def _source(node: NodeProcess, queue: str, sessions: str = "all") -> SbSource:
    return SbSource(
        label="sb:sessions",
        connection_string=_conn(node),
        queue=queue,
        topic=None,
        subscription=None,
        sessions=sessions,
        sequence_property="LoadSeq",
        receive_mode="peek_lock",
    )


def _send(node: NodeProcess, queue: str, messages: list[ServiceBusMessage]) -> None:
    with (
        ServiceBusClient.from_connection_string(_conn(node)) as client,
        client.get_queue_sender(queue) as sender,
    ):
        for i in range(0, len(messages), 100):
            sender.send_messages(messages[i : i + 100])


def _message(session: str, n: int) -> ServiceBusMessage:
    return ServiceBusMessage(
        f"{session}-{n}", session_id=session, application_properties={"LoadSeq": n}
    )


def _fill(node: NodeProcess) -> str:
    """A session-enabled queue of its own holding every session's messages in order."""
    queue = unique_name("sessions")
    _admin(node).create_queue(queue, requires_session=True)
    _send(
        node,
        queue,
        [_message(f"s{k}", n) for n in range(1, PER_SESSION + 1) for k in range(SESSIONS)],
    )
    return queue


def _active(node: NodeProcess, queue: str) -> int:
    return int(_admin(node).get_queue_runtime_properties(queue).active_message_count)


def _per_session(rows: list[Any]) -> dict[str, list[int]]:
    seqs: dict[str, list[int]] = defaultdict(list)
    for row in rows:
        seqs[row[10]].append(int(row[3]["LoadSeq"]))
    return dict(seqs)


def test_sessions_are_read_at_once_each_in_its_order(sb_node: NodeProcess) -> None:
    queue = _fill(sb_node)
    rows = list(drain(_source(sb_node, queue), 2.0, None, 25))
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
    assert _active(sb_node, queue) == 0


def test_max_messages_holds_over_sessions_read_at_once(sb_node: NodeProcess) -> None:
    queue = _fill(sb_node)
    rows = list(drain(_source(sb_node, queue), 2.0, 130, 25))
    assert len(rows) == 130
    for numbers in _per_session(rows).values():  # a prefix of each session, in order
        assert numbers == list(range(1, len(numbers) + 1))
    assert _active(sb_node, queue) == SESSIONS * PER_SESSION - 130


def test_a_late_duplicate_is_read_by_the_wait_that_ends_the_drain(sb_node: NodeProcess) -> None:
    """Once every session went quiet and was left, a copy of an earlier message sent to one
    of them (as a redelivery after a fault sends it) within ``idle`` is still read."""
    queue = _fill(sb_node)
    rows: list[Any] = []
    with (
        ServiceBusClient.from_connection_string(_conn(sb_node)) as client,
        # opened before the drain, so that the late send takes a moment, not a connection
        client.get_queue_sender(queue) as sender,
    ):
        # idle 6 s: the drain ends once no session came within it; still about three times
        # what the late send needs once the sessions were left
        reader = threading.Thread(
            target=lambda: rows.extend(drain(_source(sb_node, queue), 6.0, None, 25))
        )
        reader.start()
        deadline = time.monotonic() + 60
        while len(rows) < SESSIONS * PER_SESSION and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(rows) == SESSIONS * PER_SESSION
        time.sleep(4 * SESSION_QUIET)  # the sessions were left: the receivers wait for another
        sender.send_messages([_message("s2", 7)])
        reader.join(60)
    assert not reader.is_alive()
    numbers = _per_session(rows)["s2"]
    assert numbers == [*range(1, PER_SESSION + 1), 7]
    assert _active(sb_node, queue) == 0


def test_a_partition_closed_early_leaves_what_it_had_not_handed_over(
    sb_node: NodeProcess,
) -> None:
    queue = _fill(sb_node)
    rows = drain(_source(sb_node, queue), 2.0, None, 25)
    taken = [next(rows) for _ in range(60)]
    rows.close()  # Spark stopped reading the partition (a failed task)
    total = SESSIONS * PER_SESSION
    assert _active(sb_node, queue) >= total - 60  # completed: at most the rows handed over
    rest = list(drain(_source(sb_node, queue), 2.0, None, 25))
    seen = _per_session(taken + rest)
    for k in range(SESSIONS):  # nothing lost; what was handed but not completed comes again
        assert set(seen[f"s{k}"]) == set(range(1, PER_SESSION + 1))
    assert len(taken) + len(rest) >= total
    assert _active(sb_node, queue) == 0


def _shuffled_fill(node: NodeProcess) -> str:
    """Every session's LoadSeq sent out of order (pairs swapped: 2, 1, 4, 3, ...), to a
    session-enabled queue of its own."""
    queue = unique_name("sessions")
    _admin(node).create_queue(queue, requires_session=True)
    order = [n + 1 if n % 2 else n - 1 for n in range(1, PER_SESSION + 1)]
    _send(node, queue, [_message(f"s{k}", n) for n in order for k in range(SESSIONS)])
    return queue


def test_a_sequenced_partition_closed_early_settles_nothing_more(
    sb_node: NodeProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sequenced drain hands each row over as its message is processed and completes the
    message once its row is queued, at most ``SEQUENCED_LAG`` ahead of what Spark took; once
    Spark stops reading (the generator closed: a failed task, a ``limit``), nothing more is
    completed and what is left is read, in order, by the next drain."""
    monkeypatch.setattr(drain_module, "SEQUENCED_LAG", 10)
    queue = _shuffled_fill(sb_node)
    rows = drain(_source(sb_node, queue, "sequenced"), 2.0, None, 25)
    taken = [next(rows) for _ in range(60)]
    rows.close()
    total = SESSIONS * PER_SESSION
    completed = total - _active(sb_node, queue)
    assert 60 <= completed <= 60 + 10  # what Spark took, and at most the lag more
    rest = list(drain(_source(sb_node, queue, "sequenced"), 2.0, None, 25))
    before, after = _per_session(taken), _per_session(rest)
    for k in range(SESSIONS):
        first, then = before.get(f"s{k}", []), after.get(f"s{k}", [])
        assert first == list(range(1, len(first) + 1))  # in LoadSeq order
        # the rest goes on in order, after what was completed ahead of Spark
        assert then == list(range(then[0], PER_SESSION + 1))
        assert len(first) < then[0] <= len(first) + 1 + 10
    seen = {(row[10], int(row[3]["LoadSeq"])) for row in taken + rest}
    assert len(taken) + len(rest) == len(seen)  # nothing twice
    assert total - len(seen) == completed - 60  # only the rows completed ahead are not read
    assert _active(sb_node, queue) == 0


@pytest.mark.parametrize("sessions", ["all", "sequenced"])
def test_a_read_in_partitions_takes_each_session_once_in_order(
    sb_node: NodeProcess, sessions: str
) -> None:
    """``partitions=3``: three sources sharing the receivers; read at once (as Spark's tasks
    do), every session is drained once and in order between them."""
    queue = _shuffled_fill(sb_node) if sessions == "sequenced" else _fill(sb_node)
    opts = read_options(
        {
            "servicebus": sb_node.sb_address,
            "queue": queue,
            "sessions": sessions,
            "sequence_property": "LoadSeq",
            "partitions": "3",
            "idle": "2",
        }
    )
    assert len(opts.sources) == 3
    assert all(isinstance(src, SbSource) for src in opts.sources)
    assert {src.receivers for src in opts.sources if isinstance(src, SbSource)} == {
        max(1, SESSION_RECEIVERS // 3)
    }
    results: list[list[Any]] = [[] for _ in opts.sources]
    readers = [
        threading.Thread(target=lambda i=i, src=src: results[i].extend(drain(src, 2.0, None, 25)))
        for i, src in enumerate(opts.sources)
    ]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(120)
    assert not any(reader.is_alive() for reader in readers)
    rows = [row for part in results for row in part]
    if sessions == "all":  # in the order sent, each session by one partition at a time
        expected = {f"s{k}": list(range(1, PER_SESSION + 1)) for k in range(SESSIONS)}
        for part in results:
            for session, numbers in _per_session(part).items():
                assert numbers == sorted(numbers), session
        assert {s: sorted(n) for s, n in _per_session(rows).items()} == expected
    else:
        for session, numbers in _per_session(rows).items():
            assert sorted(numbers) == list(range(1, PER_SESSION + 1)), session
        for part in results:  # each partition's rows of a session: in LoadSeq order
            for session, numbers in _per_session(part).items():
                assert numbers == sorted(numbers), session
    assert len(rows) == SESSIONS * PER_SESSION
    assert sum(1 for part in results if part) > 1  # the partitions shared the sessions
    assert _active(sb_node, queue) == 0


def test_partitions_apply_to_session_reads_only() -> None:
    base = {"servicebus": "127.0.0.1:1", "queue": "q"}
    cases = [
        ({**base, "partitions": "2"}, "option partitions applies to Service Bus reads with"),
        ({**base, "sessions": "all", "partitions": "0"}, "option partitions must be an integer"),
        ({**base, "sessions": "all", "partitions": "17"}, "option partitions must be at most 16"),
        (
            {**base, "sessions": "all", "partitions": "2", "max_messages": "5"},
            "option max_messages needs partitions = 1",
        ),
        ({"node": "127.0.0.1:1", "queue": "q", "partitions": "2"}, "option partitions applies"),
    ]
    for options, text in cases:
        with pytest.raises(ValueError, match=text):
            read_options(options)
    one = read_options({**base, "sessions": "sequenced"})
    assert [src.receivers for src in one.sources if isinstance(src, SbSource)] == [
        SESSION_RECEIVERS
    ]
