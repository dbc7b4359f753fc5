"""Compile a parsed filter into Python source, `compile()` it once, and return plain functions.

What is decided once, at compile time, rather than per message: the node types and operators,
the scope and canonical name of every property, parameter values, constant sub-expressions
(folded), LIKE patterns (turned into `startswith`/`in`/regex), IN lists of constants (turned
into sets), and a typed fast path for comparisons with a constant (`type(x) is str and x ==
'blue'`), falling back to the general operator only for other types. AND/OR chains become flat
short-circuit code with early returns at the top level.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from qmgr.filters import ast as a
from qmgr.filters import ops, sysprops
from qmgr.filters import values as v
from qmgr.filters.errors import FilterEvaluationError, FilterSyntaxError
from qmgr.filters.interpreter import Interpreter
from qmgr.filters.like import ANYTHING, CONTAINS, EXACT, PREFIX, REGEX, SUFFIX, compile_like

Predicate = Callable[[Mapping[str, Any], Mapping[str, Any]], "bool | None"]
Matcher = Callable[[Mapping[str, Any], Mapping[str, Any]], bool]
ValueFn = Callable[[Mapping[str, Any], Mapping[str, Any]], Any]


def _pcall(user: Mapping[str, Any], name: Any) -> Any:
    key = ops.property_name(name)
    return v.UNKNOWN if key is None else sysprops.lookup_user(user, key)


_HELPERS: dict[str, Any] = {
    "_M": v.UNKNOWN,
    "_I32": v.Int32,
    "_uci": sysprops.lookup_user_folded,
    "_sci": sysprops.lookup_system_folded,
    "_pcall": _pcall,
    "_newid": uuid.uuid4,
    "_eq": ops.eq,
    "_ne": ops.ne,
    "_lt": ops.lt,
    "_le": ops.le,
    "_gt": ops.gt,
    "_ge": ops.ge,
    "_add": ops.add,
    "_sub": ops.sub,
    "_mul": ops.mul,
    "_div": ops.div,
    "_mod": ops.mod,
    "_neg": ops.neg,
    "_pos": ops.pos,
    "_like_with": ops.like_with,
    "_like_dyn": ops.like_dynamic,
    "_in_values": ops.in_values,
}
_COMPARE_HELPER = {"=": "_eq", "<>": "_ne", "<": "_lt", "<=": "_le", ">": "_gt", ">=": "_ge"}
_COMPARE_PY = {"=": "==", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_ARITH_HELPER = {"+": "_add", "-": "_sub", "*": "_mul", "/": "_div", "%": "_mod"}
_INLINE_TYPES = (str, int, float, bool)
# Constant LIKE operations are folded at compile time only when len(value) × len(pattern) is at
# most this, so that compiling a filter stays quick whatever its constants (parameters included).
LIKE_FOLD_BUDGET = 1 << 16


class _NotConstant(Exception):
    pass


class _Codegen:
    def __init__(self, text: str, parameters: Mapping[str, Any]) -> None:
        self.text = text
        self.parameters = parameters  # folded name -> value
        self.interpreter = Interpreter(parameters)
        self.lines: list[str] = []
        self.indent = 0
        self.counter = 0
        self.closure: dict[str, Any] = dict(_HELPERS)

    # -- emission helpers ----------------------------------------------------------------------

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def new(self, prefix: str = "t") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def const(self, value: Any) -> str:
        """A Python expression for a constant: a literal when possible, else a closure variable."""
        if value is None or type(value) in (str, int, bool):
            return repr(value)
        if type(value) is float and math.isfinite(value):
            return repr(value)
        name = self.new("_k")
        self.closure[name] = value
        return name

    # -- constants -----------------------------------------------------------------------------

    def constant_value(self, node: a.Node) -> Any:
        """The value of a constant sub-expression; raises _NotConstant otherwise."""
        stack: list[a.Node] = [node]
        likes: list[a.Like] = []
        while stack:
            item = stack.pop()
            if isinstance(item, (a.Property, a.PropertyCall, a.NewId)):
                raise _NotConstant
            if isinstance(item, a.Like):
                likes.append(item)
            stack.extend(a.children(item))
        for like in likes:
            self.check_like_budget(like)
        try:
            if a.is_condition(node):
                return self.interpreter.condition(node, {}, {})
            return self.interpreter.value(node, {}, {})
        except FilterEvaluationError:
            raise _NotConstant from None  # keep the failure for run time, as Service Bus does

    def check_like_budget(self, node: a.Like) -> None:
        """Leave a constant LIKE to run time when matching it could take long (huge constants).

        Its operands are values, never conditions, so evaluating them here is cheap.
        """
        try:
            operand = self.interpreter.value(node.operand, {}, {})
            pattern = self.interpreter.value(node.pattern, {}, {})
            if any(x is None or x is v.UNKNOWN for x in (operand, pattern)):
                return  # the result is unknown at once
            size = len(ops.like_text(operand)) * len(ops.like_text(pattern))
        except FilterEvaluationError:
            raise _NotConstant from None  # fails at run time, as any failing constant
        if size > LIKE_FOLD_BUDGET:
            raise _NotConstant

    # -- values --------------------------------------------------------------------------------

    def value(self, node: a.Expr) -> str:
        try:
            return self.const(self.constant_value(node))
        except _NotConstant:
            pass
        if isinstance(node, a.Property):
            return self.property(node)
        target = self.new()
        if isinstance(node, a.Binary):
            left = self.value(node.left)
            right = self.value(node.right)
            self.emit(f"{target} = {_ARITH_HELPER[node.op]}({left}, {right})")
        elif isinstance(node, a.Unary):
            operand = self.value(node.operand)
            self.emit(f"{target} = {'_neg' if node.op == '-' else '_pos'}({operand})")
        elif isinstance(node, a.PropertyCall):
            name = self.value(node.arg)
            self.emit(f"{target} = _pcall(user, {name})")
        elif isinstance(node, a.NewId):
            self.emit(f"{target} = _newid()")
        else:
            raise TypeError(f"unexpected value node {node!r}")
        return target

    def property(self, node: a.Property) -> str:
        target = self.new()
        if node.scope == "sys":
            prop = sysprops.resolve(node.name)
            assert prop is not None
            self.emit(f"{target} = system.get({prop.name!r}, _M)")
            self.emit(f"if {target} is _M: {target} = _sci(system, {prop.folded!r})")
        else:
            self.emit(f"{target} = user.get({node.name!r}, _M)")
            self.emit(f"if {target} is _M: {target} = _uci(user, {sysprops.fold(node.name)!r})")
        return target

    # -- conditions ----------------------------------------------------------------------------

    def condition(self, node: a.Condition, target: str) -> None:
        try:
            self.emit(f"{target} = {self.constant_value(node)!r}")
            return
        except _NotConstant:
            pass
        if isinstance(node, (a.And, a.Or)):
            self.chain(node, target)
        elif isinstance(node, a.Not):
            inner = self.new("c")
            self.condition(node.operand, inner)
            self.emit(f"{target} = None if {inner} is None else not {inner}")
        elif isinstance(node, a.Compare):
            self.compare(node, target)
        elif isinstance(node, a.Like):
            self.like(node, target)
        elif isinstance(node, a.In):
            self.in_list(node, target)
        elif isinstance(node, a.IsNull):
            found = self.value(node.operand)
            test = f"{found} is _M or {found} is None"
            self.emit(f"{target} = not ({test})" if node.negated else f"{target} = {test}")
        elif isinstance(node, a.Exists):
            found = self.value(node.operand)
            if isinstance(node.operand, a.Property) and node.operand.scope == "sys":
                self.emit(f"{target} = {found} is not None")
            else:
                self.emit(f"{target} = {found} is not _M")
        else:
            raise TypeError(f"unexpected condition node {node!r}")

    def chain(self, node: a.And | a.Or, target: str) -> None:
        clauses = flatten(node)
        decided = "False" if isinstance(node, a.And) else "True"
        self.condition(clauses[0], target)
        for clause in clauses[1:]:
            self.emit(f"if {target} is not {decided}:")
            self.indent += 1
            inner = self.new("c")
            self.condition(clause, inner)
            # AND: FALSE decides, UNKNOWN sticks, TRUE leaves the result; OR the other way round.
            keep = "True" if decided == "False" else "False"
            self.emit(f"if {inner} is not {keep}: {target} = {inner}")
            self.indent -= 1

    def compare(self, node: a.Compare, target: str) -> None:
        left = self.value(node.left)
        right = self.value(node.right)
        helper = f"{target} = {_COMPARE_HELPER[node.op]}({left}, {right})"
        fast = self.fast_type(node.left, node.right, node.op)
        if fast is None:
            self.emit(helper)
            return
        subject = left if fast[1] == "left" else right
        test = _type_test(subject, fast[0])
        self.emit(f"if {test}: {target} = {left} {_COMPARE_PY[node.op]} {right}")
        self.emit(f"else: {helper}")

    def fast_type(self, left: a.Expr, right: a.Expr, op: str) -> tuple[str, str] | None:
        """(python type name, side to test) when one side is an inline-able constant."""
        for constant_side, other_side, side in ((right, left, "left"), (left, right, "right")):
            try:
                constant = self.constant_value(constant_side)
            except _NotConstant:
                continue
            try:
                self.constant_value(other_side)
                return None  # both constant: folded elsewhere or left to run time
            except _NotConstant:
                pass
            kind = type(constant)
            if kind not in _INLINE_TYPES:
                return None
            if op not in ("=", "<>") and kind not in (int, float):
                return None
            if kind is float and not math.isfinite(constant):
                return None
            return kind.__name__, side
        return None

    def like(self, node: a.Like, target: str) -> None:
        operand = self.value(node.operand)
        try:
            pattern = self.constant_value(node.pattern)
            escape = None if node.escape is None else self.constant_value(node.escape)
        except _NotConstant:
            pattern_code = self.value(node.pattern)
            escape_code = "None" if node.escape is None else self.value(node.escape)
            self.emit(
                f"{target} = _like_dyn({operand}, {pattern_code}, {escape_code}, "
                f"{node.escape is not None}, {node.negated})"
            )
            return
        if pattern is None or (node.escape is not None and escape is None):
            self.emit(f"{target} = None")
            return
        try:
            plan = compile_like(
                ops.like_text(pattern), None if node.escape is None else ops.like_text(escape)
            )
        except FilterEvaluationError as error:
            raise FilterSyntaxError(str(error), self.text, node.pattern.pos) from None
        matcher = self.new("_k")
        self.closure[matcher] = plan.match
        if plan.shape == EXACT:
            test = f"{operand} == {plan.first!r}"
        elif plan.shape == PREFIX:
            test = f"{operand}.startswith({plan.first!r})"
        elif plan.shape == SUFFIX:
            test = f"{operand}.endswith({plan.first!r})"
        elif plan.shape == CONTAINS:
            test = f"{plan.first!r} in {operand}"
        elif plan.shape == ANYTHING:
            test = "True"
        elif plan.shape == REGEX:
            assert plan.regex is not None
            regex = self.new("_k")
            self.closure[regex] = plan.regex.fullmatch
            test = f"{regex}({operand}) is not None"
        else:
            test = f"{matcher}({operand})"
        if node.negated:
            test = f"not ({test})"
        self.emit(f"if type({operand}) is str: {target} = {test}")
        self.emit(f"else: {target} = _like_with({operand}, {matcher}, {node.negated})")

    def in_list(self, node: a.In, target: str) -> None:
        operand = self.value(node.operand)
        try:
            items = tuple(self.constant_value(item) for item in node.items)
        except _NotConstant:
            self.in_dynamic(node, operand, target)
            return
        tuple_name = self.const_tuple(items)
        generic = f"{target} = _in_values({operand}, {tuple_name}, {node.negated})"
        for python_type in (str, int):
            if items and all(type(item) is python_type for item in items):
                set_name = self.new("_k")
                self.closure[set_name] = frozenset(items)
                test = f"{operand} {'not in' if node.negated else 'in'} {set_name}"
                type_test = _type_test(operand, python_type.__name__)
                self.emit(f"if {type_test}: {target} = {test}")
                self.emit(f"else: {generic}")
                return
        self.emit(generic)

    def const_tuple(self, items: tuple[Any, ...]) -> str:
        name = self.new("_k")
        self.closure[name] = items
        return name

    def in_dynamic(self, node: a.In, operand: str, target: str) -> None:
        searching = self.new("f")
        if _is_variable(operand):
            self.emit(f"{target} = None if {operand} is _M else {node.negated}")
            self.emit(f"{searching} = {operand} is not _M")
        else:
            self.emit(f"{target} = {node.negated}")
            self.emit(f"{searching} = True")
        for item in node.items:
            self.emit(f"if {searching}:")
            self.indent += 1
            item_code = self.value(item)
            known = f"{item_code} is not _M and " if _is_variable(item_code) else ""
            self.emit(f"if {known}_eq({operand}, {item_code}):")
            self.emit(f"    {target} = {not node.negated}; {searching} = False")
            self.indent -= 1

    # -- whole functions -----------------------------------------------------------------------

    def predicate_body(self, root: a.Condition, matches: bool) -> list[str]:
        self.lines = []
        self.indent = 0
        try:
            constant = self.constant_value(root)
            result = constant is True if matches else constant
            return [f"return {result!r}"]
        except _NotConstant:
            pass
        if isinstance(root, (a.And, a.Or)):
            # Every clause that Service Bus would evaluate is evaluated (it may raise), so an
            # UNKNOWN clause of an AND does not end `matches` early.
            is_and = isinstance(root, a.And)
            decided = "False" if is_and else "True"
            self.emit(f"r = {is_and}")
            for clause in flatten(root):
                self.condition(clause, "c")
                self.emit(f"if c is {decided}: return {decided}")
                self.emit("if c is None: r = None")
            if matches:
                self.emit("return r is True")
            else:
                self.emit("return r")
        else:
            self.condition(root, "r")
            self.emit("return r is True" if matches else "return r")
        return self.lines

    def value_body(self, node: a.Expr) -> list[str]:
        self.lines = []
        self.indent = 0
        result = self.value(node)
        self.emit(f"return {result}")
        return self.lines

    def build(self, functions: dict[str, list[str]]) -> tuple[str, dict[str, Callable[..., Any]]]:
        names = sorted(self.closure)
        out = [f"def _factory({', '.join(names)}):"]
        for fname, body in functions.items():
            out.append(f"    def {fname}(system, user):")
            out.extend("        " + line for line in body)
        out.append(f"    return {{{', '.join(f'{n!r}: {n}' for n in functions)}}}")
        source = "\n".join(out) + "\n"
        namespace: dict[str, Any] = {}
        exec(compile(source, f"<qmgr.filters {self.text[:60]!r}>", "exec"), namespace)
        made = namespace["_factory"](**self.closure)
        return source, made


def _type_test(code: str, type_name: str) -> str:
    """A fast exact-type test; Int32 values compare like Python ints, so they share int's path."""
    if type_name == "int":
        return f"(type({code}) is int or type({code}) is _I32)"
    return f"type({code}) is {type_name}"


def _is_variable(code: str) -> bool:
    """True for generated variables, False for inlined constants such as 'abc' or 12."""
    return code.isidentifier() and code not in ("True", "False", "None")


def flatten(node: a.And | a.Or) -> list[a.Condition]:
    """The clauses of a chain of the same operator, left to right (iteratively)."""
    kind = type(node)
    out: list[a.Condition] = []
    stack: list[a.Condition] = [node]
    while stack:
        item = stack.pop()
        if type(item) is kind:
            assert isinstance(item, (a.And, a.Or))
            stack.append(item.right)
            stack.append(item.left)
        else:
            out.append(item)
    return out


def compile_condition(
    text: str, root: a.Condition, parameters: Mapping[str, Any]
) -> tuple[Predicate, Matcher, str]:
    """Compile a parsed filter: (evaluate, matches, generated source)."""
    gen = _Codegen(text, parameters)
    functions = {
        "evaluate": gen.predicate_body(root, False),
        "matches": gen.predicate_body(root, True),
    }
    source, made = gen.build(functions)
    return made["evaluate"], made["matches"], source


def compile_value(text: str, node: a.Expr, parameters: Mapping[str, Any]) -> tuple[ValueFn, str]:
    """Compile a value expression (the right-hand side of SET)."""
    gen = _Codegen(text, parameters)
    source, made = gen.build({"value": gen.value_body(node)})
    return made["value"], source
