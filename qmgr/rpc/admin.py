"""The Admin service: one MQSC command in, runmqsc-style records out; the Service Bus
namespace's calls (``qmgr.rpc.sbadmin``)."""

from __future__ import annotations

from typing import Any

import grpc

from qmgr.node.runtime import NodeRuntime
from qmgr.rpc.sbadmin import ServiceBusAdminCalls
from qmgr.wire import admin_pb2 as pb
from qmgr.wire import admin_pb2_grpc as rpc


class AdminServicer(ServiceBusAdminCalls, rpc.AdminServicer):
    def __init__(self, runtime: NodeRuntime) -> None:
        self.rt = runtime

    async def Mqsc(
        self, request: pb.MqscRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.MqscResponse:
        ok, records = await self.rt.mqsc(request.command)
        await self.rt.durable()
        response = pb.MqscResponse(ok=ok)
        for r in records:
            out = response.records.add(code=r.code, text=r.text)
            for k, v in r.attrs:
                out.attributes.add(key=k, value=v)
        return response
