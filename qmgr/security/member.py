"""Members prove who they are: a mutual challenge-response over the member secret, once per
connection (a channel stream, a repository watch, a proposal), never per message.

The exchange, where K is a key derived from the member secret (:mod:`qmgr.security.keys`: every
member holds it, full repositories derive it from the cluster secret; HKDF-SHA256,
domain-separated from every other use), ``cn``/``sn`` fresh random nonces and ``|`` an unambiguous,
length-prefixed concatenation:

1. The caller sends ``cn`` to ``Peer.Challenge``.
2. The server answers ``sn``, its queue manager name ``S`` and
   ``HMAC(K, "server" | cluster | cn | sn | S)``; the caller checks it, so it knows it talks to a
   member of its cluster (and, when it expects one, to queue manager ``S``).
3. The caller opens its call carrying a ``MemberProof`` in the request (the channel's hello, the
   watch request, the proposal): its claimed name ``C``, ``sn`` and
   ``HMAC(K, "client" | cluster | sn | cn | C | method)``.
4. The server accepts ``sn`` once, within ``NONCE_TTL`` of issuing it, and only for the method
   the proof names; the table of outstanding nonces is bounded (the oldest are evicted), so
   challenges alone cannot fill memory.

The labels keep a server proof from passing as a client proof (and back); the method keeps a
proof made for a watch from opening a channel. Without TLS nothing binds the proof to the
connection that carries it, so an attacker able to relay traffic between two members could
ride on an exchange it relays; mutual TLS (certificates of the cluster CA) closes that.

Pure: times are passed in (seconds, any monotonic origin); nonces come from ``secrets``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from qmgr.security.keys import MemberSecret

NONCE_BYTES = 32
MIN_NONCE_BYTES = 16
MAX_NONCE_BYTES = 64
NONCE_TTL = 30.0  # seconds between a challenge and the call that answers it
MAX_OUTSTANDING = 4096  # challenges waiting for their call (oldest evicted beyond)
KEY_SALT = b"qmgr member proof v1"

CHANNEL = "Peer.Channel"
WATCH = "Repository.Watch"
PROPOSE = "Repository.Propose"
METHODS = frozenset({CHANNEL, WATCH, PROPOSE})


class MemberAuthError(Exception):
    """A member proof (or a server's proof) that does not check; the text says why."""


def member_key(secret: MemberSecret, cluster: str) -> bytes:
    """The key of member proofs in ``cluster``, derived from the member secret (full and
    partial repositories compute the same one)."""
    hkdf = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=KEY_SALT, info=b"cluster:" + cluster.encode()
    )
    return hkdf.derive(secret.raw)


def _mac(key: bytes, *fields: str | bytes) -> bytes:
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for value in fields:
        data = value.encode() if isinstance(value, str) else value
        mac.update(len(data).to_bytes(4, "big"))
        mac.update(data)
    return mac.digest()


def server_proof(
    key: bytes, cluster: str, client_nonce: bytes, server_nonce: bytes, server: str
) -> bytes:
    return _mac(key, "server", cluster, client_nonce, server_nonce, server)


def client_proof(
    key: bytes,
    cluster: str,
    server_nonce: bytes,
    client_nonce: bytes,
    name: str,
    method: str,
) -> bytes:
    return _mac(key, "client", cluster, server_nonce, client_nonce, name, method)


def new_nonce() -> bytes:
    return secrets.token_bytes(NONCE_BYTES)


def _check_nonce(nonce: bytes, what: str) -> None:
    if not MIN_NONCE_BYTES <= len(nonce) <= MAX_NONCE_BYTES:
        raise MemberAuthError(
            f"{what} must be {MIN_NONCE_BYTES} to {MAX_NONCE_BYTES} bytes, not {len(nonce)}"
        )


@dataclass(frozen=True)
class Challenge:
    """A server's answer to a client nonce."""

    server_nonce: bytes
    server: str
    proof: bytes


@dataclass(frozen=True)
class Proof:
    """What a caller sends with its call."""

    name: str
    server_nonce: bytes
    proof: bytes


@dataclass
class _Outstanding:
    client_nonce: bytes
    issued: float


class Challenger:
    """The server side: issues challenges and checks the proofs that answer them."""

    def __init__(
        self,
        key: bytes,
        cluster: str,
        name: str,
        *,
        ttl: float = NONCE_TTL,
        capacity: int = MAX_OUTSTANDING,
        nonce: Callable[[], bytes] = new_nonce,
    ) -> None:
        self._key = key
        self.cluster = cluster
        self.name = name
        self.ttl = ttl
        self.capacity = capacity
        self._nonce = nonce
        self._outstanding: OrderedDict[bytes, _Outstanding] = OrderedDict()

    def __len__(self) -> int:
        return len(self._outstanding)

    def challenge(self, client_nonce: bytes, now: float) -> Challenge:
        """Answer a caller's nonce: a single-use server nonce and this server's proof."""
        _check_nonce(client_nonce, "the client nonce")
        self._expire(now)
        server_nonce = self._nonce()
        while len(self._outstanding) >= self.capacity:
            self._outstanding.popitem(last=False)
        self._outstanding[server_nonce] = _Outstanding(client_nonce, now)
        proof = server_proof(self._key, self.cluster, client_nonce, server_nonce, self.name)
        return Challenge(server_nonce, self.name, proof)

    def verify(self, proof: Proof, method: str, now: float) -> str:
        """Check a caller's proof for ``method``; returns the proven name. The server nonce is
        used up whatever the outcome."""
        if method not in METHODS:
            raise MemberAuthError(f"unknown method {method!r}")
        self._expire(now)
        if not proof.name:
            raise MemberAuthError("the member proof names no queue manager")
        pending = self._outstanding.pop(proof.server_nonce, None)
        if pending is None:
            raise MemberAuthError(
                f"{proof.name}: the challenge of the member proof is unknown, used or expired"
            )
        want = client_proof(
            self._key, self.cluster, proof.server_nonce, pending.client_nonce, proof.name, method
        )
        if not hmac.compare_digest(want, proof.proof):
            raise MemberAuthError(f"{proof.name}: member proof does not match the cluster secret")
        return proof.name

    def _expire(self, now: float) -> None:
        out = self._outstanding
        while out:
            nonce, first = next(iter(out.items()))
            if now - first.issued <= self.ttl:
                break
            del out[nonce]


class Prover:
    """The caller side: one exchange per call (make a new one for each)."""

    def __init__(
        self, key: bytes, cluster: str, name: str, *, nonce: Callable[[], bytes] = new_nonce
    ) -> None:
        self._key = key
        self.cluster = cluster
        self.name = name
        self.client_nonce = nonce()

    def accept(self, challenge: Challenge, expected: str | None = None) -> str:
        """Check the server's answer; returns the server's proven name. ``expected``: the
        queue manager the caller means to reach (None: any member)."""
        _check_nonce(challenge.server_nonce, "the server nonce")
        if not challenge.server:
            raise MemberAuthError("the server's proof names no queue manager")
        want = server_proof(
            self._key, self.cluster, self.client_nonce, challenge.server_nonce, challenge.server
        )
        if not hmac.compare_digest(want, challenge.proof):
            raise MemberAuthError(
                f"{challenge.server}: the server's proof does not match the cluster secret"
            )
        if expected is not None and challenge.server != expected:
            raise MemberAuthError(
                f"expected queue manager {expected}, the server is {challenge.server}"
            )
        return challenge.server

    def prove(self, challenge: Challenge, method: str) -> Proof:
        """This caller's proof for ``method`` (after ``accept``)."""
        mac = client_proof(
            self._key, self.cluster, challenge.server_nonce, self.client_nonce, self.name, method
        )
        return Proof(self.name, challenge.server_nonce, mac)
