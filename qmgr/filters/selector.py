"""MQ message selectors: the SQL92 subset of JMS, as DEFINE SUB SELECTOR takes it.

`compile_selector(text) -> Selector`; `Selector.matches(properties, fields) -> bool`, where
`properties` maps the message's property names to values (`str`, `int`, `float`, `bool`,
`bytes`, `None`) and `fields` maps the JMS header names the selector may use
(`JMSPriority`, `JMSCorrelationID`, ...; see `HEADER_FIELDS`) to their values.

The grammar is read by the Service Bus parser in its selector dialect (same precedence, the
same tree, LIKE through `like.py`); the evaluation follows JMS, not Service Bus. What differs is
listed in README.md, "MQ selectors". In short: identifiers are case-sensitive Java identifiers;
`BETWEEN` is supported, `EXISTS`, functions, `@parameters`, `[names]`, `%` and `!=` are not; a
missing property is NULL; comparing values of different types is FALSE, never an error; strings
and booleans only support `=` and `<>`; `IN` takes string literals and `LIKE` a string literal
pattern; an evaluation error (arithmetic on a string, integer division by zero) means the
message is not selected.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, Final

from qmgr.filters import ast as a
from qmgr.filters import lexer as lx
from qmgr.filters.compiler import flatten
from qmgr.filters.errors import FilterEvaluationError, FilterSyntaxError
from qmgr.filters.like import compile_like
from qmgr.filters.parser import Parser

MAX_SELECTOR_LENGTH: Final = 10240  # MQ's limit for SELECTOR
# JMS message header fields a selector may name; anything else is a message property.
HEADER_FIELDS: Final = frozenset(
    {
        "JMSCorrelationID",
        "JMSDeliveryMode",
        "JMSExpiration",
        "JMSMessageID",
        "JMSPriority",
        "JMSTimestamp",
    }
)
_EMPTY: Final[Mapping[str, Any]] = {}

Value = Callable[[Mapping[str, Any], Mapping[str, Any]], Any]


class _SelectorParser(Parser):
    selector_dialect = True

    @property
    def max_text(self) -> int:
        return MAX_SELECTOR_LENGTH

    @property
    def max_depth(self) -> int:
        return 64  # AND/OR chains count as one level (they are evaluated without recursion)

    @property
    def max_nodes(self) -> int:
        return 8192

    def depth_of(self, node: a.Node) -> int:
        if isinstance(node, (a.And, a.Or)) and type(node.left) is type(node):
            return max(self.depths.get(id(node.left), 1), 1 + self.depths.get(id(node.right), 1))
        return super().depth_of(node)

    def unexpected(self, expected: str) -> FilterSyntaxError:
        return self.error(f"expected {expected}, found {self.tok.describe()}")

    def condition(self) -> a.Node:
        left = self.value_or_group()
        token = self.tok
        if token.kind == lx.OP and token.value in ("=", "<>", "<", ">", "<=", ">="):
            self.advance()
            right = self.value()
            return self.made(a.Compare(str(token.value), self.need_value(left), right, left.pos))
        negated = False
        if token.is_keyword("NOT") and self.peek().is_keyword("LIKE", "IN", "BETWEEN"):
            self.advance()
            negated = True
            token = self.tok
        if token.is_keyword("BETWEEN"):
            self.advance()
            return self.between(self.need_value(left), negated)
        if token.is_keyword("LIKE"):
            self.advance()
            return self.like(self.identifier(left, "LIKE"), negated)
        if token.is_keyword("IN"):
            self.advance()
            return self.string_list(self.identifier(left, "IN"), negated)
        if token.is_keyword("IS"):
            return self.is_null(left)  # (selectors have no property() calls to test)
        return left

    def need_condition(self, node: a.Node) -> a.Condition:
        """A boolean property or TRUE/FALSE stands for `= TRUE`, as in JMS selectors."""
        if isinstance(node, a.Property) or (isinstance(node, a.Literal) and node.kind == "bool"):
            true = a.Literal(True, "bool", node.pos)
            self.made(true)
            made = self.made(a.Compare("=", node, true, node.pos))
            assert isinstance(made, a.Compare)
            return made
        return super().need_condition(node)

    def identifier(self, node: a.Node, what: str) -> a.Property:
        if not isinstance(node, a.Property):
            raise self.error(f"{what} applies to a property name", node.pos)
        return node

    def between(self, operand: a.Expr, negated: bool) -> a.Node:
        """`x BETWEEN lo AND hi` is `x >= lo AND x <= hi`; NOT BETWEEN is `x < lo OR x > hi`."""
        low = self.value()
        if not self.tok.is_keyword("AND"):
            raise self.unexpected("AND (BETWEEN low AND high)")
        self.advance()
        high = self.value()
        if negated:
            below = self.made(a.Compare("<", operand, low, operand.pos))
            above = self.made(a.Compare(">", operand, high, operand.pos))
            assert isinstance(below, a.Compare) and isinstance(above, a.Compare)
            return self.made(a.Or(below, above, operand.pos))
        lower = self.made(a.Compare(">=", operand, low, operand.pos))
        upper = self.made(a.Compare("<=", operand, high, operand.pos))
        assert isinstance(lower, a.Compare) and isinstance(upper, a.Compare)
        return self.made(a.And(lower, upper, operand.pos))

    def string_literal(self, what: str) -> a.Literal:
        token = self.tok
        if token.kind != lx.STRING:
            raise self.unexpected(f"a string literal ({what})")
        self.advance()
        literal = a.Literal(token.value, "str", token.pos)
        self.made(literal)
        return literal

    def like(self, operand: a.Property, negated: bool) -> a.Node:
        pattern = self.string_literal("the LIKE pattern")
        escape = None
        if self.tok.is_keyword("ESCAPE"):
            self.advance()
            escape = self.string_literal("the ESCAPE character")
        try:
            compile_like(str(pattern.value), None if escape is None else str(escape.value))
        except FilterEvaluationError as error:
            raise self.error(str(error), pattern.pos if escape is None else escape.pos) from None
        return self.made(a.Like(operand, pattern, escape, negated, operand.pos))

    def string_list(self, operand: a.Property, negated: bool) -> a.Node:
        start = self.expect_op("(").pos
        self.enter(start)
        items: list[a.Expr] = [self.string_literal("IN lists hold strings")]
        while self.tok.is_op(","):
            self.advance()
            items.append(self.string_literal("IN lists hold strings"))
        self.leave()
        self.expect_op(")")
        return self.made(a.In(operand, tuple(items), negated, operand.pos))

    def primary(self) -> a.Node:
        token = self.tok
        if token.is_keyword("NULL"):
            raise self.error("NULL is not a value in a selector; write 'name IS NULL'")
        if token.kind == lx.IDENT:
            if self.peek().is_op("("):
                raise self.error(f"selectors have no functions ('{token.value}(')")
            self.advance()
            prop = a.Property("user", str(token.value), token.pos)
            self.made(prop)
            return prop
        if token.kind == lx.KEYWORD and not token.is_keyword("TRUE", "FALSE"):
            raise self.error(f"unexpected keyword {token.value} ({token.value} is reserved)")
        return super().primary()


def parse_selector(text: str) -> a.Condition:
    """Parse an MQ message selector; raises FilterSyntaxError."""
    parser = _SelectorParser(text, "selector")
    node = parser.condition_or_value()
    parser.expect_end()
    if not a.is_condition(node) and not isinstance(node, (a.Property, a.Literal)):
        raise FilterSyntaxError(
            "a selector must be a condition such as \"colour = 'red'\", not a bare value",
            text,
            node.pos,
        )
    condition = parser.need_condition(node)
    parser.check_size(condition)
    return condition


# ---------------------------------------------------------------------------------------------
# Evaluation (JMS semantics): values are str, int, float, bool or None (NULL / missing).


def _number(value: Any) -> bool:
    return type(value) is not bool and isinstance(value, (int, float))


def _compare(op: str, left: Any, right: Any) -> bool | None:
    if left is None or right is None:
        return None
    if _number(left) and _number(right):
        if op == "=":
            return bool(left == right)
        if op == "<>":
            return bool(left != right)
        if op == "<":
            return bool(left < right)
        if op == ">":
            return bool(left > right)
        if op == "<=":
            return bool(left <= right)
        return bool(left >= right)
    same = type(left) is type(right) or (isinstance(left, str) and isinstance(right, str))
    if same and isinstance(left, (str, bool)) and op in ("=", "<>"):
        return (left == right) is (op == "=")
    return False  # values of different types, or ordering on strings/booleans: FALSE in JMS


def _arith(op: str, left: Any, right: Any) -> Any:
    if left is None or right is None:
        return None
    if not (_number(left) and _number(right)):
        raise FilterEvaluationError(f"operator '{op}' needs numbers")
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    if op == "*":
        return left * right
    if isinstance(left, float) or isinstance(right, float):
        if right == 0:
            return math.nan if left == 0 or math.isnan(left) else math.copysign(math.inf, left)
        return left / right
    if right == 0:
        raise FilterEvaluationError("integer division by zero")
    quotient = abs(left) // abs(right)
    return quotient if (left < 0) == (right < 0) else -quotient


def _lookup(name: str) -> Value:
    if name in HEADER_FIELDS:
        return lambda props, fields: fields.get(name)
    return lambda props, fields: props.get(name)


def _value(node: a.Expr) -> Value:
    if isinstance(node, a.Literal):
        constant = node.value
        return lambda props, fields: constant
    if isinstance(node, a.Property):
        return _lookup(node.name)
    if isinstance(node, a.Unary):
        operand = _value(node.operand)
        if node.op == "+":
            return lambda props, fields: _arith("+", 0, operand(props, fields))
        return lambda props, fields: _arith("-", 0, operand(props, fields))
    if isinstance(node, a.Binary):
        left, right, op = _value(node.left), _value(node.right), node.op
        return lambda props, fields: _arith(op, left(props, fields), right(props, fields))
    raise TypeError(f"unexpected selector node {node!r}")  # pragma: no cover - parser forbids


def _chain(clauses: list[Value], decided: bool) -> Value:
    """AND (`decided` False) or OR (`decided` True) of clauses, three-valued, left to right."""

    def evaluate(props: Mapping[str, Any], fields: Mapping[str, Any]) -> bool | None:
        result: bool | None = not decided
        for clause in clauses:
            value = clause(props, fields)
            if value is decided:
                return decided
            if value is None:
                result = None
        return result

    return evaluate


def _condition(node: a.Condition) -> Value:
    if isinstance(node, (a.And, a.Or)):
        return _chain([_condition(clause) for clause in flatten(node)], isinstance(node, a.Or))
    if isinstance(node, a.Not):
        inner = _condition(node.operand)

        def negation(props: Mapping[str, Any], fields: Mapping[str, Any]) -> bool | None:
            value = inner(props, fields)
            return None if value is None else not value

        return negation
    if isinstance(node, a.Compare):
        left, right, op = _value(node.left), _value(node.right), node.op
        return lambda props, fields: _compare(op, left(props, fields), right(props, fields))
    if isinstance(node, a.IsNull):
        operand, negated = _value(node.operand), node.negated
        return lambda props, fields: (operand(props, fields) is None) is not negated
    if isinstance(node, a.Like):
        return _like(node)
    if isinstance(node, a.In):
        return _in(node)
    raise TypeError(f"unexpected selector node {node!r}")  # pragma: no cover - parser forbids


def _string_test(operand: Value, test: Callable[[str], bool], negated: bool) -> Value:
    """LIKE and IN: NULL is UNKNOWN, a non-string FALSE (both ways), else `test` (negated)."""

    def string_test(props: Mapping[str, Any], fields: Mapping[str, Any]) -> bool | None:
        value = operand(props, fields)
        if value is None:
            return None
        if not isinstance(value, str):
            return False
        return test(value) is not negated

    return string_test


def _like(node: a.Like) -> Value:
    assert isinstance(node.pattern, a.Literal)
    escape = node.escape.value if isinstance(node.escape, a.Literal) else None
    match = compile_like(str(node.pattern.value), None if escape is None else str(escape)).match
    return _string_test(_value(node.operand), match, node.negated)


def _in(node: a.In) -> Value:
    items = frozenset(item.value for item in node.items if isinstance(item, a.Literal))
    return _string_test(_value(node.operand), items.__contains__, node.negated)


def _names(root: a.Node) -> frozenset[str]:
    names: set[str] = set()
    stack: list[a.Node] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, a.Property):
            names.add(node.name)
        stack.extend(a.children(node))
    return frozenset(names)


class Selector:
    """A compiled MQ message selector (immutable). Build it with `compile_selector`."""

    __slots__ = ("text", "tree", "header_fields", "_evaluate")

    def __init__(self, text: str, tree: a.Condition) -> None:
        self.text = text
        self.tree = tree
        self.header_fields: frozenset[str] = _names(tree) & HEADER_FIELDS
        self._evaluate = _condition(tree)

    def evaluate(
        self, properties: Mapping[str, Any], fields: Mapping[str, Any] = _EMPTY
    ) -> bool | None:
        """TRUE, FALSE or None (UNKNOWN); raises FilterEvaluationError on an evaluation error."""
        result: bool | None = self._evaluate(properties, fields)
        return result

    def matches(self, properties: Mapping[str, Any], fields: Mapping[str, Any] = _EMPTY) -> bool:
        """True only when the selector is TRUE: UNKNOWN and evaluation errors do not select."""
        try:
            return self._evaluate(properties, fields) is True
        except FilterEvaluationError:
            return False

    def __repr__(self) -> str:
        return f"Selector({self.text!r})"


@lru_cache(maxsize=1024)
def compile_selector(text: str) -> Selector:
    """Parse and compile an MQ message selector (cached by text); raises FilterSyntaxError."""
    return Selector(text, parse_selector(text))
