"""The MQSC dispatch table: a command's text is parsed once, then its (verb, object type) picks
the one handler that runs it.

Each part of a queue manager that answers MQSC commands registers its handlers in a table: the
queue manager's own objects (:data:`qmgr.core.admin.execute.CORE`), and on a node also its
bridges, its cluster channels and its cluster. Adding a command therefore takes two edits: its
entry in :mod:`qmgr.mqsc.schema` (the parser then accepts and validates it) and one
``register`` call naming its handler. Registering a command the schema does not know, or one
that is already registered, is an error when the table is built, not when a command arrives.

A part that changes how an already registered command behaves in some state (a cluster member
showing clustered topics in DISPLAY TOPIC) ``wrap``s that entry: the wrapper is given the
handler it stands in front of. Wrapping a command nobody registered is an error too.

What a command that cannot run gets back is the same wherever it would have gone: a parse or
validation failure is the parser's message id and text with the ``POSITION`` it points at, and
a valid command no handler is registered for is AMQ8569E (not supported by this queue manager).

The table is generic in its handler type: the queue manager's table holds functions of the
queue manager and the command; a node's holds functions of the command alone, which may answer
at once or later (awaitable).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from qmgr.core.admin.records import Record, error_record
from qmgr.core.errors import MQError
from qmgr.mqsc import MqscCommand, MqscError, parse_command
from qmgr.mqsc.schema import COMMANDS

Reply = tuple[bool, list[Record]]
"""What a command answers: whether it succeeded, and its runmqsc records."""

CommandHandler = Callable[[MqscCommand], Reply | Awaitable[Reply]]
"""A node's handler: the parsed command in, its reply now or awaitable."""

H = TypeVar("H")
K = TypeVar("K")

Key = tuple[str, str]


class TableError(ValueError):
    """A table built wrongly: a command registered twice, one the schema lacks, or a wrapper
    for a command nobody registered."""


@dataclass(frozen=True, slots=True)
class Route(Generic[H]):
    """A parsed command and the handler registered for it."""

    command: MqscCommand
    handler: H


class MqscTable(Generic[H]):
    """(verb, object type) -> handler; :meth:`route` parses a command's text once."""

    def __init__(self) -> None:
        self._handlers: dict[Key, H] = {}

    def register(self, verb: str, obj: str, handler: H) -> None:
        """Make ``handler`` run ``verb obj`` (canonical spellings, as the schema has them)."""
        key = (verb, obj)
        if key not in COMMANDS:
            raise TableError(f"{verb} {obj} is not in the MQSC schema; add it there first")
        if key in self._handlers:
            raise TableError(f"{verb} {obj} is already registered")
        self._handlers[key] = handler

    def wrap(self, verb: str, obj: str, wrapper: Callable[[H], H]) -> None:
        """Put ``wrapper(registered handler)`` in place of the handler of ``verb obj``."""
        key = (verb, obj)
        if key not in self._handlers:
            raise TableError(f"{verb} {obj} is not registered; there is nothing to wrap")
        self._handlers[key] = wrapper(self._handlers[key])

    def mapped(self, convert: Callable[[H], K]) -> MqscTable[K]:
        """A new table with ``convert(handler)`` for every entry of this one."""
        table: MqscTable[K] = MqscTable()
        table._handlers = {key: convert(handler) for key, handler in self._handlers.items()}
        return table

    def __contains__(self, key: object) -> bool:
        return key in self._handlers

    def __iter__(self) -> Iterator[Key]:
        return iter(sorted(self._handlers))

    def handler(self, cmd: MqscCommand) -> H | None:
        """The handler registered for an already parsed command, or None."""
        return self._handlers.get((cmd.verb, cmd.obj or ""))

    def route(self, text: str) -> Route[H] | Reply:
        """Parse ``text`` (once) and find its handler; the error reply when it does not parse
        or no handler is registered for it."""
        try:
            cmd = parse_command(text)
        except MqscError as exc:
            return parse_failure(exc)
        handler = self.handler(cmd)
        if handler is None:
            return not_supported(cmd)
        return Route(cmd, handler)


def parse_failure(exc: MqscError) -> Reply:
    """The reply to text that does not parse: the message id, the reason and its position."""
    return False, [Record(exc.code, exc.message, [("POSITION", str(exc.position))])]


def not_supported(cmd: MqscCommand) -> Reply:
    """The reply to a valid command this queue manager has no handler for."""
    text = f"Command not supported by this queue manager: {cmd.verb} {cmd.obj or ''}"
    return False, [Record("AMQ8569E", text.rstrip() + ".")]


def guarded(handler: Callable[[MqscCommand], list[Record]]) -> Callable[[MqscCommand], Reply]:
    """``handler`` answering with a reply: its records, or the error record of the MQError
    that refused the command (which then changed nothing)."""

    def run(cmd: MqscCommand) -> Reply:
        try:
            return True, handler(cmd)
        except MQError as exc:
            return False, [error_record(exc, cmd.name or "")]

    return run
