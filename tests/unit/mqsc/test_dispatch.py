"""The MQSC dispatch table: one parse per command, one handler per (verb, object type), and
the same replies as before for text that does not parse or that no handler takes."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator

import pytest

from qmgr.core.admin.dispatch import (
    MqscTable,
    Reply,
    Route,
    TableError,
    guarded,
    not_supported,
)
from qmgr.core.admin.execute import CORE, execute
from qmgr.core.admin.records import Record
from qmgr.core.clock import ManualClock
from qmgr.core.errors import MQError
from qmgr.core.journal import NullJournal
from qmgr.core.qmgr import QueueManager
from qmgr.mqsc import MqscCommand, MqscError, parse_command, parser
from qmgr.mqsc.schema import COMMANDS
from qmgr.node.config import NodeConfig
from qmgr.node.runtime import NodeRuntime

Handler = Callable[[MqscCommand], Reply]


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The text of every command the MQSC parser is asked to parse, in order."""
    seen: list[str] = []
    real = parser._Parser.parse

    def counting(self: parser._Parser) -> MqscCommand:
        seen.append(self.text)
        return real(self)

    monkeypatch.setattr(parser._Parser, "parse", counting)
    return seen


def answer(text: str) -> Handler:
    return lambda cmd: (True, [Record("AMQ0000I", f"{text} {cmd.name}")])


def reply_of(table: MqscTable[Handler], text: str) -> Reply:
    routed = table.route(text)
    return routed.handler(routed.command) if isinstance(routed, Route) else routed


# -- building a table -----------------------------------------------------------------------


def test_a_registered_command_runs_its_handler_with_the_parsed_command() -> None:
    table: MqscTable[Handler] = MqscTable()
    table.register("DEFINE", "QLOCAL", answer("define"))
    table.register("DISPLAY", "QLOCAL", answer("display"))
    ok, records = reply_of(table, "def ql(app.q) maxdepth(5)")
    assert ok and records[0].text == "define APP.Q"
    routed = table.route("DIS QL(APP.Q)")
    assert isinstance(routed, Route) and routed.command.verb == "DISPLAY"
    assert ("DEFINE", "QLOCAL") in table and list(table) == [
        ("DEFINE", "QLOCAL"),
        ("DISPLAY", "QLOCAL"),
    ]


def test_a_command_registered_twice_is_refused_when_registered() -> None:
    table: MqscTable[Handler] = MqscTable()
    table.register("DEFINE", "QLOCAL", answer("first"))
    with pytest.raises(TableError, match="DEFINE QLOCAL is already registered"):
        table.register("DEFINE", "QLOCAL", answer("second"))
    assert reply_of(table, "DEFINE QLOCAL(Q)")[1][0].text == "first Q"


def test_a_command_the_schema_lacks_cannot_be_registered() -> None:
    table: MqscTable[Handler] = MqscTable()
    with pytest.raises(TableError, match="DEFINE NAMELIST is not in the MQSC schema"):
        table.register("DEFINE", "NAMELIST", answer("x"))
    with pytest.raises(TableError, match="not in the MQSC schema"):
        table.register("DEF", "QLOCAL", answer("x"))  # canonical spellings only


def test_wrapping_stands_in_front_of_the_registered_handler() -> None:
    table: MqscTable[Handler] = MqscTable()
    table.register("DISPLAY", "TOPIC", answer("plain"))

    def clustered(inner: Handler) -> Handler:
        return lambda cmd: inner(cmd) if cmd.name == "LOCAL" else (True, [Record("X", "wrapped")])

    table.wrap("DISPLAY", "TOPIC", clustered)
    assert reply_of(table, "DISPLAY TOPIC(LOCAL)")[1][0].text == "plain LOCAL"
    assert reply_of(table, "DISPLAY TOPIC(OTHER)")[1][0].text == "wrapped"
    with pytest.raises(TableError, match="DISPLAY SUB is not registered"):
        table.wrap("DISPLAY", "SUB", clustered)


def test_a_mapped_table_has_the_same_commands_with_converted_handlers() -> None:
    table: MqscTable[str] = MqscTable()
    table.register("DEFINE", "QLOCAL", "define")
    converted = table.mapped(lambda name: answer(name))
    assert list(converted) == list(table)
    assert reply_of(converted, "DEFINE QLOCAL(Q)")[1][0].text == "define Q"


def test_guarded_turns_an_mqerror_into_its_error_record() -> None:
    def refuse(cmd: MqscCommand) -> list[Record]:
        raise MQError("MQRC_UNKNOWN_OBJECT_NAME", "no such queue")

    ok, records = guarded(refuse)(parse_command("DELETE QLOCAL(GONE)"))
    assert not ok
    assert (records[0].code, records[0].text) == ("AMQ8147E", "IBM MQ object GONE not found.")
    assert records[0].get("REASON") == "MQRC_UNKNOWN_OBJECT_NAME"


# -- replies to what no handler runs ----------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "FROB QLOCAL(Q)",  # unknown verb: AMQ8426E
        "DEFINE NAMELIST(N)",  # object type not valid for the verb: AMQ8427E
        "DEFINE QLOCAL(Q) MAXDPTH(5)",  # unknown keyword: AMQ8405E
        "DEFINE QLOCAL",  # missing name: AMQ8427E
        "",
    ],
)
def test_text_that_does_not_parse_gets_the_parsers_message_and_position(text: str) -> None:
    with pytest.raises(MqscError) as raised:
        parse_command(text)
    table: MqscTable[Handler] = MqscTable()
    table.register("DEFINE", "QLOCAL", answer("x"))
    ok, records = reply_of(table, text)
    assert not ok and len(records) == 1
    assert records[0].code == raised.value.code
    assert records[0].text == raised.value.message
    assert records[0].attrs == [("POSITION", str(raised.value.position))]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "SUSPEND QMGR CLUSTER(C1)",
            "Command not supported by this queue manager: SUSPEND QMGR.",
        ),
        ("END", "Command not supported by this queue manager: END."),
    ],
)
def test_a_valid_command_without_a_handler_is_not_supported(text: str, message: str) -> None:
    table: MqscTable[Handler] = MqscTable()
    ok, records = reply_of(table, text)
    assert not ok and [(r.code, r.text, r.attrs) for r in records] == [("AMQ8569E", message, [])]
    assert not_supported(parse_command(text)) == (ok, records)


# -- the queue manager's table ----------------------------------------------------------------


@pytest.fixture
def qm() -> QueueManager:
    return QueueManager("QM1", ManualClock(1_700_000_000.0), NullJournal())


def test_the_queue_managers_table_parses_each_command_once(
    qm: QueueManager, parses: list[str]
) -> None:
    for text in (
        "DEFINE QLOCAL(APP.Q)",
        "DISPLAY QLOCAL(APP.Q) CURDEPTH",
        "DISPLAY QLOCAL(NONE)",  # refused by its handler
        "SUSPEND QMGR CLUSTER(C1)",  # no handler here
        "DEFINE QLOCAL(Q) MAXDPTH(5)",  # does not parse
    ):
        parses.clear()
        execute(qm, text)
        assert parses == [text]


def test_every_command_of_the_queue_managers_table_is_in_the_schema() -> None:
    assert set(CORE) <= set(COMMANDS)
    assert ("DISPLAY", "QLOCAL") in CORE and ("SUSPEND", "QMGR") not in CORE


# -- a node's table -----------------------------------------------------------------------------


@pytest.fixture
def runtime() -> Iterator[NodeRuntime]:
    umask = os.umask(0o022)
    os.umask(umask)
    try:
        yield NodeRuntime(NodeConfig("QM", "127.0.0.1", 0, None))
    finally:
        os.umask(umask)  # the runtime makes the process's files private


def test_a_node_has_a_handler_for_every_command_of_the_schema(runtime: NodeRuntime) -> None:
    assert set(runtime.commands) == set(COMMANDS)


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("DEFINE QLOCAL(APP.Q)", "AMQ8006I"),  # the queue manager's
        ("DISPLAY TOPIC(SYSTEM.BASE.TOPIC)", "AMQ8633I"),  # the cluster's wrapper, then its
        ("DISPLAY BRIDGE(NONE)", "AMQ8147E"),  # the bridges'
        ("DISPLAY CHANNEL(NONE)", "AMQ8147E"),  # the cluster channels'
        ("DISPLAY CLUSQMGR(NONE)", "AMQ8147E"),
        ("SUSPEND QMGR CLUSTER(C1)", "AMQ8569E"),  # the cluster's, outside a cluster
        ("DISPLAY TCLUSTER(*)", "AMQ8569E"),
        ("END", "AMQ8569E"),
        ("FROB QLOCAL(Q)", "AMQ8426E"),
        ("DEFINE QLOCAL(Q) MAXDPTH(5)", "AMQ8405E"),
    ],
)
def test_a_node_parses_each_command_once_whichever_part_runs_it(
    runtime: NodeRuntime, parses: list[str], text: str, code: str
) -> None:
    ok, records = asyncio.run(runtime.mqsc(text))
    assert parses == [text]
    assert records[0].code == code and ok == code.endswith("I")
