"""Cluster options of `qmgr start`: parsed once, bad combinations refused with a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from qmgr.node.config import (
    ConfigError,
    TlsSettings,
    channel_settings,
    make_cluster_settings,
    make_config,
    start_credentials,
)
from qmgr.security.keys import member_secret, parse_secret, raft_password

SECRET = "s3cret"


def test_no_cluster_means_no_settings() -> None:
    assert make_cluster_settings(None) is None


def test_full_repository_includes_itself_among_raft_peers() -> None:
    s = make_cluster_settings(
        "DEMO",
        full_repository=True,
        raft="127.0.0.1:7101",
        raft_peers="127.0.0.1:7102, 127.0.0.1:7103,127.0.0.1:7102",
        password=SECRET,
    )
    assert s is not None and s.full_repository
    assert s.raft_peers == ("127.0.0.1:7101", "127.0.0.1:7102", "127.0.0.1:7103")


def test_partial_repository_keeps_join_addresses_in_order() -> None:
    s = make_cluster_settings("DEMO", join="127.0.0.1:7001,127.0.0.1:7002", password=SECRET)
    assert s is not None and not s.full_repository
    assert s.join == ("127.0.0.1:7001", "127.0.0.1:7002")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cluster": None, "join": "127.0.0.1:1"}, "need --cluster"),
        ({"cluster": "DEMO"}, "needs --join"),
        ({"cluster": "DEMO", "full_repository": True}, "needs --raft"),
        ({"cluster": "DEMO", "full_repository": True, "raft": "127.0.0.1:0"}, "real port"),
        ({"cluster": "DEMO", "raft": "127.0.0.1:7101", "join": "h:1"}, "full repositories only"),
        ({"cluster": "DEMO", "join": "nohostport"}, "HOST:PORT"),
        ({"cluster": "DEMO", "join": "127.0.0.1:0"}, "real ports"),
        ({"cluster": "bad name!", "join": "h:1"}, "cluster name"),
    ],
)
def test_bad_cluster_options_are_refused(kwargs: dict[str, object], message: str) -> None:
    cluster = kwargs.pop("cluster")
    kwargs.setdefault("password", SECRET)
    with pytest.raises(ConfigError, match=message):
        make_cluster_settings(cluster, **kwargs)  # type: ignore[arg-type]


def test_config_carries_cluster_settings() -> None:
    s = make_cluster_settings("DEMO", join="127.0.0.1:7001", password=SECRET)
    config = make_config("QM1", "127.0.0.1:0", None, s)
    assert config.cluster is s


FR = {"full_repository": True, "raft": "127.0.0.1:7101"}
PR = {"join": "127.0.0.1:7001"}


@pytest.mark.parametrize("role", [FR, PR], ids=["full", "partial"])
def test_a_member_without_a_secret_is_refused_and_told_why(role: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="needs the cluster secret") as info:
        make_cluster_settings("DEMO", **role)  # type: ignore[arg-type]
    assert "--insecure" in str(info.value)


def test_the_full_repository_refusal_names_the_raft_port_risk() -> None:
    with pytest.raises(ConfigError, match="unpickles") as info:
        make_cluster_settings("DEMO", **FR)  # type: ignore[arg-type]
    assert "encrypt and authenticate" in str(info.value)


@pytest.mark.parametrize("role", [FR, PR], ids=["full", "partial"])
def test_insecure_runs_a_member_without_a_secret(role: dict[str, object]) -> None:
    s = make_cluster_settings("DEMO", insecure=True, **role)  # type: ignore[arg-type]
    assert s is not None and s.insecure and s.secret is None


@pytest.mark.parametrize("role", [FR, PR], ids=["full", "partial"])
def test_insecure_with_a_secret_is_a_contradiction(role: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="contradicts"):
        make_cluster_settings("DEMO", password=SECRET, insecure=True, **role)  # type: ignore[arg-type]


def test_an_empty_secret_counts_as_none() -> None:
    with pytest.raises(ConfigError, match="needs the cluster secret"):
        make_cluster_settings("DEMO", password="", **PR)  # type: ignore[arg-type]


def test_the_secret_never_shows_in_a_repr() -> None:
    from qmgr.node.raft import RaftConfig

    s = make_cluster_settings("DEMO", password=SECRET, **PR)  # type: ignore[arg-type]
    raft = RaftConfig("127.0.0.1:7101", (), "DEMO", password=raft_password(SECRET))
    assert s is not None and s.secret == parse_secret(SECRET)
    member = member_secret(SECRET).text
    for text in (SECRET, raft_password(SECRET), member, member[len("member1:") :]):
        assert text not in repr(s) and text not in repr(raft) and text not in repr(s.secret)
    assert SECRET not in repr(make_config("QM1", "127.0.0.1:0", None, s))


def test_a_partial_repository_with_a_member_certificate_needs_no_secret(tmp_path: Path) -> None:
    tls = TlsSettings(tmp_path / "c.pem", tmp_path / "k.pem", tmp_path / "ca.pem")
    s = make_cluster_settings("DEMO", tls=tls, **PR)  # type: ignore[arg-type]
    assert s is not None and s.secret is None and not s.insecure


def test_a_certificate_without_the_cluster_ca_does_not_replace_the_secret(tmp_path: Path) -> None:
    tls = TlsSettings(tmp_path / "c.pem", tmp_path / "k.pem", None)
    with pytest.raises(ConfigError, match="needs the cluster secret"):
        make_cluster_settings("DEMO", tls=tls, **PR)  # type: ignore[arg-type]


def test_a_full_repository_needs_the_secret_even_with_a_certificate(tmp_path: Path) -> None:
    tls = TlsSettings(tmp_path / "c.pem", tmp_path / "k.pem", tmp_path / "ca.pem")
    with pytest.raises(ConfigError, match="unpickles"):
        make_cluster_settings("DEMO", tls=tls, **FR)  # type: ignore[arg-type]


def test_a_full_repository_refuses_a_member_secret() -> None:
    with pytest.raises(
        ConfigError, match="--full-repository needs the cluster secret, not a member"
    ):
        make_cluster_settings("DEMO", password=member_secret(SECRET).text, **FR)  # type: ignore[arg-type]


def test_a_partial_repository_takes_either_secret_and_proves_with_the_same_member_secret() -> None:
    given_member = make_cluster_settings("DEMO", password=member_secret(SECRET).text, **PR)  # type: ignore[arg-type]
    given_cluster = make_cluster_settings("DEMO", password=SECRET, **PR)  # type: ignore[arg-type]
    assert given_member is not None and given_member.secret is not None
    assert given_cluster is not None and given_cluster.secret is not None
    assert given_member.secret.member == given_cluster.secret.member == member_secret(SECRET)
    assert given_member.secret.raft_password is None
    assert given_cluster.secret.raft_password == raft_password(SECRET)


@pytest.mark.parametrize("text", ["member1:", "member1:not*base64", "member1:AAAA", "   "])
def test_a_malformed_secret_is_refused_with_the_reason(text: str) -> None:
    with pytest.raises(
        ConfigError, match="the cluster secret cannot be used: .*(member secret|empty)"
    ):
        make_cluster_settings("DEMO", password=text, **PR)  # type: ignore[arg-type]


def test_without_cluster_the_secret_is_kept_for_a_join_by_channel_definitions() -> None:
    secret, insecure = start_credentials(None, SECRET, False)
    assert secret is not None and not insecure
    config = make_config("PUB1", "127.0.0.1:0", None, secret=secret)
    s = channel_settings(config, "DEMO", ("fr1:1414",))
    assert (s.cluster, s.full_repository, s.join) == ("DEMO", False, ("fr1:1414",))
    assert s.secret is secret
    assert start_credentials("DEMO", SECRET, False) == (None, False)  # in the settings instead


def test_a_join_by_channel_definitions_needs_a_secret_or_insecure() -> None:
    with pytest.raises(ConfigError, match="member secret"):
        channel_settings(make_config("PUB1", "127.0.0.1:0", None), "DEMO", ())
    insecure = make_config("PUB1", "127.0.0.1:0", None, insecure=True)
    assert channel_settings(insecure, "DEMO", ()).insecure
    with pytest.raises(ConfigError, match="contradicts"):
        start_credentials(None, SECRET, True)
