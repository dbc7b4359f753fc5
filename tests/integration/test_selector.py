"""DEFINE SUB SELECTOR on a real node: only selected publications reach the subscription's
queue, a bad selector is refused with MQRC_SELECTOR_SYNTAX_ERROR, and the selector still
applies after the node is killed with kill -9 and restarted."""

from __future__ import annotations

from qmgr.client import QueueManagerClient
from tests.integration.conftest import NodeProcess

SELECTOR = "region = 'eu' AND amount > 100"
DEFINE = (
    "DEFINE SUB(ORDERS.EU) TOPICSTR('orders/#') DEST(ORDERS.EU.Q) "
    f"SELECTOR('{SELECTOR.replace(chr(39), chr(39) * 2)}')"
)


def drain(qm: QueueManagerClient, queue: str) -> list[str]:
    """Every message on the queue, in order, taken with non-syncpoint gets."""
    bodies = []
    while (msg := qm.get(queue, wait_ms=200)) is not None:
        bodies.append(msg.body.decode())
    return bodies


def publish_mix(qm: QueueManagerClient, tag: str) -> list[str]:
    """Publish a mix of selected and unselected orders; returns the bodies that qualify."""
    cases = [
        ({"region": "eu", "amount": 150}, True),
        ({"region": "us", "amount": 150}, False),
        ({"region": "eu", "amount": 100}, False),
        ({"region": "eu"}, False),  # amount missing: UNKNOWN
        ({"Region": "eu", "amount": 500}, False),  # names are case-sensitive
        ({"region": "eu", "amount": "lots"}, False),  # type mismatch: FALSE
        ({"region": "eu", "amount": 100.5}, True),
    ]
    selected = []
    for index, (props, wanted) in enumerate(cases):
        body = f"{tag}-{index}"
        copies = qm.publish("orders/new", body, properties=props, persistent=True)
        assert copies == 1 + int(wanted)  # ORDERS.ALL (no selector) gets every one
        if wanted:
            selected.append(body)
    return selected


def assert_nothing_more(qm: QueueManagerClient, tag: str) -> None:
    """A selected marker published last must be the next (and only) message on the queue."""
    qm.publish("orders/new", f"{tag}-marker", properties={"region": "eu", "amount": 101})
    assert drain(qm, "ORDERS.EU.Q") == [f"{tag}-marker"]


def test_selector_applies_and_survives_kill_9(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(ORDERS.EU.Q)")
        qm.mqsc("DEFINE QLOCAL(ORDERS.ALL.Q)")
        ok, records = qm.mqsc_ok(
            "DEFINE SUB(BAD) TOPICSTR('orders/#') DESTCLAS(MANAGED) SELECTOR('region = ')"
        )
        assert not ok
        assert records[0].attrs["REASON"] == "MQRC_SELECTOR_SYNTAX_ERROR"
        assert "(99B)" in records[0].text
        assert "SELECTOR is not valid" in records[0].attrs["DETAIL"]
        assert qm.mqsc("DISPLAY SUB(*)") == []

        qm.mqsc(DEFINE)
        qm.mqsc("DEFINE SUB(ORDERS.ALL) TOPICSTR('orders/#') DEST(ORDERS.ALL.Q)")
        shown = qm.mqsc("DISPLAY SUB(ORDERS.EU) SELECTOR SELTYPE")[0]
        assert shown["SELECTOR"] == SELECTOR and shown["SELTYPE"] == "STANDARD"

        expected = publish_mix(qm, "before")
        assert drain(qm, "ORDERS.EU.Q") == expected
        assert len(drain(qm, "ORDERS.ALL.Q")) == 7
        assert_nothing_more(qm, "before")

    node.restart()  # kill -9, then start on the same data directory

    with node.client() as qm:
        shown = qm.mqsc("DISPLAY SUB(ORDERS.EU) SELECTOR SELTYPE")[0]
        assert shown["SELECTOR"] == SELECTOR and shown["SELTYPE"] == "STANDARD"
        expected = publish_mix(qm, "after")
        assert drain(qm, "ORDERS.EU.Q") == expected
        assert_nothing_more(qm, "after")
