"""Private files: secrets are written 0600 and read back; bad files get a typed error."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from qmgr.security.files import (
    SecretError,
    generate_secret,
    private_dir,
    read_secret,
    write_private,
)


def test_a_secret_is_written_private_and_read_back(tmp_path: Path) -> None:
    secret = generate_secret()
    assert len(secret) >= 40 and secret != generate_secret()
    path = write_private(private_dir(tmp_path / "state") / "secret", secret + "\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert read_secret(path) == secret


def test_an_existing_readable_file_becomes_private_when_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_text("old")
    path.chmod(0o644)
    write_private(path, "new")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and read_secret(path) == "new"


def test_an_empty_or_missing_secret_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SecretError, match="empty"):
        read_secret(write_private(tmp_path / "empty", "  \n"))
    with pytest.raises(SecretError, match="cannot read"):
        read_secret(tmp_path / "missing")


def test_a_secret_readable_by_others_is_used_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "secret"
    path.write_text("s3cret")
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="qmgr.security"):
        assert read_secret(path) == "s3cret"
    assert "0600" in caplog.text


OTHER_UID = 65534  # nobody


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
@pytest.mark.parametrize("how", ["file", "symlink"])
def test_a_file_of_another_user_is_not_written_into(tmp_path: Path, how: str) -> None:
    """Someone else's file (say a planted cluster.secret in a shared directory, or a link to
    one) would keep the secret readable by its owner whatever its mode."""
    theirs = tmp_path / "theirs"
    theirs.write_text("")
    os.chown(theirs, OTHER_UID, OTHER_UID)
    target = theirs if how == "file" else tmp_path / "cluster.secret"
    if how == "symlink":
        target.symlink_to(theirs)
    why = f"belongs to uid {OTHER_UID}" if how == "file" else "is a symbolic link"
    with pytest.raises(SecretError, match=why):
        write_private(target, "s3cret")
    assert theirs.read_text() == ""


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_a_directory_of_another_user_is_not_made_private_for_us(tmp_path: Path) -> None:
    theirs = tmp_path / "state"
    theirs.mkdir(mode=0o777)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    with pytest.raises(SecretError, match=f"belongs to uid {OTHER_UID}"):
        private_dir(theirs)
