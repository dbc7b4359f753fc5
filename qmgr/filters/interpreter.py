"""A plain tree-walking evaluator: the reference semantics, and the baseline the compiler beats.

It decides everything per message (node types, property scopes, operator dispatch), which is
what the compiler avoids. Tests check that both give the same answers.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from qmgr.filters import ast as a
from qmgr.filters import ops, sysprops
from qmgr.filters import values as v


class Interpreter:
    """Evaluate a parsed filter (or value expression) against system and user properties."""

    def __init__(self, parameters: Mapping[str, Any] | None = None) -> None:
        self.parameters = {
            sysprops.fold(k.lstrip("@")): val for k, val in (parameters or {}).items()
        }

    def condition(
        self, node: a.Node, system: Mapping[str, Any], user: Mapping[str, Any]
    ) -> bool | None:
        if isinstance(node, (a.And, a.Or)):
            # three-valued AND/OR: the deciding value (False for AND, True for OR) on either
            # side decides; otherwise unknown (None) if either side is, else the other value
            deciding = isinstance(node, a.Or)
            left = self.condition(node.left, system, user)
            if left is deciding:
                return deciding
            right = self.condition(node.right, system, user)
            if right is deciding:
                return deciding
            return None if left is None or right is None else not deciding
        if isinstance(node, a.Not):
            inner = self.condition(node.operand, system, user)
            return None if inner is None else not inner
        if isinstance(node, a.Compare):
            left_value = self.value(node.left, system, user)
            right_value = self.value(node.right, system, user)
            return ops.COMPARE[node.op](left_value, right_value)
        if isinstance(node, a.Like):
            operand = self.value(node.operand, system, user)
            pattern = self.value(node.pattern, system, user)
            escape = None if node.escape is None else self.value(node.escape, system, user)
            return ops.like_dynamic(operand, pattern, escape, node.escape is not None, node.negated)
        if isinstance(node, a.In):
            operand = self.value(node.operand, system, user)
            if operand is v.UNKNOWN:
                return None
            for item in node.items:
                item_value = self.value(item, system, user)
                if item_value is not v.UNKNOWN and ops.eq(operand, item_value):
                    return not node.negated
            return node.negated
        if isinstance(node, a.IsNull):
            found = self.value(node.operand, system, user)
            is_null = found is v.UNKNOWN or found is None
            return not is_null if node.negated else is_null
        if isinstance(node, a.Exists):
            found = self.value(node.operand, system, user)
            if isinstance(node.operand, a.Property) and node.operand.scope == "sys":
                return found is not None
            return found is not v.UNKNOWN
        raise TypeError(f"not a condition: {node!r}")

    def value(self, node: a.Node, system: Mapping[str, Any], user: Mapping[str, Any]) -> Any:
        if isinstance(node, a.Literal):
            return node.value
        if isinstance(node, a.Property):
            if node.scope == "sys":
                prop = sysprops.resolve(node.name)
                assert prop is not None
                return sysprops.lookup_system(system, prop)
            return sysprops.lookup_user(user, node.name)
        if isinstance(node, a.Parameter):
            return self.parameters[sysprops.fold(node.name)]
        if isinstance(node, a.Binary):
            left = self.value(node.left, system, user)
            right = self.value(node.right, system, user)
            return ops.ARITHMETIC[node.op](left, right)
        if isinstance(node, a.Unary):
            return ops.UNARY[node.op](self.value(node.operand, system, user))
        if isinstance(node, a.PropertyCall):
            name = ops.property_name(self.value(node.arg, system, user))
            return v.UNKNOWN if name is None else sysprops.lookup_user(user, name)
        if isinstance(node, a.NewId):
            return uuid.uuid4()
        raise TypeError(f"not a value: {node!r}")
