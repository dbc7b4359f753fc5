"""Hosting a Service Bus namespace on a node: the start options, the namespace's name, and the
timer that calls the namespace's tick at its next deadline."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from qmgr.core.clock import ManualClock
from qmgr.node.config import ConfigError, make_config
from qmgr.node.servicebus import ServiceBusHost, ServiceBusStartError, namespace_name
from qmgr.servicebus import config_json


def test_servicebus_without_a_name_hosts_the_default_namespace() -> None:
    assert make_config("QM1", "127.0.0.1:0", None, servicebus="").servicebus == "sbemulatorns"
    assert make_config("QM1", "127.0.0.1:0", None, servicebus="orders-ns").servicebus == (
        "orders-ns"
    )
    plain = make_config("QM1", "127.0.0.1:0", None)
    assert plain.servicebus is None and plain.servicebus_config is None


def test_servicebus_config_names_the_namespace_unless_servicebus_does(tmp_path: Path) -> None:
    file = tmp_path / "Config.json"
    file.write_text("{}")
    c = make_config("QM1", "127.0.0.1:0", None, servicebus="", servicebus_config=str(file))
    assert c.servicebus is None and c.servicebus_config == file


@pytest.mark.parametrize(
    "name", ["abc", "1starts-with-digit", "ends-with-", "has_underscore", "x" * 51]
)
def test_a_bad_namespace_name_is_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="6-50 characters"):
        make_config("QM1", "127.0.0.1:0", None, servicebus=name)


def test_a_missing_config_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is not a file"):
        make_config("QM1", "127.0.0.1:0", None, servicebus_config=str(tmp_path / "none.json"))


def _config(name: str) -> config_json.Config:
    return config_json.parse({"UserConfig": {"Namespaces": [{"Name": name}]}})


def test_the_namespace_name_comes_from_the_option_the_file_or_the_store() -> None:
    assert namespace_name(None, None, None, None) == "sbemulatorns"
    assert namespace_name(None, None, "kept-ns", None) == "kept-ns"
    assert namespace_name("given-ns", None, "kept-ns", None) == "given-ns"
    assert namespace_name(None, _config("file-ns"), "kept-ns", None) == "file-ns"
    assert namespace_name("FILE-ns", _config("file-ns"), None, None) == "FILE-ns"
    with pytest.raises(ServiceBusStartError, match="defines namespace 'file-ns' but"):
        namespace_name("other-ns", _config("file-ns"), None, Path("Config.json"))


class FakeNamespace:
    """Deadlines set by the test; ``tick`` records when it was called."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.deadline: float | None = None
        self.ticks: list[float] = []

    def next_deadline(self) -> float | None:
        return self.deadline

    def tick(self) -> None:
        self.ticks.append(self.clock.now())
        self.deadline = None


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_the_timer_ticks_at_the_deadline_and_sees_an_earlier_one_at_once() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        host = ServiceBusHost("timer-ns", clock)
        fake = FakeNamespace(clock)
        host.namespace = fake  # type: ignore[assignment]
        host.start()
        await _settle()
        assert fake.ticks == []  # nothing to do: it waits, without polling the namespace

        fake.deadline = clock.now() + 3600.0
        host.changed()
        await _settle()
        assert fake.ticks == []  # not due yet

        fake.deadline = clock.now() - 1.0  # due now (a lock that has expired, say)
        host.changed()
        await _settle()
        assert fake.ticks == [clock.now()]

        fake.deadline = clock.now() + 0.01
        host.changed()
        await _settle()
        assert len(fake.ticks) == 1  # waiting for it
        clock.advance(1.0)
        await asyncio.sleep(0.05)  # the wait ends by itself: the deadline has come
        await _settle()
        assert len(fake.ticks) == 2
        await host.stop()

    asyncio.run(scenario())


def test_a_failing_tick_does_not_stop_the_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    from qmgr.node import servicebus as module

    monkeypatch.setattr(module, "RETRY_AFTER_FAILURE", 0.0)

    async def scenario() -> None:
        clock = ManualClock()
        host = ServiceBusHost("timer-ns", clock)
        fake = FakeNamespace(clock)
        calls: list[Any] = []

        def tick() -> None:
            calls.append(1)
            if len(calls) == 1:
                raise RuntimeError("boom")
            fake.deadline = None

        fake.tick = tick  # type: ignore[method-assign]
        host.namespace = fake  # type: ignore[assignment]
        fake.deadline = clock.now()
        host.start()
        for _ in range(20):
            await asyncio.sleep(0)
        assert len(calls) == 2
        await host.stop()

    asyncio.run(scenario())


def test_servicebus_limits_are_parsed_and_checked() -> None:
    c = make_config(
        "QM1",
        "127.0.0.1:0",
        None,
        servicebus="",
        servicebus_limits=("max_subscriptions_per_topic=3", "MAX-SQL-RULES-PER-TOPIC=10"),
    )
    assert dict(c.servicebus_limits) == {
        "max_subscriptions_per_topic": 3,
        "max_sql_rules_per_topic": 10,
    }
    for bad in ("max_subscriptions_per_topic", "max_topics=3", "max_sql_rules_per_topic=0"):
        with pytest.raises(ConfigError, match="--servicebus-limit"):
            make_config("QM1", "127.0.0.1:0", None, servicebus_limits=(bad,))
