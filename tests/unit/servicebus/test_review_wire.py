"""Review findings: messages the namespace holds always reach the wire."""

from __future__ import annotations

import datetime as dt

from qmgr.client.sbwire import stored_from_wire, stored_to_wire
from qmgr.servicebus.entities import FilterType, RuleProperties
from qmgr.servicebus.message import SbMessage
from qmgr.servicebus.namespace import Namespace, ReceiveMode
from qmgr.wire import servicebus_pb2 as pb


def test_a_message_an_action_gave_a_date_reaches_the_receiver(ns: Namespace) -> None:
    action = "SET at = sys.EnqueuedTimeUtc; SET span = sys.TimeToLive; SET id = newid()"
    ns.create_topic("t")
    ns.create_subscription(
        "t", "s", rule=("r", RuleProperties(FilterType.SQL, "1=1", action=action))
    )
    ns.send("t", [SbMessage(b"x", time_to_live=60)])
    # what the Admin service does after a receive-and-delete: the message is already gone
    [got] = ns.receive("t/Subscriptions/s", 1, ReceiveMode.RECEIVE_AND_DELETE)
    wire = stored_to_wire(got, pb.SbStoredMessage())
    back = stored_from_wire(wire).message.properties
    assert back["span"] == str(dt.timedelta(seconds=60))
    assert back["at"] == got.message.properties["at"].isoformat()
    assert back["id"] == str(got.message.properties["id"])
    assert back["RuleName"] == "r"
