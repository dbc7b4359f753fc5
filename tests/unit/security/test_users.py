"""The users file: scrypt hashes verify only their password, files round-trip, bad files and
entries get a typed error naming the line or the user, and verified credentials are cached."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qmgr.security import users as users_mod
from qmgr.security.users import (
    ADMIN_GROUP,
    CredentialCache,
    User,
    Users,
    UsersFileError,
    check_name,
    hash_password,
    parse_users,
    verify_password,
)

FAST = {"n": 2**4, "r": 1, "p": 1}  # cheap parameters: the scheme is the same
names = st.from_regex(r"[A-Za-z0-9._@-]{1,20}", fullmatch=True)
passwords = st.text(max_size=40)


@settings(max_examples=50, deadline=None)
@given(password=passwords, other=passwords)
def test_a_hash_verifies_its_password_and_no_other(password: str, other: str) -> None:
    encoded = hash_password(password, **FAST)
    assert verify_password(password, encoded)
    assert verify_password(other, encoded) == (other == password)


def test_hashes_are_salted_and_carry_their_parameters() -> None:
    first, second = hash_password("pw", **FAST), hash_password("pw", **FAST)
    assert first != second and verify_password("pw", first) and verify_password("pw", second)
    assert first.startswith("scrypt$16$1$1$")
    secret = "not stored: spaces and ! are no base64"
    default = hash_password(secret)
    assert default.startswith(f"scrypt${2**14}$8$1$") and secret not in default
    assert verify_password(secret, default)


user_entries = st.dictionaries(
    names,
    st.tuples(passwords, st.frozensets(st.sampled_from(["mqm", "apps", "ops.team"]))),
    max_size=4,
)


@settings(max_examples=30, deadline=None)
@given(entries=user_entries)
def test_a_users_file_round_trips(entries: dict[str, tuple[str, frozenset[str]]]) -> None:
    users = Users()
    for name, (password, groups) in entries.items():
        users = users.with_user(User(name, hash_password(password, **FAST), groups))
    parsed = parse_users(users.render())
    assert dict(parsed) == dict(users)
    for name, (password, groups) in entries.items():
        assert parsed.authenticate(name, password) == User(name, users[name].password_hash, groups)
        assert parsed[name].is_admin == (ADMIN_GROUP in groups)


def _file(entries: dict[str, object]) -> str:
    return json.dumps({"users": entries})


GOOD = hash_password("pw", **FAST)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('{\n  "users": {\n    "alice": {,}\n  }\n}', "line 3"),
        ("[]", "one object"),
        ('{"users": {}, "extra": 1}', "one object"),
        (_file({"alice": "pw"}), "user 'alice': must be an object"),
        (_file({"alice": {"groups": []}}), "user 'alice': 'hash' must be a string"),
        (_file({"alice": {"hash": "plain"}}), "user 'alice': the hash is not scrypt"),
        (_file({"alice": {"hash": "scrypt$16$1$1$!!$??"}}), "user 'alice': .*base64"),
        (_file({"alice": {"hash": GOOD, "groups": "mqm"}}), "user 'alice': 'groups'"),
        (_file({"alice": {"hash": GOOD, "password": "pw"}}), "user 'alice': unknown keys"),
        (_file({"al ice": {"hash": GOOD}}), "user 'al ice': user name"),
        (_file({"alice": {"hash": GOOD, "groups": ["m q m"]}}), "user 'alice': group name"),
        (
            _file({"alice": {"hash": GOOD.replace("scrypt$16$", f"scrypt${2**30}$")}}),
            "user 'alice': scrypt parameters",
        ),
        (_file({"alice": {"hash": GOOD.replace("scrypt$16$", "scrypt$17$")}}), "power of two"),
    ],
)
def test_a_bad_file_or_entry_is_refused_naming_the_line_or_user(text: str, named: str) -> None:
    with pytest.raises(UsersFileError, match=named):
        parse_users(text)


def test_authenticate_refuses_wrong_passwords_and_unknown_users() -> None:
    users = Users([User("alice", hash_password("right", **FAST), frozenset({ADMIN_GROUP}))])
    assert users.authenticate("alice", "right") == users["alice"]
    assert users.authenticate("alice", "wrong") is None
    assert users.authenticate("bob", "right") is None
    assert users["alice"].is_admin


def test_with_user_replaces_and_without_removes() -> None:
    users = Users([User("alice", hash_password("one", **FAST))])
    users = users.with_user(User("alice", hash_password("two", **FAST), frozenset({"mqm"})))
    assert len(users) == 1 and users.authenticate("alice", "two") is not None
    with pytest.raises(UsersFileError, match="no user 'bob'"):
        users.without("bob")
    assert len(users.without("alice")) == 0
    with pytest.raises(UsersFileError, match="user name"):
        users.with_user(User("a:b", GOOD))


def test_the_cache_remembers_successes_only(monkeypatch: pytest.MonkeyPatch) -> None:
    users = Users([User("alice", hash_password("right", **FAST))])
    checks: list[str] = []
    real = users_mod.verify_password

    def counting(password: str, encoded: str) -> bool:
        checks.append(password)
        return real(password, encoded)

    monkeypatch.setattr(users_mod, "verify_password", counting)
    cache = CredentialCache(users)
    assert cache.lookup("alice", "right") is None
    assert cache.verify("alice", "wrong") is None
    assert cache.lookup("alice", "wrong") is None  # a failure is never remembered
    assert cache.verify("alice", "right") == users["alice"]
    for _ in range(3):
        assert cache.lookup("alice", "right") == users["alice"]
    assert checks == ["wrong", "right"]  # scrypt ran once per attempt, not per look-up
    assert cache.lookup("alice", "righ") is None and cache.lookup("alicer", "ight") is None


def test_the_cache_is_bounded() -> None:
    users = Users([User(f"u{i}", hash_password("pw", **FAST)) for i in range(5)])
    cache = CredentialCache(users, limit=3)
    for i in range(5):
        assert cache.verify(f"u{i}", "pw") is not None
    assert cache.lookup("u4", "pw") is not None
    assert sum(cache.lookup(f"u{i}", "pw") is not None for i in range(5)) <= 3


@pytest.mark.parametrize("name", ["admin\n", "admin\nforged log line", "ad min", ""])
def test_a_name_with_a_line_break_or_space_is_not_a_user_name(name: str) -> None:
    with pytest.raises(UsersFileError, match="must be 1-64 characters"):
        check_name(name)
