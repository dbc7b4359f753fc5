"""The error boundary (qmgr.rpc.errors.ErrorBoundary) on an in-process gRPC server: every kind of
failure, unary or streaming, becomes the documented status; a stream never ends OK after one."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest

from qmgr.core.errors import MQError
from qmgr.rpc.errors import ErrorBoundary
from qmgr.store import StoreFailed
from qmgr.wire import messaging_pb2 as pb

REQ = pb.UnitOfWork
FAILURES = [
    ("", grpc.StatusCode.OK),
    ("mq", grpc.StatusCode.RESOURCE_EXHAUSTED),
    ("store", grpc.StatusCode.UNAVAILABLE),
    ("bug", grpc.StatusCode.INTERNAL),
]
GARBAGE = b"\xff\xff\xff\xff\x0f"


def _raise(kind: str) -> None:
    if kind == "mq":
        raise MQError("MQRC_Q_FULL", "queue Q is full")
    if kind == "store":
        raise StoreFailed("store commit failed: OperationalError: database or disk is full")
    if kind == "bug":
        raise KeyError("oops")


async def unary(request: pb.UnitOfWork, context: Any) -> pb.UnitOfWorkResult:
    _raise(request.unit_of_work)
    return pb.UnitOfWorkResult(messages=1)


async def server_stream(request: pb.UnitOfWork, context: Any) -> AsyncIterator[Any]:
    yield pb.UnitOfWorkResult(messages=1)
    _raise(request.unit_of_work)


async def bidi(requests: AsyncIterator[pb.UnitOfWork], context: Any) -> AsyncIterator[Any]:
    async def reader() -> None:  # swallows the failure of the request stream
        try:
            async for r in requests:
                _raise(r.unit_of_work)
                await out.put(pb.UnitOfWorkResult(messages=1))
        except (MQError, StoreFailed, KeyError, ValueError):
            pass
        finally:
            await out.put(None)

    out: asyncio.Queue[Any] = asyncio.Queue()
    task = asyncio.get_running_loop().create_task(reader())
    while (item := await out.get()) is not None:
        yield item
    await task


async def bidi_writer(requests: AsyncIterator[pb.UnitOfWork], context: Any) -> None:
    """A bidirectional handler that writes with context.write instead of yielding."""
    async for r in requests:
        _raise(r.unit_of_work)
        await context.write(pb.UnitOfWorkResult(messages=1))


def _handlers() -> grpc.GenericRpcHandler:
    ser = pb.UnitOfWorkResult.SerializeToString
    return grpc.method_handlers_generic_handler(
        "t.T",
        {
            "Unary": grpc.unary_unary_rpc_method_handler(unary, REQ.FromString, ser),
            "Stream": grpc.unary_stream_rpc_method_handler(server_stream, REQ.FromString, ser),
            "Bidi": grpc.stream_stream_rpc_method_handler(bidi, REQ.FromString, ser),
            "Writer": grpc.stream_stream_rpc_method_handler(bidi_writer, REQ.FromString, ser),
        },
    )


@pytest.fixture
def address() -> Iterator[str]:
    ready = threading.Event()
    addresses: list[str] = []
    loop = asyncio.new_event_loop()
    stop: list[Any] = []

    async def serve() -> None:
        server = grpc.aio.server(interceptors=[ErrorBoundary()])
        server.add_generic_rpc_handlers((_handlers(),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        done = asyncio.Event()
        stop.append(done)
        addresses.append(f"127.0.0.1:{port}")
        ready.set()
        await done.wait()
        await server.stop(0)

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(10)
    yield addresses[0]
    loop.call_soon_threadsafe(stop[0].set)
    thread.join(10)
    loop.close()


def _code(call: Any) -> tuple[grpc.StatusCode, dict[str, str], list[Any]]:
    got: list[Any] = []
    try:
        result = call()
        if hasattr(result, "__iter__"):
            got.extend(result)
        else:
            got.append(result)
    except grpc.RpcError as exc:
        return exc.code(), dict(exc.trailing_metadata() or ()), got
    return grpc.StatusCode.OK, {}, got


@pytest.mark.parametrize(("kind", "code"), FAILURES)
def test_every_failure_maps_to_its_status(
    address: str, kind: str, code: grpc.StatusCode, caplog: pytest.LogCaptureFixture
) -> None:
    request = REQ(unit_of_work=kind).SerializeToString()
    with grpc.insecure_channel(address) as ch, caplog.at_level(logging.ERROR, "qmgr.rpc"):
        for method, call in (
            ("Unary", lambda: ch.unary_unary("/t.T/Unary")(request, timeout=10)),
            ("Stream", lambda: ch.unary_stream("/t.T/Stream")(request, timeout=10)),
        ):
            got, meta, _ = _code(call)
            assert got == code, method
            if kind == "mq":
                assert meta == {"mq-reason": "2053", "mq-reason-name": "MQRC_Q_FULL"}
            if kind == "store":
                assert meta["mq-reason-name"] == "MQRC_RESOURCE_PROBLEM"
    internal_lines = [r for r in caplog.records if "KeyError" in r.getMessage()]
    assert len(internal_lines) == (2 if kind == "bug" else 0)
    assert all(r.exc_info is None for r in caplog.records)  # one line, no traceback


def test_garbage_is_invalid_argument_and_a_swallowed_stream_error_is_not_ok(
    address: str,
) -> None:
    good = REQ(unit_of_work="").SerializeToString()
    with grpc.insecure_channel(address) as ch:
        for callable_ in (ch.unary_unary("/t.T/Unary"), ch.unary_stream("/t.T/Stream")):
            got, _, _ = _code(lambda c=callable_: c(GARBAGE, timeout=10))
            assert got == grpc.StatusCode.INVALID_ARGUMENT
        bidi_call = ch.stream_stream("/t.T/Bidi")
        got, _, answered = _code(lambda: bidi_call(iter([good, good, GARBAGE, good]), timeout=10))
        assert got == grpc.StatusCode.INVALID_ARGUMENT
        assert len(answered) == 2
        # a failure the handler swallows ends the stream OK only if it was the handler's own
        got, _, answered = _code(lambda: bidi_call(iter([good, good]), timeout=10))
        assert got == grpc.StatusCode.OK and len(answered) == 2


@pytest.mark.parametrize(
    ("kind", "code"), [*FAILURES, ("garbage", grpc.StatusCode.INVALID_ARGUMENT)]
)
def test_a_bidirectional_handler_that_writes_is_bounded_too(
    address: str, kind: str, code: grpc.StatusCode
) -> None:
    good = REQ(unit_of_work="").SerializeToString()
    last = GARBAGE if kind == "garbage" else REQ(unit_of_work=kind).SerializeToString()
    with grpc.insecure_channel(address) as ch:
        call = ch.stream_stream("/t.T/Writer")
        got, meta, answered = _code(lambda: call(iter([good, last]), timeout=10))
    assert got == code
    assert len(answered) == (2 if kind == "" else 1)
    if kind == "mq":
        assert meta["mq-reason-name"] == "MQRC_Q_FULL"
