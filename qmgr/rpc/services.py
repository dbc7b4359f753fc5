"""Registers every gRPC service of a node on a server, behind the one error boundary."""

from __future__ import annotations

import grpc

from qmgr.node.runtime import NodeRuntime
from qmgr.rpc.admin import AdminServicer
from qmgr.rpc.auth import ConnectionAuthentication
from qmgr.rpc.convert import check_request, check_stream_request
from qmgr.rpc.errors import ErrorBoundary
from qmgr.rpc.messaging import MessagingServicer, serialize_delivery
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


class _Handlers:
    """Takes the method handlers a generated ``add_*Servicer_to_server`` registers."""

    def __init__(self) -> None:
        self.service = ""
        self.handlers: dict[str, grpc.RpcMethodHandler] = {}

    def add_generic_rpc_handlers(self, handlers: object) -> None:
        pass

    def add_registered_method_handlers(
        self, service: str, handlers: dict[str, grpc.RpcMethodHandler]
    ) -> None:
        self.service, self.handlers = service, handlers


def _add_messaging(server: grpc.aio.Server, runtime: NodeRuntime) -> None:
    """The Messaging service as generated, but with deliveries (Subscribe, Consume) sent as
    the bytes the servicer encodes them to."""
    taken = _Handlers()
    messaging_pb2_grpc.add_MessagingServicer_to_server(MessagingServicer(runtime), taken)
    handlers = dict(taken.handlers)
    for method in ("Subscribe", "Consume"):
        handlers[method] = handlers[method]._replace(response_serializer=serialize_delivery)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(taken.service, handlers),)
    )
    server.add_registered_method_handlers(taken.service, handlers)


def add_services(server: grpc.aio.Server, runtime: NodeRuntime) -> None:
    _add_messaging(server, runtime)
    admin_pb2_grpc.add_AdminServicer_to_server(AdminServicer(runtime), server)
    cluster_pb2_grpc.add_PeerServicer_to_server(PeerServicer(runtime), server)
    cluster_pb2_grpc.add_RepositoryServicer_to_server(RepositoryServicer(runtime), server)
