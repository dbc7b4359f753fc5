"""Recursive-descent parser for SQL filters and rule actions.

Precedence, loosest first: OR, AND, NOT, conditions (comparison, [NOT] LIKE, [NOT] IN,
IS [NOT] NULL, EXISTS), `+ -`, `* / %`, unary `+ -`. Everything that is rejected when a rule is
created is rejected here: syntax, limits, unknown `sys.` names, SET of read-only and REMOVE of
system properties.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from qmgr.filters import ast as a
from qmgr.filters import lexer as lx
from qmgr.filters import sysprops
from qmgr.filters.errors import FilterSyntaxError

MAX_TEXT_LENGTH: Final = 1024
MAX_STATEMENTS: Final = 32
MAX_DEPTH: Final = 32  # deepest path through the tree, counting every node on it
MAX_NODES: Final = 1024
MAX_NESTING: Final = 32  # parentheses, unary operators, NOT and function arguments

_COMPARISONS: Final = ("=", "<>", "!=", "<", ">", "<=", ">=")
_FUNCTIONS: Final = ("newid", "property", "p")


def parse_filter(text: str) -> a.Condition:
    """Parse a whole filter condition."""
    parser = Parser(text, "filter")
    node = parser.condition_or_value()
    parser.expect_end()
    if not a.is_condition(node):
        raise FilterSyntaxError(
            "a filter must be a condition such as 'x = 1', not a bare value", text, node.pos
        )
    parser.check_size(node)
    assert not isinstance(node, a.VALUE_NODES)
    return node


def parse_expression(text: str) -> a.Expr:
    """Parse a value expression (used by tests and tools)."""
    parser = Parser(text, "expression")
    node = parser.value()
    parser.expect_end()
    parser.check_size(node)
    assert isinstance(node, a.VALUE_NODES)
    return node


def parse_action(text: str) -> tuple[a.Statement, ...]:
    """Parse `SET p = expr` / `REMOVE p` statements separated by optional semicolons."""
    parser = Parser(text, "action")
    statements = parser.statements()
    total = 0
    for statement in statements:
        total += parser.check_size(statement)
    if total > MAX_NODES:
        raise FilterSyntaxError(f"action is too complex (more than {MAX_NODES} nodes)", text, 0)
    return statements


class Parser:
    selector_dialect: bool = False  # the MQ message selector grammar (selector.py)

    @property
    def max_text(self) -> int:
        return MAX_TEXT_LENGTH

    @property
    def max_depth(self) -> int:
        return MAX_DEPTH

    @property
    def max_nodes(self) -> int:
        return MAX_NODES

    def __init__(self, text: str, what: str) -> None:
        if not isinstance(text, str):
            raise FilterSyntaxError(f"the {what} text must be a string", "", 0)
        if len(text) > self.max_text:
            raise FilterSyntaxError(
                f"the {what} is longer than {self.max_text} characters", text, self.max_text
            )
        self.text = text
        self.tokens = lx.tokenize(text, selector=self.selector_dialect)
        self.index = 0
        self.nesting = 0
        self.depths: dict[int, int] = {}

    # -- token helpers -----------------------------------------------------------------------

    @property
    def tok(self) -> lx.Token:
        return self.tokens[self.index]

    def peek(self, offset: int = 1) -> lx.Token:
        return self.tokens[min(self.index + offset, len(self.tokens) - 1)]

    def advance(self) -> lx.Token:
        token = self.tokens[self.index]
        if token.kind != lx.EOF:
            self.index += 1
        return token

    def error(self, message: str, pos: int | None = None) -> FilterSyntaxError:
        return FilterSyntaxError(message, self.text, self.tok.pos if pos is None else pos)

    def unexpected(self, expected: str) -> FilterSyntaxError:
        token = self.tok
        if token.kind == lx.IDENT and str(token.value).upper() == "BETWEEN":
            return self.error("BETWEEN is not supported; use 'x >= a AND x <= b'")
        return self.error(f"expected {expected}, found {token.describe()}")

    def expect_op(self, op: str) -> lx.Token:
        if not self.tok.is_op(op):
            raise self.unexpected(f"'{op}'")
        return self.advance()

    def expect_end(self) -> None:
        if self.tok.kind != lx.EOF:
            raise self.unexpected("end of input")

    def enter(self, pos: int) -> None:
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise self.error(
                f"expression is too complex (nested more than {MAX_NESTING} levels)", pos
            )

    def leave(self) -> None:
        self.nesting -= 1

    # -- size limits -------------------------------------------------------------------------

    def depth_of(self, node: a.Node) -> int:
        return 1 + max((self.depths.get(id(child), 1) for child in a.children(node)), default=0)

    def made(self, node: a.Node) -> a.Node:
        """Record a new node's depth and reject trees deeper than max_depth."""
        depth = self.depth_of(node)
        if depth > self.max_depth:
            raise self.error(
                f"expression is too complex (deeper than {self.max_depth} levels)", node.pos
            )
        self.depths[id(node)] = depth
        return node

    def check_size(self, root: a.Node | a.Statement) -> int:
        count = 0
        stack: list[a.Node | a.Statement] = [root]
        while stack:
            node = stack.pop()
            count += 1
            stack.extend(a.children(node))
        if count > self.max_nodes:
            raise self.error(f"expression is too complex (more than {self.max_nodes} nodes)", 0)
        return count

    def need_value(self, node: a.Node) -> a.Expr:
        if a.is_condition(node):
            raise self.error("expected a value here, found a condition", node.pos)
        assert isinstance(node, a.VALUE_NODES)
        return node

    def need_condition(self, node: a.Node) -> a.Condition:
        if not a.is_condition(node):
            raise self.error("expected a condition here, found a value", node.pos)
        assert not isinstance(node, a.VALUE_NODES)
        return node

    # -- conditions --------------------------------------------------------------------------

    def condition_or_value(self) -> a.Node:
        return self.chained("OR", a.Or, self.and_level)

    def and_level(self) -> a.Node:
        return self.chained("AND", a.And, self.not_level)

    def chained(
        self,
        keyword: str,
        node: Callable[[a.Condition, a.Condition, int], a.Node],
        operand: Callable[[], a.Node],
    ) -> a.Node:
        """``operand (keyword operand)*``, grouped from the left."""
        left = operand()
        while self.tok.is_keyword(keyword):
            self.advance()
            right = operand()
            left = self.made(node(self.need_condition(left), self.need_condition(right), left.pos))
        return left

    def not_level(self) -> a.Node:
        if self.tok.is_keyword("NOT"):
            start = self.advance().pos
            self.enter(start)
            operand = self.need_condition(self.not_level())
            self.leave()
            return self.made(a.Not(operand, start))
        return self.condition()

    def condition(self) -> a.Node:
        token = self.tok
        if token.is_keyword("EXISTS"):
            return self.exists()
        left = self.value_or_group()
        token = self.tok
        if token.kind == lx.OP and token.value in _COMPARISONS:
            self.advance()
            op = "<>" if token.value == "!=" else str(token.value)
            right = self.value()
            return self.made(a.Compare(op, self.need_value(left), right, left.pos))
        negated = False
        if token.is_keyword("NOT") and self.peek().is_keyword("LIKE", "IN"):
            self.advance()
            negated = True
            token = self.tok
        if token.is_keyword("LIKE"):
            self.advance()
            operand = self.need_value(left)
            pattern = self.value()
            escape = None
            if self.tok.is_keyword("ESCAPE"):
                self.advance()
                escape = self.value()
            return self.made(a.Like(operand, pattern, escape, negated, left.pos))
        if token.is_keyword("IN"):
            self.advance()
            return self.in_list(self.need_value(left), negated)
        if token.is_keyword("IS"):
            return self.is_null(left)
        return left

    def is_null(self, left: a.Node) -> a.Node:
        """`IS [NOT] NULL` after `left` (the current token is IS)."""
        self.advance()
        is_not = False
        if self.tok.is_keyword("NOT"):
            self.advance()
            is_not = True
        if not self.tok.is_keyword("NULL"):
            raise self.unexpected("NULL")
        self.advance()
        if not isinstance(left, (a.Property, a.PropertyCall)):
            raise self.error("IS [NOT] NULL can only test a property", left.pos)
        return self.made(a.IsNull(left, is_not, left.pos))

    def exists(self) -> a.Node:
        start = self.advance().pos
        self.expect_op("(")
        self.enter(start)
        operand = self.value()
        self.leave()
        if not isinstance(operand, (a.Property, a.PropertyCall)):
            raise self.error("EXISTS needs a property", operand.pos)
        self.expect_op(")")
        return self.made(a.Exists(operand, start))

    def in_list(self, operand: a.Expr, negated: bool) -> a.Node:
        start = self.expect_op("(").pos
        self.enter(start)
        items = [self.value()]
        while self.tok.is_op(","):
            self.advance()
            items.append(self.value())
        self.leave()
        self.expect_op(")")
        return self.made(a.In(operand, tuple(items), negated, operand.pos))

    # -- values ------------------------------------------------------------------------------

    def value(self) -> a.Expr:
        return self.need_value(self.value_or_group())

    def value_or_group(self) -> a.Node:
        """An additive expression; a parenthesised condition passes through unchanged."""
        left = self.term()
        while self.tok.is_op("+", "-"):
            op = str(self.advance().value)
            right = self.need_value(self.term())
            left = self.made(a.Binary(op, self.need_value(left), right, left.pos))
        return left

    def term(self) -> a.Node:
        left = self.unary()
        while self.tok.is_op("*", "/", "%"):
            op = str(self.advance().value)
            right = self.need_value(self.unary())
            left = self.made(a.Binary(op, self.need_value(left), right, left.pos))
        return left

    def unary(self) -> a.Node:
        token = self.tok
        if not token.is_op("+", "-"):
            return self.primary()
        self.advance()
        nxt = self.tok
        if token.value == "-" and nxt.kind in (lx.INTEGER, lx.DECIMAL):
            self.advance()  # a negative constant, so that -9223372036854775808 is an Int64
            return self.made(self.number(nxt, negative=True, pos=token.pos))
        self.enter(token.pos)
        operand = self.need_value(self.unary())
        self.leave()
        return self.made(a.Unary(str(token.value), operand, token.pos))

    def number(self, token: lx.Token, negative: bool, pos: int) -> a.Literal:
        value = token.value
        if token.kind == lx.DECIMAL:
            assert isinstance(value, float)
            return a.Literal(-value if negative else value, "float", pos)
        assert isinstance(value, int)
        value = -value if negative else value
        if not -(2**63) <= value <= 2**63 - 1:
            raise self.error("integer constant is outside the range of an Int64", token.pos)
        return a.Literal(value, "int", pos)

    def primary(self) -> a.Node:
        token = self.tok
        if token.kind in (lx.INTEGER, lx.DECIMAL):
            self.advance()
            return self.made(self.number(token, negative=False, pos=token.pos))
        if token.kind == lx.STRING:
            self.advance()
            return self.made(a.Literal(token.value, "str", token.pos))
        if token.is_keyword("TRUE", "FALSE"):
            self.advance()
            return self.made(a.Literal(token.value == "TRUE", "bool", token.pos))
        if token.is_keyword("NULL"):
            self.advance()
            return self.made(a.Literal(None, "null", token.pos))
        if token.kind == lx.PARAMETER:
            self.advance()
            return self.made(a.Parameter(str(token.value), token.pos))
        if token.is_op("("):
            self.advance()
            self.enter(token.pos)
            inner = self.condition_or_value()
            self.leave()
            self.expect_op(")")
            return inner
        if token.kind == lx.IDENT and self.peek().is_op("("):
            return self.function()
        if token.kind in (lx.IDENT, lx.DELIMITED):
            return self.property_ref()
        if token.kind == lx.KEYWORD:
            raise self.error(
                f"unexpected keyword {token.value} ({token.value} is a reserved word; write "
                f"[{str(token.value).lower()}] to use it as a property name)"
            )
        raise self.unexpected("a value")

    def function(self) -> a.Node:
        token = self.advance()
        name = str(token.value).lower()
        if name not in _FUNCTIONS:
            raise self.error(f"unknown function '{token.value}'", token.pos)
        self.expect_op("(")
        if name == "newid":
            self.expect_op(")")
            return self.made(a.NewId(token.pos))
        if self.tok.is_op(")"):
            raise self.error(f"{token.value}() needs one argument, a property name")
        self.enter(token.pos)
        arg = self.value()
        self.leave()
        if self.tok.is_op(","):
            raise self.error(f"{token.value}() takes exactly one argument")
        self.expect_op(")")
        return self.made(a.PropertyCall(arg, token.pos))

    def property_ref(self) -> a.Property:
        token = self.advance()
        name = str(token.value)
        if token.kind == lx.IDENT and self.tok.is_op("."):
            scope = name.lower()
            if scope not in ("sys", "user"):
                raise self.error(
                    f"unknown scope '{name}' (use sys. or user.; write [{name}.…] for a name with a dot)",
                    token.pos,
                )
            self.advance()
            name_token = self.tok
            if name_token.kind == lx.KEYWORD:
                raise self.error(
                    f"{name_token.value} is a reserved word; write {scope}.[{str(name_token.value).lower()}]"
                )
            if name_token.kind not in (lx.IDENT, lx.DELIMITED):
                raise self.unexpected(f"a property name after '{scope}.'")
            self.advance()
            prop = a.Property(scope, str(name_token.value), token.pos)
            if scope == "sys" and sysprops.resolve(prop.name) is None:
                raise self.error(f"unknown system property '{prop.name}'", name_token.pos)
            return self.made_property(prop)
        return self.made_property(a.Property("user", name, token.pos))

    def made_property(self, prop: a.Property) -> a.Property:
        self.made(prop)
        return prop

    # -- actions -----------------------------------------------------------------------------

    def statements(self) -> tuple[a.Statement, ...]:
        result: list[a.Statement] = []
        while self.tok.kind != lx.EOF:
            token = self.tok
            if token.is_keyword("SET"):
                self.advance()
                target = self.target()
                prop = sysprops.resolve(target.name) if target.scope == "sys" else None
                if prop is not None and not prop.writable:
                    raise self.error(f"system property '{target.name}' is read-only", target.pos)
                self.expect_op("=")
                value = self.value()
                result.append(a.SetStatement(target, value, token.pos))
            elif token.is_keyword("REMOVE"):
                self.advance()
                target = self.target()
                if target.scope == "sys":
                    raise self.error("system properties cannot be removed", target.pos)
                result.append(a.RemoveStatement(target, token.pos))
            else:
                raise self.unexpected("SET or REMOVE")
            if len(result) > MAX_STATEMENTS:
                raise self.error(f"an action has at most {MAX_STATEMENTS} statements", token.pos)
            if self.tok.is_op(";"):
                self.advance()
        if not result:
            raise self.error("an action needs at least one SET or REMOVE statement")
        return tuple(result)

    def target(self) -> a.Property:
        if self.tok.kind not in (lx.IDENT, lx.DELIMITED):
            if self.tok.kind == lx.KEYWORD:
                raise self.error(
                    f"{self.tok.value} is a reserved word; write [{str(self.tok.value).lower()}]"
                )
            raise self.unexpected("a property name")
        if self.tok.kind == lx.IDENT and self.peek().is_op("("):
            raise self.error("SET and REMOVE need a property name, not a function")
        return self.property_ref()
