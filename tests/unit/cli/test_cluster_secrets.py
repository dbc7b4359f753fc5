"""A local cluster's credentials in its state directory: the secret (generated once, kept),
the cluster CA and a certificate per node and for admin, and the TLS options they give."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from click import ClickException

from qmgr.cli.cluster_secrets import (
    ADMIN,
    PKI_DIR,
    SECRET_FILE,
    admin_client_options,
    cert_files,
    ensure_pki,
    node_tls_args,
    prepare,
    secret_path,
)
from qmgr.cli.topology import parse_topology
from qmgr.security.files import SecretError, write_private
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
    with pytest.raises(ClickException, match="empty"):
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
