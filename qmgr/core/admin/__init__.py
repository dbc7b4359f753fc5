"""MQSC commands executed against a queue manager, answered with runmqsc-style records.

The commands are found in a dispatch table (:mod:`qmgr.core.admin.dispatch`) that a node
extends with its own (bridges, cluster channels, the cluster).
"""

from qmgr.core.admin.execute import execute, execute_command
from qmgr.core.admin.records import Record

__all__ = ["Record", "execute", "execute_command"]
