"""The worked examples of the seeds, end to end at the level of rules.

The filter-examples sample sends 13 orders to a topic with four subscriptions (True filter, a
SQL filter, a SQL filter with an action, a correlation filter); the NServiceBus seed routes
events by `[NServiceBus.EnclosedMessageTypes] LIKE '%Type%'` rules under a `$default`
FalseFilter.
"""

from __future__ import annotations

import pytest

from qmgr.filters import (
    CorrelationFilter,
    FalseFilter,
    Filter,
    Int32,
    TrueFilter,
    compile_action,
    compile_filter,
)

from .compliance_data import EMT, ORDER_ACCEPTED, ORDER_ACCEPTED_V2, ORDER_DECLINED

pytestmark = pytest.mark.filterwarnings("error")

ORDERS = [
    (None, 0, None),  # new Order(): every property null, Quantity 0
    ("blue", 5, "low"),
    ("red", 10, "high"),
    ("yellow", 5, "low"),
    ("blue", 10, "low"),
    ("blue", 5, "high"),
    ("blue", 10, "low"),
    ("red", 5, "low"),
    ("red", 10, "low"),
    ("red", 5, "low"),
    ("yellow", 10, "high"),
    ("yellow", 5, "low"),
    ("yellow", 10, "low"),
]


def _message(color: str | None, quantity: int, priority: str | None) -> tuple[dict, dict]:
    system = {"CorrelationId": priority, "Label": color}
    user = {"color": color, "quantity": Int32(quantity), "priority": priority}
    return system, user


def test_topic_filters_sample() -> None:
    subscriptions: dict[str, Filter] = {
        "AllOrders": TrueFilter(),
        "ColorBlueSize10Orders": compile_filter("color='blue' AND quantity=10"),
        "ColorRed": compile_filter("user.color='red'"),
        "HighPriorityRedOrders": CorrelationFilter(subject="red", correlation_id="high"),
    }
    action = compile_action(
        "SET quantity = quantity / 2; REMOVE priority;SET sys.CorrelationId = 'low';"
    )
    received: dict[str, list[tuple[dict, dict]]] = {name: [] for name in subscriptions}
    for order in ORDERS:
        system, user = _message(*order)
        for name, rule in subscriptions.items():
            if rule.matches(system, user):
                copy = action.apply(system, user) if name == "ColorRed" else (system, user)
                received[name].append(copy)
    assert {name: len(got) for name, got in received.items()} == {
        "AllOrders": 13,
        "ColorBlueSize10Orders": 2,
        "ColorRed": 4,
        "HighPriorityRedOrders": 1,
    }
    red = received["ColorRed"]
    assert [user["quantity"] for _system, user in red] == [Int32(5), Int32(2), Int32(5), Int32(2)]
    assert all(type(user["quantity"]) is Int32 and "priority" not in user for _system, user in red)
    assert all(system["CorrelationId"] == "low" for system, _user in red)


def test_five_rules_two_with_actions_all_match() -> None:
    # The seed's scenario: five rules, two with actions, a message matching all five gives
    # three copies (one for the rules without actions, one per rule with an action).
    message = ({"Label": "x"}, {"a": 1})
    rules = [
        (compile_filter("a = 1"), None),
        (compile_filter("EXISTS(a)"), None),
        (TrueFilter(), None),
        (compile_filter("sys.Label = 'x'"), compile_action("SET tagged = 1")),
        (CorrelationFilter(label="x"), compile_action("SET a = a + 1")),
    ]
    copies = []
    if any(f.matches(*message) for f, action in rules if action is None):
        copies.append(message)
    copies += [
        action.apply(*message) for f, action in rules if action is not None and f.matches(*message)
    ]
    assert len(copies) == 3
    assert copies[1][1] == {"a": 1, "tagged": 1} and copies[2][1] == {"a": 2}


def test_nservicebus_forwarding_topology_routing() -> None:
    def rules(*types: str) -> list[Filter]:
        return [FalseFilter()] + [compile_filter(f"[{EMT}] LIKE '%{t}%'") for t in types]

    endpoints = {
        "billing": rules("Shipping.OrderAccepted"),
        "status": rules("Shipping.IOrderStatusChanged"),
        "v2-only": rules("Shipping.OrderAcceptedV2"),
        "nothing-yet": rules(),
    }

    def routed(header: str) -> set[str]:
        user = {EMT: header}
        return {name for name, rs in endpoints.items() if any(r.matches({}, user) for r in rs)}

    assert routed(ORDER_ACCEPTED) == {"billing", "status"}
    assert routed(ORDER_ACCEPTED_V2) == {"billing", "status", "v2-only"}
    assert routed(ORDER_DECLINED) == {"status"}
