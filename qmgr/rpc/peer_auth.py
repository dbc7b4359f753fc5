"""Who is calling a node's Peer and Repository services: the server side of member
authentication, checked once per call (a channel stream, a watch, a proposal).

- With a cluster secret, every call carries a ``MemberProof`` answering a challenge this node
  issued (``Peer.Challenge``, see ``qmgr.security.member``); a call without one, or whose proof
  does not check, is refused with UNAUTHENTICATED.
- With TLS and a cluster CA (``--tls-ca``), the caller's certificate must be a member
  certificate of that CA naming the queue manager it claims to be; a client certificate, or a
  member certificate of another queue manager, is refused with PERMISSION_DENIED.
- With both, both are checked. With neither (an ``--insecure`` cluster), the claimed name is
  taken as given.

The proof's name must be the name the call claims (the hello's sender, the join's name); what
a member may then do under its name is the caller's business (``cluster.repository``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, TypeAlias

import grpc

from qmgr.security.member import Challenge, MemberAuthError, Proof
from qmgr.security.pki import client_name, member_name
from qmgr.wire import cluster_pb2 as cpb

if TYPE_CHECKING:
    from qmgr.node.cluster.agent import ClusterAgent

Ctx: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"


class Refused(Exception):
    """A call refused for who it comes from: a gRPC status and a message saying why."""

    def __init__(self, code: grpc.StatusCode, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text


def challenge(agent: ClusterAgent, request: cpb.ChallengeRequest) -> cpb.ChallengeResponse:
    """Answer ``Peer.Challenge``; raises Refused."""
    if request.cluster != agent.cluster:
        raise Refused(
            grpc.StatusCode.PERMISSION_DENIED,
            f"{agent.name} is in cluster {agent.cluster}, not {request.cluster}",
        )
    if agent.challenger is None:
        raise Refused(
            grpc.StatusCode.UNAUTHENTICATED,
            f"{agent.name} has no cluster secret (an --insecure cluster): it proves nothing and "
            "accepts no member proofs",
        )
    try:
        answer: Challenge = agent.challenger.challenge(request.client_nonce, time.monotonic())
    except MemberAuthError as exc:
        raise Refused(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None
    return cpb.ChallengeResponse(
        server_nonce=answer.server_nonce, server=answer.server, proof=answer.proof
    )


def _certificate(context: Ctx) -> bytes | None:
    certs = context.auth_context().get("x509_pem_cert")
    return certs[0] if certs else None


def authenticate(
    agent: ClusterAgent, context: Ctx, proof: cpb.MemberProof, method: str, claimed: str
) -> str:
    """The member a call comes from, proven as this node requires; raises Refused. Changes
    nothing but the challenge table (the challenge is used up)."""
    if proof.name and proof.name != claimed:
        raise Refused(
            grpc.StatusCode.PERMISSION_DENIED,
            f"the member proof is for {proof.name}, the call claims {claimed}",
        )
    if agent.member_certificates:
        cert = _certificate(context)
        if cert is None:
            raise Refused(
                grpc.StatusCode.UNAUTHENTICATED, f"{claimed}: no member certificate presented"
            )
        certified = member_name(cert)
        if certified is None:
            who = client_name(cert)
            raise Refused(
                grpc.StatusCode.PERMISSION_DENIED,
                f"{claimed}: the certificate presented is not a member certificate"
                + (f" (client {who})" if who else ""),
            )
        if certified != claimed:
            raise Refused(
                grpc.StatusCode.PERMISSION_DENIED,
                f"{claimed}: the certificate presented is queue manager {certified}'s",
            )
    if agent.challenger is not None:
        if not proof.server_nonce:
            raise Refused(
                grpc.StatusCode.UNAUTHENTICATED,
                f"{claimed}: no member proof (cluster {agent.cluster} requires the cluster secret)",
            )
        try:
            agent.challenger.verify(
                Proof(claimed, proof.server_nonce, proof.proof), method, time.monotonic()
            )
        except MemberAuthError as exc:
            raise Refused(grpc.StatusCode.UNAUTHENTICATED, str(exc)) from None
    return claimed


async def refuse(context: Ctx, refused: Refused) -> None:
    await context.abort(refused.code, refused.text)
