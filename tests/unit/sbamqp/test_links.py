"""The pure helpers of the Service Bus AMQP links: addresses and error conditions."""

from __future__ import annotations

import pytest

from qmgr.amqp.types import Described, Symbol
from qmgr.sbamqp.conditions import CONDITIONS, error_for
from qmgr.sbamqp.links import entity_path
from qmgr.servicebus.errors import Code, ServiceBusError


@pytest.mark.parametrize(
    ("address", "path"),
    [
        ("amqps://127.0.0.1:5672/orders", "orders"),
        ("amqps://localhost/topic/Subscriptions/sub", "topic/Subscriptions/sub"),
        ("amqps://h:1/q/$DeadLetterQueue", "q/$DeadLetterQueue"),
        ("$cbs", "$cbs"),
        ("orders/$management", "orders/$management"),
        ("amqps://h:1", ""),
        (None, ""),
        (Described(Symbol("x"), "amqps://h/q"), "q"),
    ],
)
def test_entity_path(address: object, path: str) -> None:
    assert entity_path(address) == path


def test_every_code_has_a_condition_the_sdk_knows() -> None:
    assert set(CONDITIONS) == set(Code)
    err = error_for(ServiceBusError(Code.MESSAGE_LOCK_LOST, "gone"))
    assert err.condition == "com.microsoft:message-lock-lost"
    assert err.description is not None and "gone" in err.description
    assert error_for(ServiceBusError(Code.ENTITY_NOT_FOUND, "x")).condition == "amqp:not-found"
