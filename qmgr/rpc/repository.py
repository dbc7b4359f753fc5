"""The Repository service of a full repository: propose a change, join and watch."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, TypeAlias

import grpc

from qmgr.node.cluster.hub import JoinRejected, watch
from qmgr.node.cluster.repolink import RaftLink
from qmgr.node.runtime import NodeRuntime
from qmgr.rpc.peer_convert import result_to_wire
from qmgr.wire import cluster_pb2 as cpb
from qmgr.wire import cluster_pb2_grpc as crpc

Ctx: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"


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

    async def Propose(self, request: cpb.ProposeRequest, context: Ctx) -> cpb.ProposeResponse:
        link = await self._link(context)
        command = await self._decode(request.command_json, context)
        result = await link.propose(command)
        return result_to_wire(result, link.repository.revision)

    async def Watch(
        self, request: cpb.WatchRequest, context: Ctx
    ) -> AsyncIterator[cpb.RepositoryUpdate]:
        link = await self._link(context)
        join = await self._decode(request.join_command_json, context)
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
