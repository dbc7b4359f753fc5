"""Private files: secrets, keys and data that only the node's user may read (mode 0600,
directories 0700)."""

from __future__ import annotations

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


def private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) if needed and make it 0700 (SecretError when it belongs
    to another user)."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    _own(path, path.stat())
    os.chmod(path, 0o700)
    return path


def write_private(path: Path, data: bytes | str) -> Path:
    """Write ``data`` to ``path`` with mode 0600 (created so, never readable by others;
    SecretError when an existing file there belongs to another user)."""
    raw = data.encode() if isinstance(data, str) else data
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        _own(path, os.fstat(fd))
        os.fchmod(fd, 0o600)
        os.ftruncate(fd, 0)
        os.write(fd, raw)
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
