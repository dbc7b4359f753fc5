"""`qmgr sb peek`'s table: long subjects and properties wrap; bodies are cut on a terminal only."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest

from qmgr.cli.sb_data import BODY_ON_TERMINAL, print_messages

SUBJECT = "Prices/Fruit/Apples/Granny-Smith/Organic/Imported/From/New-Zealand/Via/Rotterdam"
BODY = "".join(str(n % 10) for n in range(200))


class _Out(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def _item() -> dict[str, Any]:
    return {
        "sequenceNumber": 7,
        "state": "Active",
        "deliveryCount": 0,
        "enqueuedTime": 1_700_000_000.0,
        "messageId": "m-1",
        "subject": SUBJECT,
        "properties": {"qmgr.route": "PUB1,HOSTA1,SB1", "MQTopicString": SUBJECT},
        "body": BODY,
    }


def _print(monkeypatch: pytest.MonkeyPatch, tty: bool) -> str:
    out = _Out(tty)
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setenv("COLUMNS", "120")
    print_messages("orders", [_item()], "table", "no messages")
    return re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())


def _column(table: str, name: str) -> str:
    rows = [line for line in table.splitlines() if line.startswith(("┃", "│"))]
    header = [cell.strip() for cell in rows[0].strip("┃").split("┃")]
    at = header.index(name)
    return "".join(line.strip("│").split("│")[at].strip() for line in rows[1:])


def test_piped_output_keeps_everything(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    table = _print(monkeypatch, tty=False)
    assert _column(table, "subject") == SUBJECT
    assert _column(table, "body") == BODY
    assert SUBJECT in _column(table, "properties")
    assert "…" not in table
    assert capsys.readouterr().err == ""


def test_a_terminal_wraps_subjects_and_properties_and_cuts_bodies(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    table = _print(monkeypatch, tty=True)
    assert max(len(line) for line in table.splitlines()) <= 120
    assert _column(table, "subject") == SUBJECT
    assert SUBJECT in _column(table, "properties")
    assert _column(table, "body") == BODY[: BODY_ON_TERMINAL - 3] + "..."
    assert "-o json shows them whole" in capsys.readouterr().err
