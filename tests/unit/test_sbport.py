"""The Service Bus port's options and certificate: ``--servicebus-port`` parsed with the other
start options; the self-signed certificate made once per data directory and kept private."""

from __future__ import annotations

import ssl
import stat
from pathlib import Path

import pytest

from qmgr.node.config import ConfigError, make_config
from qmgr.node.sbport import CERT_FILE, KEY_FILE, server_context


def test_servicebus_port_default_and_given() -> None:
    default = make_config("QM1", "127.0.0.1:0", None, servicebus="sbemulatorns")
    assert (default.servicebus_host, default.servicebus_port) == ("127.0.0.1", 5672)
    given = make_config("QM1", "127.0.0.1:0", None, servicebus_port="[::1]:0")
    assert (given.servicebus_host, given.servicebus_port) == ("::1", 0)


@pytest.mark.parametrize("value", ["5672", "host:", "host:70000", ":5672"])
def test_bad_servicebus_port_is_refused(value: str) -> None:
    with pytest.raises(ConfigError, match="--servicebus-port"):
        make_config("QM1", "127.0.0.1:0", None, servicebus_port=value)


def test_self_signed_certificate_is_made_once_per_data_dir(tmp_path: Path) -> None:
    context = server_context(tmp_path)
    assert isinstance(context, ssl.SSLContext)
    cert = (tmp_path / CERT_FILE).read_bytes()
    assert stat.S_IMODE((tmp_path / KEY_FILE).stat().st_mode) == 0o600
    server_context(tmp_path)
    assert (tmp_path / CERT_FILE).read_bytes() == cert


def test_given_certificate_is_used(tmp_path: Path) -> None:
    server_context(tmp_path)  # makes a pair to give
    other = tmp_path / "other"
    other.mkdir()
    server_context(other, tmp_path / CERT_FILE, tmp_path / KEY_FILE)
    assert not (other / CERT_FILE).exists()


def test_without_a_data_dir_the_certificate_lives_in_memory() -> None:
    assert isinstance(server_context(None), ssl.SSLContext)
