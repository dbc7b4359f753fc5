"""Member proofs for tests that play a cluster member with raw gRPC stubs (see
``qmgr.security.member``): a challenge from the node, answered with a secret."""

from __future__ import annotations

import grpc

from qmgr.security.keys import parse_secret
from qmgr.security.member import Challenge, Prover, member_key
from qmgr.wire import cluster_pb2 as cpb
from qmgr.wire import cluster_pb2_grpc as crpc

SECRET = "a cluster secret for the member tests"
CALL_TIMEOUT = 10.0


def connect(address: str, credentials: grpc.ChannelCredentials | None = None) -> grpc.Channel:
    if credentials is None:
        return grpc.insecure_channel(address)
    return grpc.secure_channel(address, credentials)


def proof_for(
    address: str,
    name: str,
    method: str,
    secret: str = SECRET,
    credentials: grpc.ChannelCredentials | None = None,
    cluster: str = "DEMO",
) -> cpb.MemberProof:
    """A member proof made with ``secret`` (the cluster secret or a member secret) on a
    challenge of the node at ``address``."""
    prover = Prover(member_key(parse_secret(secret).member, cluster), cluster, name)
    with connect(address, credentials) as channel:
        answer = crpc.PeerStub(channel).Challenge(
            cpb.ChallengeRequest(client_nonce=prover.client_nonce, cluster=cluster),
            timeout=CALL_TIMEOUT,
        )
    proof = prover.prove(Challenge(answer.server_nonce, answer.server, answer.proof), method)
    return cpb.MemberProof(name=name, server_nonce=proof.server_nonce, proof=proof.proof)
