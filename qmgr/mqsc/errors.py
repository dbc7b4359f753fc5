"""The one exception the MQSC front end raises, and the message ids it uses.

Every problem found while splitting, tokenizing or validating a command is reported as an
:class:`MqscError` carrying a runmqsc-style message id (``.code``), a sentence naming the
problem (``.message``) and the 0-based offset into the command text where it was found
(``.position``). The ids mirror the runmqsc messages an operator knows:

``AMQ8405E``  syntax error at or near the position: bad tokens (unbalanced quotes or
              parentheses), unknown or misplaced keywords, a parameter given twice, a value
              where none is allowed or none where one is needed, conflicting parameters.
``AMQ8426E``  the command verb is not one runmqsc knows (runmqsc then lists the valid verbs).
``AMQ8427E``  the verb is known but the rest does not fit its syntax: wrong object type,
              missing object name, missing required parameter, a parameter the command
              forbids (for example ``ALTER TOPIC ... TOPICSTR``).
``AMQ8424E``  the name in the object's parentheses is not valid (length, characters, blank).
``AMQ8425E``  an attribute value is not valid (not in the enumeration, out of range, too long,
              not hexadecimal).
``AMQ8147E``  object not found: never raised here; listed for the executor, which reports it
              with the same class.
"""

from __future__ import annotations

SYNTAX_ERROR = "AMQ8405E"
UNKNOWN_VERB = "AMQ8426E"
VALID_SYNTAX = "AMQ8427E"
NAME_ERROR = "AMQ8424E"
VALUE_ERROR = "AMQ8425E"
OBJECT_NOT_FOUND = "AMQ8147E"

MESSAGE_IDS: dict[str, str] = {
    SYNTAX_ERROR: "Syntax error detected at or near end of command segment below:-",
    UNKNOWN_VERB: "Valid MQSC commands are: ...",
    VALID_SYNTAX: "Valid syntax for the MQSC command: ...",
    NAME_ERROR: "Error detected in a name keyword.",
    VALUE_ERROR: "Attribute value error.",
    OBJECT_NOT_FOUND: "IBM MQ object not found.",
}

_WINDOW = 100


class MqscError(ValueError):
    """A command that cannot be accepted, with its message id, reason and position."""

    def __init__(self, code: str, message: str, position: int = 0, text: str = "") -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.text = text
        self.position = max(0, min(position, len(text)))

    def with_text(self, text: str) -> MqscError:
        """The same error attached to ``text`` (the command it was found in)."""
        return MqscError(self.code, self.message, self.position, text)

    def render(self, label: str = "") -> str:
        """The command line, a caret under the position, then ``CODE: message``.

        ``label`` is printed before the command (for example a runmqsc-style ``"     1 : "``)
        and the caret is shifted to match. Long lines are shown as a window around the caret.
        """
        text = self.text
        pos = self.position
        start = text.rfind("\n", 0, pos) + 1
        end = text.find("\n", pos)
        if end < 0:
            end = len(text)
        line = "".join(" " if ord(c) < 32 or ord(c) == 127 else c for c in text[start:end])
        col = pos - start
        if len(line) > _WINDOW:
            lo = max(0, min(col - _WINDOW // 2, len(line) - _WINDOW))
            hi = lo + _WINDOW
            head = "..." if lo > 0 else ""
            tail = "..." if hi < len(line) else ""
            line = head + line[lo:hi] + tail
            col = col - lo + len(head)
        caret = " " * (len(label) + col) + "^"
        return f"{label}{line}\n{caret}\n{self.code}: {self.message}"

    def __repr__(self) -> str:
        return f"MqscError({self.code!r}, {self.message!r}, position={self.position})"
