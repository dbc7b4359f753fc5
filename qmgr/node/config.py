"""A node's configuration, parsed once at the edge into a frozen dataclass."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

NAME_RE = re.compile(r"^[A-Za-z0-9._%/]{1,48}$")


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class NodeConfig:
    name: str
    host: str
    port: int
    data_dir: Path | None
    commit_interval: float = 0.002  # seconds a group commit waits to collect more changes

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def parse_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"--listen must be HOST:PORT with a port 0-65535, got '{listen}'")
    return host.strip("[]"), int(port)


def make_config(name: str, listen: str, data_dir: str | None) -> NodeConfig:
    if not NAME_RE.match(name):
        raise ConfigError(
            f"queue manager name '{name}' must be 1-48 characters of A-Z a-z 0-9 . _ % /"
        )
    host, port = parse_listen(listen)
    path = Path(data_dir) if data_dir else None
    if path is not None and path.exists() and not path.is_dir():
        raise ConfigError(f"--data-dir {data_dir} is not a directory")
    return NodeConfig(name=name, host=host, port=port, data_dir=path)
