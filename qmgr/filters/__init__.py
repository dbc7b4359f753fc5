"""The Azure Service Bus rule language: SQL filters, correlation filters and rule actions.

Pure code (no I/O, no clock). Every filter has the same two methods::

    f.evaluate(system, user) -> True | False | None   # None = UNKNOWN
    f.matches(system, user) -> bool                    # only TRUE selects the message

where `system` maps system property names (`MessageId`, `CorrelationId`, `Label`/`Subject`,
`To`, `SequenceNumber`, ...) and `user` maps application property names to Python values:
`str`, `bool`, `int` (Int64), `Int32`, `float` (Double), `None`, `bytes` (opaque),
`datetime.datetime`, `datetime.timedelta`, `uuid.UUID`. Property names are case-insensitive.

Filters:

- `compile_filter(text, parameters=None) -> SqlFilter`: the documented SQL filter grammar,
  compiled once to Python code and cached by (text, parameters).
- `CorrelationFilter(correlation_id=..., message_id=..., to=..., reply_to=..., label=... (or
  subject=...), session_id=..., reply_to_session_id=..., content_type=..., properties={...})`.
- `TrueFilter()` (`1=1`) and `FalseFilter()` (`1=0`).

Actions: `compile_action(text, parameters=None) -> Action`, and
`Action.apply(system, user) -> (new_system, new_user)` (copies; the inputs are not changed).

Errors: `FilterSyntaxError` (the rule is rejected at creation; has `.position` and a caret
line) and `FilterEvaluationError` (a message made the filter or action fail at run time).

Decisions where the documentation is silent are listed in `qmgr/filters/README.md`.
"""

from qmgr.filters.actions import Action, compile_action
from qmgr.filters.base import FalseFilter, Filter, TrueFilter
from qmgr.filters.correlation import CorrelationFilter
from qmgr.filters.errors import FilterError, FilterEvaluationError, FilterSyntaxError
from qmgr.filters.sql import SqlFilter, compile_filter
from qmgr.filters.values import UNKNOWN, Int32

__all__ = [
    "UNKNOWN",
    "Action",
    "CorrelationFilter",
    "FalseFilter",
    "Filter",
    "FilterError",
    "FilterEvaluationError",
    "FilterSyntaxError",
    "Int32",
    "SqlFilter",
    "TrueFilter",
    "compile_action",
    "compile_filter",
]
