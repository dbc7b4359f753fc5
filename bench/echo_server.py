"""An empty gRPC streaming service, the baseline for the node benchmark: it answers each batch
of publications with a count and does nothing else. Prints READY addr=.. like a node."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from typing import Any

import grpc

from qmgr.wire import messaging_pb2 as pb
from qmgr.wire import messaging_pb2_grpc as rpc


class Echo(rpc.MessagingServicer):
    async def PublishStream(
        self, request_iterator: AsyncIterator[pb.PublishRequest], context: Any
    ) -> AsyncIterator[pb.PublishResponse]:
        async for request in request_iterator:
            yield pb.PublishResponse(batch_id=request.batch_id, accepted=len(request.publications))


async def main() -> None:
    server = grpc.aio.server()
    rpc.add_MessagingServicer_to_server(Echo(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"READY name=ECHO addr=127.0.0.1:{port}", flush=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
