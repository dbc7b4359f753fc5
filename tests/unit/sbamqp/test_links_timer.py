"""The link logic runs without an event loop: a next-available session receiver waits on the timer
it is given (``call_later``), is answered ``com.microsoft:timeout`` when that timer fires, and
has the timer cancelled when a session comes first."""

from __future__ import annotations

from collections.abc import Callable

from qmgr.amqp.connection import RECEIVER, Connection
from qmgr.core.clock import ManualClock
from qmgr.sbamqp.conditions import TIMEOUT
from qmgr.sbamqp.links import SbLinks
from qmgr.servicebus.entities import QueueProperties
from qmgr.servicebus.message import SbMessage
from qmgr.servicebus.namespace import Namespace
from tests.unit.amqp.test_connection import ATTACH, DETACH, attach, frame, frames_of, opened

SESSION_FILTER = b"com.microsoft:session-filter"


class Timers:
    """``call_later`` for the test: the scheduled callbacks, fired by hand."""

    def __init__(self) -> None:
        self.scheduled: list[tuple[float, Callable[[], None], Timers.Handle]] = []

    class Handle:
        def __init__(self) -> None:
            self.cancelled = False

        def cancel(self) -> None:
            self.cancelled = True

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timers.Handle:
        handle = Timers.Handle()
        self.scheduled.append((delay, callback, handle))
        return handle


def _setup() -> tuple[Connection, Namespace, SbLinks, Timers]:
    clock = ManualClock()
    ns = Namespace(clock=clock)
    ns.create_queue("s", QueueProperties(requires_session=True, lock_duration=30.0))
    conn = opened()
    timers = Timers()
    links = SbLinks(
        conn,
        ns,
        now=clock.now,
        changed=lambda: None,
        deadline_moved=lambda: None,
        when_durable=lambda callback: callback(None),
        call_later=timers.call_later,
        flush=lambda: None,
    )
    return conn, ns, links, timers


def _attach_next_available(conn: Connection, links: SbLinks) -> None:
    wait_ms = {b"com.microsoft:timeout": 1500}
    request = attach("r", 0, RECEIVER, "s", filters={SESSION_FILTER: None}, properties=wait_ms)
    links.handle(conn.receive_data(frame(request)))


def test_a_session_wait_times_out_on_the_timer_it_was_given() -> None:
    conn, _, links, timers = _setup()
    _attach_next_available(conn, links)
    assert frames_of(conn.data_to_send(), ATTACH) == []  # waiting for a session
    ((delay, fire, handle),) = timers.scheduled
    assert delay == 1.5 and not handle.cancelled
    fire()
    out = conn.data_to_send()
    assert len(frames_of(out, ATTACH)) == 1
    (detach,) = frames_of(out, DETACH)
    assert detach[2][0] == TIMEOUT.encode()  # the error's condition


def test_a_session_that_comes_first_cancels_the_timer() -> None:
    conn, ns, links, timers = _setup()
    _attach_next_available(conn, links)
    ((_, fire, handle),) = timers.scheduled
    ns.send("s", [SbMessage(b"x", session_id="a")])
    links.wake()
    out = conn.data_to_send()
    assert len(frames_of(out, ATTACH)) == 1 and frames_of(out, DETACH) == []
    assert handle.cancelled
    fire()  # a timer that fires after all (already due when cancelled) changes nothing
    assert frames_of(conn.data_to_send(), DETACH) == []
