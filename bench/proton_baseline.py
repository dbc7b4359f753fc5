"""A minimal Service Bus-like server on Apache Qpid Proton's Python binding: the baseline that
bench/bench_servicebus_wire.py measures qmgr's node against in the same run.

Run: .venv/bin/python bench/proton_baseline.py --port N   (prints ``listening on HOST:N``;
exits on SIGTERM). Needs ``python-qpid-proton`` (``pip install -e '.[bench]'``).

It keeps its queues in memory only (no disk, no persistence, no limits): it is a baseline of
protocol-handling cost (what a server on this binding spends per message), not a broker. What
it serves, for the real ``azure-servicebus`` SDK with an emulator connection string
(``Endpoint=sb://127.0.0.1:N;...;UseDevelopmentEmulator=true;``):

- SASL ANONYMOUS, the only mechanism the SDK offers (its token auth is CBS, below); Proton's
  built-in SASL server (without Cyrus) cannot serve PLAIN, so it is not offered;
- CBS: every put-token request on ``$cbs`` gets status-code 202, correlation-id = the request's
  message-id, on the connection's ``$cbs`` receiver link (or the one whose source is the
  request's reply-to, when it has one); a request to ``<entity>/$management`` gets an empty
  200 answer the same way (no operation is implemented; the SDK's receive, complete and send
  make none);
- attach replies echo the client's source, target and settle modes; queues are created on
  first use, named by the address's path (``amqps://host:port/<queue>`` or bare), lower-cased;
- sender links get credit 1,000 (topped up as it is used); every transfer is accepted and
  settled. The Python binding hides a transfer's message-format, so a batch (format
  0x80013700) is recognised by its shape: data sections that each hold a whole encoded
  message (they start with a section descriptor), after nothing but other leading sections
  (the SDK puts a properties section first); such a transfer is split into its messages,
  anything else is one message;
- receiver links: on credit, the oldest messages go out with a 16-byte random UUID delivery
  tag (the lock token) and message annotations ``x-opt-sequence-number`` (long, per queue,
  from 1), ``x-opt-enqueued-time`` and, in peek-lock, ``x-opt-locked-until`` (timestamps, a
  60 s lock that is never enforced). Peek-lock (snd-settle-mode unsettled): the client's
  disposition is settled with the same outcome type, a plain ``rejected`` for a dead-letter
  (the echo azure-servicebus 7.15.0 waits for; a pre-settled one, as from <= 7.14, needs none); accepted and rejected remove the message,
  released and modified put it back in sequence order (modified counts a delivery).
  Receive-and-delete (snd-settle-mode settled): sent pre-settled, removed at once. A drain is
  answered when the queue runs dry.

Messages are decoded (``proton.Message``) when they arrive and re-encoded with their
annotations on each delivery, as a server on this binding ordinarily does.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
import uuid
from bisect import insort
from collections import deque
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from proton import (
    Data,
    Delivery,
    Disposition,
    Endpoint,
    Event,
    Handler,
    Link,
    Message,
    Receiver,
    Sender,
    symbol,
    timestamp,
)
from proton.reactor import Container

CREDIT = 1000  # given to the client's senders, topped up at half
LOCK_MS = 60_000
SEQ = symbol("x-opt-sequence-number")
ENQUEUED = symbol("x-opt-enqueued-time")
LOCKED_UNTIL = symbol("x-opt-locked-until")


@dataclass
class Entry:
    seq: int
    message: Message


@dataclass
class Queue:
    name: str
    ready: deque[Entry] = field(default_factory=deque)
    consumers: list[Sender] = field(default_factory=list)
    next_seq: int = 1
    turn: int = 0  # round robin over consumers

    def put_back(self, entry: Entry) -> None:
        """A released or abandoned message goes back in sequence order."""
        insort(self.ready, entry, key=lambda e: e.seq)


def entity_of(address: str | None) -> str:
    """``amqps://host:port/queue`` or ``queue`` -> ``queue`` (lower case)."""
    path = (address or "").split("://", 1)[-1]
    if "://" in (address or ""):
        path = path.split("/", 1)[1] if "/" in path else ""
    return path.strip("/").lower()


def split_batch(raw: bytes) -> list[bytes] | None:
    """The encoded messages of a batch transfer, or None when ``raw`` is not shaped like one.
    The SDK's batch: a properties section (the first message's message-id), then one data
    section per message holding that whole encoded message."""
    out: list[bytes] = []
    i, n = 0, len(raw)
    while i < n:
        if raw[i : i + 2] != b"\x00\x53":
            return None
        if raw[i + 2] != 0x75:  # not a data section: skip it (header, properties, ...)
            if out:
                return None  # sections after the body: not a batch
            i += Data().decode(raw[i:])
            continue
        code = raw[i + 3]
        if code == 0xA0:
            size, i = raw[i + 4], i + 5
        elif code == 0xB0:
            size, i = int.from_bytes(raw[i + 4 : i + 8], "big"), i + 8
        else:
            return None
        payload = raw[i : i + size]
        if payload[:2] != b"\x00\x53":  # a body, not an encoded message
            return None
        out.append(payload)
        i += size
    return out or None


class Server(Handler):
    def __init__(self) -> None:
        super().__init__()
        self.queues: dict[str, Queue] = {}
        # what each unsettled peek-lock delivery carries: (queue, entry)
        self.locked: dict[Delivery, tuple[Queue, Entry]] = {}

    def queue(self, name: str) -> Queue:
        q = self.queues.get(name)
        if q is None:
            q = self.queues[name] = Queue(name)
        return q

    # ------------------------------------------------------------------ endpoints

    def on_connection_bound(self, event: Event) -> None:
        if event.transport is None:
            return
        sasl = event.transport.sasl()
        sasl.allow_insecure_mechs = True
        sasl.allowed_mechs("ANONYMOUS")

    def on_connection_remote_open(self, event: Event) -> None:
        conn = event.connection
        if conn is not None and conn.state & Endpoint.LOCAL_UNINIT:
            conn.open()

    def on_session_remote_open(self, event: Event) -> None:
        ssn = event.session
        if ssn is not None and ssn.state & Endpoint.LOCAL_UNINIT:
            ssn.open()

    def on_link_remote_open(self, event: Event) -> None:
        link = event.link
        if link is None or not link.state & Endpoint.LOCAL_UNINIT:
            return
        link.source.copy(link.remote_source)
        link.target.copy(link.remote_target)
        link.snd_settle_mode = link.remote_snd_settle_mode
        link.rcv_settle_mode = link.remote_rcv_settle_mode
        link.max_message_size = 1 << 20
        if isinstance(link, Sender):
            link.initial_delivery_count = 0
        link.open()
        if isinstance(link, Receiver):
            link.flow(CREDIT)
        else:
            address = link.remote_source.address
            if not self._is_node(address):
                q = self.queue(entity_of(address))
                q.consumers.append(link)
                self.dispatch(q)

    @staticmethod
    def _is_node(address: str | None) -> bool:
        return address is not None and ("$cbs" in address or "$management" in address)

    def on_link_remote_close(self, event: Event) -> None:
        link = event.link
        if link is None:
            return
        self._drop_link(link)
        if not link.state & Endpoint.LOCAL_CLOSED:
            link.close()

    on_link_remote_detach = on_link_remote_close

    def on_session_remote_close(self, event: Event) -> None:
        ssn = event.session
        if ssn is not None and not ssn.state & Endpoint.LOCAL_CLOSED:
            ssn.close()

    def on_connection_remote_close(self, event: Event) -> None:
        conn = event.connection
        if conn is not None and not conn.state & Endpoint.LOCAL_CLOSED:
            conn.close()

    def on_transport_closed(self, event: Event) -> None:
        conn = event.connection
        if conn is None:
            return
        link = conn.link_head(0)
        while link is not None:
            self._drop_link(link)
            link = link.next(0)

    def _drop_link(self, link: Link) -> None:
        """A consumer goes away: stop sending to it, and put its unsettled messages back."""
        if not isinstance(link, Sender):
            return
        q = self.queues.get(entity_of(link.source.address))
        if q is None or link not in q.consumers:
            return
        q.consumers.remove(link)
        back = [
            (d, entry) for d, (queue, entry) in self.locked.items() if queue is q and d.link == link
        ]
        for d, entry in back:
            del self.locked[d]
            q.put_back(entry)
        if back:
            self.dispatch(q)

    # ------------------------------------------------------------------ flow and transfers

    def on_link_flow(self, event: Event) -> None:
        link = event.link
        if isinstance(link, Sender):
            address = link.source.address
            if not self._is_node(address):
                self.dispatch(self.queue(entity_of(address)))
                if link.drain_mode and link.credit > 0:
                    link.drained()

    def on_delivery(self, event: Event) -> None:
        link = event.link
        delivery = event.delivery
        if delivery is None:
            return
        if isinstance(link, Receiver):
            if delivery.partial:
                return
            raw = link.recv(delivery.pending) or b""
            link.advance()
            address = link.target.address
            if self._is_node(address):
                self.request(link, raw)
            else:
                self.enqueue(self.queue(entity_of(address)), raw)
            delivery.update(Disposition.ACCEPTED)
            delivery.settle()
            if link.credit < CREDIT // 2:
                link.flow(CREDIT - link.credit)
        else:
            self.settled(delivery)

    def enqueue(self, q: Queue, raw: bytes) -> None:
        now = int(time.time() * 1000)
        for encoded in split_batch(raw) or [raw]:
            m = Message()
            m.decode(encoded)
            annotations = dict(m.annotations or {})
            annotations[SEQ] = q.next_seq
            annotations[ENQUEUED] = timestamp(now)
            m.annotations = annotations
            q.ready.append(Entry(q.next_seq, m))
            q.next_seq += 1
        self.dispatch(q)

    def dispatch(self, q: Queue) -> None:
        """Send what is ready to the consumers with credit, in turn."""
        while q.ready:
            ready = [c for c in q.consumers if c.credit > 0]
            if not ready:
                return
            for link in ready[q.turn % len(ready) :] + ready[: q.turn % len(ready)]:
                while q.ready and link.credit > 0:
                    self.send(q, link, q.ready.popleft())
                    if len(ready) > 1:
                        break  # one each, in turn
                if link.drain_mode and not q.ready and link.credit > 0:
                    link.drained()
            q.turn += 1

    def send(self, q: Queue, link: Sender, entry: Entry) -> None:
        m = entry.message
        presettled = link.snd_settle_mode == Link.SND_SETTLED
        if not presettled:
            annotations = dict(m.annotations or {})
            annotations[LOCKED_UNTIL] = timestamp(int(time.time() * 1000) + LOCK_MS)
            m.annotations = annotations
        delivery = link.delivery(uuid.uuid4().bytes)  # type: ignore[arg-type]
        link.stream(m.encode())
        link.advance()
        if presettled:
            delivery.settle()
        else:
            self.locked[delivery] = (q, entry)

    def settled(self, delivery: Delivery) -> None:
        """The client's disposition of a message sent to it: echo it, settled."""
        remote_settled = delivery.settled  # the peer settled it (<= 7.14 SDKs do)
        if not (delivery.updated or remote_settled):
            return
        held = self.locked.pop(delivery, None)
        state = delivery.remote_state
        if held is not None and state in (Disposition.RELEASED, Disposition.MODIFIED):
            q, entry = held
            if state == Disposition.MODIFIED:
                m = entry.message
                m.delivery_count = (m.delivery_count or 0) + 1
            q.put_back(entry)
            self.dispatch(q)
        if state and not remote_settled:
            delivery.update(state)
        delivery.settle()

    # ------------------------------------------------------------------ $cbs, $management

    def request(self, link: Receiver, raw: bytes) -> None:
        """Answer a put-token (``$cbs``) or management request: success, whatever it asks."""
        req = Message()
        req.decode(raw)
        cbs = "$cbs" in (link.target.address or "")
        reply_to = req.reply_to or link.target.address
        out: Sender | None = None
        other = link.connection.link_head(Endpoint.LOCAL_ACTIVE | Endpoint.REMOTE_ACTIVE)
        fallback: Sender | None = None
        while other is not None:
            if isinstance(other, Sender):
                source = other.source.address
                if source == reply_to:
                    out = other
                    break
                if source == link.target.address:
                    fallback = other
            other = other.next(Endpoint.LOCAL_ACTIVE | Endpoint.REMOTE_ACTIVE)
        out = out or fallback
        if out is None:
            return
        if cbs:
            reply = Message(
                correlation_id=req.id,
                address=reply_to,
                properties={"status-code": 202, "status-description": "Accepted"},
            )
        else:
            reply = Message(
                body={},
                correlation_id=req.id,
                address=reply_to,
                properties={"statusCode": 200, "statusDescription": "OK"},
            )
        # the client gives its reply link credit before it sends a request
        delivery = out.delivery(uuid.uuid4().bytes)  # type: ignore[arg-type]
        out.stream(reply.encode())
        out.advance()
        delivery.settle()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5672)
    args = parser.parse_args(argv)

    def stop(signum: int, frame: FrameType | None) -> Any:
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    container = Container(Server())
    container.listen(f"{args.host}:{args.port}")
    print(f"listening on {args.host}:{args.port}", flush=True)
    container.run()


if __name__ == "__main__":
    main()
