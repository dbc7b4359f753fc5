"""The namespace host's listeners (what wakes the AMQP receivers that wait for messages): told
once per event-loop turn however often the namespace changed in it, told after the timer
expired locks or activated messages, never told when only a deadline moved."""

from __future__ import annotations

import asyncio

from qmgr.core.clock import ManualClock
from qmgr.node.servicebus import ServiceBusHost
from tests.unit.test_servicebus_host import FakeNamespace, _settle


def test_listeners_are_told_once_per_turn_and_after_a_tick_but_not_for_a_deadline() -> None:
    async def scenario() -> list[str]:
        clock = ManualClock()
        host = ServiceBusHost("listen-ns", clock)
        fake = FakeNamespace(clock)
        host.namespace = fake  # type: ignore[assignment]
        told: list[str] = []
        host.listen(lambda: told.append("a"))
        host.listen(lambda: told.append("b"))
        host.start()
        await _settle()
        assert told == []  # nothing happened: nobody is woken

        for _ in range(3):  # three sends in one turn
            host.changed()
        await _settle()
        assert told == ["a", "b"]

        fake.deadline = clock.now() + 60.0  # a lock was taken: only the timer looks again
        host.deadline_moved()
        await _settle()
        assert told == ["a", "b"]

        fake.deadline = clock.now() - 1.0  # the lock expired: the message is available again
        host.deadline_moved()
        await _settle()
        assert fake.ticks == [clock.now()]
        await host.stop()
        return told

    assert asyncio.run(scenario()) == ["a", "b", "a", "b"]
