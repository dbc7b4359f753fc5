"""Cluster options of `qmgr start`: parsed once, bad combinations refused with a clear error."""

from __future__ import annotations

import pytest

from qmgr.node.config import ConfigError, make_cluster_settings, make_config


def test_no_cluster_means_no_settings() -> None:
    assert make_cluster_settings(None) is None


def test_full_repository_includes_itself_among_raft_peers() -> None:
    s = make_cluster_settings(
        "DEMO",
        full_repository=True,
        raft="127.0.0.1:7101",
        raft_peers="127.0.0.1:7102, 127.0.0.1:7103,127.0.0.1:7102",
    )
    assert s is not None and s.full_repository
    assert s.raft_peers == ("127.0.0.1:7101", "127.0.0.1:7102", "127.0.0.1:7103")


def test_partial_repository_keeps_join_addresses_in_order() -> None:
    s = make_cluster_settings("DEMO", join="127.0.0.1:7001,127.0.0.1:7002")
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
    with pytest.raises(ConfigError, match=message):
        make_cluster_settings(cluster, **kwargs)  # type: ignore[arg-type]


def test_config_carries_cluster_settings() -> None:
    s = make_cluster_settings("DEMO", join="127.0.0.1:7001")
    config = make_config("QM1", "127.0.0.1:0", None, s)
    assert config.cluster is s
