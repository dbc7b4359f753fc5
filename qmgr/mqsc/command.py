"""The validated form of one MQSC command, as handed to the executor."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class WhereClause:
    """A DISPLAY filter ``WHERE(attr op value)``; ``value`` follows the quoting rule."""

    attr: str
    op: str
    value: str


@dataclass(frozen=True)
class MqscCommand:
    """One validated MQSC command.

    ``verb`` and ``obj`` are canonical (synonyms resolved: ``DEF QL`` gives DEFINE QLOCAL);
    ``obj`` is None only for END. ``name`` is the value in the object's parentheses after the
    quoting rule (unquoted folded to upper case), None where the object takes none (DISPLAY
    QMGR) or where it was left out in favour of SUBID. ``params`` maps canonical keywords to
    their validated values (integers as canonical decimal strings; names of MQ objects with
    trailing blanks dropped, so a blank name is ``''``); flags such as REPLACE or ALL map to
    None. ``requested`` lists the attribute names a DISPLAY asked for, in order. ``where`` is
    the parsed WHERE filter (also in ``params['WHERE']`` as ``"ATTR OP value"``).
    """

    verb: str
    obj: str | None
    name: str | None
    params: Mapping[str, str | None]
    requested: tuple[str, ...]
    text: str
    where: WhereClause | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    def __hash__(self) -> int:
        return hash(
            (
                self.verb,
                self.obj,
                self.name,
                tuple(sorted(self.params.items(), key=lambda kv: kv[0])),
                self.requested,
                self.text,
                self.where,
            )
        )

    @property
    def generic(self) -> bool:
        """True for a DISPLAY whose name ends with ``*`` (all names with that stem).

        DISPLAY TPSTATUS takes a topic string, whose wildcards are ``#`` and ``+``; its name is
        never generic.
        """
        return (
            self.verb == "DISPLAY"
            and self.obj != "TPSTATUS"
            and self.name is not None
            and self.name.endswith("*")
        )

    @property
    def label(self) -> str:
        """``"VERB OBJ"``, e.g. ``"DEFINE QLOCAL"`` (just ``"END"`` for END)."""
        return self.verb if self.obj is None else f"{self.verb} {self.obj}"

    def has(self, keyword: str) -> bool:
        """Whether ``keyword`` (a value parameter or a flag) was given."""
        return keyword in self.params

    def get(self, keyword: str, default: str | None = None) -> str | None:
        """The value given for ``keyword``, or ``default``."""
        return self.params.get(keyword, default)
