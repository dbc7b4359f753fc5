"""What can go wrong when starting, finding or stopping nodes and clusters.

Every error here is a :class:`LaunchError`, a ``RuntimeError`` with a message meant for the
person who asked: the command line turns it into its own error at one place
(:mod:`qmgr.cli.edge`), the load job into its ``ClusterError``, tests and benchmarks let it
fail the run with the message as it is.
"""

from __future__ import annotations


class LaunchError(RuntimeError):
    """A node or cluster could not be started, found, waited for or stopped."""


class NodeStartError(LaunchError):
    """A node process exited, or printed no READY line in time."""


class PortError(LaunchError):
    """The ports a topology asks for cannot be used."""


class StateError(LaunchError):
    """A cluster's state on disk is unreadable, or names no cluster that is up."""


class CredentialsError(LaunchError):
    """The cluster secret, the member secret or the certificates cannot be made or used."""


class ClusterRunningError(LaunchError):
    """A cluster is still running where another would start."""


class WaitTimeout(LaunchError):
    """What :func:`qmgr.launcher.poll.wait_for` waited for did not happen in time."""
