"""The AMQP side of a node's Service Bus port, driven only through the real azure-servicebus
7.15.0 client (sync and async) against a real node process."""

from __future__ import annotations

import asyncio
import logging
import socket
from datetime import UTC, datetime, timedelta

import pytest

pytest.importorskip("azure.servicebus")

from azure.servicebus import (  # noqa: E402
    NEXT_AVAILABLE_SESSION,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient  # noqa: E402
from azure.servicebus.exceptions import (  # noqa: E402
    MessageLockLostError,
    MessageSizeExceededError,
    MessagingEntityNotFoundError,
    OperationTimeoutError,
    ServiceBusError,
)

from tests.integration import clock, sb_nodes  # noqa: E402
from tests.integration import test_sb_admin_http as admin_http  # noqa: E402
from tests.integration.conftest import NodeProcess  # noqa: E402
from tests.integration.sb_drain import receive_all  # noqa: E402
from tests.integration.sb_nodes import unique_name  # noqa: E402
from tests.integration.test_sb_admin_http import _admin, _conn  # noqa: E402

# one node for the module (each test makes entities of its own names), and quiet self-signed
# HTTPS warnings; a test that moves the node's clock or kills the node has a node of its own
sb_node = sb_nodes.shared_sb_node
own_sb_node = admin_http.sb_node
_quiet_insecure_warning = admin_http._quiet_insecure_warning
movable_clock = clock.movable_clock  # the own node's clock moves past a lock


def _client(node: NodeProcess) -> ServiceBusClient:
    return ServiceBusClient.from_connection_string(_conn(node))


def test_send_batch_then_peek_lock_receive_and_complete(sb_node: NodeProcess) -> None:
    _admin(sb_node).create_queue("orders")
    with _client(sb_node) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(
                [ServiceBusMessage(f"m{i}", application_properties={"n": i}) for i in range(5)]
            )
            sender.send_messages(ServiceBusMessage("single", session_id=None))
        with client.get_queue_receiver("orders", max_wait_time=5) as receiver:
            got = []
            while len(got) < 6:
                batch = receiver.receive_messages(max_message_count=10, max_wait_time=5)
                assert batch, f"only {len(got)} of 6 arrived"
                for msg in batch:
                    assert msg.lock_token is not None
                    assert msg.locked_until_utc is not None
                    got.append(msg)
                    receiver.complete_message(msg)
    bodies = [str(m) for m in got]
    assert bodies == ["m0", "m1", "m2", "m3", "m4", "single"]
    assert [m.sequence_number for m in got] == [1, 2, 3, 4, 5, 6]
    assert got[2].application_properties[b"n"] == 2
    assert all(m.message_id for m in got)
    props = _admin(sb_node).get_queue_runtime_properties("orders")
    assert props.active_message_count == 0


def test_receive_and_delete(sb_node: NodeProcess) -> None:
    _admin(sb_node).create_queue("q")
    with _client(sb_node) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages([ServiceBusMessage(f"x{i}") for i in range(3)])
        with client.get_queue_receiver(
            "q", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE, max_wait_time=5
        ) as receiver:
            got: list[str] = []
            while len(got) < 3:
                batch = receiver.receive_messages(max_message_count=10, max_wait_time=5)
                assert batch
                got += [str(m) for m in batch]
    assert got == ["x0", "x1", "x2"]
    assert _admin(sb_node).get_queue_runtime_properties("q").total_message_count == 0


def test_abandon_defer_dead_letter_and_the_dead_letter_queue(sb_node: NodeProcess) -> None:
    _admin(sb_node).create_queue("work")
    with _client(sb_node) as client:
        with client.get_queue_sender("work") as sender:
            sender.send_messages([ServiceBusMessage(b) for b in ("a", "d", "x")])
        with client.get_queue_receiver("work", max_wait_time=5) as receiver:
            first = receiver.receive_messages(max_message_count=3, max_wait_time=5)
            while len(first) < 3:
                first += receiver.receive_messages(max_message_count=3, max_wait_time=5)
            by_body = {str(m): m for m in first}
            receiver.abandon_message(by_body["a"])
            receiver.defer_message(by_body["d"])
            receiver.dead_letter_message(by_body["x"], reason="bad", error_description="it was bad")
            again = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            assert [str(m) for m in again] == ["a"]
            assert again[0].delivery_count == 1
            receiver.complete_message(again[0])
        with client.get_queue_receiver(
            "work", sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=5
        ) as dlq:
            dead = dlq.receive_messages(max_message_count=1, max_wait_time=5)
            assert [str(m) for m in dead] == ["x"]
            assert dead[0].dead_letter_reason == "bad"
            assert dead[0].dead_letter_error_description == "it was bad"
            dlq.complete_message(dead[0])
        with client.get_queue_receiver("work", max_wait_time=5) as receiver:
            (deferred,) = receiver.receive_deferred_messages([by_body["d"].sequence_number])
            assert str(deferred) == "d"
            receiver.complete_message(deferred)
    props = _admin(sb_node).get_queue_runtime_properties("work")
    assert props.total_message_count == 0


def test_settling_after_the_lock_expired_raises_lock_lost(own_sb_node: NodeProcess) -> None:
    _admin(own_sb_node).create_queue("short", lock_duration=timedelta(seconds=5))
    with _client(own_sb_node) as client:
        with client.get_queue_sender("short") as sender:
            sender.send_messages(ServiceBusMessage("m"))
        with client.get_queue_receiver("short", max_wait_time=5) as receiver:
            (msg,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            clock.advance_clock(own_sb_node, 5.5)
            # the client refuses by itself to settle past locked-until: make it ask the node
            msg._expiry = datetime.now(UTC) + timedelta(minutes=5)
            with pytest.raises(MessageLockLostError):
                receiver.complete_message(msg)
            (again,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            assert str(again) == "m"
            assert again.delivery_count == 1
            receiver.complete_message(again)


def test_unknown_entity_is_refused(sb_node: NodeProcess) -> None:
    with (
        _client(sb_node) as client,
        pytest.raises(MessagingEntityNotFoundError),
        client.get_queue_sender("nope") as sender,
    ):
        sender.send_messages(ServiceBusMessage("m"))
    with (
        _client(sb_node) as client,
        pytest.raises(MessagingEntityNotFoundError),
        client.get_queue_receiver("nope", max_wait_time=2) as receiver,
    ):
        receiver.receive_messages(max_message_count=1, max_wait_time=1)


def test_a_half_open_connection_does_not_stop_the_others(sb_node: NodeProcess) -> None:
    _admin(sb_node).create_queue("h")
    host, port = sb_node.sb_address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as stalled:
        stalled.sendall(b"AMQP\x03\x01\x00\x00")  # SASL header, then nothing more
        with _client(sb_node) as client:
            with client.get_queue_sender("h") as sender:
                sender.send_messages(ServiceBusMessage("through"))
            with client.get_queue_receiver(
                "h", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE, max_wait_time=5
            ) as receiver:
                got = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert [str(m) for m in got] == ["through"]


def test_async_client_send_receive_complete(sb_node: NodeProcess) -> None:
    _admin(sb_node).create_queue("aq")

    async def run() -> list[str]:
        async with AsyncServiceBusClient.from_connection_string(_conn(sb_node)) as client:
            async with client.get_queue_sender("aq") as sender:
                await sender.send_messages([ServiceBusMessage(f"a{i}") for i in range(4)])
            got: list[str] = []
            async with client.get_queue_receiver("aq", max_wait_time=5) as receiver:
                while len(got) < 4:
                    batch = await receiver.receive_messages(max_message_count=10, max_wait_time=5)
                    assert batch
                    for m in batch:
                        await receiver.complete_message(m)
                        got.append(str(m))
            return got

    assert asyncio.run(run()) == ["a0", "a1", "a2", "a3"]


def test_sessions_named_and_next_available(sb_node: NodeProcess) -> None:
    _admin(sb_node).create_queue("sq", requires_session=True)
    with _client(sb_node) as client:
        with client.get_queue_sender("sq") as sender:
            sender.send_messages(
                [ServiceBusMessage(f"s1-{i}", session_id="s1") for i in range(2)]
                + [ServiceBusMessage("s2-0", session_id="s2")]
            )
        with client.get_queue_receiver("sq", session_id="s2", max_wait_time=5) as receiver:
            assert receiver.session.session_id == "s2"
            assert receiver.session.locked_until_utc is not None
            msgs = receiver.receive_messages(max_message_count=5, max_wait_time=5)
            assert [str(m) for m in msgs] == ["s2-0"]
            receiver.complete_message(msgs[0])
        with client.get_queue_receiver(
            "sq", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=5
        ) as receiver:
            assert receiver.session.session_id == "s1"
            msgs = []
            while len(msgs) < 2:
                batch = receiver.receive_messages(max_message_count=5, max_wait_time=5)
                assert batch
                msgs += batch
            for m in msgs:
                receiver.complete_message(m)
            assert [str(m) for m in msgs] == ["s1-0", "s1-1"]
        with (
            pytest.raises(OperationTimeoutError),
            client.get_queue_receiver(
                "sq", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=2
            ) as receiver,
        ):
            receiver.receive_messages(max_message_count=1, max_wait_time=1)
        # a session-enabled queue needs a session receiver
        with (
            pytest.raises(ServiceBusError),
            client.get_queue_receiver("sq", max_wait_time=2) as receiver,
        ):
            receiver.receive_messages(max_message_count=1, max_wait_time=1)


def test_next_available_times_out_cleanly_when_the_sdk_retries(
    sb_node: NodeProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """No session has messages: the node holds the attach for the receiver's timeout, then
    refuses it with com.microsoft:timeout. The SDK retries the receive on the refused link
    (a flow for it after the detach); that must end in OperationTimeoutError, not in a session
    error that closes the connection (ServiceBusConnectionError), and the SDK logs no warning
    about the attach answer (it read one with a source as a granted session)."""
    _admin(sb_node).create_queue("idle-sessions", requires_session=True)
    caplog.set_level(logging.WARNING, logger="azure.servicebus")
    with (
        _client(sb_node) as client,
        pytest.raises(OperationTimeoutError),
        client.get_queue_receiver(
            "idle-sessions", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=3
        ) as receiver,
    ):
        receiver.receive_messages(max_message_count=10, max_wait_time=3)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [w for w in warnings if "attach" in w], warnings


def test_garbage_on_the_port_harms_no_other_connection(sb_node: NodeProcess) -> None:
    _admin(sb_node).create_queue("g")
    host, port = sb_node.sb_address.rsplit(":", 1)
    with _client(sb_node) as client, client.get_queue_sender("g") as sender:
        sender.send_messages(ServiceBusMessage("before"))
        for junk in (b"AMQP\x00\x01\x00\x00\x00\x00\x00\x08\xff\xff\xff\xff", b"AMQP\x09zz"):
            with socket.create_connection((host, int(port)), timeout=5) as s:
                s.sendall(junk)
                s.settimeout(5)
                with pytest.raises((ConnectionError, TimeoutError, OSError)):
                    while s.recv(4096):
                        pass
                    raise ConnectionError("closed")
        sender.send_messages(ServiceBusMessage("after"))
    assert _admin(sb_node).get_queue_runtime_properties("g").active_message_count == 2


def test_kill_9_loses_nothing_acknowledged(own_sb_node: NodeProcess) -> None:
    _admin(own_sb_node).create_queue("durable")
    with _client(own_sb_node) as client:
        with client.get_queue_sender("durable") as sender:
            for i in range(20):
                sender.send_messages([ServiceBusMessage(f"d{i}-{j}") for j in range(5)])
        with client.get_queue_receiver("durable", max_wait_time=5) as receiver:
            done = 0
            while done < 30:
                batch = receiver.receive_messages(max_message_count=30 - done, max_wait_time=5)
                assert batch
                for m in batch:
                    receiver.complete_message(m)
                done += len(batch)
    # killed right after the last complete was echoed: each echo waited for the write-ahead log
    own_sb_node.kill()
    own_sb_node.start()
    with (
        _client(own_sb_node) as client,
        client.get_queue_receiver(
            "durable", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE, max_wait_time=5
        ) as receiver,
    ):
        expected = [f"d{i}-{j}" for i in range(20) for j in range(5)][30:]
        left = [str(m) for m in receive_all(receiver, len(expected))]
    assert left == expected


def test_peek_schedule_cancel_and_renew_lock(sb_node: NodeProcess) -> None:
    _admin(sb_node).create_queue("mq")
    with _client(sb_node) as client:
        with client.get_queue_sender("mq") as sender:
            sender.send_messages([ServiceBusMessage(f"p{i}") for i in range(3)])
            later = datetime.now(UTC) + timedelta(hours=1)
            seqs = sender.schedule_messages(
                [ServiceBusMessage("s1"), ServiceBusMessage("s2")], later
            )
            assert len(seqs) == 2
            sender.cancel_scheduled_messages(seqs[0])
        with client.get_queue_receiver("mq", max_wait_time=5) as receiver:
            peeked = receiver.peek_messages(max_message_count=10)
            assert [str(m) for m in peeked] == ["p0", "p1", "p2", "s2"]
            (msg,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            before = msg.locked_until_utc
            assert before is not None
            after = receiver.renew_message_lock(msg)
            assert after >= before
            receiver.complete_message(msg)
    props = _admin(sb_node).get_queue_runtime_properties("mq")
    assert props.active_message_count == 2
    assert props.scheduled_message_count == 1


def test_session_state_and_topic_subscriptions(sb_node: NodeProcess) -> None:
    admin = _admin(sb_node)
    admin.create_queue("ss", requires_session=True)
    admin.create_topic("events")
    admin.create_subscription("events", "all")
    admin.create_subscription("events", "also")
    with _client(sb_node) as client:
        with client.get_queue_sender("ss") as sender:
            sender.send_messages(ServiceBusMessage("x", session_id="abc"))
        with client.get_queue_receiver("ss", session_id="abc", max_wait_time=5) as receiver:
            assert receiver.session.get_state() is None
            receiver.session.set_state(b"progress=1")
            assert receiver.session.get_state() == b"progress=1"
            receiver.session.renew_lock()
            (m,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            receiver.complete_message(m)
        with client.get_topic_sender("events") as sender:
            sender.send_messages([ServiceBusMessage("e1"), ServiceBusMessage("e2")])
        for sub in ("all", "also"):
            with client.get_subscription_receiver("events", sub, max_wait_time=5) as receiver:
                got: list[str] = []
                while len(got) < 2:
                    batch = receiver.receive_messages(max_message_count=5, max_wait_time=5)
                    assert batch
                    for m in batch:
                        receiver.complete_message(m)
                    got += [str(m) for m in batch]
                assert got == ["e1", "e2"]


def test_a_waiting_receiver_gets_what_another_connection_sends(sb_node: NodeProcess) -> None:
    _admin(sb_node).create_queue("wait")

    async def run() -> list[str]:
        async def send_later() -> None:
            await asyncio.sleep(1)
            async with sc.get_queue_sender("wait") as sender:
                await sender.send_messages(ServiceBusMessage("late"))

        async with (
            AsyncServiceBusClient.from_connection_string(_conn(sb_node)) as rc,
            AsyncServiceBusClient.from_connection_string(_conn(sb_node)) as sc,
            rc.get_queue_receiver("wait", max_wait_time=10) as receiver,
        ):
            task = asyncio.create_task(send_later())
            got = await receiver.receive_messages(max_message_count=1, max_wait_time=10)
            await task
            for m in got:
                await receiver.complete_message(m)
            return [str(m) for m in got]

    assert asyncio.run(run()) == ["late"]


def test_an_oversize_message_is_refused_and_nothing_changes(sb_node: NodeProcess) -> None:
    _admin(sb_node).create_queue("big")
    with _client(sb_node) as client, client.get_queue_sender("big") as sender:
        with pytest.raises((MessageSizeExceededError, ServiceBusError)) as caught:
            sender.send_messages(ServiceBusMessage(b"x" * 400_000))
        sender.send_messages(ServiceBusMessage("small"))
    assert isinstance(caught.value, MessageSizeExceededError), repr(caught.value)
    assert _admin(sb_node).get_queue_runtime_properties("big").active_message_count == 1


@pytest.mark.parametrize("size", [300_000, 1_100_000, 4_000_000])
def test_every_oversize_message_gets_message_size_exceeded_and_the_link_goes_on(
    sb_node: NodeProcess, size: int
) -> None:
    """Over the entity's 256 KB and over the link's 1 MB max-message-size alike: the SDK raises
    MessageSizeExceededError at once (no retries), the same sender then sends, and nothing of
    the refused message is stored."""
    queue = unique_name("sizes")  # one per size on the shared node
    _admin(sb_node).create_queue(queue)
    with _client(sb_node) as client, client.get_queue_sender(queue) as sender:
        with pytest.raises(MessageSizeExceededError):  # not retried: the error is the outcome
            sender.send_messages(ServiceBusMessage(b"x" * size))
        sender.send_messages(ServiceBusMessage("small"))
    assert _admin(sb_node).get_queue_runtime_properties(queue).active_message_count == 1

    async def run() -> None:
        async with (
            AsyncServiceBusClient.from_connection_string(_conn(sb_node)) as client,
            client.get_queue_sender(queue) as sender,
        ):
            with pytest.raises(MessageSizeExceededError):
                await sender.send_messages(ServiceBusMessage(b"y" * size))
            await sender.send_messages(ServiceBusMessage("small again"))

    asyncio.run(run())
    assert _admin(sb_node).get_queue_runtime_properties(queue).active_message_count == 2
