"""Asking a node's standard gRPC health service (grpc.health.v1) how it serves: what ``qmgr
health`` prints and what waits on a restarted container poll. It imports grpc and the health
stubs only when asked, so the compose healthcheck stays light."""

from __future__ import annotations


def check(address: str, service: str = "", timeout: float = 3.0) -> str:
    """The status name the node's health service gives ``service`` (``""``: the server as a
    whole), e.g. ``SERVING``; ``UNREACHABLE: ...`` when it cannot be asked, ``UNKNOWN_SERVICE``
    when the node does not know the service."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        except grpc.RpcError as exc:
            code = exc.code()
            if code == grpc.StatusCode.NOT_FOUND:
                return "UNKNOWN_SERVICE"
            return f"UNREACHABLE: {code.name if code else 'error'} {exc.details() or ''}".strip()
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))
