"""The two errors of the filter language.

`FilterSyntaxError` is raised when a filter or action is *created* (lexing, parsing, limits,
unknown system properties, read-only system properties in SET, unbound parameters, invalid
constant LIKE patterns). `FilterEvaluationError` is raised while a compiled filter or action runs
against a message (type mismatch, integer division by zero, overflow, failed conversion).
"""

from __future__ import annotations


class FilterError(Exception):
    """Base class of the errors of `qmgr.filters`."""


class FilterSyntaxError(FilterError):
    """A filter or action text was rejected when it was created.

    `position` is a 0-based character offset into `text` (0 <= position <= len(text); an error at
    the end of the input points just past the last character). `line` and `column` are 1-based.
    `str(error)` shows the message, the offending line and a caret under the position.
    """

    def __init__(self, message: str, text: str = "", position: int = 0) -> None:
        position = max(0, min(position, len(text)))
        self.message = message
        self.text = text
        self.position = position
        line_start = text.rfind("\n", 0, position) + 1
        line_end = text.find("\n", position)
        if line_end < 0:
            line_end = len(text)
        self.line = text.count("\n", 0, position) + 1
        self.column = position - line_start + 1
        self.source_line = text[line_start:line_end]
        super().__init__(self._render())

    def _render(self) -> str:
        head = f"{self.message} (line {self.line}, column {self.column})"
        if not self.text:
            return head
        # Tabs keep their width in the caret line so the caret stays under the character.
        pad = "".join("\t" if ch == "\t" else " " for ch in self.source_line[: self.column - 1])
        return f"{head}\n{self.source_line}\n{pad}^"

    def caret(self) -> str:
        """The offending line followed by a caret line (empty when there is no text)."""
        rendered = self._render()
        return rendered.split("\n", 1)[1] if "\n" in rendered else ""


class FilterEvaluationError(FilterError):
    """A filter or action failed while it was evaluated against a message.

    The engine treats this as Service Bus does: the message goes to the subscription's
    dead-letter queue when `DeadLetteringOnFilterEvaluationExceptions` is set, otherwise it is
    dropped for that subscription.
    """
