"""The typed syntax tree of filters and actions, and its canonical text form.

Value nodes (`Literal`, `Property`, `Parameter`, `PropertyCall`, `NewId`, `Unary`, `Binary`)
produce values; condition nodes (`Compare`, `Like`, `In`, `IsNull`, `Exists`, `Not`, `And`,
`Or`) produce TRUE/FALSE/UNKNOWN. Positions are kept for error messages but do not take part
in equality, so `parse(to_text(tree)) == tree`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

from qmgr.filters.lexer import is_regular_identifier


@dataclass(frozen=True, slots=True)
class Literal:
    value: object  # int, float, str, bool or None
    kind: str  # "int" | "float" | "str" | "bool" | "null"
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Property:
    scope: str  # "user" | "sys"
    name: str  # as written (lookups are case-insensitive)
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Parameter:
    name: str  # without the '@'
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class PropertyCall:
    """`property(expr)` / `p(expr)`: a user property whose name is computed."""

    arg: Expr
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class NewId:
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Unary:
    op: str  # "+" | "-"
    operand: Expr
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Binary:
    op: str  # "+" | "-" | "*" | "/" | "%"
    left: Expr
    right: Expr
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Compare:
    op: str  # "=" | "<>" | "<" | ">" | "<=" | ">="   ("!=" is read as "<>")
    left: Expr
    right: Expr
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Like:
    operand: Expr
    pattern: Expr
    escape: Expr | None
    negated: bool
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class In:
    operand: Expr
    items: tuple[Expr, ...]
    negated: bool
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class IsNull:
    operand: Property | PropertyCall
    negated: bool
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Exists:
    operand: Property | PropertyCall
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Not:
    operand: Condition
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class And:
    left: Condition
    right: Condition
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Or:
    left: Condition
    right: Condition
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class SetStatement:
    target: Property
    value: Expr
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class RemoveStatement:
    target: Property
    pos: int = field(default=0, compare=False)


Expr: TypeAlias = Literal | Property | Parameter | PropertyCall | NewId | Unary | Binary
Condition: TypeAlias = Compare | Like | In | IsNull | Exists | Not | And | Or
Node: TypeAlias = Expr | Condition
Statement: TypeAlias = SetStatement | RemoveStatement

VALUE_NODES = (Literal, Property, Parameter, PropertyCall, NewId, Unary, Binary)
CONDITION_NODES = (Compare, Like, In, IsNull, Exists, Not, And, Or)


def is_condition(node: Node) -> bool:
    return isinstance(node, CONDITION_NODES)


def children(node: Node | Statement) -> tuple[Node, ...]:
    """The direct sub-nodes, left to right."""
    if isinstance(node, (Literal, Property, Parameter, NewId)):
        return ()
    if isinstance(node, (PropertyCall,)):
        return (node.arg,)
    if isinstance(node, (Unary, Not, IsNull, Exists)):
        return (node.operand,)
    if isinstance(node, (Binary, Compare, And, Or)):
        return (node.left, node.right)
    if isinstance(node, Like):
        return (node.operand, node.pattern) + ((node.escape,) if node.escape is not None else ())
    if isinstance(node, In):
        return (node.operand, *node.items)
    if isinstance(node, SetStatement):
        return (node.target, node.value)
    return (node.target,)


# ---------------------------------------------------------------------------------------------
# Printing. Precedence: OR 1 < AND 2 < NOT 3 < condition 4 < + - 5 < * / % 6 < unary 7 < atom 8.

_PREC_ADD = 5
_PREC_MUL = 6
_PREC_UNARY = 7
_PREC_ATOM = 8


def _precedence(node: Node) -> int:
    if isinstance(node, Or):
        return 1
    if isinstance(node, And):
        return 2
    if isinstance(node, Not):
        return 3
    if isinstance(node, CONDITION_NODES):
        return 4
    if isinstance(node, Binary):
        return _PREC_ADD if node.op in "+-" else _PREC_MUL
    if isinstance(node, Unary):
        return _PREC_UNARY
    if isinstance(node, Literal) and node.kind in ("int", "float") and _negative(node.value):
        return _PREC_UNARY  # printed with a leading '-'
    return _PREC_ATOM


def _negative(value: object) -> bool:
    return isinstance(value, (int, float)) and str(value).startswith("-")


def quote_identifier(name: str) -> str:
    return name if is_regular_identifier(name) else "[" + name.replace("]", "]]") + "]"


def quote_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def to_text(node: Node) -> str:
    """Canonical text of a filter or expression; parsing it gives an equal tree."""
    return _print(node, 0)


def statement_to_text(statement: Statement) -> str:
    if isinstance(statement, SetStatement):
        return f"SET {_print(statement.target, 0)} = {_print(statement.value, 0)}"
    return f"REMOVE {_print(statement.target, 0)}"


def action_to_text(statements: tuple[Statement, ...]) -> str:
    return "; ".join(statement_to_text(s) for s in statements)


def _print(node: Node, min_prec: int) -> str:
    text = _render(node)
    return f"({text})" if _precedence(node) < min_prec else text


def _render(node: Node) -> str:
    if isinstance(node, Literal):
        return _literal(node)
    if isinstance(node, Property):
        prefix = "sys." if node.scope == "sys" else ""
        return prefix + quote_identifier(node.name)
    if isinstance(node, Parameter):
        return "@" + node.name
    if isinstance(node, PropertyCall):
        return f"property({_print(node.arg, 0)})"
    if isinstance(node, NewId):
        return "newid()"
    if isinstance(node, Unary):
        inner = node.operand
        if node.op == "-" and isinstance(inner, Literal) and inner.kind in ("int", "float"):
            # "-5" would read back as the literal -5, so keep the operator visibly separate.
            return f"-({_render(inner)})"
        text = _print(inner, _PREC_UNARY)
        return node.op + (" " + text if text[:1] in "+-" else text)
    if isinstance(node, Binary):
        prec = _precedence(node)
        return f"{_print(node.left, prec)} {node.op} {_print(node.right, prec + 1)}"
    if isinstance(node, Compare):
        return f"{_print(node.left, _PREC_ADD)} {node.op} {_print(node.right, _PREC_ADD)}"
    if isinstance(node, Like):
        text = f"{_print(node.operand, _PREC_ADD)} {'NOT ' if node.negated else ''}LIKE "
        text += _print(node.pattern, _PREC_ADD)
        if node.escape is not None:
            text += f" ESCAPE {_print(node.escape, _PREC_ADD)}"
        return text
    if isinstance(node, In):
        items = ", ".join(_print(item, _PREC_ADD) for item in node.items)
        return f"{_print(node.operand, _PREC_ADD)} {'NOT ' if node.negated else ''}IN ({items})"
    if isinstance(node, IsNull):
        return f"{_print(node.operand, _PREC_ATOM)} IS {'NOT ' if node.negated else ''}NULL"
    if isinstance(node, Exists):
        return f"EXISTS({_print(node.operand, 0)})"
    if isinstance(node, Not):
        return "NOT " + _print(node.operand, 3)
    if isinstance(node, And):
        return f"{_print(node.left, 2)} AND {_print(node.right, 3)}"
    assert isinstance(node, Or)
    return f"{_print(node.left, 1)} OR {_print(node.right, 2)}"


def _literal(node: Literal) -> str:
    value = node.value
    if node.kind == "null":
        return "NULL"
    if node.kind == "bool":
        return "TRUE" if value else "FALSE"
    if node.kind == "str":
        assert isinstance(value, str)
        return quote_string(value)
    if node.kind == "float":
        assert isinstance(value, float)
        text = repr(value)
        return text if ("." in text or "e" in text) else text + ".0"
    return str(value)
