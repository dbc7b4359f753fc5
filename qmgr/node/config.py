"""A node's configuration, parsed once at the edge into frozen dataclasses."""

from __future__ import annotations

import dataclasses
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from qmgr.security.keys import NodeSecret, SecretFormatError, parse_secret
from qmgr.servicebus.sas import KeysFileError, SasKeys, parse_keys

NAME_RE = re.compile(r"^[A-Za-z0-9._%/]{1,48}$")
CLUSTER_RE = re.compile(r"^[A-Za-z0-9._%/]{1,48}$")


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class ClusterSettings:
    """Cluster membership of a node (``--cluster`` and friends)."""

    cluster: str
    full_repository: bool = False
    raft_address: str = ""  # FR only: where PySyncObj binds
    raft_peers: tuple[str, ...] = ()  # FR only: every FR's Raft address
    join: tuple[str, ...] = ()  # gRPC addresses of full repositories
    # the secret given (qmgr.security.keys): the cluster secret (a full repository's: Raft and
    # member proofs) or a member secret (member proofs only)
    secret: NodeSecret | None = field(default=None, repr=False)
    insecure: bool = False  # --insecure: run without a secret (nothing authenticated)
    join_timeout: float = 20.0  # a partial repository waits this long for its first snapshot


@dataclass(frozen=True)
class TlsSettings:
    """TLS on the node's port (``--tls-cert/--tls-key``, ``--tls-ca`` to require client
    certificates). In a cluster the same certificate is the node's client certificate on the
    channels it opens, and ``ca`` is the cluster CA its peers are checked against."""

    cert: Path
    key: Path
    ca: Path | None = None


DEFAULT_SERVICEBUS_HOST = "127.0.0.1"
DEFAULT_SERVICEBUS_PORT = 5672  # the port of Microsoft's emulator's connection string


@dataclass(frozen=True)
class PortLimits:
    """What one client may hold on the Service Bus port (``--servicebus-limit NAME=N``). A
    client that goes past one is refused with ``amqp:resource-limit-exceeded`` (HTTP: 503 or
    408), and only its own connection is closed."""

    connections: int = 5000  # AMQP and HTTP connections open on the port at once
    sessions_per_connection: int = 256  # AMQP sessions (channel-max + 1 in the open frame)
    links_per_session: int = 256  # AMQP links of one session (handle-max + 1 in begin)
    links_per_connection: int = 1024  # AMQP links of one connection, all sessions together
    partial_bytes_per_connection: int = 2 * 1024 * 1024  # unfinished multi-frame deliveries
    tokens_per_connection: int = 1024  # CBS tokens one connection holds (one per audience)
    http_request_seconds: int = 30  # an HTTP request (headers and body) arrives within this


@dataclass(frozen=True)
class NodeConfig:
    name: str
    host: str
    port: int
    data_dir: Path | None
    commit_interval: float = 0.002  # seconds a group commit waits to collect more changes
    cluster: ClusterSettings | None = None
    tls: TlsSettings | None = None
    auth_file: Path | None = None  # --auth: users, hashed passwords and groups
    # without --cluster: what the node proves itself with once DEFINE CHANNEL joins a cluster
    secret: NodeSecret | None = field(default=None, repr=False)
    insecure: bool = False
    # --servicebus [NAME]: the Service Bus namespace the node hosts (None: only one the store
    # already holds; "": the one the store holds, else the default one, for --servicebus-port
    # given alone); --servicebus-config FILE: the emulator's Config.json applied at start
    servicebus: str | None = None
    servicebus_config: Path | None = None
    # --servicebus-limit NAME=N: the namespace's quotas (NamespaceLimits fields) in place of
    # Service Bus's documented ones
    servicebus_limits: tuple[tuple[str, int], ...] = ()
    # --servicebus-limit NAME=N for PortLimits fields: what the port lets one client hold
    servicebus_port_limits: PortLimits = field(default_factory=lambda: PortLimits())
    # --servicebus-port HOST:PORT: AMQP, HTTPS and HTTP of the namespace on one port (0: any
    # free port); the default when a namespace is hosted
    servicebus_host: str = DEFAULT_SERVICEBUS_HOST
    servicebus_port: int = DEFAULT_SERVICEBUS_PORT
    # --servicebus-keys FILE: the shared access keys SAS tokens are checked against (None:
    # every token is accepted, as by Microsoft's emulator)
    servicebus_keys: SasKeys | None = field(default=None, repr=False)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def parse_listen(listen: str, option: str = "--listen") -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"{option} must be HOST:PORT with a port 0-65535, got '{listen}'")
    return host.strip("[]"), int(port)


def _addresses(text: str, option: str) -> tuple[str, ...]:
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        _, port = parse_listen(part, option)
        if port == 0:
            raise ConfigError(f"{option} needs real ports, got '{part}'")
        out.append(part)
    return tuple(dict.fromkeys(out))


def make_cluster_settings(
    cluster: str | None,
    *,
    full_repository: bool = False,
    raft: str | None = None,
    raft_peers: str | None = None,
    join: str | None = None,
    password: str | None = None,
    insecure: bool = False,
    tls: TlsSettings | None = None,
) -> ClusterSettings | None:
    """Validate the cluster options; None when the node is not in a cluster."""
    if not cluster:
        if full_repository or raft or raft_peers or join:
            raise ConfigError("--full-repository, --raft, --raft-peers and --join need --cluster")
        return None
    if not CLUSTER_RE.match(cluster):
        raise ConfigError(
            f"cluster name '{cluster}' must be 1-48 characters of A-Z a-z 0-9 . _ % /"
        )
    joins = _addresses(join or "", "--join")
    _check_secret(full_repository, password or None, insecure, tls)
    secret = _parse_secret(full_repository, password) if password else None
    if full_repository:
        if not raft:
            raise ConfigError("--full-repository needs --raft HOST:PORT for the Raft transport")
        _, port = parse_listen(raft, "--raft")
        if port == 0:
            raise ConfigError("--raft needs a real port (the other full repositories dial it)")
        peers = _addresses(raft_peers or "", "--raft-peers")
        return ClusterSettings(
            cluster,
            True,
            raft,
            tuple(dict.fromkeys((raft, *peers))),
            joins,
            secret,
            insecure,
        )
    if raft or raft_peers:
        raise ConfigError("--raft and --raft-peers are for full repositories only")
    if not joins:
        raise ConfigError("a partial repository needs --join with the address of a full repository")
    return ClusterSettings(cluster, False, "", (), joins, secret, insecure)


def channel_settings(config: NodeConfig, cluster: str, join: tuple[str, ...]) -> ClusterSettings:
    """The settings of a partial repository whose cluster-receiver and cluster-sender channels
    were defined with MQSC (the node was started without ``--cluster``): the secret or
    ``--insecure`` it was started with; raises ConfigError when it has no way to prove who it
    is."""
    _check_secret(False, "given" if config.secret else None, config.insecure, config.tls)
    return ClusterSettings(cluster, False, "", (), join, config.secret, config.insecure)


def start_credentials(
    cluster: str | None, password: str | None, insecure: bool
) -> tuple[NodeSecret | None, bool]:
    """Without ``--cluster``, the secret (and ``--insecure``) are kept for a cluster joined
    later with DEFINE CHANNEL; with it they are in the cluster settings."""
    if cluster:
        return None, False
    if password and insecure:
        _check_secret(False, password, insecure, None)
    return (_parse_secret(False, password) if password else None), insecure


def _parse_secret(full_repository: bool, text: str) -> NodeSecret:
    try:
        secret = parse_secret(text)
    except SecretFormatError as exc:
        raise ConfigError(f"the cluster secret cannot be used: {exc}") from None
    if full_repository and not secret.is_repository_secret:
        raise ConfigError(
            "--full-repository needs the cluster secret, not a member secret: a member secret "
            "(member1:...) lets a partial repository prove membership but cannot key Raft "
            "between full repositories; give this node the file `qmgr cluster secret` made"
        )
    return secret


INSECURE_HINT = "or give --insecure to run with nothing between members authenticated"


def _check_secret(
    full_repository: bool, secret: str | None, insecure: bool, tls: TlsSettings | None
) -> None:
    """A cluster member needs a way to prove who it is: the cluster secret (both roles) or,
    for a partial repository, a certificate from the cluster CA. ``--insecure`` is the explicit
    way to run without either, and contradicts a secret."""
    if secret is not None and insecure:
        raise ConfigError(
            "--insecure contradicts the cluster secret that was given "
            "(--cluster-secret-file, QMGR_CLUSTER_SECRET_FILE or QMGR_CLUSTER_SECRET): "
            "drop one of them"
        )
    if secret is not None or insecure:
        return
    if full_repository:
        raise ConfigError(
            "a full repository needs the cluster secret (--cluster-secret-file FILE, or env "
            "QMGR_CLUSTER_SECRET_FILE / QMGR_CLUSTER_SECRET): its Raft port unpickles what "
            "reaches it (PySyncObj), and the secret makes PySyncObj encrypt and authenticate "
            f"every frame so nothing from outside the cluster is read; {INSECURE_HINT}"
        )
    if tls is None or tls.ca is None:
        raise ConfigError(
            "a partial repository needs the cluster secret or its member secret (`qmgr cluster "
            "secret --member`; --cluster-secret-file FILE, or env QMGR_CLUSTER_SECRET_FILE / "
            "QMGR_CLUSTER_SECRET) or a member certificate "
            "(--tls-cert/--tls-key with --tls-ca, the cluster CA) to prove to the full "
            f"repositories and its peers who it is; {INSECURE_HINT}"
        )


def make_tls(cert: str | None, key: str | None, ca: str | None) -> TlsSettings | None:
    """``--tls-cert/--tls-key/--tls-ca``: the first two go together; ``--tls-ca`` needs them."""
    if bool(cert) != bool(key):
        raise ConfigError("--tls-cert and --tls-key go together")
    if not cert or not key:
        if ca:
            raise ConfigError("--tls-ca needs --tls-cert and --tls-key")
        return None
    return TlsSettings(Path(cert), Path(key), Path(ca) if ca else None)


def make_config(
    name: str,
    listen: str,
    data_dir: str | None,
    cluster: ClusterSettings | None = None,
    *,
    tls: TlsSettings | None = None,
    auth_file: str | None = None,
    secret: NodeSecret | None = None,
    insecure: bool = False,
    servicebus: str | None = None,
    servicebus_config: str | None = None,
    servicebus_limits: tuple[str, ...] = (),
    servicebus_port: str | None = None,
    servicebus_keys: str | None = None,
) -> NodeConfig:
    if not NAME_RE.match(name):
        raise ConfigError(
            f"queue manager name '{name}' must be 1-48 characters of A-Z a-z 0-9 . _ % /"
        )
    host, port = parse_listen(listen)
    path = Path(data_dir) if data_dir else None
    if path is not None and path.exists() and not path.is_dir():
        raise ConfigError(f"--data-dir {data_dir} is not a directory")
    namespace, config_file = _servicebus(servicebus, servicebus_config)
    limits = _limits(servicebus_limits)
    sb_host, sb_port = DEFAULT_SERVICEBUS_HOST, DEFAULT_SERVICEBUS_PORT
    if servicebus_port is not None:
        sb_host, sb_port = parse_listen(servicebus_port, "--servicebus-port")
        if namespace is None and config_file is None:
            namespace = ""  # the port implies a namespace: the store's, else the default one
    return NodeConfig(
        name=name,
        host=host,
        port=port,
        data_dir=path,
        cluster=cluster,
        tls=tls,
        auth_file=Path(auth_file) if auth_file else None,
        secret=secret,
        insecure=insecure,
        servicebus=namespace,
        servicebus_config=config_file,
        servicebus_limits=tuple((k, v) for k, v in limits if k in NAMESPACE_LIMITS),
        servicebus_port_limits=PortLimits(**{k: v for k, v in limits if k not in NAMESPACE_LIMITS}),
        servicebus_host=sb_host,
        servicebus_port=sb_port,
        servicebus_keys=read_keys_file(Path(servicebus_keys)) if servicebus_keys else None,
    )


def read_keys_file(path: Path) -> SasKeys:
    """The Service Bus keys of ``--servicebus-keys FILE`` (:mod:`qmgr.servicebus.sas`), refused
    when other users may read or write the file (it must be 0600 or 0400)."""
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--servicebus-keys: cannot read {path}: {exc}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(
            f"--servicebus-keys: {path} can be read by other users (mode {mode & 0o777:o}): "
            f"it holds keys; make it private (chmod 600 {path})"
        )
    try:
        return parse_keys(text)
    except KeysFileError as exc:
        raise ConfigError(f"--servicebus-keys: {path}: {exc}") from None


NAMESPACE_LIMITS = (
    "max_subscriptions_per_topic",
    "max_sql_rules_per_topic",
    "max_correlation_rules_per_topic",
)
SERVICEBUS_LIMITS = NAMESPACE_LIMITS + tuple(f.name for f in dataclasses.fields(PortLimits))


def _limits(items: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    """``--servicebus-limit NAME=N`` (repeatable): NAME one of SERVICEBUS_LIMITS, N >= 1."""
    out: dict[str, int] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip().lower().replace("-", "_")
        if not sep or name not in SERVICEBUS_LIMITS:
            raise ConfigError(
                f"--servicebus-limit takes NAME=N with NAME one of {', '.join(SERVICEBUS_LIMITS)}"
                f", got '{item}'"
            )
        if not value.strip().isdigit() or int(value) < 1:
            raise ConfigError(
                f"--servicebus-limit {name} must be a whole number >= 1, got '{value}'"
            )
        out[name] = int(value)
    return tuple(out.items())


NAMESPACE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9-]{4,48}[A-Za-z0-9]$")
DEFAULT_NAMESPACE = "sbemulatorns"


def _servicebus(name: str | None, config_file: str | None) -> tuple[str | None, Path | None]:
    """``--servicebus [NAME]`` and ``--servicebus-config FILE`` (which implies the first; the
    namespace is named by NAME, else the file's ``Namespaces[0].Name`` at start). An empty
    NAME (the option without a value) hosts a namespace of the default name."""
    if name == "":
        name = None if config_file else DEFAULT_NAMESPACE
    if name is not None and not NAMESPACE_RE.match(name):
        raise ConfigError(
            f"--servicebus namespace name '{name}' must be 6-50 characters of letters, digits "
            "and hyphens, starting with a letter and ending with a letter or digit"
        )
    path = Path(config_file) if config_file else None
    if path is not None and not path.is_file():
        raise ConfigError(f"--servicebus-config {config_file} is not a file")
    return name, path
