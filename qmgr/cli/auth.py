"""Access from the command line: ``qmgr auth`` manages a users file (``qmgr start --auth``),
and :func:`client_options` gives every client command ``--user`` and ``--tls-ca/--tls-cert/
--tls-key``. Passwords come from ``QMGR_PASSWORD`` or a prompt, never from the command line
(which every local user can read)."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from qmgr.security.files import SecretError, write_private
from qmgr.security.users import User, Users, UsersFileError, hash_password, parse_users

PASSWORD_ENV = "QMGR_PASSWORD"
F = TypeVar("F", bound=Callable[..., Any])


def read_password(prompt: str, *, confirm: bool = False) -> str:
    """``$QMGR_PASSWORD``, else asked for on the terminal (not echoed)."""
    password = os.environ.get(PASSWORD_ENV)
    if password is not None:
        return password
    if not sys.stdin.isatty():
        raise click.ClickException(f"no password: set {PASSWORD_ENV} or run from a terminal")
    return str(click.prompt(prompt, hide_input=True, confirmation_prompt=confirm, err=True))


@dataclass(frozen=True)
class Access:
    """How a client command reaches its node: TLS files and the user (the password is read
    when the client is made)."""

    user: str | None = None
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None

    def client(self, address: str, timeout: float = 30.0) -> Any:
        from qmgr.client import MQClientError, QueueManagerClient

        password = read_password(f"Password for {self.user}") if self.user else None
        try:
            return QueueManagerClient(
                address,
                timeout,
                tls_ca=self.tls_ca,
                tls_cert=self.tls_cert,
                tls_key=self.tls_key,
                user=self.user,
                password=password,
            )
        except MQClientError as exc:
            raise click.ClickException(str(exc)) from None


def client_options(command: F) -> F:
    """Add ``--user`` and the TLS options to a client command; it receives them as
    ``access`` (an :class:`Access`)."""

    @functools.wraps(command)
    def wrapper(
        *args: Any,
        user: str | None,
        tls_ca: str | None,
        tls_cert: str | None,
        tls_key: str | None,
        **kwargs: Any,
    ) -> Any:
        access = Access(user or None, tls_ca or None, tls_cert or None, tls_key or None)
        return command(*args, access=access, **kwargs)

    path = click.Path(dir_okay=False, exists=True)
    options = [
        click.option(
            "--user",
            envvar="QMGR_USER",
            help=f"User for a node started with --auth (password: ${PASSWORD_ENV} or a prompt).",
        ),
        click.option(
            "--tls-ca", type=path, envvar="QMGR_TLS_CA", help="PEM CA of the node's certificate."
        ),
        click.option(
            "--tls-cert", type=path, envvar="QMGR_TLS_CERT", help="PEM client certificate."
        ),
        click.option("--tls-key", type=path, envvar="QMGR_TLS_KEY", help="PEM key of --tls-cert."),
    ]
    decorated: Any = wrapper
    for option in reversed(options):
        decorated = option(decorated)
    return decorated


def _load(path: Path) -> Users:
    if not path.exists():
        return Users()
    try:
        return parse_users(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, UsersFileError) as exc:
        raise click.ClickException(f"{path}: {exc}") from None


def _save(path: Path, users: Users) -> None:
    try:
        write_private(path, users.render())
    except (OSError, SecretError) as exc:
        raise click.ClickException(f"{path}: {exc}") from None


@click.group()
def auth() -> None:
    """Users and passwords of nodes started with --auth (members of group mqm may run MQSC)."""


@auth.command("add-user")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("user")
@click.option("--group", "groups", multiple=True, help="A group of the user (repeatable): mqm.")
def add_user(file: Path, user: str, groups: tuple[str, ...]) -> None:
    """Add USER to FILE (or set their password and groups); the password comes from
    $QMGR_PASSWORD or a prompt. FILE is written mode 0600."""
    users = _load(file)
    password = read_password(f"Password for {user}", confirm=True)
    if not password:
        raise click.ClickException("the password is empty")
    try:
        users = users.with_user(User(user, hash_password(password), frozenset(groups)))
    except UsersFileError as exc:
        raise click.ClickException(str(exc)) from None
    _save(file, users)
    click.echo(f"user {user} set in {file}" + (f" (groups {', '.join(groups)})" if groups else ""))


@auth.command("remove-user")
@click.argument("file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.argument("user")
def remove_user(file: Path, user: str) -> None:
    """Remove USER from FILE."""
    try:
        users = _load(file).without(user)
    except UsersFileError as exc:
        raise click.ClickException(f"{file}: {exc}") from None
    _save(file, users)
    click.echo(f"user {user} removed from {file}")


@auth.command("list")
@click.argument("file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
def list_users(file: Path) -> None:
    """The users of FILE and their groups (never the hashes)."""
    for user in _load(file).values():
        click.echo(f"{user.name}\t{','.join(sorted(user.groups)) or '-'}")
