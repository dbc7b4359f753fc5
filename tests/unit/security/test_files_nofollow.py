"""Private files and directories are never reached through a symbolic link: a link planted in
a shared state directory is refused (the file or directory it points at is left as it was),
also when it is swapped in between two steps, and so are hard links and FIFOs."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from qmgr.cli.cluster import cluster
from qmgr.launcher.cluster_secrets import MEMBER_FILE, PKI_DIR, SECRET_FILE, prepare
from qmgr.launcher.compose import ENV_FILE
from qmgr.launcher.errors import CredentialsError
from qmgr.launcher.launch import qmgr_command
from qmgr.launcher.topology import parse_topology
from qmgr.security.files import SecretError, private_dir, read_secret, write_private

TOPOLOGY = 'cluster = "C1"\n[[node]]\nname = "FR1"\nrole = "full"\n'


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file of this user's that a planted link points at."""
    path = tmp_path / "victim"
    path.write_text("precious\n")
    path.chmod(0o644)
    return path


def _unchanged(victim: Path) -> None:
    assert victim.read_text() == "precious\n" and _mode(victim) == 0o644


def test_a_link_at_the_secret_path_is_refused_and_its_target_kept(
    tmp_path: Path, victim: Path
) -> None:
    link = tmp_path / "cluster.secret"
    link.symlink_to(victim)
    with pytest.raises(SecretError, match="is a symbolic link") as info:
        write_private(link, "s3cret\n")
    assert str(link) in str(info.value)
    _unchanged(victim)
    assert link.is_symlink()


def test_a_dangling_link_creates_nothing_where_it_points(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "new-file"
    target.parent.mkdir()
    link = tmp_path / "member.secret"
    link.symlink_to(target)
    with pytest.raises(SecretError, match="is a symbolic link"):
        write_private(link, "s3cret\n")
    assert not target.exists()


def test_a_hard_link_to_another_file_is_refused(tmp_path: Path, victim: Path) -> None:
    planted = tmp_path / "cluster.secret"
    os.link(victim, planted)
    with pytest.raises(SecretError, match="2 hard links"):
        write_private(planted, "s3cret\n")
    _unchanged(victim)


def test_a_fifo_is_refused_without_waiting_for_a_reader(tmp_path: Path) -> None:
    fifo = tmp_path / "cluster.secret"
    os.mkfifo(fifo)
    with pytest.raises(SecretError, match="not a regular file"):
        write_private(fifo, "s3cret\n")


def test_a_regular_file_is_still_rewritten_private(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_text("a much longer old secret\n")
    path.chmod(0o644)
    write_private(path, b"new\n")
    assert path.read_bytes() == b"new\n" and _mode(path) == 0o600


def test_a_linked_directory_is_refused_and_its_target_kept(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    link = tmp_path / "state"
    link.symlink_to(shared)
    with pytest.raises(SecretError, match="is a symbolic link") as info:
        private_dir(link)
    assert str(link) in str(info.value)
    assert _mode(shared) == 0o755
    dangling = tmp_path / "gone"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(SecretError, match="is a symbolic link"):
        private_dir(dangling)
    assert not (tmp_path / "nowhere").exists()


def test_a_file_where_the_directory_goes_is_refused(tmp_path: Path) -> None:
    (tmp_path / "state").write_text("")
    with pytest.raises(SecretError, match="not a directory"):
        private_dir(tmp_path / "state")


def test_a_directory_swapped_for_a_link_after_it_was_made_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between creating the directory and making it private, someone replaces it with a link:
    the mode is set on what was opened without following links, so the link is refused."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    state = tmp_path / "state"
    real_mkdir = Path.mkdir

    def mkdir_then_swap(self: Path, *args: object, **kwargs: object) -> None:
        real_mkdir(self, *args, **kwargs)  # type: ignore[arg-type]
        if self == state:
            os.rmdir(self)
            os.symlink(shared, self)

    monkeypatch.setattr(Path, "mkdir", mkdir_then_swap)
    with pytest.raises(SecretError, match="is a symbolic link"):
        private_dir(state)
    assert _mode(shared) == 0o755


def test_a_private_directory_is_made_0700(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    state.chmod(0o755)
    assert private_dir(state) == state and _mode(state) == 0o700
    assert private_dir(tmp_path / "a" / "b") == tmp_path / "a" / "b"
    assert _mode(tmp_path / "a" / "b") == 0o700


# -- through the commands that write secrets -----------------------------------------------------


def test_cluster_secret_out_refuses_a_planted_link(tmp_path: Path, victim: Path) -> None:
    """The real `qmgr cluster secret --out FILE` process."""
    link = tmp_path / "cluster.secret"
    link.symlink_to(victim)
    result = subprocess.run(
        [*qmgr_command(), "cluster", "secret", "--out", str(link)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert f"{link} is a symbolic link" in result.stderr
    _unchanged(victim)


def test_cluster_compose_refuses_a_planted_env_file_link(tmp_path: Path, victim: Path) -> None:
    (tmp_path / ENV_FILE).symlink_to(tmp_path / "not-yet")  # dangling: would be created
    result = CliRunner().invoke(cluster, ["compose", "--out", str(tmp_path)])
    assert result.exit_code == 1 and "is a symbolic link" in result.output
    assert not (tmp_path / "not-yet").exists()


def test_a_cluster_state_directory_with_planted_links_is_refused(
    tmp_path: Path, victim: Path
) -> None:
    """What `qmgr cluster up` prepares in its state directory: the secret files and pki/."""
    topology = parse_topology(TOPOLOGY)
    base = tmp_path / "C1"
    base.mkdir()
    (base / MEMBER_FILE).symlink_to(victim)
    with pytest.raises(CredentialsError, match="is a symbolic link"):
        prepare(topology, base)
    _unchanged(victim)
    assert len(read_secret(base / SECRET_FILE)) >= 40  # the secret itself went in its place

    (base / MEMBER_FILE).unlink()
    shared = tmp_path / "shared-pki"
    shared.mkdir()
    shared.chmod(0o755)
    (base / PKI_DIR).symlink_to(shared)
    with pytest.raises(CredentialsError, match="is a symbolic link"):
        prepare(topology, base)
    assert list(shared.iterdir()) == [] and _mode(shared) == 0o755
