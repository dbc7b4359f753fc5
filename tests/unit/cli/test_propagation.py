"""`qmgr sub`'s wait for its proxy subscriptions (qmgr.cli.propagation), against a stand-in
node that answers DISPLAY CHSTATUS from a script of channel states."""

from __future__ import annotations

from dataclasses import dataclass

from qmgr.cli.propagation import wait_delivered
from qmgr.client import MQClientError

# (channel, status, MSGS, XQMSGSA) per answer
Answer = list[tuple[str, str, int, int]]


@dataclass
class Record:
    attrs: dict[str, str]


@dataclass
class Node:
    answers: list[Answer]
    ok: bool = True
    refused: bool = False
    asked: int = 0

    def mqsc_ok(self, command: str) -> tuple[bool, list[Record]]:
        assert command == "DISPLAY CHSTATUS(*) ALL"
        if self.refused:
            raise MQClientError(2035, "MQRC_NOT_AUTHORIZED", "not authorized")
        answer = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        inbound = Record({"CHANNEL": "DEMO.SUB1", "CHLTYPE": "CLUSRCVR", "RQMNAME": "HOSTA1"})
        return self.ok, [inbound] + [
            Record(
                {
                    "CHANNEL": f"DEMO.{peer}",
                    "CHLTYPE": "CLUSSDR",
                    "RQMNAME": peer,
                    "STATUS": status,
                    "MSGS": str(acked),
                    "XQMSGSA": str(waiting),
                    "LSTERROR": "refused" if status == "RETRYING" else "",
                }
            )
            for peer, status, acked, waiting in answer
        ]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def wait(node: Node, timeout: float = 1.0) -> tuple[str, list[str]] | None:
    clock = Clock()
    found = wait_delivered(node, timeout, clock=clock, sleep=clock.sleep)
    return None if found is None else (found.cluster, [s.channel for s in found.late])


def test_done_once_what_waited_is_acknowledged() -> None:
    node = Node(
        [
            [("HOSTA1", "RUNNING", 3, 2), ("HOSTA2", "INACTIVE", 0, 1), ("FR1", "RUNNING", 5, 0)],
            [("HOSTA1", "RUNNING", 4, 3), ("HOSTA2", "RUNNING", 1, 0), ("FR1", "RUNNING", 5, 0)],
            # HOSTA1 acknowledged the two that waited; a third came after them
            [("HOSTA1", "RUNNING", 5, 1), ("HOSTA2", "RUNNING", 1, 0), ("FR1", "RUNNING", 5, 0)],
        ]
    )
    assert wait(node) == ("DEMO", [])
    assert node.asked == 3


def test_a_channel_that_does_not_deliver_is_named_after_the_timeout() -> None:
    node = Node([[("HOSTA1", "RUNNING", 0, 1), ("HOSTA2", "RETRYING", 0, 1)]])
    node.answers.append([("HOSTA1", "RUNNING", 1, 0), ("HOSTA2", "RETRYING", 0, 1)])
    assert wait(node) == ("DEMO", ["DEMO.HOSTA2"])


def test_a_stopped_channel_is_not_waited_for() -> None:
    node = Node([[("HOSTA1", "STOPPED", 0, 1)]])
    assert wait(node, timeout=1e9) == ("DEMO", ["DEMO.HOSTA1"])
    assert node.asked == 2


def test_nothing_waiting_or_no_cluster() -> None:
    assert wait(Node([[("HOSTA1", "INACTIVE", 0, 0)]])) == ("DEMO", [])
    assert wait(Node([[]])) == ("", [])


def test_a_node_that_cannot_tell() -> None:
    assert wait(Node([[]], ok=False)) is None  # not a cluster member: the command fails
    assert wait(Node([[]], refused=True)) is None  # the user may not run MQSC there
