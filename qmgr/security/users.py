"""Application users of a node started with ``--auth``: names, salted password hashes, groups.

The users file is JSON::

    {"users": {"alice": {"hash": "scrypt$16384$8$1$<salt>$<key>", "groups": ["mqm"]}}}

A password is stored as an scrypt hash (``hashlib.scrypt``) with its own random salt and the
cost parameters it was made with, so a file keeps working when the defaults change. Members of
``ADMIN_GROUP`` (``mqm``, as in IBM MQ) may run MQSC; every user may put, get, publish and
subscribe.

:class:`CredentialCache` remembers credentials already verified (by a keyed digest, never the
password itself), so a node runs scrypt once per distinct user and password, not per call.

Pure: text and values in, values out; no file, clock or network.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

ADMIN_GROUP = "mqm"
NAME_RE = re.compile(r"^[A-Za-z0-9._@-]{1,64}$")
SCHEME = "scrypt"
SALT_BYTES = 16
KEY_BYTES = 32
# scrypt cost: N=2^14, r=8 needs 16 MiB and tens of milliseconds per check
DEFAULT_N, DEFAULT_R, DEFAULT_P = 2**14, 8, 1
MAX_N, MAX_R, MAX_P = 2**20, 32, 16  # a file asking for more is refused, not run
CACHE_LIMIT = 4096


class UsersFileError(ValueError):
    """A users file (or an entry in it) that cannot be used; the text names the line or user."""


@dataclass(frozen=True)
class User:
    name: str
    password_hash: str
    groups: frozenset[str] = frozenset()

    @property
    def is_admin(self) -> bool:
        return ADMIN_GROUP in self.groups


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _params(n: int, r: int, p: int) -> None:
    if n < 2 or n & (n - 1) or n > MAX_N or not 1 <= r <= MAX_R or not 1 <= p <= MAX_P:
        raise UsersFileError(
            f"scrypt parameters N={n} r={r} p={p} out of range "
            f"(N a power of two up to {MAX_N}, r up to {MAX_R}, p up to {MAX_P})"
        )


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(
        password.encode("utf-8"),
        salt=salt,
        n=n,
        r=r,
        p=p,
        maxmem=256 * n * r + 2**20,
        dklen=KEY_BYTES,
    )


def hash_password(
    password: str,
    *,
    salt: bytes | None = None,
    n: int = DEFAULT_N,
    r: int = DEFAULT_R,
    p: int = DEFAULT_P,
) -> str:
    """``scrypt$N$r$p$salt$key`` (salt and key in base64); a fresh random salt unless given."""
    _params(n, r, p)
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    return f"{SCHEME}${n}${r}${p}${_b64(salt)}${_b64(_scrypt(password, salt, n, r, p))}"


def _parse_hash(encoded: str) -> tuple[bytes, int, int, int, bytes]:
    parts = encoded.split("$")
    if len(parts) != 6 or parts[0] != SCHEME:
        raise UsersFileError("the hash is not scrypt$N$r$p$salt$key")
    try:
        n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
        salt = base64.b64decode(parts[4], validate=True)
        key = base64.b64decode(parts[5], validate=True)
    except (ValueError, binascii.Error):
        raise UsersFileError("the hash has a malformed number or base64 field") from None
    _params(n, r, p)
    if not salt or len(key) != KEY_BYTES:
        raise UsersFileError(f"the hash needs a salt and a {KEY_BYTES}-byte key")
    return salt, n, r, p, key


def verify_password(password: str, encoded: str) -> bool:
    """Whether ``password`` matches ``encoded`` (compared in constant time)."""
    salt, n, r, p, key = _parse_hash(encoded)
    return hmac.compare_digest(_scrypt(password, salt, n, r, p), key)


def check_name(name: str, what: str = "user") -> str:
    if not NAME_RE.fullmatch(name):
        raise UsersFileError(f"{what} name '{name}' must be 1-64 characters of A-Z a-z 0-9 . _ @ -")
    return name


class Users(Mapping[str, User]):
    """The users of a file, by name (immutable: :meth:`with_user` and :meth:`without` copy)."""

    def __init__(self, users: Iterable[User] = ()) -> None:
        self._users = {u.name: u for u in users}

    def __getitem__(self, name: str) -> User:
        return self._users[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._users)

    def __len__(self) -> int:
        return len(self._users)

    def with_user(self, user: User) -> Users:
        """These users with ``user`` added (or replacing the one of that name)."""
        check_name(user.name)
        for group in user.groups:
            check_name(group, "group")
        _parse_hash(user.password_hash)
        return Users([*(u for u in self._users.values() if u.name != user.name), user])

    def without(self, name: str) -> Users:
        if name not in self._users:
            raise UsersFileError(f"no user '{name}'")
        return Users(u for u in self._users.values() if u.name != name)

    def authenticate(self, name: str, password: str) -> User | None:
        """The user when ``password`` is theirs, else None (unknown users take as long)."""
        user = self._users.get(name)
        if user is None:
            hash_password(password)  # the same work as a known user's check
            return None
        return user if verify_password(password, user.password_hash) else None

    def render(self) -> str:
        """The users file text (:func:`parse_users` reads it back)."""
        users = {
            u.name: {"hash": u.password_hash, "groups": sorted(u.groups)}
            for u in sorted(self._users.values(), key=lambda u: u.name)
        }
        return json.dumps({"users": users}, indent=2) + "\n"


def _user(name: object, entry: object) -> User:
    if not isinstance(name, str):
        raise UsersFileError("user names must be strings")
    where = f"user '{name}'"
    if not isinstance(entry, dict):
        raise UsersFileError(f"{where}: must be an object with 'hash' and 'groups'")
    unknown = set(entry) - {"hash", "groups"}
    if unknown:
        raise UsersFileError(f"{where}: unknown keys {', '.join(sorted(unknown))}")
    password_hash, groups = entry.get("hash"), entry.get("groups", [])
    if not isinstance(password_hash, str):
        raise UsersFileError(f"{where}: 'hash' must be a string")
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise UsersFileError(f"{where}: 'groups' must be a list of names")
    try:
        check_name(name)
        for group in groups:
            check_name(group, "group")
        _parse_hash(password_hash)
    except UsersFileError as exc:
        raise UsersFileError(f"{where}: {exc}") from None
    return User(name, password_hash, frozenset(groups))


def parse_users(text: str) -> Users:
    """The users of a users file's text; :class:`UsersFileError` names the line or user."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsersFileError(f"line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    if not isinstance(doc, dict) or set(doc) != {"users"} or not isinstance(doc["users"], dict):
        raise UsersFileError('the file must be one object {"users": {NAME: {...}, ...}}')
    return Users(_user(name, entry) for name, entry in doc["users"].items())


class CredentialCache:
    """Verified credentials by a keyed digest of user and password (the key is random per
    cache, the password is never kept): :meth:`lookup` is a dictionary look-up, :meth:`verify`
    runs scrypt and remembers successes only. At most ``limit`` entries (then it starts over)."""

    def __init__(self, users: Users, limit: int = CACHE_LIMIT) -> None:
        self.users = users
        self._key = secrets.token_bytes(32)
        self._verified: dict[bytes, User] = {}
        self._limit = limit

    def _digest(self, name: str, password: str) -> bytes:
        message = name.encode("utf-8") + b"\0" + password.encode("utf-8")
        return hmac.new(self._key, message, hashlib.sha256).digest()

    def lookup(self, name: str, password: str) -> User | None:
        """The user if these credentials were verified before, else None (not known yet)."""
        return self._verified.get(self._digest(name, password))

    def verify(self, name: str, password: str) -> User | None:
        """The user when the credentials are right (remembered), else None (not remembered)."""
        user = self.users.authenticate(name, password)
        if user is not None:
            if len(self._verified) >= self._limit:
                self._verified.clear()
            self._verified[self._digest(name, password)] = user
        return user
