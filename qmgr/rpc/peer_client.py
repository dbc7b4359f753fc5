"""Outbound node-to-node calls: a cluster channel to a peer, and a full repository's
Repository service (propose, watch). The node's cluster code sees domain objects only.

Every call proves who this node is (``Dialer``): with a cluster secret, it first answers a
challenge from the server (``Peer.Challenge``) and checks the server's own proof, so it only
talks to a member of its cluster (for a channel: to the queue manager it means to reach); the
member proof then travels in the request (the hello, the watch request, the proposal). With
TLS, the connection presents this node's member certificate and checks the server's against
the cluster CA.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from cluster.records import RepoEvent
from cluster.repository import ApplyResult
from qmgr.node.cluster.items import Item, Key
from qmgr.rpc.channel_wire import encode_batch
from qmgr.rpc.peer_convert import result_from_wire
from qmgr.security.member import (
    CHANNEL,
    PROPOSE,
    WATCH,
    Challenge,
    MemberAuthError,
    Prover,
)
from qmgr.wire import cluster_pb2 as cpb
from qmgr.wire import cluster_pb2_grpc as crpc

OPTIONS = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]
TransportError = grpc.RpcError


class ChannelLost(Exception):
    """The channel's stream ended or failed."""


class Refusal(ChannelLost):
    """The server refused the call (FAILED_PRECONDITION: e.g. a join it rejects, or it is not
    a full repository)."""


class NotAMember(Refusal):
    """The server did not prove it is a member of the cluster (or not the one expected), or
    refused this node's proof."""


REFUSALS = (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)


@dataclass(frozen=True)
class Dialer:
    """How this node reaches its peers: who it is, its member key (None without a cluster
    secret) and its TLS credentials (None: plain TCP)."""

    name: str
    cluster: str
    key: bytes | None = None
    tls: grpc.ChannelCredentials | None = None

    @staticmethod
    def make(
        name: str,
        cluster: str,
        key: bytes | None,
        tls: tuple[bytes, bytes, bytes | None] | None = None,
    ) -> Dialer:
        """``key``: from ``member_key``; ``tls``: (certificate chain, private key, CA
        certificates) in PEM."""
        creds = None
        if tls is not None:
            cert, private, ca = tls
            creds = grpc.ssl_channel_credentials(
                root_certificates=ca, private_key=private, certificate_chain=cert
            )
        return Dialer(name, cluster, key, creds)

    def channel(self, address: str) -> grpc.aio.Channel:
        if self.tls is not None:
            return grpc.aio.secure_channel(address, self.tls, options=OPTIONS)
        return grpc.aio.insecure_channel(address, options=OPTIONS)

    async def prove(
        self, channel: grpc.aio.Channel, method: str, timeout: float, expected: str | None = None
    ) -> tuple[cpb.MemberProof, str]:
        """This node's proof for one ``method`` call on ``channel``, and the server's proven
        name ("" without a secret). Raises NotAMember, or grpc.RpcError when the server cannot
        be reached."""
        if self.key is None:
            return cpb.MemberProof(name=self.name), ""
        prover = Prover(self.key, self.cluster, self.name)
        request = cpb.ChallengeRequest(client_nonce=prover.client_nonce, cluster=self.cluster)
        try:
            answer = await crpc.PeerStub(channel).Challenge(request, timeout=timeout)
        except grpc.RpcError as exc:
            if exc.code() in REFUSALS:
                raise NotAMember(describe(exc)) from None
            raise
        challenge = Challenge(answer.server_nonce, answer.server, answer.proof)
        try:
            server = prover.accept(challenge, expected)
        except MemberAuthError as exc:
            raise NotAMember(str(exc)) from None
        proof = prover.prove(challenge, method)
        return cpb.MemberProof(
            name=proof.name, server_nonce=proof.server_nonce, proof=proof.proof
        ), server


def describe(exc: BaseException) -> str:
    """A one-line reason for a channel failure (DISPLAY CHSTATUS)."""
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "code"):
        return f"{exc.code().name}: {exc.details()}"
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, ChannelLost) else f"{type(exc).__name__}: {text}"


CHANNEL_PATH = "/qmgr.wire.Peer/Channel"


def _request_bytes(request: cpb.ChannelRequest | bytes) -> bytes:
    return request if isinstance(request, bytes) else request.SerializeToString()


class PeerConnection:
    """One open channel stream to a peer: send batches, read acknowledgements."""

    def __init__(self, address: str, dialer: Dialer) -> None:
        self.address = address
        self.dialer = dialer
        self._channel = dialer.channel(address)
        # the generated stub's Channel, with a serializer that passes encoded batches through
        self._open = self._channel.stream_stream(
            CHANNEL_PATH,
            request_serializer=_request_bytes,
            response_deserializer=cpb.ChannelAck.FromString,
        )
        # the hello as a message, then each batch as its encoded request
        self._requests: asyncio.Queue[cpb.ChannelRequest | bytes | None] = asyncio.Queue()
        self._call: Any = None
        self.receiver = ""

    async def _iter(self) -> AsyncIterator[cpb.ChannelRequest | bytes]:
        while True:
            req = await self._requests.get()
            if req is None:
                return
            yield req

    async def open(
        self,
        receiver: str,
        address: str,
        proxies: Sequence[str],
        timeout: float,
        *,
        qmid: str = "",
    ) -> Key:
        """Prove who we are to ``receiver`` (and that it is ``receiver``), say hello; returns
        the highest key the receiver has committed from us."""
        me = self.dialer
        try:
            proof, _ = await me.prove(self._channel, CHANNEL, timeout, expected=receiver)
        except grpc.RpcError as exc:
            raise ChannelLost(describe(exc)) from None
        hello = cpb.ChannelHello(
            sender=me.name, address=address, cluster=me.cluster, qmid=qmid, proof=proof
        )
        hello.proxies.extend(sorted(proxies))
        self._requests.put_nowait(cpb.ChannelRequest(hello=hello))
        self._call = self._open(self._iter())
        try:
            ack = await asyncio.wait_for(self._call.read(), timeout)
        except grpc.RpcError as exc:
            if exc.code() in REFUSALS:
                raise NotAMember(describe(exc)) from None
            raise ChannelLost(describe(exc)) from None
        except TimeoutError:
            raise ChannelLost(f"no answer to the hello within {timeout} s") from None
        if ack is grpc.aio.EOF:
            raise ChannelLost("the receiver closed the channel")
        self.receiver = ack.receiver
        return (ack.epoch, ack.seq)

    def send(self, items: Sequence[Item]) -> list[tuple[Item, Exception]]:
        """Send one batch (written as bytes: ``qmgr.rpc.channel_wire``); returns the items
        left out because they cannot be encoded."""
        request, bad = encode_batch(items)
        if request is not None:
            self._requests.put_nowait(request)
        return bad

    async def next_ack(self) -> Key:
        try:
            ack = await self._call.read()
        except grpc.RpcError as exc:
            raise ChannelLost(describe(exc)) from None
        if ack is grpc.aio.EOF:
            raise ChannelLost("the receiver closed the channel")
        return (ack.epoch, ack.seq)

    async def close(self) -> None:
        self._requests.put_nowait(None)
        if self._call is not None:
            self._call.cancel()
        await self._channel.close()


class RepositoryClient:
    """Calls to one full repository's Repository service, each proving who this node is."""

    def __init__(self, address: str, dialer: Dialer, timeout: float = 5.0) -> None:
        self.address = address
        self.dialer = dialer
        self.timeout = timeout  # for the challenge that starts each call
        self._channel = dialer.channel(address)
        self._stub = crpc.RepositoryStub(self._channel)

    async def propose(self, command: Mapping[str, Any], timeout: float) -> ApplyResult:
        proof, _ = await self.dialer.prove(self._channel, PROPOSE, self.timeout)
        req = cpb.ProposeRequest(
            command_json=json.dumps(dict(command), sort_keys=True), proof=proof
        )
        try:
            resp = await self._stub.Propose(req, timeout=timeout)
        except grpc.RpcError as exc:
            if exc.code() in REFUSALS:
                raise NotAMember(describe(exc)) from None
            raise
        return result_from_wire(resp)

    async def watch(
        self, join: Mapping[str, Any]
    ) -> AsyncIterator[tuple[dict[str, Any] | None, list[RepoEvent], str]]:
        """Join and watch: yields (snapshot or None, events, full repository name). With a
        cluster secret the name is the one the server proved; without, the one it says."""
        proof, server = await self.dialer.prove(self._channel, WATCH, self.timeout)
        request = cpb.WatchRequest(join_command_json=json.dumps(dict(join)), proof=proof)
        call = self._stub.Watch(request)
        try:
            async for update in call:
                snap = json.loads(update.snapshot_json) if update.snapshot_json else None
                events = [RepoEvent.from_dict(json.loads(e)) for e in update.events_json]
                yield snap, events, server or update.full_repository
        except grpc.RpcError as exc:
            if exc.code() in REFUSALS:
                raise NotAMember(describe(exc)) from None
            if exc.code() is grpc.StatusCode.FAILED_PRECONDITION:
                raise Refusal(describe(exc)) from None
            raise
        finally:
            call.cancel()

    async def close(self) -> None:
        await self._channel.close()
