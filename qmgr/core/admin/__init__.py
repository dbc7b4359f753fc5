"""MQSC commands executed against a queue manager, answered with runmqsc-style records."""

from qmgr.core.admin.execute import execute, execute_command
from qmgr.core.admin.records import Record

__all__ = ["Record", "execute", "execute_command"]
