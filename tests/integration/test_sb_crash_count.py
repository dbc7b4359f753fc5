"""A lock lost to a node crash counts as a delivery, as an expired lock does: messages received
in peek-lock mode through the real azure-servicebus SDK and not settled when the node is killed
(``kill -9``) come back with their delivery count one higher, and reach MaxDeliveryCount (the
dead-letter queue, ``MaxDeliveryCountExceeded``) when their consumer's node keeps crashing.
What was completed or received-and-deleted stays gone; what was not locked keeps its count."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("azure.servicebus")

from azure.servicebus import (  # noqa: E402
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
    ServiceBusReceiveMode,
    ServiceBusReceiver,
    ServiceBusSubQueue,
)

from qmgr.servicebus.message import SbMessage, Stored  # noqa: E402
from qmgr.store.sbcodec import encode_stored  # noqa: E402
from qmgr.store.servicebus import SbStoreJournal  # noqa: E402
from qmgr.store.sqlite import SqliteStore  # noqa: E402
from tests.integration import test_sb_admin_http as admin_http  # noqa: E402
from tests.integration.conftest import NodeProcess  # noqa: E402
from tests.integration.test_sb_admin_http import _admin, _conn  # noqa: E402

NodeFactory = Callable[..., NodeProcess]
_quiet_insecure_warning = admin_http._quiet_insecure_warning

BARRIER = "barrier"  # a send here is acknowledged once everything before it is committed


@pytest.fixture
def sb_node(node_factory: NodeFactory) -> NodeProcess:
    node = node_factory("QM1", args=("--servicebus",))
    _admin(node).create_queue(BARRIER)
    return node


def _client(node: NodeProcess) -> ServiceBusClient:
    return ServiceBusClient.from_connection_string(_conn(node), retry_total=0)


def _send(client: ServiceBusClient, queue: str, *messages: ServiceBusMessage) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(list(messages))


def _receive(receiver: ServiceBusReceiver, count: int) -> list[ServiceBusReceivedMessage]:
    got: list[ServiceBusReceivedMessage] = []
    while len(got) < count:
        batch = receiver.receive_messages(max_message_count=count - len(got), max_wait_time=5)
        assert batch, f"only {len(got)} of {count} arrived"
        got += batch
    return got


def _crash_holding_locks(node: NodeProcess, client: ServiceBusClient) -> None:
    """Make sure what the node did so far is committed (a send is acknowledged only then, and
    the commit takes every change made before it), then kill -9 the node while the receivers
    still hold their locks, and start it again on the same data directory."""
    _send(client, BARRIER, ServiceBusMessage("sync"))
    node.kill()
    with contextlib.suppress(Exception):  # its node is gone: closing may fail
        client.close()
    node.start()


def test_a_lock_lost_to_kill_9_counts_a_delivery(sb_node: NodeProcess) -> None:
    admin = _admin(sb_node)
    admin.create_queue("work", lock_duration="PT5M")
    admin.create_queue("other", lock_duration="PT5M")
    admin.create_queue("taken")
    admin.create_queue("sessions", lock_duration="PT5M", requires_session=True)
    client = _client(sb_node)
    _send(client, "work", ServiceBusMessage("locked"), ServiceBusMessage("completed"))
    _send(client, "other", ServiceBusMessage("abandoned"))
    _send(client, "taken", ServiceBusMessage("deleted"))
    _send(client, "sessions", *(ServiceBusMessage(f"s{i}", session_id="a") for i in range(2)))

    # abandoned once (counted), then not locked at the crash: keeps its count
    with client.get_queue_receiver("other") as receiver:
        [abandoned] = _receive(receiver, 1)
        receiver.abandon_message(abandoned)
    with client.get_queue_receiver(
        "taken", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
    ) as receiver:
        assert [str(m) for m in _receive(receiver, 1)] == ["deleted"]

    work = client.get_queue_receiver("work")
    got = _receive(work, 2)
    assert [(str(m), m.delivery_count) for m in got] == [("locked", 0), ("completed", 0)]
    work.complete_message(got[1])
    session = client.get_queue_receiver("sessions", session_id="a")
    assert [str(m) for m in _receive(session, 1)] == ["s0"]  # s1 is under the session lock too
    _crash_holding_locks(sb_node, client)

    with _client(sb_node) as client:
        with client.get_queue_receiver("work") as receiver:
            again = _receive(receiver, 1)
            assert [(str(m), m.delivery_count) for m in again] == [("locked", 1)]
            receiver.complete_message(again[0])
            assert receiver.receive_messages(max_message_count=5, max_wait_time=1) == []
        with client.get_queue_receiver("other") as receiver:
            [m] = _receive(receiver, 1)
            assert (str(m), m.delivery_count) == ("abandoned", 1)
            receiver.complete_message(m)
        with client.get_queue_receiver("taken") as receiver:
            assert receiver.receive_messages(max_message_count=5, max_wait_time=1) == []
        with client.get_queue_receiver("sessions", session_id="a") as receiver:
            rest = _receive(receiver, 2)
            assert [(str(m), m.delivery_count) for m in rest] == [("s0", 1), ("s1", 0)]
            for m in rest:
                receiver.complete_message(m)


def test_a_consumer_whose_node_keeps_crashing_dead_letters_the_message(
    sb_node: NodeProcess,
) -> None:
    _admin(sb_node).create_queue("poison", lock_duration="PT5M", max_delivery_count=2)
    client = _client(sb_node)
    _send(client, "poison", ServiceBusMessage("p", message_id="poison-1"))
    for attempt in range(2):
        receiver = client.get_queue_receiver("poison")
        [m] = _receive(receiver, 1)
        assert (str(m), m.delivery_count) == ("p", attempt)
        _crash_holding_locks(sb_node, client)
        client = _client(sb_node)

    with client:
        with client.get_queue_receiver("poison") as receiver:
            assert receiver.receive_messages(max_message_count=5, max_wait_time=1) == []
        with client.get_queue_receiver(
            "poison", sub_queue=ServiceBusSubQueue.DEAD_LETTER
        ) as receiver:
            [dead] = _receive(receiver, 1)
            assert (str(dead), dead.message_id, dead.delivery_count) == ("p", "poison-1", 2)
            assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"
            receiver.complete_message(dead)
    props = _admin(sb_node).get_queue_runtime_properties("poison")
    assert (props.active_message_count, props.dead_letter_message_count) == (0, 0)


# -- the marks in the store, on real files ------------------------------------------------------


def _commit(store: SqliteStore) -> None:
    ops, _ = store.take()
    store.commit(ops)


def _stored(seq: int) -> Stored:
    return Stored(SbMessage(body=b"x" * 300_000), seq, 1_700_000_000.0)


def test_the_store_keeps_which_messages_are_locked(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    store.load()
    j = SbStoreJournal(store)
    for seq in (1, 2, 3, 4, 5):
        j.message_added("q", _stored(seq))
    j.message_added("q/$DeadLetterQueue", _stored(6))
    _commit(store)
    for seq in (1, 2, 3, 4):
        j.message_locked("q", seq)
    j.message_locked("q/$DeadLetterQueue", 6)
    j.message_updated("q", _stored(2))  # abandoned, deferred: rewritten, no longer locked
    j.message_unlocked("q", 3)  # released
    j.message_settled("q", 4)  # completed
    _commit(store)
    store.close()

    store = SqliteStore(tmp_path)
    loaded = store.load().servicebus
    assert [(e, s.sequence_number) for e, s in loaded.messages] == [
        ("q", 1),
        ("q", 2),
        ("q", 3),
        ("q", 5),
        ("q/$DeadLetterQueue", 6),
    ]
    assert loaded.locked == {("q", 1), ("q/$DeadLetterQueue", 6)}
    store.close()


def test_a_store_from_before_the_lock_marks_is_upgraded(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "qmgr.sqlite")
    conn.executescript(
        "CREATE TABLE sb_messages (entity TEXT COLLATE NOCASE NOT NULL, seq INTEGER NOT NULL, "
        "body BLOB NOT NULL, header TEXT NOT NULL, PRIMARY KEY (entity, seq));"
    )
    conn.execute(
        "INSERT INTO sb_messages VALUES (?,?,?,?)", ("q", 1, b"x", encode_stored(_stored(1)))
    )
    conn.commit()
    conn.close()
    store = SqliteStore(tmp_path)
    loaded = store.load().servicebus
    assert [(e, s.sequence_number) for e, s in loaded.messages] == [("q", 1)]
    assert loaded.locked == set()
    SbStoreJournal(store).message_locked("q", 1)
    _commit(store)
    store.close()
    store = SqliteStore(tmp_path)
    assert store.load().servicebus.locked == {("q", 1)}
    store.close()
