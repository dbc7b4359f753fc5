"""The two levels of the cluster secret (``qmgr.security.keys``): the repository secret gives
the Raft password and the member secret; the member secret gives neither back."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qmgr.security.keys import (
    MEMBER_PREFIX,
    MemberSecret,
    SecretFormatError,
    member_secret,
    parse_member_secret,
    parse_secret,
    raft_password,
)
from qmgr.security.member import member_key

secrets_text = st.text(
    st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=60
).filter(lambda t: not t.startswith(MEMBER_PREFIX))


@given(secret=secrets_text)
def test_each_purpose_gets_its_own_value(secret: str) -> None:
    member = member_secret(secret)
    password = raft_password(secret)
    values = {secret, password, member.text, base64.urlsafe_b64encode(member.raw).decode()}
    assert len(values) == 4
    assert member_key(member, "DEMO") not in (member.raw, password.encode())
    assert member_secret(secret) == member and raft_password(secret) == password  # stable


def test_different_secrets_give_different_keys() -> None:
    assert member_secret("one") != member_secret("two")
    assert raft_password("one") != raft_password("two")


@given(secret=secrets_text)
def test_the_member_secret_round_trips_as_text(secret: str) -> None:
    member = member_secret(secret)
    assert member.text.startswith(MEMBER_PREFIX) and "=" not in member.text
    assert parse_member_secret(member.text) == member
    assert parse_member_secret(f"  {member.text}\n") == member


@given(secret=secrets_text)
def test_a_partial_given_either_secret_proves_with_the_same_key(secret: str) -> None:
    from_repository = parse_secret(secret)
    from_member = parse_secret(member_secret(secret).text)
    assert member_key(from_repository.member, "C") == member_key(from_member.member, "C")
    assert from_repository.is_repository_secret and from_repository.raft_password is not None
    assert not from_member.is_repository_secret and from_member.raft_password is None


def test_the_member_secret_cannot_be_turned_back() -> None:
    """Treated as the cluster secret, a member secret yields nothing: no Raft password, no
    'member secret of the member secret'."""
    text = member_secret("the cluster secret").text
    with pytest.raises(SecretFormatError, match="no Raft password"):
        raft_password(text)
    with pytest.raises(SecretFormatError, match="already a member secret"):
        member_secret(text)
    assert parse_secret(text).raft_password is None
    # its bytes, taken as a cluster secret in any form, give another Raft password
    raw = parse_member_secret(text).raw
    real = raft_password("the cluster secret")
    candidates = (raw.hex(), base64.urlsafe_b64encode(raw).decode(), text[len(MEMBER_PREFIX) :])
    assert real not in {raft_password(c) for c in candidates}


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty"),
        ("  \n", "empty"),
        ("member1:", "holds 0 bytes"),
        ("member1:AAAA", "holds 3 bytes"),
        ("member1:" + "A" * 44, "holds 33 bytes"),
        ("member1:" + "*" * 43, "not base64url"),
        ("member1:" + "A" * 42 + "=", "not base64url"),
        ("member1:" + "A" * 21 + " " + "A" * 21, "not base64url"),
    ],
)
def test_a_malformed_secret_is_a_typed_error(text: str, why: str) -> None:
    with pytest.raises(SecretFormatError, match=why):
        parse_secret(text)


def test_parse_member_secret_wants_the_prefix() -> None:
    with pytest.raises(SecretFormatError, match="starts with 'member1:'"):
        parse_member_secret("just-a-cluster-secret")


def test_a_member_secret_is_32_bytes() -> None:
    with pytest.raises(SecretFormatError, match="32 bytes, not 31"):
        MemberSecret(b"x" * 31)


def test_no_secret_shows_in_a_repr() -> None:
    secret = parse_secret("a cluster secret")
    member = secret.member
    assert secret.raft_password is not None
    for shown in (repr(secret), repr(member), str(secret)):
        assert secret.raft_password not in shown and member.text[8:] not in shown
        assert repr(member.raw) not in shown
