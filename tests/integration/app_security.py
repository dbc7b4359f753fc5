"""Helpers for the TLS and --auth tests: a cluster CA with node and client certificates, users
files made with `qmgr auth`, and `qmgr start` processes with extra options."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from qmgr.launcher.launch import Launched, qmgr_command, start_node
from qmgr.security import pki

QMGR = qmgr_command()[0]


@dataclass
class Certs:
    ca: Path
    node_cert: Path
    node_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that issued nothing here
    stranger_cert: Path  # a client certificate of the CA for user "mallory"
    stranger_key: Path

    def node_args(self, *, require_client: bool = False) -> list[str]:
        args = ["--tls-cert", str(self.node_cert), "--tls-key", str(self.node_key)]
        return args + (["--tls-ca", str(self.ca)] if require_client else [])


def make_certs(base: Path) -> Certs:
    now = datetime.now(UTC)
    base.mkdir(parents=True, exist_ok=True)
    ca = pki.make_ca("APPS", now)
    node = pki.issue(ca, "QM1", now)
    client = pki.issue(ca, "alice", now, member=False)
    stranger = pki.issue(ca, "mallory", now, member=False)
    other = pki.make_ca("OTHER", now)
    files = {
        "ca.pem": ca.cert_pem,
        "node.pem": node.cert_pem,
        "node.key": node.key_pem,
        "client.pem": client.cert_pem,
        "client.key": client.key_pem,
        "other-ca.pem": other.cert_pem,
        "stranger.pem": stranger.cert_pem,
        "stranger.key": stranger.key_pem,
    }
    for name, data in files.items():
        (base / name).write_bytes(data)
    return Certs(
        base / "ca.pem",
        base / "node.pem",
        base / "node.key",
        base / "client.pem",
        base / "client.key",
        base / "other-ca.pem",
        base / "stranger.pem",
        base / "stranger.key",
    )


def qmgr(
    *args: str, env: dict[str, str] | None = None, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the qmgr command line; ``env`` is added to a copy of this environment."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("QMGR_PASSWORD", "QMGR_TLS"))}
    return subprocess.run(
        [QMGR, *args],
        input=input,
        capture_output=True,
        text=True,
        env={**full, **(env or {})},
        timeout=60,
    )


def add_user(users_file: Path, user: str, password: str, *groups: str) -> None:
    group_args = [arg for group in groups for arg in ("--group", group)]
    done = qmgr(
        "auth", "add-user", str(users_file), user, *group_args, env={"QMGR_PASSWORD": password}
    )
    assert done.returncode == 0, done.stderr


class Nodes:
    """`qmgr start` processes of one test, killed at its end."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.started: list[Launched] = []

    def start(self, name: str, *args: str, listen: str = "127.0.0.1:0") -> Launched:
        launched = start_node(
            name,
            data_dir=self.base / name,
            log=self.base / f"{name}.log",
            listen=listen,
            extra_args=list(args),
            env={**os.environ, "QMGR_HOME": str(self.base / "home")},
        )
        self.started.append(launched)
        return launched

    def stop_all(self) -> None:
        for launched in self.started:
            if launched.proc.poll() is None:
                launched.proc.kill()
                launched.proc.wait(10)


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[Nodes]:
    started = Nodes(tmp_path)
    yield started
    started.stop_all()
