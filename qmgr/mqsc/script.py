"""Splitting an MQSC script into commands, following runmqsc's input rules.

- A line whose first non-blank character is ``*`` is a comment; blank lines are ignored. Both
  are discarded even in the middle of a continued command (runmqsc does the same).
- A line whose last non-blank character is ``-`` continues with the next line from its
  column 1 (leading blanks kept); ``+`` continues from the next line's first non-blank
  character. The continuation character itself is dropped. This works inside quoted strings
  too: ``DESCR('Fr-`` followed by ``ed')`` gives ``DESCR('Fred')``.
- Any other line ends the command. A trailing ``;`` also ends it and is dropped, which is how
  a stray continuation character on the previous line is neutralised.
- Lines may be indented; the command text is stripped of leading and trailing blanks.

A command still open at the end of the text (its last line ended in ``-`` or ``+``) is
returned as it stands.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class ScriptCommand:
    """One command of a script: its reassembled text and the 1-based line it starts on."""

    text: str
    line: int


def split_commands(text: str) -> list[ScriptCommand]:
    """Split a whole MQSC script into its commands (comments and blank lines dropped)."""
    commands: list[ScriptCommand] = []
    parts: list[str] = []
    start_line = 0
    mode = ""  # "" = not continuing, "-" = from column 1, "+" = from first non-blank

    def finish() -> None:
        command = "".join(parts).strip()
        if command:
            commands.append(ScriptCommand(command, start_line))
        parts.clear()

    for number, raw in enumerate(_LINE_BREAK.split(text), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("*"):
            continue
        if not parts and not mode:
            start_line = number
        content = raw.rstrip()
        if mode == "+":
            content = content.lstrip()
        last = content[-1]
        if last == ";":
            parts.append(content[:-1])
            mode = ""
            finish()
        elif last in "-+":
            parts.append(content[:-1])
            mode = last
        else:
            parts.append(content)
            mode = ""
            finish()
    if parts:
        finish()
    return commands
