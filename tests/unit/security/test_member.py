"""Member proofs over the member secret (``qmgr.security.member``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qmgr.security.keys import member_secret
from qmgr.security.member import (
    CHANNEL,
    PROPOSE,
    WATCH,
    Challenge,
    Challenger,
    MemberAuthError,
    Proof,
    Prover,
    member_key,
)

KEY = member_key(member_secret("s3cret"), "DEMO")
names = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=20)
methods = st.sampled_from([CHANNEL, WATCH, PROPOSE])


def exchange(
    server: Challenger, prover: Prover, method: str, now: float = 0.0
) -> tuple[Challenge, Proof]:
    challenge = server.challenge(prover.client_nonce, now)
    prover.accept(challenge)
    return challenge, prover.prove(challenge, method)


@given(name=names, method=methods)
def test_a_member_with_the_secret_proves_its_name_once(name: str, method: str) -> None:
    server = Challenger(KEY, "DEMO", "FR1")
    _, proof = exchange(server, Prover(KEY, "DEMO", name), method)
    assert server.verify(proof, method, 1.0) == name
    with pytest.raises(MemberAuthError, match="unknown, used or expired"):
        server.verify(proof, method, 1.0)  # a replay


def test_the_caller_verifies_the_server_and_the_name_it_expects() -> None:
    server = Challenger(KEY, "DEMO", "FR1")
    prover = Prover(KEY, "DEMO", "PUB1")
    challenge = server.challenge(prover.client_nonce, 0.0)
    assert prover.accept(challenge, expected="FR1") == "FR1"
    with pytest.raises(MemberAuthError, match="expected queue manager SUB1, the server is FR1"):
        prover.accept(challenge, expected="SUB1")
    forged = Challenge(challenge.server_nonce, "SUB1", challenge.proof)
    with pytest.raises(MemberAuthError, match="server's proof does not match"):
        prover.accept(forged)


def test_a_server_without_the_secret_is_not_believed() -> None:
    impostor = Challenger(member_key(member_secret("guess"), "DEMO"), "DEMO", "FR1")
    prover = Prover(KEY, "DEMO", "PUB1")
    with pytest.raises(MemberAuthError, match="FR1: the server's proof does not match"):
        prover.accept(impostor.challenge(prover.client_nonce, 0.0))


def test_a_caller_with_the_wrong_secret_is_refused() -> None:
    server = Challenger(KEY, "DEMO", "FR1")
    prover = Prover(member_key(member_secret("wrong"), "DEMO"), "DEMO", "PUB1")
    challenge = server.challenge(prover.client_nonce, 0.0)
    proof = prover.prove(challenge, CHANNEL)
    with pytest.raises(MemberAuthError, match="PUB1: member proof does not match the cluster"):
        server.verify(proof, CHANNEL, 0.0)


def test_the_same_secret_in_another_cluster_is_another_key() -> None:
    assert member_key(member_secret("s3cret"), "OTHER") != KEY
    server = Challenger(KEY, "DEMO", "FR1")
    prover = Prover(member_key(member_secret("s3cret"), "OTHER"), "DEMO", "PUB1")
    proof = prover.prove(server.challenge(prover.client_nonce, 0.0), CHANNEL)
    with pytest.raises(MemberAuthError, match="does not match"):
        server.verify(proof, CHANNEL, 0.0)


@given(name=names, other=names)
def test_a_proof_does_not_pass_under_another_name(name: str, other: str) -> None:
    server = Challenger(KEY, "DEMO", "FR1")
    _, proof = exchange(server, Prover(KEY, "DEMO", name), CHANNEL)
    if other != name:
        with pytest.raises(MemberAuthError, match="does not match"):
            server.verify(Proof(other, proof.server_nonce, proof.proof), CHANNEL, 0.0)


def test_a_proof_is_for_one_method() -> None:
    server = Challenger(KEY, "DEMO", "FR1")
    _, proof = exchange(server, Prover(KEY, "DEMO", "PUB1"), WATCH)
    with pytest.raises(MemberAuthError, match="does not match"):
        server.verify(proof, PROPOSE, 0.0)
    with pytest.raises(MemberAuthError, match="unknown method"):
        server.verify(proof, "Admin.Mqsc", 0.0)


def test_an_expired_challenge_is_refused() -> None:
    server = Challenger(KEY, "DEMO", "FR1", ttl=30.0)
    _, proof = exchange(server, Prover(KEY, "DEMO", "PUB1"), CHANNEL, now=100.0)
    with pytest.raises(MemberAuthError, match="unknown, used or expired"):
        server.verify(proof, CHANNEL, 130.5)
    assert len(server) == 0


def test_a_failed_proof_uses_the_challenge_up() -> None:
    server = Challenger(KEY, "DEMO", "FR1")
    _, proof = exchange(server, Prover(KEY, "DEMO", "PUB1"), CHANNEL)
    with pytest.raises(MemberAuthError):
        server.verify(Proof("PUB1", proof.server_nonce, b"x" * 32), CHANNEL, 0.0)
    with pytest.raises(MemberAuthError, match="unknown, used or expired"):
        server.verify(proof, CHANNEL, 0.0)


def test_swapped_roles_a_server_proof_is_no_client_proof() -> None:
    """A server's proof over (cn, sn, name) cannot be replayed as a client's proof."""
    server = Challenger(KEY, "DEMO", "PUB1")
    prover = Prover(KEY, "DEMO", "PUB1")
    challenge = server.challenge(prover.client_nonce, 0.0)
    with pytest.raises(MemberAuthError, match="does not match"):
        server.verify(Proof("PUB1", challenge.server_nonce, challenge.proof), CHANNEL, 0.0)
    # nor does a client's proof pass as a server's answer
    other = Challenger(KEY, "DEMO", "FR1")
    client = Prover(KEY, "DEMO", "FR1")
    c2 = other.challenge(client.client_nonce, 0.0)
    client_mac = client.prove(c2, CHANNEL).proof
    with pytest.raises(MemberAuthError, match="server's proof does not match"):
        client.accept(Challenge(c2.server_nonce, "FR1", client_mac))


def test_outstanding_challenges_are_bounded_oldest_evicted() -> None:
    server = Challenger(KEY, "DEMO", "FR1", capacity=8)
    first = Prover(KEY, "DEMO", "PUB1")
    c0 = server.challenge(first.client_nonce, 0.0)
    for _ in range(100):
        server.challenge(b"n" * 16, 0.0)
    assert len(server) == 8
    with pytest.raises(MemberAuthError, match="unknown, used or expired"):
        server.verify(first.prove(c0, CHANNEL), CHANNEL, 0.0)


@pytest.mark.parametrize("nonce", [b"", b"short", b"x" * 65])
def test_nonces_of_the_wrong_size_are_refused(nonce: bytes) -> None:
    server = Challenger(KEY, "DEMO", "FR1")
    with pytest.raises(MemberAuthError, match="client nonce must be"):
        server.challenge(nonce, 0.0)
    prover = Prover(KEY, "DEMO", "PUB1")
    with pytest.raises(MemberAuthError, match="server nonce must be"):
        prover.accept(Challenge(nonce, "FR1", b""))


def test_an_empty_secret_is_no_key() -> None:
    with pytest.raises(ValueError, match="empty"):
        member_key(member_secret(""), "DEMO")
