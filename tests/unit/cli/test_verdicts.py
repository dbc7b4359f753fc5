"""The verdict words `qmgr demo` and `qmgr load` share (qmgr/cli/demo_report.py)."""

from __future__ import annotations

from qmgr.launcher.verdicts import count_word, loss_verdict, order_verdict


def test_order_verdicts() -> None:
    assert order_verdict(1, 0) == "in order (one host keeps order)"
    assert order_verdict(2, 0) == "in order this time (several hosts do not guarantee it)"
    assert order_verdict(1, 3) == "3 out of order"
    assert order_verdict(2, 598, "49.9%") == (
        "49.9% out of order, as two hosts do (each publication picks its host)"
    )
    assert order_verdict(12, 1).startswith("1 out of order, as 12 hosts do")
    assert order_verdict(2, 0, sequenced=True) == (
        "in order (the sequenced-delivery helper restores each publisher's order, which two "
        "hosts lose)"
    )
    # the helper does not hide disorder it let through
    assert order_verdict(2, 5, sequenced=True).startswith("5 out of order")


def test_loss_verdicts_say_loss_plainly() -> None:
    assert loss_verdict(0, 0) == "nothing lost or duplicated"
    assert loss_verdict(0, 0, "through the kill of HOSTA1") == (
        "nothing lost or duplicated through the kill of HOSTA1"
    )
    assert loss_verdict(3, 0, "through the kill of HOSTA1") == "3 LOST"
    assert loss_verdict(0, 2) == "2 DUPLICATED"
    assert loss_verdict(3, 2) == "3 LOST, 2 DUPLICATED"
    assert [count_word(n) for n in (1, 2, 9, 10)] == ["one", "two", "nine", "10"]
