"""A session belongs to the receiver that locked it: once its lock has run out and another
receiver has taken the session, the first receiver acts on it no more (real azure-servicebus
SDK against a real node). Before, the first receiver's close released the session the second
held, and the first could renew, read and write the state of, and fetch deferred messages from
a session it no longer held; two consumers at once then lost or repeated messages of a
sequenced session."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from datetime import timedelta

import pytest

pytest.importorskip("azure.servicebus")

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiver  # noqa: E402
from azure.servicebus._common.utils import utc_now  # noqa: E402
from azure.servicebus.exceptions import (  # noqa: E402
    ServiceBusError,
    SessionCannotBeLockedError,
    SessionLockLostError,
)

from tests.integration import clock  # noqa: E402
from tests.integration import test_sb_admin_http as admin_http  # noqa: E402
from tests.integration.conftest import NodeProcess  # noqa: E402
from tests.integration.test_sb_admin_http import _admin, _conn  # noqa: E402

sb_node = admin_http.sb_node
_quiet_insecure_warning = admin_http._quiet_insecure_warning
movable_clock = clock.movable_clock  # the node's clock moves past the session locks

LOCK = 5  # seconds: the queue's lock duration


def _queue(node: NodeProcess, messages: int) -> None:
    with _admin(node) as admin:
        admin.create_queue("q", requires_session=True, lock_duration=timedelta(seconds=LOCK))
    with (
        ServiceBusClient.from_connection_string(_conn(node)) as client,
        client.get_queue_sender("q") as sender,
    ):
        sender.send_messages([ServiceBusMessage(f"m{i}", session_id="S") for i in range(messages)])


def _overdue(receiver: ServiceBusReceiver) -> None:
    """Makes the SDK believe the receiver still holds its session (its own check goes by the
    lock's time): as when a renewal sent in time reached a node that was busy past the lock's
    end and another receiver took the session meanwhile."""
    receiver.session._locked_until_utc = utc_now() + timedelta(seconds=60)


def test_a_closing_receiver_leaves_the_session_another_took(sb_node: NodeProcess) -> None:
    _queue(sb_node, 3)
    with ServiceBusClient.from_connection_string(_conn(sb_node)) as client:
        first = client.get_queue_receiver("q", session_id="S", max_wait_time=2)
        first.__enter__()
        assert len(first.receive_messages(max_message_count=1, max_wait_time=5)) == 1
        clock.advance_clock(sb_node, LOCK + 1)  # the first receiver's lock runs out (not renewed)
        with client.get_queue_receiver("q", session_id="S", max_wait_time=2) as second:
            got = second.receive_messages(max_message_count=10, max_wait_time=3)
            assert sorted(str(m) for m in got) == ["m0", "m1", "m2"]
            first.__exit__(None, None, None)  # its close leaves the session to the second
            time.sleep(0.5)
            with (
                pytest.raises(SessionCannotBeLockedError),
                client.get_queue_receiver("q", session_id="S", max_wait_time=2) as third,
            ):
                third.receive_messages(max_message_count=1, max_wait_time=1)
            for message in got:
                second.complete_message(message)
            second.session.set_state(b"done")


def test_a_receiver_whose_session_lock_ran_out_acts_on_it_no_more(sb_node: NodeProcess) -> None:
    """One session per call tried (the SDK drops a receiver at its first lost lock)."""
    calls: dict[str, Callable[[ServiceBusReceiver, int], object]] = {
        "renew": lambda r, _: r.session.renew_lock(),
        "get-state": lambda r, _: r.session.get_state(),
        "set-state": lambda r, _: r.session.set_state(b"stale"),
        "fetch-deferred": lambda r, seq: r.receive_deferred_messages([seq]),
        "receive": lambda r, _: r.receive_messages(max_message_count=10, max_wait_time=2),
    }
    with _admin(sb_node) as admin:
        admin.create_queue("q", requires_session=True, lock_duration=timedelta(seconds=LOCK))
    with ServiceBusClient.from_connection_string(_conn(sb_node)) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages(
                [ServiceBusMessage(f"{s}-{i}", session_id=s) for s in calls for i in range(3)]
            )
        firsts: dict[str, tuple[ServiceBusReceiver, int]] = {}
        for name in calls:
            first = client.get_queue_receiver("q", session_id=name, max_wait_time=2)
            first.__enter__()
            early = first.receive_messages(max_message_count=2, max_wait_time=5)
            assert len(early) == 2 and early[1].sequence_number is not None
            first.defer_message(early[1])
            first.session.set_state(b"first")
            firsts[name] = first, early[1].sequence_number
        clock.advance_clock(sb_node, LOCK + 1)  # the first receivers' locks run out (not renewed)
        for name, call in calls.items():
            first, deferred_seq = firsts[name]
            with client.get_queue_receiver("q", session_id=name, max_wait_time=2) as second:
                assert second.session.get_state() == b"first"
                second.session.set_state(b"second")
                _overdue(first)
                with pytest.raises(SessionLockLostError):
                    call(first, deferred_seq)  # the node refuses it: it does not hold the session
                with contextlib.suppress(ServiceBusError):
                    first.__exit__(None, None, None)
                got = second.receive_messages(max_message_count=10, max_wait_time=3)
                assert sorted(str(m) for m in got) == [f"{name}-0", f"{name}-2"], name
                for message in got:
                    second.complete_message(message)
                (deferred,) = second.receive_deferred_messages([deferred_seq])
                second.complete_message(deferred)
                assert second.session.get_state() == b"second", name
