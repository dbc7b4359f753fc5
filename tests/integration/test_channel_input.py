"""What a receiving node does with bad channel input, sent straight to its Peer service with a
raw gRPC stub: an item that cannot be delivered goes to the dead-letter queue with a
dead-letter header and the channel moves on (the items before it are delivered once, not again
on every retry); garbage ends the stream with INVALID_ARGUMENT, never OK. The sender, FORGER,
proves it holds the cluster secret (a member gone wrong): input from non-members never gets this
far (tests/integration/test_member_auth.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from qmgr.client.types import ReceivedMessage
from qmgr.launcher.poll import wait_for
from qmgr.security.member import CHANNEL
from qmgr.wire import cluster_pb2 as cpb
from qmgr.wire import cluster_pb2_grpc as crpc
from qmgr.wire import messages_pb2 as mpb
from tests.integration.cluster_nodes import Cluster
from tests.integration.members import SECRET, proof_for

TOPIC = "Forged/Prices"
DLQ = "SYSTEM.DEAD.LETTER.QUEUE"


def hello(address: str) -> cpb.ChannelRequest:
    """A hello from FORGER, a member holding the cluster secret (a fresh proof each time)."""
    return cpb.ChannelRequest(
        hello=cpb.ChannelHello(
            sender="FORGER",
            address="127.0.0.1:1",
            cluster="DEMO",
            qmid="FORGER_0000cafe",
            proof=proof_for(address, "FORGER", CHANNEL),
        )
    )


def item(seq: int, body: str, **fields: int) -> cpb.ChannelItem:
    msg = mpb.Message(
        message_id=f"{seq:048x}",
        body=body.encode(),
        persistence=mpb.PERSISTENT,
        priority=fields.get("priority", 4),
        expiry_ms=fields.get("expiry_ms", 0),
        put_time_ms=int(time.time() * 1000),
    )
    pub = cpb.ForwardedPublication(topic=TOPIC, message=msg, route=["FORGER"], purpose=cpb.DELIVER)
    return cpb.ChannelItem(epoch=1, seq=seq, publication=pub)


def batch(*items: cpb.ChannelItem) -> cpb.ChannelRequest:
    return cpb.ChannelRequest(batch=cpb.ChannelBatch(items=list(items)))


def run_channel(address: str, requests: list[cpb.ChannelRequest]) -> list[tuple[int, int]]:
    """Open a channel, send ``requests``, read the acknowledgements (the hello answer first)
    up to the last item sent and close it."""
    last = (1, requests[-1].batch.items[-1].seq)
    with grpc.insecure_channel(address) as channel:
        stub = crpc.PeerStub(channel)

        def gen() -> Iterator[cpb.ChannelRequest]:
            yield from requests
            time.sleep(30)  # keep the stream open until the acknowledgements are read

        call = stub.Channel(gen(), timeout=40)
        got = []
        for ack in call:
            got.append((ack.epoch, ack.seq))
            if len(got) > 1 and got[-1] >= last:
                break
        call.cancel()
        return got


def receive_all(sub: object, want: int, timeout: float = 20) -> list[ReceivedMessage]:
    got: list[ReceivedMessage] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        got.extend(sub.receive_batch(timeout=1))  # type: ignore[attr-defined]
    return got


@pytest.fixture
def cl(tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path, secret=SECRET).start(["FR1"], ["SUB1"])
    try:
        yield cluster
    finally:
        cluster.stop()


def test_forged_items_are_dead_lettered_and_the_channel_moves_on(cl: Cluster) -> None:
    node = cl["SUB1"]
    sub = node.c.subscribe(TOPIC)
    items = [
        item(1, "a"),
        item(2, "b"),
        item(3, "priority 10", priority=10),
        item(4, "c"),
        item(5, "expiry overflow", expiry_ms=2**63 - 1),
        item(6, "d"),
    ]
    first = run_channel(node.address, [hello(node.address), batch(*items)])
    assert first[0] == (0, 0)  # a new sender QMID: nothing committed from it yet
    assert first[-1] == (1, 6)
    # the sender did not see the acknowledgement in time and sends the batch again
    again = run_channel(
        node.address, [hello(node.address), batch(*items), batch(item(7, "marker"))]
    )
    assert again[0] == (1, 6)  # the hello answers the last committed key
    assert again[-1] == (1, 7)
    got = [m.body.decode() for m in receive_all(sub, 5)]
    got += [m.body.decode() for m in sub.receive_batch(timeout=1)]
    assert got == ["a", "b", "c", "d", "marker"]
    sub.close()

    dead = sorted(node.c.browse(DLQ), key=lambda m: m.body, reverse=True)
    assert [m.body for m in dead] == [b"priority 10", b"expiry overflow"]
    p10, overflow = dead
    assert p10.properties["MQDLH.Reason"] == 2050
    assert p10.properties["MQDLH.ReasonName"] == "MQRC_PRIORITY_ERROR"
    assert p10.properties["MQDLH.DestQName"] == TOPIC
    assert p10.properties["MQDLH.PutApplName"] == "FORGER"
    assert isinstance(p10.properties["MQDLH.PutTime"], float)
    assert 0 <= p10.priority <= 9 and p10.persistent
    assert overflow.properties["MQDLH.Reason"] == 2013
    assert overflow.properties["MQDLH.ReasonName"] == "MQRC_EXPIRY_ERROR"
    assert overflow.expiry_ms == 0

    # the node is well: a local publication still arrives, DISPLAY still answers
    sub = node.c.subscribe(TOPIC)
    node.c.publish(TOPIC, "local")
    assert [m.body for m in receive_all(sub, 1)] == [b"local"]
    sub.close()
    status = {r["RQMNAME"]: r for r in node.mqsc("DISPLAY CHSTATUS(*)")}
    assert "FORGER" not in status or status["FORGER"]["RQMID"] == "FORGER_0000cafe"


def _call(address: str, requests: list[bytes]) -> grpc.RpcError:
    with grpc.insecure_channel(address) as channel:
        call = channel.stream_stream(
            "/qmgr.wire.Peer/Channel",
            request_serializer=lambda b: b,
            response_deserializer=cpb.ChannelAck.FromString,
        )(iter(requests), timeout=20)
        with pytest.raises(grpc.RpcError) as info:
            for _ in call:
                pass
        return info.value


def test_garbage_on_a_channel_ends_it_with_invalid_argument(cl: Cluster) -> None:
    address = cl["SUB1"].address
    garbage = b"\xff\xff\xff\xff\x0f garbage"
    hello_bytes = b"a hello"  # stands for a fresh hello with its own proof
    for requests in (
        [garbage],
        [batch(item(1, "no hello")).SerializeToString()],
        [hello_bytes, garbage],
        [hello_bytes, hello_bytes],
        [hello_bytes, batch(cpb.ChannelItem(epoch=1, seq=1)).SerializeToString()],
        [hello_bytes, batch(cpb.ChannelItem(epoch=0, seq=0)).SerializeToString()],
        [hello_bytes, batch(item(2, "x"), item(1, "y")).SerializeToString()],
    ):
        fresh = [hello(address).SerializeToString() if r is hello_bytes else r for r in requests]
        err = _call(address, fresh)
        assert err.code() is grpc.StatusCode.INVALID_ARGUMENT, (requests, err)
    # nothing was delivered, the node still serves
    wait_for(lambda: cl["SUB1"].mqsc("DISPLAY QMGR"), 20.0, what="DISPLAY QMGR", retry=Exception)
