"""The Repository service of a full repository: propose a change, join and watch.

Every call comes from a member that proved who it is (``qmgr.rpc.peer_auth``: the member proof
in the request, the TLS certificate); a watch's join must be that member's own, and a proposal
must be about that member (``cluster.repository.remote_refusal``: no ``force_remove``, no join
as a full repository). A call refused for who it comes from ends with
UNAUTHENTICATED/PERMISSION_DENIED and changes nothing."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any, TypeAlias

import grpc

from cluster.repository import command_subject, remote_refusal
from qmgr.node.cluster.hub import JoinRejected, watch
from qmgr.node.cluster.repolink import RaftLink
from qmgr.node.runtime import NodeRuntime
from qmgr.rpc.peer_auth import Refused, authenticate, refuse
from qmgr.rpc.peer_convert import result_to_wire
from qmgr.security.member import PROPOSE, WATCH
from qmgr.wire import cluster_pb2 as cpb
from qmgr.wire import cluster_pb2_grpc as crpc

Ctx: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"
log = logging.getLogger("qmgr.node.repository")


class RepositoryServicer(crpc.RepositoryServicer):
    def __init__(self, runtime: NodeRuntime) -> None:
        self.rt = runtime

    async def _link(self, context: Ctx) -> RaftLink:
        agent = self.rt.agent
        if agent is None or not isinstance(agent.link, RaftLink):
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "not a full repository")
            raise AssertionError("unreachable")
        return agent.link

    async def _decode(self, text: str, context: Ctx) -> dict[str, Any]:
        try:
            value = json.loads(text)
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"command is not JSON: {exc}")
            raise AssertionError("unreachable") from None
        if not isinstance(value, dict):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "command must be an object")
        return value

    async def _authorize(
        self,
        context: Ctx,
        proof: cpb.MemberProof,
        method: str,
        command: dict[str, Any],
        *,
        join: bool = False,
    ) -> None:
        """Abort unless the caller proves it is the member the command is about."""
        agent = self.rt.agent
        assert agent is not None
        claimed = proof.name or command_subject(command) or ""
        try:
            if not claimed:
                raise Refused(
                    grpc.StatusCode.UNAUTHENTICATED,
                    "no member proof: the call names no queue manager",
                )
            who = authenticate(agent, context, proof, method, claimed)
            refusal = remote_refusal(command, who, join=join)
            if refusal is not None:
                raise Refused(grpc.StatusCode.PERMISSION_DENIED, refusal)
        except Refused as refused:
            log.warning("%s from %s refused: %r", method, context.peer(), refused.text)
            await refuse(context, refused)

    async def Propose(self, request: cpb.ProposeRequest, context: Ctx) -> cpb.ProposeResponse:
        link = await self._link(context)
        command = await self._decode(request.command_json, context)
        await self._authorize(context, request.proof, PROPOSE, command)
        result = await link.propose(command)
        return result_to_wire(result, link.repository.revision)

    async def Watch(
        self, request: cpb.WatchRequest, context: Ctx
    ) -> AsyncIterator[cpb.RepositoryUpdate]:
        link = await self._link(context)
        join = await self._decode(request.join_command_json, context)
        await self._authorize(context, request.proof, WATCH, join, join=True)
        agent = self.rt.agent
        assert agent is not None
        try:
            async for snapshot, events, revision in watch(link, join):
                update = cpb.RepositoryUpdate(revision=revision, full_repository=agent.name)
                if snapshot is not None:
                    update.snapshot_json = json.dumps(snapshot, separators=(",", ":"))
                update.events_json.extend(
                    json.dumps(e.to_dict(), separators=(",", ":")) for e in events
                )
                yield update
        except JoinRejected as exc:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"join rejected: {exc}")
