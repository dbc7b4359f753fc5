"""Review findings: sessions."""

from __future__ import annotations

from qmgr.core.clock import ManualClock
from qmgr.servicebus.entities import QueueProperties
from qmgr.servicebus.message import SbMessage
from qmgr.servicebus.namespace import Namespace, ReceiveMode

PL = ReceiveMode.PEEK_LOCK


def test_a_message_that_expired_while_its_session_held_it_expires_on_release(
    ns: Namespace, clock: ManualClock
) -> None:
    ns.create_queue("q", QueueProperties(requires_session=True, dead_lettering_on_expiration=True))
    ns.send("q", [SbMessage(b"a", session_id="s", time_to_live=10)])
    ns.accept_session("q", "s")
    ns.receive("q", 1, PL, session="s")
    clock.advance(20)  # expired, but locked: not expired yet
    ns.tick()
    assert ns.get_queue("q").active == 1
    ns.release_session("q", "s")
    ns.tick()
    info = ns.get_queue("q")
    assert (info.active, info.dead_lettered) == (0, 1)
    [dead] = ns.peek("q/$DeadLetterQueue", 0, 1)
    assert dead.message.properties["DeadLetterReason"] == "TTLExpiredException"
    assert ns.list_sessions("q") == []
