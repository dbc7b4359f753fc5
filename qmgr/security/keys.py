"""The two levels of a cluster's secret: full repositories hold the repository secret, partial
repositories only the member secret derived from it.

- The **repository secret** is the cluster secret (``qmgr cluster secret``, ``cluster.secret``
  of ``qmgr cluster up``): any text not in the member secret's form below. From it a node
  derives, with HKDF-SHA256 (salt ``SALT``, one ``info`` label per purpose, so no output can
  stand in for another):

  - the **Raft password** (``info`` ``raft password``): PySyncObj's password, which encrypts and
    authenticates every frame between full repositories;
  - the **member secret** (``info`` ``member secret``, 32 bytes), from which the key of member
    proofs is derived (``qmgr.security.member.member_key``).

- The **member secret** travels as text ``member1:`` + base64url (no padding) of its 32 bytes
  (``qmgr cluster secret --member --from FILE``; ``member.secret`` of ``qmgr cluster up``;
  ``member.env`` of the compose files). A node given one can prove membership (channels, the
  repository service) but cannot compute the Raft password: both are independent HKDF outputs
  of the repository secret, and HKDF cannot be run backwards. So only full repositories can speak
  Raft, and a partial repository cannot pose as one on a ``--raft`` port. A full repository
  refuses to start with a member secret; a partial repository given the repository secret
  derives its member secret itself.

Existing state: the derivation changes what goes on the wire (PySyncObj's password is no longer
the secret text itself, and member proofs are keyed through the member secret), not anything
stored: the Raft journal and snapshots, the nodes' stores and the secret files are not keyed by
the secret. An existing ``cluster.secret`` (or ``cluster.env``) stays the repository secret; the
member secret is derived from it whenever it is needed, so the two files never disagree. Nodes
running an earlier version cannot talk to nodes running this one: restart every member of a
cluster together.

Pure: no I/O; errors are ``SecretFormatError``.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

MEMBER_PREFIX = "member1:"  # the text form of a member secret starts so
MEMBER_SECRET_BYTES = 32
SALT = b"qmgr cluster secret v1"
RAFT_INFO = b"raft password"
MEMBER_INFO = b"member secret"


class SecretFormatError(ValueError):
    """A secret whose text cannot be used (empty, or a malformed member secret)."""


def _derive(repository_secret: str, info: bytes) -> bytes:
    raw = repository_secret.encode("utf-8")
    if not raw:
        raise SecretFormatError("the cluster secret is empty")
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=SALT, info=info)
    return hkdf.derive(raw)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


@dataclass(frozen=True)
class MemberSecret:
    """What every member holds; the key of member proofs is derived from ``raw``."""

    raw: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.raw) != MEMBER_SECRET_BYTES:
            raise SecretFormatError(
                f"a member secret is {MEMBER_SECRET_BYTES} bytes, not {len(self.raw)}"
            )

    @property
    def text(self) -> str:
        """The form to write to a file: ``member1:`` + base64url."""
        return MEMBER_PREFIX + _b64(self.raw)


@dataclass(frozen=True)
class NodeSecret:
    """What a node can do with the secret it was given: prove membership (``member``) and,
    given the repository secret, speak Raft (``raft_password``; None for a member secret)."""

    member: MemberSecret
    raft_password: str | None = field(default=None, repr=False)

    @property
    def is_repository_secret(self) -> bool:
        return self.raft_password is not None


def is_member_secret(text: str) -> bool:
    """Whether ``text`` is in the member secret's form (it may still be malformed)."""
    return text.strip().startswith(MEMBER_PREFIX)


def raft_password(repository_secret: str) -> str:
    """PySyncObj's password for the full repositories of the cluster with this secret."""
    if is_member_secret(repository_secret):
        raise SecretFormatError(
            "a member secret gives no Raft password: it needs the cluster secret"
        )
    return _b64(_derive(repository_secret, RAFT_INFO))


def member_secret(repository_secret: str) -> MemberSecret:
    """The member secret of the cluster with this repository secret."""
    if is_member_secret(repository_secret):
        raise SecretFormatError("this is already a member secret, not the cluster secret")
    return MemberSecret(_derive(repository_secret, MEMBER_INFO))


def parse_member_secret(text: str) -> MemberSecret:
    """A member secret from its text form (``member1:`` + base64url of 32 bytes)."""
    text = text.strip()
    if not text.startswith(MEMBER_PREFIX):
        raise SecretFormatError(f"a member secret starts with {MEMBER_PREFIX!r}")
    body = text[len(MEMBER_PREFIX) :]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        raise SecretFormatError("the member secret is not base64url after 'member1:'") from None
    if _b64(raw) != body:  # other characters, padding in the middle, non-canonical bits
        raise SecretFormatError("the member secret is not base64url after 'member1:'")
    if len(raw) != MEMBER_SECRET_BYTES:
        raise SecretFormatError(
            f"the member secret holds {len(raw)} bytes, not {MEMBER_SECRET_BYTES}: "
            "copy it whole from `qmgr cluster secret --member`"
        )
    return MemberSecret(raw)


def parse_secret(text: str) -> NodeSecret:
    """The secret a node was given: a member secret (``member1:...``) or the repository
    secret (anything else; surrounding whitespace is not part of it)."""
    text = text.strip()
    if not text:
        raise SecretFormatError("the cluster secret is empty")
    if is_member_secret(text):
        return NodeSecret(parse_member_secret(text))
    return NodeSecret(member_secret(text), raft_password(text))
