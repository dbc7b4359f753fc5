"""Parsing and validating one MQSC command against the schema.

A command is ``VERB OBJECT[(name)] [KEYWORD[(value)] ...]``: the verb first, the object type
second, then parameters in any order, each at most once. Keywords are case-insensitive;
values follow the quoting rule (see :mod:`qmgr.mqsc.lexer`). Every failure is an
:class:`~qmgr.mqsc.errors.MqscError` whose position points into the command text.
"""

from __future__ import annotations

from qmgr.mqsc.command import MqscCommand, WhereClause
from qmgr.mqsc.domains import Domain, ValueProblem
from qmgr.mqsc.errors import (
    NAME_ERROR,
    SYNTAX_ERROR,
    UNKNOWN_VERB,
    VALID_SYNTAX,
    VALUE_ERROR,
    MqscError,
)
from qmgr.mqsc.lexer import Group, Item, Word, tokenize
from qmgr.mqsc.schema import (
    COMMANDS,
    KNOWN_KEYWORDS,
    OBJECT_SYNONYMS,
    VERB_SYNONYMS,
    VERBS,
    WHERE_OPERATORS,
    CommandSpec,
    objects_for,
)
from qmgr.mqsc.script import ScriptCommand, split_commands


def parse_command(text: str) -> MqscCommand:
    """Parse and validate one command; raises :class:`MqscError` for anything invalid."""
    return _Parser(text).parse()


def parse_script(text: str) -> list[tuple[ScriptCommand, MqscCommand | MqscError]]:
    """Split a script and parse each command, stopping after an END command.

    Each entry pairs the script command with its parsed form or the error it raised, so a
    runner can execute the good ones and report the bad ones with their line numbers.
    """
    results: list[tuple[ScriptCommand, MqscCommand | MqscError]] = []
    for command in split_commands(text):
        try:
            parsed: MqscCommand | MqscError = parse_command(command.text)
        except MqscError as error:
            parsed = error
        results.append((command, parsed))
        if isinstance(parsed, MqscCommand) and parsed.verb == "END":
            break
    return results


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text

    def error(self, code: str, message: str, position: int) -> MqscError:
        return MqscError(code, message, position, self.text)

    def parse(self) -> MqscCommand:
        words = tokenize(self.text)
        if not words:
            raise self.error(SYNTAX_ERROR, "Empty command", 0)
        verb = self.verb(words[0])
        if verb == "END":
            if len(words) > 1:
                raise self.error(SYNTAX_ERROR, "END takes no parameters", words[1].pos)
            return MqscCommand("END", None, None, {}, (), self.text)
        if len(words) < 2:
            raise self.error(
                VALID_SYNTAX,
                f"Missing object type after {verb}; valid types are "
                + ", ".join(objects_for(verb)),
                len(self.text.rstrip()),
            )
        spec = self.spec(verb, words[1])
        return _CommandBuilder(self, spec, words).build()

    def verb(self, word: Word) -> str:
        verb = VERB_SYNONYMS.get(word.keyword, word.keyword)
        if verb not in VERBS:
            raise self.error(
                UNKNOWN_VERB,
                f"Unknown command verb {_short(word.raw)}; valid verbs are {', '.join(VERBS)}",
                word.pos,
            )
        if word.value is not None:
            raise self.error(
                SYNTAX_ERROR, f"{verb} takes no value in parentheses", word.value.open_pos
            )
        return verb

    def spec(self, verb: str, word: Word) -> CommandSpec:
        obj = OBJECT_SYNONYMS.get(word.keyword, word.keyword)
        spec = COMMANDS.get((verb, obj))
        if spec is None:
            raise self.error(
                VALID_SYNTAX,
                f"Object type {_short(word.raw)} not valid for {verb}; valid types are "
                + ", ".join(objects_for(verb)),
                word.pos,
            )
        return spec


class _CommandBuilder:
    """Validates the name and parameters of one command against its spec."""

    def __init__(self, parser: _Parser, spec: CommandSpec, words: list[Word]) -> None:
        self.parser = parser
        self.spec = spec
        self.obj_word = words[1]
        self.words = words[2:]
        self.params: dict[str, str | None] = {}
        self.requested: list[str] = []
        self.where: WhereClause | None = None
        self.seen: dict[str, int] = {}

    def error(self, code: str, message: str, position: int) -> MqscError:
        return self.parser.error(code, message, position)

    def build(self) -> MqscCommand:
        name = self.name()
        for word in self.words:
            self.parameter(word)
        self.check_combinations(name)
        return MqscCommand(
            self.spec.verb,
            self.spec.obj,
            name,
            self.params,
            tuple(self.requested),
            self.parser.text,
            self.where,
        )

    # --- the object's name ------------------------------------------------------------------

    def name(self) -> str | None:
        spec, word = self.spec, self.obj_word
        if word.value is None:
            if spec.name is not None and spec.name_alternative is None:
                raise self.error(
                    VALID_SYNTAX, f"Missing name in parentheses after {spec.obj}", word.end
                )
            return None
        if spec.name is None:
            raise self.error(
                SYNTAX_ERROR, f"{spec.obj} takes no name in parentheses", word.value.open_pos
            )
        item = self.single(spec.obj, word.value)
        return self.validate(spec.obj, spec.name, item, NAME_ERROR)

    # --- parameters -------------------------------------------------------------------------

    def parameter(self, word: Word) -> None:
        spec, keyword = self.spec, word.keyword
        if keyword in self.seen:
            raise self.error(SYNTAX_ERROR, f"Parameter {_short(keyword)} specified twice", word.pos)
        self.seen[keyword] = word.pos
        if keyword in spec.forbidden and (word.value is not None or keyword not in spec.attrs):
            raise self.error(VALID_SYNTAX, spec.forbidden[keyword], word.pos)
        if word.value is None:
            if keyword in spec.flags:
                self.params[keyword] = None
            elif keyword in spec.attrs:
                self.requested.append(keyword)
            elif keyword in spec.params or (keyword == "WHERE" and spec.where):
                raise self.error(
                    SYNTAX_ERROR, f"Missing parenthesised value for {keyword}", word.pos
                )
            else:
                raise self.unknown(word)
        elif keyword in spec.params:
            item = self.single(keyword, word.value)
            self.params[keyword] = self.validate(keyword, spec.params[keyword], item, VALUE_ERROR)
        elif keyword == "WHERE" and spec.where:
            self.where_clause(word.value)
        elif keyword in spec.flags or keyword in spec.attrs:
            raise self.error(SYNTAX_ERROR, f"{keyword} takes no value", word.value.open_pos)
        else:
            raise self.unknown(word)

    def unknown(self, word: Word) -> MqscError:
        keyword, label = _short(word.keyword), self.spec.label
        if word.keyword in KNOWN_KEYWORDS:
            return self.error(SYNTAX_ERROR, f"Keyword {keyword} not valid for {label}", word.pos)
        return self.error(SYNTAX_ERROR, f"Unknown keyword {keyword} for {label}", word.pos)

    def single(self, keyword: str, group: Group) -> Item:
        if not group.items:
            raise self.error(
                SYNTAX_ERROR, f"Missing parenthesised value for {keyword}", group.open_pos
            )
        if len(group.items) > 1:
            raise self.error(
                SYNTAX_ERROR,
                f"Too many values for {keyword}; quote a value that holds blanks or commas",
                group.items[1].pos,
            )
        return group.items[0]

    def validate(self, keyword: str, domain: Domain, item: Item, code: str) -> str:
        try:
            return domain.check(keyword, item.text)
        except ValueProblem as problem:
            position = item.pos
            if problem.offset is not None:
                position += problem.offset + (1 if item.quoted else 0)
            raise self.error(code, problem.message, position) from None

    def where_clause(self, group: Group) -> None:
        items = group.items
        if len(items) != 3:
            at = items[3].pos if len(items) > 3 else group.close_pos
            raise self.error(
                SYNTAX_ERROR, "WHERE needs a filter of the form WHERE(keyword operator value)", at
            )
        attr, op, value = items
        if attr.quoted or attr.text not in self.spec.attrs:
            raise self.error(
                SYNTAX_ERROR,
                f"{_short(attr.text)} cannot be used in WHERE for {self.spec.label}",
                attr.pos,
            )
        if op.quoted or op.text not in WHERE_OPERATORS:
            raise self.error(
                SYNTAX_ERROR,
                f"Unknown WHERE operator {_short(op.text)}; valid operators are "
                + ", ".join(WHERE_OPERATORS),
                op.pos,
            )
        self.where = WhereClause(attr.text, op.text, value.text)
        self.params["WHERE"] = f"{attr.text} {op.text} {value.text}"

    # --- rules across parameters ------------------------------------------------------------

    def check_combinations(self, name: str | None) -> None:
        spec, end = self.spec, len(self.parser.text.rstrip())
        alternative = spec.name_alternative
        if name is None and alternative is not None and alternative not in self.params:
            raise self.error(
                VALID_SYNTAX, f"{spec.label} needs a name in parentheses or {alternative}", end
            )
        for group in spec.exclusive:
            given = sorted((self.seen[k], k) for k in group if k in self.seen)
            if len(given) > 1:
                raise self.error(
                    SYNTAX_ERROR,
                    f"Parameters {given[0][1]} and {given[1][1]} cannot be used together",
                    given[1][0],
                )
        for group in spec.required:
            if not any(k in self.seen for k in group):
                raise self.error(
                    VALID_SYNTAX,
                    f"Missing required parameter {' or '.join(group)} for {spec.label}",
                    end,
                )
        if spec.attrs_by_type is not None:
            kind = self.params.get("TYPE") or spec.default_type or ""
            allowed = spec.attrs_by_type.get(kind, frozenset())
            for attr in self.requested:
                if attr not in allowed:
                    raise self.error(
                        SYNTAX_ERROR,
                        f"Attribute {attr} not valid for {spec.label} TYPE({kind})",
                        self.seen[attr],
                    )
        for check in spec.checks:
            message = check(self.params)
            if message is not None:
                raise self.error(VALID_SYNTAX, message, end)


def _short(text: str) -> str:
    return text if len(text) <= 48 else text[:45] + "..."
