"""Shared Access Signature (SAS) authorization, as Service Bus checks it (pure: the time is
passed in).

A token is ``SharedAccessSignature sr=<resource>&sig=<signature>&se=<expiry>&skn=<key name>``:
``sr`` the URL-encoded URI of the resource the token grants access to, ``se`` its expiry in
seconds since the epoch, ``skn`` the name of the shared access key (authorization rule) it was
signed with, and ``sig`` the base64 HMAC-SHA256, keyed with that key's text (UTF-8), of
``urlencode(sr) + "\\n" + se``. Service Bus checks every part:

- the key exists (its primary or secondary key signed the token), and the token has not
  expired;
- the token's resource covers what it is used for: the same host, and a path that is the
  target's path or one of its ancestors by whole segments, case-insensitively (a token for the
  namespace, ``sb://host/``, covers every entity; one for ``orders`` covers ``orders`` and
  ``orders/$DeadLetterQueue``; one for topic ``t`` covers ``t/Subscriptions/s``);
- a key defined on an entity (``entity``) only signs tokens for that entity and what is under
  it;
- the operation needs a right (claim) the key has: ``Send`` to send, ``Listen`` to receive,
  ``Manage`` to manage entities. ``Manage`` includes ``Send`` and ``Listen``.

A queue or subscription that auto-forwards (``ForwardTo``, ``ForwardDeadLetteredMessagesTo``)
sends into its destination on its own, so whoever creates or updates one so must hold
``Manage`` on the destination too, as Service Bus documents for chaining ("the creator ... must
have Manage permissions on both the source and the destination entity"); otherwise a key
confined to one entity could reach any other by forwarding. ``Send`` (or ``Listen``) there is
not enough. The admin clients send a token for the destination in a supplementary header
(``ServiceBusSupplementaryAuthorization`` for ``ForwardTo``,
``ServiceBusDlqSupplementaryAuthorization`` for ``ForwardDeadLetteredMessagesTo``), signed with
the same credential for the destination's address; :func:`authorize_destination` accepts the
change when that token or the request's own token grants ``Manage`` there, each checked as
above. Sending into the source afterwards needs only ``Send`` on the source.

:class:`SasKeys` holds the keys of a namespace (read from the keys file, :func:`parse_keys`);
:class:`Claims` holds what the tokens put on one AMQP connection (CBS ``put-token``) grant.
Every failure is a :class:`SasError` subclass whose text says what was wrong.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import enum
import hashlib
import hmac
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote_plus, unquote, unquote_plus, urlsplit

PREFIX = "SharedAccessSignature "
MAX_TOKEN = 8192  # characters; a real token is a few hundred
KEY_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,255}$")
KEY_FIELDS = frozenset({"key", "secondaryKey", "rights", "entity"})


class Right(enum.Flag):
    """The claims a key grants (Service Bus's ``AccessRights``)."""

    NONE = 0
    LISTEN = enum.auto()
    SEND = enum.auto()
    MANAGE = enum.auto()

    @property
    def label(self) -> str:
        names = [n for r, n in _LABELS if r & self]
        return ", ".join(names) or "none"


_LABELS = ((Right.MANAGE, "Manage"), (Right.SEND, "Send"), (Right.LISTEN, "Listen"))
RIGHTS = {"listen": Right.LISTEN, "send": Right.SEND, "manage": Right.MANAGE}


# ---------------------------------------------------------------------- errors


class SasError(Exception):
    """A token that does not grant what it is used for."""


class MalformedToken(SasError):
    """Not a ``SharedAccessSignature sr=..&sig=..&se=..&skn=..`` token."""


class UnknownKey(SasError):
    """``skn`` names no key of the namespace."""


class InvalidSignature(SasError):
    """``sig`` is not what the named key signs."""


class TokenExpired(SasError):
    """``se`` has passed."""


class OutOfScope(SasError):
    """The token's resource does not cover the entity or audience it is used for."""


class MissingRight(SasError):
    """The key lacks the claim (Send, Listen, Manage) the operation needs."""


class DestinationRefused(SasError):
    """Neither the request's token nor the supplementary one grants Manage on a forwarding
    destination."""


class KeysFileError(ValueError):
    """A keys file that cannot be used; the text names the JSON path."""


# ---------------------------------------------------------------------- resources


@dataclass(frozen=True, slots=True)
class Resource:
    """A resource URI reduced to what scoping compares: host (lower-case, with the port when
    one is given) and path segments (lower-case, unescaped before splitting, so an escaped
    ``/`` separates segments as it does in the entity name the management API resolves)."""

    host: str
    path: tuple[str, ...]

    @classmethod
    def parse(cls, uri: str) -> Resource:
        parts = urlsplit(uri.strip())
        host = parts.netloc.lower() if parts.scheme else ""
        path = parts.path if parts.scheme else uri.strip()
        return cls(host, tuple(s.lower() for s in unquote(path).split("/") if s))

    @classmethod
    def entity(cls, entity_path: str) -> Resource:
        """An entity path of this namespace (``queue``, ``topic/Subscriptions/sub``)."""
        return cls("", tuple(s.lower() for s in entity_path.split("/") if s))

    def covers(self, other: Resource) -> bool:
        """Whether a token for this resource may be used for ``other``: the same host (an
        entity path, with no host, is in this namespace) and this path or one below it."""
        if other.host and self.host != other.host:
            return False
        return other.path[: len(self.path)] == self.path

    def __str__(self) -> str:
        return "/" + "/".join(self.path)


# ---------------------------------------------------------------------- keys


@dataclass(frozen=True)
class SasKey:
    """One shared access key (an authorization rule): a name, its primary and optional
    secondary key, its rights, and optionally the entity it is defined on."""

    name: str
    key: str = field(repr=False)
    rights: Right
    secondary: str | None = field(default=None, repr=False)
    entity: str | None = None

    def signs(self, message: bytes, signature: bytes) -> bool:
        ok = False
        for key in (self.key, self.secondary):
            if key is not None:
                mac = hmac.new(key.encode("utf-8"), message, hashlib.sha256).digest()
                ok |= hmac.compare_digest(mac, signature)
        return ok


@dataclass(frozen=True, slots=True)
class Token:
    """A parsed token; ``resource_text`` is ``sr`` exactly as written (URL-encoded)."""

    resource: str
    resource_text: str
    signature: bytes = field(repr=False)
    expiry: int
    key_name: str


@dataclass(frozen=True, slots=True)
class Grant:
    """What a verified token grants: ``resource`` and below, ``rights``, until ``expiry``."""

    resource: Resource
    rights: Right
    expiry: float
    key_name: str


def _when(seconds: float) -> str:
    try:
        return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return str(int(seconds))


def parse_token(text: str) -> Token:
    """The parts of a SAS token; :class:`MalformedToken` when it is not one."""
    if not isinstance(text, str) or not text:
        raise MalformedToken("no token was given")
    if len(text) > MAX_TOKEN:
        raise MalformedToken(f"the token is longer than {MAX_TOKEN} characters")
    if not text.startswith(PREFIX):
        raise MalformedToken("the token is not a SharedAccessSignature (only SAS tokens are used)")
    fields: dict[str, str] = {}
    for item in text[len(PREFIX) :].strip().split("&"):
        name, sep, value = item.partition("=")
        if not sep:
            raise MalformedToken(f"'{item[:40]}' in the token is not name=value")
        if name in fields:
            raise MalformedToken(f"the token gives '{name}' twice")
        fields[name] = value
    missing = [n for n in ("sr", "sig", "se", "skn") if not fields.get(n)]
    if missing:
        raise MalformedToken(f"the token has no {', '.join(missing)}")
    se = fields["se"]
    if not se.isascii() or not se.isdigit():
        raise MalformedToken(f"se must be seconds since the epoch, got '{se[:20]}'")
    try:
        signature = base64.b64decode(unquote_plus(fields["sig"]), validate=True)
    except (binascii.Error, ValueError):
        raise MalformedToken("sig is not base64") from None
    if len(signature) != hashlib.sha256().digest_size:
        raise MalformedToken("sig is not an HMAC-SHA256 signature")
    return Token(
        resource=unquote_plus(fields["sr"]),
        resource_text=fields["sr"],
        signature=signature,
        expiry=int(se),
        key_name=unquote_plus(fields["skn"]),
    )


def string_to_sign(resource_text: str, expiry: int) -> bytes:
    """``urlencode(sr) + "\\n" + se``, the text a key signs."""
    return f"{resource_text}\n{expiry}".encode()


class SasKeys:
    """The shared access keys of a namespace."""

    def __init__(self, keys: Iterable[SasKey]) -> None:
        self._keys: dict[str, SasKey] = {}
        for key in keys:
            if key.name.lower() in self._keys:
                raise KeysFileError(f"key '{key.name}' is defined twice")
            self._keys[key.name.lower()] = key

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[SasKey]:
        return iter(self._keys.values())

    def get(self, name: str) -> SasKey | None:
        return self._keys.get(name.lower())

    def verify(self, token: str, audience: str, now: float) -> Grant:
        """Check ``token`` for ``audience`` (the URI the client names: the CBS ``name``, or the
        URL of an HTTP request) at time ``now``; the grant is for the audience."""
        parsed = parse_token(token)
        key = self.get(parsed.key_name)
        if key is None:
            raise UnknownKey(f"the token is signed with key '{parsed.key_name}', which is unknown")
        signed = {parsed.resource_text, quote_plus(parsed.resource)}
        if not any(key.signs(string_to_sign(t, parsed.expiry), parsed.signature) for t in signed):
            raise InvalidSignature(
                f"the token's signature does not match key '{key.name}' (a wrong key?)"
            )
        if now >= parsed.expiry:
            raise TokenExpired(f"the token expired at {_when(parsed.expiry)}")
        resource = Resource.parse(parsed.resource)
        if key.entity is not None and not Resource.entity(key.entity).covers(
            Resource("", resource.path)
        ):
            raise OutOfScope(
                f"key '{key.name}' is defined on '{key.entity}' and cannot sign a token for "
                f"'{parsed.resource}'"
            )
        target = Resource.parse(audience)
        if not resource.covers(target):
            raise OutOfScope(
                f"the token is for '{parsed.resource}', which does not cover '{audience}'"
            )
        return Grant(target, key.rights, float(parsed.expiry), key.name)


def require(grant: Grant, right: Right) -> None:
    """:class:`MissingRight` unless ``grant`` holds ``right``."""
    if right and not (grant.rights & right):
        raise MissingRight(
            f"Unauthorized access. '{right.label}' claim(s) are required to perform this "
            f"operation; key '{grant.key_name}' has {grant.rights.label}"
        )


# ---------------------------------------------------------------------- forwarding

SUPPLEMENTARY_HEADER = "ServiceBusSupplementaryAuthorization"
DLQ_SUPPLEMENTARY_HEADER = "ServiceBusDlqSupplementaryAuthorization"
FORWARDING_HEADERS = {
    "ForwardTo": SUPPLEMENTARY_HEADER,
    "ForwardDeadLetteredMessagesTo": DLQ_SUPPLEMENTARY_HEADER,
}


def authorize_destination(
    keys: SasKeys,
    prop: str,
    destination: str,
    base: str,
    main: str | None,
    supplementary: str | None,
    now: float,
) -> Grant:
    """The grant of ``Manage`` on ``destination`` (an entity path of the namespace served at
    ``base``, such as ``https://host:port``) that setting ``prop`` (``ForwardTo`` or
    ``ForwardDeadLetteredMessagesTo``) to it needs: from ``main``, the request's own token, or
    else ``supplementary``, the token of the header :data:`FORWARDING_HEADERS` names for
    ``prop``. :class:`DestinationRefused` names the destination and why each token falls
    short when neither grants it."""
    header = FORWARDING_HEADERS[prop]
    audience = f"{base.rstrip('/')}/{destination.strip('/')}"
    reasons: list[str] = []
    for label, token in (("Authorization", main), (header, supplementary)):
        if not token:
            reasons.append(f"{label}: none was sent")
            continue
        try:
            grant = keys.verify(token, audience, now)
            require(grant, Right.MANAGE)
        except SasError as exc:
            reasons.append(f"{label}: {exc}")
        else:
            return grant
    raise DestinationRefused(
        f"{prop} '{destination}' needs 'Manage' on '{destination}', which neither the request's "
        f"token nor the {header} token grants ({'; '.join(reasons)})"
    )


class Claims:
    """What the tokens put on one connection grant, by audience (a later token for the same
    audience replaces the earlier one, as a refreshed token does)."""

    def __init__(self, keys: SasKeys) -> None:
        self.keys = keys
        self._grants: dict[Resource, Grant] = {}

    def __len__(self) -> int:
        """How many tokens are held (one per resource)."""
        return len(self._grants)

    def put_token(self, token: str, audience: str, now: float) -> Grant:
        grant = self.keys.verify(token, audience, now)
        self._grants[grant.resource] = grant
        return grant

    def check(self, entity_path: str, right: Right, now: float) -> Grant:
        """The grant that lets this connection use ``entity_path`` with ``right`` now."""
        target = Resource.entity(entity_path)
        covering = [g for g in self._grants.values() if g.resource.covers(target)]
        if not covering:
            raise OutOfScope(
                f"Unauthorized access: no token for '{entity_path}' was put on this connection "
                "($cbs put-token)"
            )
        live = [g for g in covering if now < g.expiry]
        if not live:
            latest = max(g.expiry for g in covering)
            raise TokenExpired(
                f"Unauthorized access: the token for '{entity_path}' expired at {_when(latest)}"
            )
        for grant in live:
            if not right or grant.rights & right:
                return grant
        require(live[0], right)
        raise AssertionError("unreachable")  # pragma: no cover

    def next_expiry(self) -> float | None:
        """When the first token held now expires (None without tokens)."""
        return min((g.expiry for g in self._grants.values()), default=None)

    def expired(self, now: float) -> list[Resource]:
        """Audiences whose token has expired (and was not replaced); forgotten once returned."""
        gone = [r for r, g in self._grants.items() if now >= g.expiry]
        for resource in gone:
            del self._grants[resource]
        return gone


# ---------------------------------------------------------------------- the keys file


def parse_keys(text: str) -> SasKeys:
    """The keys of a keys file: a JSON object of key name → ``{"key": ..., "rights": [...]}``
    with optional ``secondaryKey`` and ``entity``::

        {
          "RootManageSharedAccessKey": {"key": "...", "rights": ["Manage", "Send", "Listen"]},
          "orders-sender": {"key": "...", "rights": ["Send"], "entity": "orders"}
        }
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KeysFileError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise KeysFileError("$: must be an object of key name → key definition")
    if not data:
        raise KeysFileError("$: defines no key")
    return SasKeys(_key(name, body) for name, body in data.items())


def _key(name: str, body: Any) -> SasKey:
    where = f"$.{name}"
    if not KEY_NAME_RE.match(name):
        raise KeysFileError(
            f"{where}: a key name is 1-256 letters, digits, '.', '-' and '_', starting with a "
            "letter or digit"
        )
    if not isinstance(body, Mapping):
        raise KeysFileError(f"{where}: must be an object with 'key' and 'rights'")
    unknown = sorted(set(body) - KEY_FIELDS)
    if unknown:
        raise KeysFileError(
            f"{where}: unknown field '{unknown[0]}' (known: {', '.join(sorted(KEY_FIELDS))})"
        )
    key = body.get("key")
    if not isinstance(key, str) or not key:
        raise KeysFileError(f"{where}.key: must be a non-empty string")
    secondary = body.get("secondaryKey")
    if secondary is not None and (not isinstance(secondary, str) or not secondary):
        raise KeysFileError(f"{where}.secondaryKey: must be a non-empty string")
    rights_given = body.get("rights")
    if not isinstance(rights_given, list) or not rights_given:
        raise KeysFileError(f"{where}.rights: must be a list of Manage, Send, Listen")
    rights = Right.NONE
    for i, item in enumerate(rights_given):
        right = RIGHTS.get(item.lower()) if isinstance(item, str) else None
        if right is None:
            raise KeysFileError(f"{where}.rights[{i}]: '{item}' is not Manage, Send or Listen")
        rights |= right
    if rights & Right.MANAGE:
        rights |= Right.SEND | Right.LISTEN
    entity = body.get("entity")
    if entity is not None and (not isinstance(entity, str) or not entity.strip("/")):
        raise KeysFileError(f"{where}.entity: must be an entity path such as 'orders'")
    return SasKey(
        name,
        key,
        rights,
        secondary=secondary,
        entity=entity.strip("/") if entity is not None else None,
    )
