"""Where the command line meets the launcher: a :class:`qmgr.launcher.errors.LaunchError`
raised under a command becomes click's own error (``Error: ...``, exit code 1), here and
nowhere else. Groups and commands that start, find or stop nodes are declared with
``cls=LaunchGroup`` / ``cls=LaunchCommand``; a group's check covers every command under it."""

from __future__ import annotations

from typing import Any

import click

from qmgr.launcher.errors import LaunchError


class _LaunchErrors:
    """Runs the command or group, turning a LaunchError into a ClickException."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)  # type: ignore[misc]
        except LaunchError as exc:
            raise click.ClickException(str(exc)) from None


class LaunchGroup(_LaunchErrors, click.Group):
    """A click group whose commands' LaunchErrors reach the user as click errors."""


class LaunchCommand(_LaunchErrors, click.Command):
    """A click command whose LaunchErrors reach the user as click errors."""
