"""Registers every gRPC service of a node on a server, behind the one error boundary."""

from __future__ import annotations

import grpc

from qmgr.node.runtime import NodeRuntime
from qmgr.rpc.admin import AdminServicer
from qmgr.rpc.auth import ConnectionAuthentication
from qmgr.rpc.convert import check_request, check_stream_request
from qmgr.rpc.errors import ErrorBoundary
from qmgr.rpc.messaging import MessagingServicer
from qmgr.rpc.peer import PeerServicer
from qmgr.rpc.repository import RepositoryServicer
from qmgr.security.users import Users
from qmgr.wire import admin_pb2_grpc, cluster_pb2_grpc, messaging_pb2_grpc

MESSAGING_SERVICE = "qmgr.wire.Messaging"


def interceptors(
    runtime: NodeRuntime, users: Users | None = None
) -> list[grpc.aio.ServerInterceptor]:
    """The interceptors of a node's server: with ``users`` (``--auth``), connection
    authentication first (before anything else runs for an application call), then the error
    and validation boundary of every call (refusing every call but health checks once the
    store has failed)."""
    boundary = ErrorBoundary(
        gate=runtime.check_serving, check=check_request, stream_check=check_stream_request
    )
    if users is None:
        return [boundary]
    tls = runtime.config.tls
    certificates = tls is not None and tls.ca is not None  # verified client certificates
    return [ConnectionAuthentication(users, client_certificates=certificates), boundary]


def add_services(server: grpc.aio.Server, runtime: NodeRuntime) -> None:
    messaging_pb2_grpc.add_MessagingServicer_to_server(MessagingServicer(runtime), server)
    admin_pb2_grpc.add_AdminServicer_to_server(AdminServicer(runtime), server)
    cluster_pb2_grpc.add_PeerServicer_to_server(PeerServicer(runtime), server)
    cluster_pb2_grpc.add_RepositoryServicer_to_server(RepositoryServicer(runtime), server)
