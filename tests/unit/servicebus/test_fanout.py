"""Topic fan-out as Service Bus documents it: the $Default rule, one copy for all matching
action-less rules, one copy per matching rule with an action (with RuleName), correlation
filters, filter evaluation failures, and the NServiceBus ForwardingTopology."""

from __future__ import annotations

from typing import Any

import pytest

from qmgr.servicebus.entities import (
    FilterType,
    QueueProperties,
    RuleProperties,
    SubscriptionProperties,
)
from qmgr.servicebus.message import SbMessage
from qmgr.servicebus.namespace import Namespace, ReceiveMode
from qmgr.servicebus.rules import RULE_NAME_PROPERTY

RD = ReceiveMode.RECEIVE_AND_DELETE


def sql(text: str, action: str | None = None) -> RuleProperties:
    return RuleProperties(FilterType.SQL, sql=text, action=action)


def corr(properties: dict[str, Any] | None = None, **fields: str) -> RuleProperties:
    return RuleProperties(FilterType.CORRELATION, correlation=fields, properties=properties or {})


def drain(ns: Namespace, path: str) -> list[SbMessage]:
    return [s.message for s in ns.receive(path, 1000, RD)]


def test_default_rule_delivers_everything_to_every_subscription(ns: Namespace) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "a")
    ns.create_subscription("t", "b")
    [seq] = ns.send("t", [SbMessage(b"hello", properties={"x": 1})])
    assert seq == 1
    for sub in ("a", "b"):
        [stored] = ns.receive(f"t/Subscriptions/{sub}", 10, RD)
        assert stored.message.body == b"hello"
        assert stored.enqueued_sequence_number == 1


def test_five_rules_two_with_actions_give_three_copies(ns: Namespace) -> None:
    """The documented example: a message matching five rules, two of them with actions."""
    ns.create_topic("t")
    ns.create_subscription("t", "s", rule=("r1", sql("color = 'red'")))
    ns.create_rule("t", "s", "r2", sql("size > 1"))
    ns.create_rule("t", "s", "r3", corr(properties={"color": "red"}))
    ns.create_rule("t", "s", "r4", sql("1=1", action="SET quantity = quantity * 2"))
    ns.create_rule("t", "s", "r5", sql("color = 'red'", action="SET sys.Label = 'tagged'"))
    ns.send(
        "t",
        [SbMessage(b"m", subject="orig", properties={"color": "red", "size": 3, "quantity": 5})],
    )
    copies = drain(ns, "t/Subscriptions/s")
    assert len(copies) == 3
    plain = [m for m in copies if RULE_NAME_PROPERTY not in m.properties]
    assert len(plain) == 1 and plain[0].properties == {"color": "red", "size": 3, "quantity": 5}
    by_rule = {m.properties[RULE_NAME_PROPERTY]: m for m in copies if m not in plain}
    assert set(by_rule) == {"r4", "r5"}
    assert by_rule["r4"].properties["quantity"] == 10
    assert by_rule["r4"].subject == "orig"
    assert by_rule["r5"].subject == "tagged"
    assert by_rule["r5"].properties["quantity"] == 5


def test_action_copy_does_not_change_other_subscriptions(ns: Namespace) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "a", rule=("set", sql("1=1", action="SET color = 'blue'")))
    ns.create_subscription("t", "b")
    ns.send("t", [SbMessage(properties={"color": "red"})])
    assert drain(ns, "t/Subscriptions/a")[0].properties["color"] == "blue"
    assert drain(ns, "t/Subscriptions/b")[0].properties == {"color": "red"}


def test_no_matching_rule_delivers_nothing(ns: Namespace) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "red", rule=("r", sql("color = 'red'")))
    ns.create_subscription("t", "none")
    ns.delete_rule("t", "none", "$Default")  # a subscription without rules receives nothing
    [seq] = ns.send("t", [SbMessage(properties={"color": "green"})])
    assert seq == 1
    assert ns.get_subscription("t", "red").active == 0
    assert ns.get_subscription("t", "none").active == 0


def test_false_filter_selects_nothing(ns: Namespace) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "s", rule=("$default", RuleProperties(FilterType.FALSE)))
    ns.send("t", [SbMessage()])
    assert ns.get_subscription("t", "s").active == 0


def test_topic_sequence_numbers_are_gap_free_and_subscriptions_number_their_own(
    ns: Namespace,
) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "all")
    ns.create_subscription("t", "odd", rule=("odd", sql("n % 2 = 1")))
    seqs = ns.send("t", [SbMessage(properties={"n": n}) for n in range(1, 6)])
    assert seqs == [1, 2, 3, 4, 5]
    odd = ns.receive("t/Subscriptions/odd", 10, RD)
    assert [s.sequence_number for s in odd] == [1, 2, 3]
    assert [s.enqueued_sequence_number for s in odd] == [1, 3, 5]


@pytest.mark.parametrize(
    ("rule", "message", "matches"),
    [
        (corr(CorrelationId="abc"), SbMessage(correlation_id="abc"), True),
        (corr(CorrelationId="abc"), SbMessage(correlation_id="ABC"), False),
        (corr(CorrelationId="abc"), SbMessage(), False),
        (corr(Label="red", To="x"), SbMessage(subject="red", to="x"), True),
        (corr(Label="red", To="x"), SbMessage(subject="red", to="y"), False),
        (corr(ContentType="json"), SbMessage(content_type="json"), True),
        (corr(SessionId="s1"), SbMessage(session_id="s1"), True),
        (corr(ReplyTo="r"), SbMessage(reply_to="r"), True),
        (corr(MessageId="m1"), SbMessage(message_id="m1"), True),
        (corr({"n": 1}), SbMessage(properties={"n": 1.0}), True),
        (corr({"n": 1}), SbMessage(properties={"N": 1}), True),
        (corr({"n": 1}), SbMessage(properties={"n": "1"}), False),
        (corr({"flag": True}), SbMessage(properties={"flag": 1}), False),
        (corr({"kind": "A"}, Label="x"), SbMessage(subject="x", properties={"kind": "B"}), False),
        (corr({"kind": "A"}, Label="x"), SbMessage(subject="x", properties={"kind": "A"}), True),
    ],
)
def test_correlation_filters(
    ns: Namespace, rule: RuleProperties, message: SbMessage, matches: bool
) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "s", rule=("c", rule))
    ns.send("t", [message])
    assert ns.get_subscription("t", "s").active == (1 if matches else 0)


def test_many_correlation_rules_each_message_reaches_its_own(ns: Namespace) -> None:
    ns.create_topic("t")
    for s in range(20):
        ns.create_subscription("t", f"s{s}", rule=("r0", corr(CorrelationId=f"c{s}-0")))
        for r in range(1, 50):
            ns.create_rule("t", f"s{s}", f"r{r}", corr({"kind": f"k{s}-{r}"}))
    ns.send("t", [SbMessage(correlation_id="c7-0"), SbMessage(properties={"KIND": "k3-49"})])
    counts = {s.name: s.active for s in ns.list_subscriptions("t")}
    assert counts == {f"s{s}": (1 if s in (3, 7) else 0) for s in range(20)}


def test_correlation_rules_mixed_with_sql_rules_keep_subscription_order(ns: Namespace) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "a", rule=("c", corr(To="x")))
    ns.create_subscription("t", "b", rule=("s", sql("sys.To = 'x'")))
    ns.create_rule("t", "a", "also", sql("1=1"))  # a second action-less match: still one copy
    ns.send("t", [SbMessage(to="x")])
    assert ns.get_subscription("t", "a").active == 1
    assert ns.get_subscription("t", "b").active == 1


def test_filter_evaluation_error_dead_letters_when_configured(ns: Namespace) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "dl", rule=("bad", sql("n > 1")))
    ns.create_subscription(
        "t",
        "drop",
        SubscriptionProperties(dead_lettering_on_filter_exceptions=False),
        rule=("bad", sql("n > 1")),
    )
    ns.send("t", [SbMessage(properties={"n": "text"})])  # string > number: evaluation error
    [dead] = ns.receive("t/Subscriptions/dl/$DeadLetterQueue", 10, RD)
    assert dead.message.properties["DeadLetterReason"] == "FilterEvaluationException"
    assert ns.get_subscription("t", "dl").active == 0
    assert ns.get_subscription("t", "drop").total == 0


def test_rule_changes_apply_to_later_messages(ns: Namespace) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "s", rule=("r", sql("n = 1")))
    ns.send("t", [SbMessage(properties={"n": 2})])
    ns.update_rule("t", "s", "r", sql("n = 2"))
    ns.send("t", [SbMessage(properties={"n": 2})])
    ns.delete_rule("t", "s", "r")
    ns.send("t", [SbMessage(properties={"n": 2})])
    assert ns.get_subscription("t", "s").active == 1


# ---------------------------------------------------------------------- NServiceBus


TYPES = "NServiceBus.EnclosedMessageTypes"


def enclosed(*types: str) -> str:
    return ";".join(
        f"{t}, Shared, Version=1.0.0.0, Culture=neutral, PublicKeyToken=XYZ" for t in types
    )


def nsb_endpoint(ns: Namespace, endpoint: str, *events: str) -> None:
    """What the ForwardingTopology creates for a subscribing endpoint: its input queue, a
    subscription on the bundle topic forwarding to it, a FalseFilter ``$default`` and one SQL
    rule per event type."""
    ns.create_queue(endpoint)
    ns.create_subscription(
        "bundle-1",
        endpoint,
        SubscriptionProperties(forward_to=endpoint),
        rule=("$default", RuleProperties(FilterType.FALSE)),
    )
    for event in events:
        ns.create_rule(
            "bundle-1",
            endpoint,
            event.replace(".", "")[-50:],
            sql(f"[{TYPES}] LIKE '%{event}%'"),
        )


def test_nservicebus_forwarding_topology(ns: Namespace) -> None:
    ns.create_topic("bundle-1")
    nsb_endpoint(ns, "Billing", "Shipping.OrderAccepted")
    nsb_endpoint(ns, "Sales", "Shipping.IOrderStatusChanged")
    nsb_endpoint(ns, "Audit", "Shipping.OrderAcceptedV2")
    nsb_endpoint(ns, "Idle", "Shipping.OrderShipped")

    def publish(*types: str) -> None:
        ns.send("bundle-1", [SbMessage(b"event", properties={TYPES: enclosed(*types)})])

    # polymorphic: the interface-based handler gets the concrete event
    publish("Shipping.OrderAccepted", "Shipping.IOrderAccepted", "Shipping.IOrderStatusChanged")
    # versioned: an existing OrderAccepted subscriber still gets OrderAcceptedV2
    publish("Shipping.OrderAcceptedV2", "Shipping.IOrderAccepted", "Shipping.IOrderStatusChanged")
    # a sibling event type reaches only the interface subscriber
    publish("Shipping.OrderDeclined", "Shipping.IOrderAccepted", "Shipping.IOrderStatusChanged")

    def got(queue: str) -> list[str]:
        return [m.properties[TYPES].split(",")[0] for m in drain(ns, queue)]

    assert got("Billing") == ["Shipping.OrderAccepted", "Shipping.OrderAcceptedV2"]
    assert got("Sales") == [
        "Shipping.OrderAccepted",
        "Shipping.OrderAcceptedV2",
        "Shipping.OrderDeclined",
    ]
    assert got("Audit") == ["Shipping.OrderAcceptedV2"]
    assert got("Idle") == []
    # the forwarding subscriptions hold nothing themselves
    assert all(s.total == 0 for s in ns.list_subscriptions("bundle-1"))


def test_nservicebus_command_to_endpoint_queue_directly(ns: Namespace) -> None:
    """The destination of a forwarding subscription can still be sent to directly."""
    ns.create_topic("bundle-1")
    nsb_endpoint(ns, "Billing", "Shipping.OrderAccepted")
    ns.send("Billing", [SbMessage(b"command")])
    assert [m.body for m in drain(ns, "Billing")] == [b"command"]


def test_forwarding_subscription_to_missing_queue_is_refused(ns: Namespace) -> None:
    ns.create_topic("bundle-1")
    with pytest.raises(Exception) as info:
        ns.create_subscription("bundle-1", "x", SubscriptionProperties(forward_to="nope"))
    assert "does not exist" in str(info.value)
    assert ns.list_subscriptions("bundle-1") == []
    assert ns.create_queue("nope", QueueProperties()).name == "nope"


def test_filters_see_the_topic_sequence_number_and_system_fields(ns: Namespace) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "later", rule=("r", sql("sys.SequenceNumber > 1")))
    ns.create_subscription("t", "label", rule=("r", sql("sys.Label = 'x' AND sys.To IS NULL")))
    ns.send("t", [SbMessage(b"1", subject="x"), SbMessage(b"2", subject="y")])
    assert [m.body for m in drain(ns, "t/Subscriptions/later")] == [b"2"]
    assert [m.body for m in drain(ns, "t/Subscriptions/label")] == [b"1"]


def test_correlation_values_outside_the_index_still_match(ns: Namespace) -> None:
    import datetime as dt

    when = dt.datetime(2026, 1, 2, 3, 4, 5)
    ns.create_topic("t")
    ns.create_subscription("t", "s", rule=("d", corr({"when": when})))
    ns.send("t", [SbMessage(properties={"when": when}), SbMessage(properties={"when": "x"})])
    assert ns.get_subscription("t", "s").active == 1


def test_updated_and_deleted_correlation_rules_leave_the_index(ns: Namespace) -> None:
    ns.create_topic("t")
    ns.create_subscription("t", "s", rule=("c", corr(CorrelationId="old")))
    ns.update_rule("t", "s", "c", corr(CorrelationId="new"))
    ns.send("t", [SbMessage(correlation_id="old"), SbMessage(correlation_id="new")])
    assert [m.correlation_id for m in drain(ns, "t/Subscriptions/s")] == ["new"]
    ns.delete_rule("t", "s", "c")
    ns.send("t", [SbMessage(correlation_id="new")])
    assert ns.get_subscription("t", "s").active == 0
    ns.create_subscription("t", "other", rule=("c", corr(CorrelationId="new")))
    ns.delete_subscription("t", "s")
    ns.send("t", [SbMessage(correlation_id="new")])
    assert ns.get_subscription("t", "other").active == 1
