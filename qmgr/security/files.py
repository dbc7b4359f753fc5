"""Private files: secrets, keys and data that only the node's user may read (mode 0600,
directories 0700).

Neither helper follows a symbolic link at the path it is given: a link planted in a shared
directory (``cluster.secret -> ~/.bashrc``) would otherwise have the secret written over the
file it points at, or another directory made the private one. The file or directory is opened
without following links and everything after that (owner, mode, contents) is done on the open
descriptor, so a link swapped in between two steps is refused too.
"""

from __future__ import annotations

import errno
import logging
import os
import secrets
import stat
from pathlib import Path

log = logging.getLogger("qmgr.security")

SECRET_BYTES = 32  # of randomness in a generated cluster secret


class SecretError(ValueError):
    """A secret file that cannot be used."""


def _own(path: Path, st: os.stat_result) -> None:
    """Refuse a file or directory of another user: its owner could read what goes there."""
    if st.st_uid != os.geteuid():
        raise SecretError(
            f"{path} belongs to uid {st.st_uid}, not to this user (uid {os.geteuid()}): its "
            "owner could read what is written there; remove it or choose another path"
        )


def _is_link(path: Path) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def _link_refused(path: Path, what: str) -> SecretError:
    return SecretError(
        f"{path} is a symbolic link: refusing to use it as {what} (a link planted there would "
        "redirect what is written to the file it points at); remove it or choose another path"
    )


def private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) if needed and make it 0700. SecretError when it is a
    symbolic link, not a directory, or belongs to another user."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    except FileExistsError:  # something else than a directory (or a link to one) is there
        if _is_link(path):
            raise _link_refused(path, "a private directory") from None
        raise SecretError(f"{path} exists and is not a directory") from None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):
            if _is_link(path):
                raise _link_refused(path, "a private directory") from None
            raise SecretError(f"{path} exists and is not a directory") from None
        raise
    try:
        _own(path, os.fstat(fd))
        os.fchmod(fd, 0o700)
    finally:
        os.close(fd)
    return path


def write_private(path: Path, data: bytes | str) -> Path:
    """Write ``data`` to ``path`` with mode 0600 (created so, never readable by others).
    SecretError when the path is a symbolic link, is not a regular file, has other hard links
    (its contents would show under another name), or belongs to another user; the file is
    then left as it was."""
    raw = data.encode() if isinstance(data, str) else data
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP and _is_link(path):
            raise _link_refused(path, "a private file") from None
        if exc.errno == errno.ENXIO:  # a FIFO nobody reads: O_NONBLOCK refuses to wait
            raise SecretError(f"{path} is not a regular file") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SecretError(f"{path} is not a regular file")
        _own(path, st)
        if st.st_nlink > 1:
            raise SecretError(
                f"{path} has {st.st_nlink} hard links: what is written there would show under "
                "its other names too; remove it or choose another path"
            )
        os.fchmod(fd, 0o600)
        os.ftruncate(fd, 0)
        view = memoryview(raw)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    return path


def generate_secret() -> str:
    """A new cluster secret (URL-safe text)."""
    return secrets.token_urlsafe(SECRET_BYTES)


def read_secret(path: Path) -> str:
    """The secret kept in ``path`` (surrounding whitespace removed). Warns when the file can be
    read by other users."""
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise SecretError(f"cannot read the cluster secret from {path}: {exc}") from None
    if not text:
        raise SecretError(f"the cluster secret file {path} is empty")
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning("%s can be read by other users (mode %o); make it 0600", path, mode & 0o777)
    return text
