"""Registers every gRPC service of a node on a server."""

from __future__ import annotations

import grpc

from qmgr.node.runtime import NodeRuntime
from qmgr.rpc.admin import AdminServicer
from qmgr.rpc.messaging import MessagingServicer
from qmgr.rpc.peer import PeerServicer
from qmgr.rpc.repository import RepositoryServicer
from qmgr.wire import admin_pb2_grpc, cluster_pb2_grpc, messaging_pb2_grpc

MESSAGING_SERVICE = "qmgr.wire.Messaging"


def add_services(server: grpc.aio.Server, runtime: NodeRuntime) -> None:
    messaging_pb2_grpc.add_MessagingServicer_to_server(MessagingServicer(runtime), server)
    admin_pb2_grpc.add_AdminServicer_to_server(AdminServicer(runtime), server)
    cluster_pb2_grpc.add_PeerServicer_to_server(PeerServicer(runtime), server)
    cluster_pb2_grpc.add_RepositoryServicer_to_server(RepositoryServicer(runtime), server)
