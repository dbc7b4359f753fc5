"""A local cluster's credentials in its state directory: the cluster secret (generated once,
kept) and the member secret derived from it (full repositories get the one, partial
repositories the other), the cluster CA and a certificate per node and for admin, and the TLS options they give."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from qmgr.launcher.cluster_secrets import (
    ADMIN,
    MEMBER_FILE,
    PKI_DIR,
    SECRET_FILE,
    admin_client_options,
    cert_files,
    ensure_pki,
    node_secret_path,
    node_tls_args,
    prepare,
    secret_path,
)
from qmgr.launcher.errors import CredentialsError
from qmgr.launcher.topology import parse_topology
from qmgr.security.files import SecretError, read_secret, write_private
from qmgr.security.keys import member_secret, parse_secret
from qmgr.security.pki import client_name, member_name

TOPOLOGY = 'cluster = "C1"\n[[node]]\nname = "FR1"\nrole = "full"\n[[node]]\nname = "APP/1"\n'


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_secret_is_generated_once_and_kept(tmp_path: Path) -> None:
    base = tmp_path / "C1"
    topology = parse_topology(TOPOLOGY)
    path = secret_path(topology, base)
    assert path == base / SECRET_FILE and _mode(path) == 0o600 and _mode(base) == 0o700
    first = path.read_text()
    assert secret_path(topology, base).read_text() == first


def test_the_topologys_secret_file_is_used_and_checked(tmp_path: Path) -> None:
    own = write_private(tmp_path / "own.secret", "abc\n")
    topology = parse_topology(
        TOPOLOGY.replace('cluster = "C1"', 'cluster = "C1"\nsecret_file = "own.secret"'),
        directory=tmp_path,
    )
    assert secret_path(topology, tmp_path / "C1") == own
    assert not (tmp_path / "C1" / SECRET_FILE).exists()
    own.write_text("")
    with pytest.raises(SecretError, match="empty"):
        secret_path(topology, tmp_path / "C1")
    with pytest.raises(CredentialsError, match="empty"):
        prepare(topology, tmp_path / "C1")


def test_certificates_name_each_node_and_admin_and_keys_are_private(tmp_path: Path) -> None:
    topology = parse_topology(TOPOLOGY)
    ensure_pki(topology, tmp_path)
    for name in ("FR1", "APP/1"):
        files = cert_files(tmp_path, name)
        assert member_name(files.cert.read_bytes()) == name
        assert _mode(files.key) == 0o600
    assert cert_files(tmp_path, "APP/1").cert.name == "APP%2F1.pem"
    admin = cert_files(tmp_path, ADMIN, client=True)
    assert (
        client_name(admin.cert.read_bytes()) == ADMIN
        and member_name(admin.cert.read_bytes()) is None
    )
    assert _mode(tmp_path / PKI_DIR) == 0o700 and _mode(tmp_path / PKI_DIR / "ca.key") == 0o600


def test_existing_certificates_are_kept_and_a_new_ca_reissues_all(tmp_path: Path) -> None:
    topology = parse_topology(TOPOLOGY)
    ensure_pki(topology, tmp_path)
    fr1 = cert_files(tmp_path, "FR1").cert.read_bytes()
    ensure_pki(topology, tmp_path)
    assert cert_files(tmp_path, "FR1").cert.read_bytes() == fr1
    (tmp_path / PKI_DIR / "ca.key").unlink()
    ensure_pki(topology, tmp_path)
    assert cert_files(tmp_path, "FR1").cert.read_bytes() != fr1


def test_tls_options_point_at_the_state_directory(tmp_path: Path) -> None:
    files = cert_files(tmp_path, "FR1")
    assert node_tls_args(tmp_path, "FR1") == [
        "--tls-cert",
        str(files.cert),
        "--tls-key",
        str(files.key),
        "--tls-ca",
        str(files.ca),
    ]
    assert admin_client_options(tmp_path, False) == {}
    admin = cert_files(tmp_path, ADMIN, client=True)
    assert admin_client_options(tmp_path, True) == {
        "tls_ca": admin.ca,
        "tls_cert": admin.cert,
        "tls_key": admin.key,
    }


def test_the_topology_turns_tls_on() -> None:
    assert not parse_topology(TOPOLOGY).tls
    assert parse_topology(TOPOLOGY.replace('cluster = "C1"', 'cluster = "C1"\ntls = true')).tls


def test_cluster_secret_prints_or_writes_a_fresh_private_secret(tmp_path: Path) -> None:
    import stat

    from click.testing import CliRunner

    from qmgr.cli.cluster import cluster
    from qmgr.security.files import read_secret

    runner = CliRunner()
    first = runner.invoke(cluster, ["secret"])
    second = runner.invoke(cluster, ["secret"])
    assert first.exit_code == 0 and len(first.output.strip()) >= 40
    assert first.output != second.output
    out = tmp_path / "cluster.secret"
    written = runner.invoke(cluster, ["secret", "--out", str(out)])
    assert written.exit_code == 0, written.output
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and len(read_secret(out)) >= 40


def test_partial_repositories_get_the_member_secret_and_full_ones_the_cluster_secret(
    tmp_path: Path,
) -> None:
    base = tmp_path / "C1"
    topology = parse_topology(TOPOLOGY)
    fr, partial = topology.nodes
    assert prepare(topology, base) == base / SECRET_FILE
    assert node_secret_path(topology, fr, base) == base / SECRET_FILE
    member = node_secret_path(topology, partial, base)
    assert member == base / MEMBER_FILE and _mode(member) == 0o600
    cluster_secret = read_secret(base / SECRET_FILE)
    assert read_secret(member) == member_secret(cluster_secret).text
    assert parse_secret(read_secret(member)).raft_password is None


def test_the_member_secret_follows_the_cluster_secret_in_use(tmp_path: Path) -> None:
    """A member.secret left from another cluster secret (an earlier --secret-file) is
    rewritten, never given to partial repositories as it is."""
    base = tmp_path / "C1"
    prepare(parse_topology(TOPOLOGY), base)
    own = write_private(tmp_path / "own.secret", "another-cluster-secret\n")
    topology = parse_topology(
        TOPOLOGY.replace('cluster = "C1"', 'cluster = "C1"\nsecret_file = "own.secret"'),
        directory=tmp_path,
    )
    path = node_secret_path(topology, topology.nodes[1], base)
    assert read_secret(path) == member_secret("another-cluster-secret").text
    assert read_secret(own) == "another-cluster-secret"


def test_a_member_secret_is_refused_as_the_cluster_secret(tmp_path: Path) -> None:
    own = write_private(tmp_path / "own.secret", member_secret("x").text + "\n")
    topology = parse_topology(
        TOPOLOGY.replace('cluster = "C1"', 'cluster = "C1"\nsecret_file = "own.secret"'),
        directory=tmp_path,
    )
    with pytest.raises(CredentialsError, match="holds a member secret: the full repositories"):
        prepare(topology, tmp_path / "C1")
    assert read_secret(own).startswith("member1:")


def test_cluster_secret_member_derives_the_member_secret_of_a_file(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from qmgr.cli.cluster import cluster

    runner = CliRunner()
    source = write_private(tmp_path / "cluster.secret", "the-cluster-secret\n")
    printed = runner.invoke(cluster, ["secret", "--member", "--from", str(source)])
    assert printed.exit_code == 0, printed.output
    assert printed.output.strip() == member_secret("the-cluster-secret").text
    out = tmp_path / "member.secret"
    written = runner.invoke(
        cluster, ["secret", "--member", "--from", str(source), "--out", str(out)]
    )
    assert written.exit_code == 0, written.output
    assert "the member secret, for partial repositories" in written.output
    assert _mode(out) == 0o600 and read_secret(out) == printed.output.strip()
    again = runner.invoke(cluster, ["secret", "--member", "--from", str(out)])
    assert again.exit_code == 1 and "already a member secret" in again.output


@pytest.mark.parametrize("args", [["--member"], ["--from", "FILE"]])
def test_cluster_secret_member_and_from_go_together(tmp_path: Path, args: list[str]) -> None:
    from click.testing import CliRunner

    from qmgr.cli.cluster import cluster

    source = write_private(tmp_path / "FILE", "s\n")
    args = [str(source) if a == "FILE" else a for a in args]
    result = CliRunner().invoke(cluster, ["secret", *args])
    assert result.exit_code == 2 and "--member and --from FILE go together" in result.output
