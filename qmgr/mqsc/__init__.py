"""MQSC language front end: text in, validated command records out (pure, no I/O).

``split_commands(text) -> list[ScriptCommand]`` cuts an MQSC script into commands the way
runmqsc does (``*`` comments, blank lines, ``-`` and ``+`` continuations, optional trailing
``;``), each with its ``.text`` and the 1-based ``.line`` it starts on. ``parse_command(text)
-> MqscCommand`` tokenizes one command (case-insensitive keywords, unquoted values folded to
upper case, quoted values kept with ``''`` as one quote), resolves verb and object synonyms
(DEF, DIS, ALT; QL, Q, QS, TPS, CHS, CHL, SUBSCRIPTION) and validates every parameter against
the schema in :mod:`qmgr.mqsc.schema`; the frozen :class:`MqscCommand` carries ``verb``,
``obj``, ``name``, ``params``, ``requested``, ``text`` (plus ``where`` and the ``generic``
property). ``parse_script(text)`` does both and stops after END. Anything invalid raises
:class:`MqscError` (a ``ValueError``) with an MQSC message id ``.code``, a ``.message``, a
0-based ``.position`` in the command text and ``render()`` for a caret display.
"""

from qmgr.mqsc.command import MqscCommand, WhereClause
from qmgr.mqsc.errors import MESSAGE_IDS, MqscError
from qmgr.mqsc.parser import parse_command, parse_script
from qmgr.mqsc.script import ScriptCommand, split_commands

__all__ = [
    "MESSAGE_IDS",
    "MqscCommand",
    "MqscError",
    "ScriptCommand",
    "WhereClause",
    "parse_command",
    "parse_script",
    "split_commands",
]
