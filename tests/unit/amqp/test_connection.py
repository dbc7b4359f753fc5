"""The server-side connection/session/link machine, driven by frames that azure-servicebus's own
``_pyamqp`` encoder builds (as 7.15.0 sends them) and checked with its decoder (as it reads them).
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pyamqp = pytest.importorskip("azure.servicebus._pyamqp")

from azure.servicebus._pyamqp import _decode, _encode  # noqa: E402
from azure.servicebus._pyamqp import performatives as pf  # noqa: E402
from azure.servicebus._pyamqp.endpoints import Source, Target  # noqa: E402
from azure.servicebus._pyamqp.message import Message, Properties  # noqa: E402
from azure.servicebus._pyamqp.outcomes import Accepted as PyAccepted  # noqa: E402
from azure.servicebus._pyamqp.outcomes import Modified as PyModified  # noqa: E402

from qmgr.amqp import performatives as p  # noqa: E402
from qmgr.amqp.connection import (  # noqa: E402
    RECEIVER,
    SENDER,
    Closed,
    Connection,
    CreditChanged,
    DispositionReceived,
    LinkAttached,
    LinkDetached,
    LocalProtocolError,
    Opened,
    SaslInit,
    SessionBegun,
    SessionEnded,
    TransferReceived,
)
from tests.unit.amqp.sdk_frames import flow_frame, open_frame, sdk_frame  # noqa: E402

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
BATCH_FORMAT = 0x80013700

OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH, END, CLOSE = range(0x10, 0x19)
SASL_MECHANISMS, SASL_INIT, SASL_CHALLENGE, SASL_RESPONSE, SASL_OUTCOME = range(0x40, 0x45)


# --------------------------------------------------------------------------- the client side


def frame(perf: Any, channel: int = 0, sasl: bool = False) -> bytes:
    header, body = _encode.encode_frame(perf, frame_type=b"\x01" if sasl else b"\x00")
    assert body is not None
    return header + struct.pack(">H", channel) + bytes(body)


def parse(data: bytes) -> list[tuple[Any, ...]]:
    """The server's bytes as pyamqp reads them: headers, heartbeats, (code, channel, fields)."""
    out: list[tuple[Any, ...]] = []
    pos = 0
    while pos < len(data):
        if data[pos : pos + 4] == b"AMQP":
            out.append(("header", data[pos : pos + 8]))
            pos += 8
            continue
        size = struct.unpack(">I", data[pos : pos + 4])[0]
        doff = data[pos + 4]
        channel = struct.unpack(">H", data[pos + 6 : pos + 8])[0]
        body = memoryview(data[pos + doff * 4 : pos + size])
        pos += size
        if not len(body):
            out.append(("heartbeat", channel))
            continue
        code, fields = _decode.decode_frame(body)
        out.append((code, channel, fields))
    return out


def frames_of(data: bytes, code: int) -> list[list[Any]]:
    return [f[2] for f in parse(data) if f[0] == code]


def attach(name: str, handle: int, role: bool, address: str, **kw: Any) -> pf.AttachFrame:
    source = Source(address=address, filters=kw.pop("filters", None))
    target = Target(address=address)
    return pf.AttachFrame(
        name=name,
        handle=handle,
        role=role,
        send_settle_mode=kw.pop("snd", 0),
        rcv_settle_mode=kw.pop("rcv", 0),
        source=source,
        target=target,
        unsettled=None,
        incomplete_unsettled=False,
        initial_delivery_count=0 if role is SENDER else None,
        max_message_size=kw.pop("max_message_size", 1024 * 1024),
        offered_capabilities=None,
        desired_capabilities=None,
        properties=kw.pop("properties", None),
    )


def link_flow(handle: int, credit: int, delivery_count: int = 0, **kw: Any) -> pf.FlowFrame:
    return flow_frame(
        **{"next_incoming_id": 0, "incoming_window": 65536, "next_outgoing_id": 0, **kw},
        outgoing_window=65536,
        handle=handle,
        delivery_count=delivery_count,
        link_credit=credit,
    )


def transfer(handle: int, delivery_id: int | None, tag: bytes | None, payload: bytes, **kw: Any):
    return pf.TransferFrame(
        handle=handle,
        delivery_id=delivery_id,
        delivery_tag=tag,
        message_format=kw.pop("message_format", 0),
        settled=kw.pop("settled", False),
        more=kw.pop("more", False),
        rcv_settle_mode=None,
        state=None,
        resume=False,
        aborted=kw.pop("aborted", False),
        batchable=False,
        payload=payload,
    )


def disposition(role: bool, first: int, last: int | None, settled: bool, state: Any):
    return pf.DispositionFrame(
        role=role, first=first, last=last, settled=settled, state=state, batchable=None
    )


def encode_message(msg: Message) -> bytes:
    out = bytearray()
    _encode.encode_payload(out, msg)
    return bytes(out)


OPEN_FRAME = open_frame("client-1", 65536, {b"product": "azsdk-python-servicebus"})
BEGIN_FRAME = sdk_frame(
    pf.BeginFrame,
    next_outgoing_id=0,
    incoming_window=65536,
    outgoing_window=65536,
    handle_max=4294967295,
)


def opened(**kw: Any) -> Connection:
    """A connection past SASL ANONYMOUS, open and begin (session on channel 0)."""
    conn = Connection("qmgr-node", **kw)
    events = conn.receive_data(SASL_HEADER)
    assert events == []
    init = pf.SASLInit(mechanism=b"ANONYMOUS", initial_response=b"", hostname="localhost")
    events = conn.receive_data(frame(init, sasl=True))
    assert [type(e) for e in events] == [SaslInit]
    conn.accept_sasl()
    events = conn.receive_data(AMQP_HEADER + frame(OPEN_FRAME) + frame(BEGIN_FRAME))
    assert [type(e) for e in events] == [Opened, SessionBegun]
    conn.data_to_send()
    return conn


def attached(conn: Connection, name: str, handle: int, role: bool, address: str, **kw: Any):
    (event,) = conn.receive_data(frame(attach(name, handle, role, address, **kw)))
    assert isinstance(event, LinkAttached)
    conn.attach_reply(event.link)
    conn.data_to_send()
    return event.link


# --------------------------------------------------------------------------- SASL and open


def test_sasl_anonymous_open_begin_answered_full_length() -> None:
    conn = Connection("qmgr-node", idle_timeout=30.0)
    conn.receive_data(SASL_HEADER)
    out = parse(conn.data_to_send())
    assert out[0] == ("header", SASL_HEADER)
    assert out[1][0] == SASL_MECHANISMS
    assert set(out[1][2][0]) == {b"ANONYMOUS", b"PLAIN"}
    init = pf.SASLInit(mechanism=b"ANONYMOUS", initial_response=b"", hostname="localhost")
    (event,) = conn.receive_data(frame(init, sasl=True))
    assert event == SaslInit(mechanism="ANONYMOUS", initial_response=b"", hostname="localhost")
    conn.accept_sasl()
    ((code, _, fields),) = parse(conn.data_to_send())
    assert (code, fields[0]) == (SASL_OUTCOME, 0)
    events = conn.receive_data(AMQP_HEADER + frame(OPEN_FRAME))
    assert [type(e) for e in events] == [Opened]
    assert events[0].container_id == "client-1"
    assert events[0].max_frame_size == 65536
    out = parse(conn.data_to_send())
    assert out[0] == ("header", AMQP_HEADER)
    assert out[1][0] == OPEN
    open_fields = out[1][2]
    assert len(open_fields) == 10  # every field written, trailing nulls included
    assert open_fields[0] == b"qmgr-node"
    assert open_fields[4] == 30000
    (event,) = conn.receive_data(frame(BEGIN_FRAME, channel=3))
    assert isinstance(event, SessionBegun)
    ((code, channel, fields),) = parse(conn.data_to_send())
    assert (code, channel, fields[0]) == (BEGIN, 3, 3)
    assert len(fields) == 8


def test_sasl_pauses_until_accepted_and_keeps_pipelined_bytes() -> None:
    conn = Connection("n")
    init = pf.SASLInit(mechanism=b"PLAIN", initial_response=b"\x00user\x00secret", hostname=None)
    pipelined = SASL_HEADER + frame(init, sasl=True) + AMQP_HEADER + frame(OPEN_FRAME)
    events = conn.receive_data(pipelined[:5]) + conn.receive_data(pipelined[5:])
    assert [type(e) for e in events] == [SaslInit]
    assert events[0].plain_credentials == ("user", "secret")
    conn.accept_sasl()
    assert [type(e) for e in conn.receive_data(b"")] == [Opened]
    out = parse(conn.data_to_send())
    assert [o[0] for o in out] == ["header", SASL_MECHANISMS, SASL_OUTCOME, "header", OPEN]


def test_sasl_refused_outcome_then_closed() -> None:
    conn = Connection("n")
    init = pf.SASLInit(mechanism=b"PLAIN", initial_response=b"\x00u\x00bad", hostname=None)
    conn.receive_data(SASL_HEADER + frame(init, sasl=True))
    conn.data_to_send()
    conn.accept_sasl(ok=False)
    ((code, _, fields),) = parse(conn.data_to_send())
    assert (code, fields[0]) == (SASL_OUTCOME, 1)
    assert conn.closed


def test_unoffered_mechanism_is_refused() -> None:
    conn = Connection("n", sasl_mechanisms=("ANONYMOUS",))
    init = pf.SASLInit(mechanism=b"EXTERNAL", initial_response=None, hostname=None)
    events = conn.receive_data(SASL_HEADER + frame(init, sasl=True))
    assert isinstance(events[0], Closed)
    assert parse(conn.data_to_send())[-1][2][0] == 1
    assert conn.closed


@pytest.mark.parametrize(
    "header", [b"AMQP\x01\x01\x00\x00", b"GET / HTTP/1.1\r\n", b"AMQP\x00\x02\x00\x00"]
)
def test_protocol_header_mismatch_answers_ours_and_closes(header: bytes) -> None:
    conn = Connection("n")
    (event,) = conn.receive_data(header)
    assert isinstance(event, Closed)
    assert event.error.condition == "amqp:connection:framing-error"
    assert conn.data_to_send() in (SASL_HEADER, AMQP_HEADER)
    assert conn.closed
    assert conn.receive_data(b"more") == []


def test_amqp_header_without_sasl_is_accepted_unless_required() -> None:
    conn = Connection("n")
    assert [type(e) for e in conn.receive_data(AMQP_HEADER + frame(OPEN_FRAME))] == [Opened]
    strict = Connection("n", require_sasl=True)
    (event,) = strict.receive_data(AMQP_HEADER)
    assert isinstance(event, Closed)
    assert strict.data_to_send() == SASL_HEADER


# --------------------------------------------------------------------------- the 7.15.0 conversation


def test_cbs_put_token_then_batch_send_and_accept() -> None:
    conn = opened()
    # $cbs: a sender and a receiver link pair, as the SDK's management link attaches them
    cbs_out = attached(conn, "cbs-sender", 0, SENDER, "$cbs")
    (event,) = conn.receive_data(frame(attach("cbs-receiver", 1, RECEIVER, "$cbs")))
    assert isinstance(event, LinkAttached) and event.role is RECEIVER
    cbs_in = event.link
    assert cbs_in.is_sender and not cbs_out.is_sender
    conn.attach_reply(cbs_in)
    reply = frames_of(conn.data_to_send(), ATTACH)[0]
    assert len(reply) == 14
    assert reply[0] == b"cbs-receiver" and reply[2] is SENDER
    assert reply[5][0] == b"$cbs" and reply[6][0] == b"$cbs"  # source and target echoed
    assert reply[9] == 0  # initial-delivery-count on a reply to a receiver
    assert reply[10] == 1024 * 1024  # max-message-size advertised

    conn.flow(cbs_out, 100)
    (flow,) = frames_of(conn.data_to_send(), FLOW)
    assert flow[4:7] == [0, 0, 100]  # handle, delivery-count, link-credit

    (event,) = conn.receive_data(frame(link_flow(1, 300)))
    assert event == CreditChanged(cbs_in, 300, False)

    request_id = uuid.uuid4()
    request = Message(
        value="SharedAccessSignature sr=x&sig=y&se=1&skn=k",
        properties=Properties(message_id=request_id),
        application_properties={"operation": "put-token", "type": "jwt", "name": "sb://h/q"},
    )
    body = encode_message(request)
    (event,) = conn.receive_data(frame(transfer(0, 0, b"\x00\x00\x00\x00", body)))
    assert isinstance(event, TransferReceived)
    assert (event.link, event.delivery_id, event.payload, event.settled) == (
        cbs_out,
        0,
        body,
        False,
    )
    conn.settle(cbs_out, event.delivery_id, p.Accepted())
    (disp,) = frames_of(conn.data_to_send(), DISPOSITION)
    assert disp[:4] == [RECEIVER, 0, 0, True]

    response = Message(
        value=None,
        properties=Properties(correlation_id=request_id),
        application_properties={"status-code": 202, "status-description": "Accepted"},
    )
    delivery_id = conn.send_transfer(cbs_in, b"\x01", encode_message(response), settled=True)
    (t,) = frames_of(conn.data_to_send(), TRANSFER)
    decoded = _decode.decode_payload(memoryview(t[-1]))
    assert decoded.application_properties[b"status-code"] == 202
    assert decoded.properties.correlation_id == request_id
    assert (t[1], t[2], t[4]) == (delivery_id, b"\x01", True)
    assert cbs_in.credit == 299 and cbs_in.delivery_count == 1

    # the queue sender: one batch transfer, unsettled, waits for accepted
    queue = attached(conn, "sender-link", 2, SENDER, "amqps://localhost:5672/q")
    conn.flow(queue, 50)
    conn.data_to_send()
    inner = [encode_message(Message(value=f"m{i}")) for i in range(3)]
    batch = encode_message(Message(data=inner))
    (event,) = conn.receive_data(
        frame(transfer(2, 1, b"\x00\x00\x00\x01", batch, message_format=BATCH_FORMAT))
    )
    assert isinstance(event, TransferReceived)
    assert event.message_format == BATCH_FORMAT
    assert event.delivery_tag == b"\x00\x00\x00\x01"
    conn.settle(queue, event.delivery_id, p.Accepted())
    (disp,) = frames_of(conn.data_to_send(), DISPOSITION)
    assert disp[:4] == [RECEIVER, 1, 1, True]
    assert disp[4] == {"accepted": []}  # as pyamqp reads an outcome
    assert queue.credit == 49


def test_peek_lock_delivery_settled_by_client_and_echoed() -> None:
    conn = opened()
    props = {b"com.microsoft:receiver-name": "r1"}
    (event,) = conn.receive_data(
        frame(attach("receiver-link", 0, RECEIVER, "amqps://h/q", rcv=1, properties=props))
    )
    link = event.link
    assert event.rcv_settle_mode == 1 and event.properties == {"com.microsoft:receiver-name": "r1"}
    conn.attach_reply(link)
    conn.receive_data(frame(link_flow(0, 2)))
    tags = [uuid.uuid4().bytes_le for _ in range(2)]
    ids = [conn.send_transfer(link, tag, b"payload") for tag in tags]
    assert ids == [0, 1]
    assert not link.can_send
    with pytest.raises(LocalProtocolError):
        conn.send_transfer(link, b"x", b"no credit")
    conn.data_to_send()
    # 7.15.0: unsettled disposition, waits for the echo of the same outcome
    (event,) = conn.receive_data(
        frame(disposition(RECEIVER, 1, None, False, PyModified(True, True, None)))
    )
    assert isinstance(event, DispositionReceived)
    assert [d.tag for d in event.deliveries] == [tags[1]]
    assert isinstance(event.state, p.Modified) and event.state.undeliverable_here
    conn.settle(link, 1, event.state)
    (disp,) = frames_of(conn.data_to_send(), DISPOSITION)
    assert disp[:4] == [SENDER, 1, 1, True]
    assert list(link.session.unsettled) == [0]
    # 7.14: pre-settled, waits for nothing
    (event,) = conn.receive_data(frame(disposition(RECEIVER, 0, 0, True, PyAccepted())))
    assert [d.tag for d in event.deliveries] == [tags[0]] and event.settled
    assert link.session.unsettled == {}


def test_drain_is_answered_even_with_nothing_to_send() -> None:
    conn = opened()
    link = attached(conn, "r", 0, RECEIVER, "amqps://h/q")
    conn.receive_data(frame(link_flow(0, 5)))
    conn.send_transfer(link, b"t", b"x", settled=True)
    (event,) = conn.receive_data(frame(link_flow(0, 0, delivery_count=0, drain=True)))
    assert event == CreditChanged(link, 0, True) or event.drain
    (event,) = conn.receive_data(frame(link_flow(0, 10, delivery_count=1, drain=True)))
    assert event.credit == 10 and event.drain
    conn.flow(link)
    conn.data_to_send()
    assert link.credit == 0 and link.delivery_count == 11
    (event,) = conn.receive_data(frame(link_flow(0, 0, delivery_count=11, drain=True)))
    conn.flow(link)
    (flow,) = frames_of(conn.data_to_send(), FLOW)
    assert flow[4:9] == [0, 11, 0, None, True]


def test_echo_flow_is_answered() -> None:
    conn = opened()
    link = attached(conn, "s", 0, SENDER, "amqps://h/q")
    conn.flow(link, 7)
    conn.data_to_send()
    assert conn.receive_data(frame(link_flow(0, 0, echo=True))) == []
    (flow,) = frames_of(conn.data_to_send(), FLOW)
    assert flow[6] == 7


def test_multi_frame_transfer_is_joined() -> None:
    conn = opened()
    link = attached(conn, "s", 0, SENDER, "amqps://h/q")
    conn.flow(link, 1)
    payload = bytes(range(256)) * 40
    parts = [payload[:4000], payload[4000:8000], payload[8000:]]
    assert conn.receive_data(frame(transfer(0, 0, b"t", parts[0], more=True))) == []
    assert conn.receive_data(frame(transfer(0, None, None, parts[1], more=True))) == []
    (event,) = conn.receive_data(frame(transfer(0, None, None, parts[2])))
    assert event.payload == payload and event.delivery_tag == b"t"
    assert link.credit == 0  # one delivery, one credit


def test_aborted_transfer_is_dropped() -> None:
    conn = opened()
    link = attached(conn, "s", 0, SENDER, "amqps://h/q")
    conn.flow(link, 2)
    assert conn.receive_data(frame(transfer(0, 0, b"t", b"abc", more=True))) == []
    assert conn.receive_data(frame(transfer(0, None, None, b"", aborted=True))) == []
    (event,) = conn.receive_data(frame(transfer(0, 1, b"u", b"whole")))
    assert event.payload == b"whole"


def test_send_transfer_splits_by_peer_max_frame_size() -> None:
    conn = Connection("n")
    small_open = OPEN_FRAME._replace(max_frame_size=512)
    conn.receive_data(AMQP_HEADER + frame(small_open) + frame(BEGIN_FRAME))
    link = attached(conn, "r", 0, RECEIVER, "amqps://h/q")
    conn.receive_data(frame(link_flow(0, 1)))
    payload = bytes(range(256)) * 8
    conn.send_transfer(link, b"tag", payload, message_format=BATCH_FORMAT)
    data = conn.data_to_send()
    sizes = []
    pos = 0
    while pos < len(data):
        size = struct.unpack(">I", data[pos : pos + 4])[0]
        sizes.append(size)
        pos += size
    assert len(sizes) > 4 and max(sizes) <= 512
    transfers = frames_of(data, TRANSFER)
    assert [t[5] for t in transfers] == [True] * (len(transfers) - 1) + [False]  # more
    assert b"".join(t[-1] for t in transfers) == payload
    assert {t[3] for t in transfers} == {BATCH_FORMAT}


# --------------------------------------------------------------------------- link and session errors


def test_owed_answers_go_out_beyond_credit_and_wait_for_the_session_window() -> None:
    """A reply link granted 2 credits once (as azure-servicebus grants its $management link
    10,000) still gets every answer; with the peer's incoming window shut, answers wait in
    order and leave when its flow opens the window again."""
    conn = opened()
    link = attached(conn, "mgmt-reply", 0, RECEIVER, "$management")
    conn.receive_data(frame(link_flow(0, 2, incoming_window=4)))
    for i in range(4):
        conn.send_owed(link, bytes([i]), f"answer {i}".encode(), settled=True)
    assert link.credit == 0 and link.delivery_count == 4
    assert [t[11] for t in frames_of(conn.data_to_send(), TRANSFER)] == [
        b"answer 0",
        b"answer 1",
        b"answer 2",
        b"answer 3",
    ]
    # the window is used up: owed answers wait, a credit-bound send is refused meanwhile
    conn.send_owed(link, b"\x04", b"answer 4", settled=True)
    conn.send_owed(link, b"\x05", b"answer 5", settled=True)
    assert frames_of(conn.data_to_send(), TRANSFER) == []
    assert not link.can_send
    session_flow = flow_frame(
        next_incoming_id=4, incoming_window=1, next_outgoing_id=0, outgoing_window=65536
    )
    conn.receive_data(frame(session_flow))
    assert [t[11] for t in frames_of(conn.data_to_send(), TRANSFER)] == [b"answer 4"]
    conn.receive_data(frame(session_flow._replace(next_incoming_id=5, incoming_window=10)))
    (answer,) = frames_of(conn.data_to_send(), TRANSFER)
    assert answer[1] == 5 and answer[11] == b"answer 5"  # delivery-ids stay in sequence
    # the peer's next link flow counts what was sent beyond its credit
    conn.receive_data(frame(link_flow(0, 3, delivery_count=6, next_incoming_id=6)))
    assert link.credit == 3 and link.can_send


def test_delivery_ids_and_windows_wrap_at_two_to_the_32() -> None:
    """Ids are serial numbers: a long-lived connection crosses 2**32 on both sides and goes on
    (incoming ids, outgoing ids, and a disposition range that spans the wrap)."""
    conn = opened()
    sender = attached(conn, "s", 0, SENDER, "amqps://h/q")
    receiver = attached(conn, "r", 1, RECEIVER, "amqps://h/q")
    conn.flow(sender, 10)
    conn.data_to_send()
    for i, delivery_id in enumerate((0xFFFFFFFE, 0xFFFFFFFF, 0, 1)):
        (event,) = conn.receive_data(frame(transfer(0, delivery_id, bytes([i]), b"m")))
        assert isinstance(event, TransferReceived) and event.delivery_id == delivery_id
    receiver.session.next_outgoing_id = 0xFFFFFFFF
    conn.receive_data(frame(link_flow(1, 5, next_incoming_id=0xFFFFFFFF)))
    ids = [conn.send_transfer(receiver, bytes([i]), b"x") for i in range(3)]
    assert ids == [0xFFFFFFFF, 0, 1]
    conn.data_to_send()
    (event,) = conn.receive_data(frame(disposition(RECEIVER, 0xFFFFFFFF, 1, True, PyAccepted())))
    assert sorted(d.delivery_id for d in event.deliveries) == [0, 1, 0xFFFFFFFF]
    assert receiver.session.unsettled == {}


def test_a_window_opened_by_another_links_flow_wakes_the_blocked_senders() -> None:
    conn = opened()
    first = attached(conn, "r1", 0, RECEIVER, "amqps://h/q1")
    second = attached(conn, "r2", 1, RECEIVER, "amqps://h/q2")
    conn.receive_data(frame(link_flow(0, 5, incoming_window=1)))
    conn.send_transfer(first, b"a", b"x", settled=True)  # the peer's window is used up
    assert not first.can_send
    conn.data_to_send()
    # a flow for the other link carries a fresh window: the first link may send again
    events = conn.receive_data(frame(link_flow(1, 3, next_incoming_id=1, incoming_window=10)))
    assert CreditChanged(first, 4, False) in events
    assert CreditChanged(second, 3, False) in events
    assert first.can_send and second.can_send


def test_transfer_without_credit_detaches_only_that_link() -> None:
    conn = opened()
    bad = attached(conn, "s1", 0, SENDER, "amqps://h/q")
    good = attached(conn, "s2", 1, SENDER, "amqps://h/q")
    conn.flow(good, 1)
    conn.data_to_send()
    (event,) = conn.receive_data(frame(transfer(0, 0, b"t", b"x")))
    assert isinstance(event, LinkDetached) and not event.by_peer
    assert event.link is bad and event.error.condition == "amqp:link:transfer-limit-exceeded"
    (detach,) = frames_of(conn.data_to_send(), DETACH)
    assert detach[0] == bad.output_handle and detach[1] is True
    assert detach[2][0] == b"amqp:link:transfer-limit-exceeded"
    (event,) = conn.receive_data(frame(transfer(1, 1, b"u", b"y")))
    assert isinstance(event, TransferReceived) and event.link is good
    # the peer's detach reply frees the handle silently
    assert conn.receive_data(frame(pf.DetachFrame(handle=0, closed=True, error=None))) == []
    assert 0 not in good.session.links and not conn.closed


def test_oversize_message_is_read_dropped_and_rejected_and_the_link_kept() -> None:
    conn = opened(max_partial_bytes=10_000)
    (event,) = conn.receive_data(frame(attach("s", 0, SENDER, "amqps://h/q")))
    link = event.link
    conn.attach_reply(link, max_message_size=1000)
    conn.flow(link, 5)
    conn.data_to_send()
    assert conn.receive_data(frame(transfer(0, 0, b"t", b"x" * 600, more=True))) == []
    # past max-message-size: the rest is read and dropped (it counts nothing against the
    # connection's budget), the delivery rejected at its end
    for _ in range(30):
        assert conn.receive_data(frame(transfer(0, None, None, b"x" * 600, more=True))) == []
    assert conn.receive_data(frame(transfer(0, None, None, b"x" * 600))) == []
    (disp,) = frames_of(conn.data_to_send(), DISPOSITION)
    assert disp[:4] == [RECEIVER, 0, 0, True]
    assert disp[4]["rejected"][0][0] == b"amqp:link:message-size-exceeded"
    # the link goes on: the next delivery is received as usual
    (event,) = conn.receive_data(frame(transfer(0, 1, b"u", b"small")))
    assert isinstance(event, TransferReceived) and event.payload == b"small"
    assert link.live and not conn.closed
    # a pre-settled oversize delivery is dropped without an answer
    assert conn.receive_data(frame(transfer(0, 2, b"v", b"x" * 1001, settled=True))) == []
    assert frames_of(conn.data_to_send(), DISPOSITION) == []


def test_links_past_the_connection_budget_close_only_that_connection() -> None:
    conn = opened(max_links=3)
    for handle in range(3):
        attached(conn, f"s{handle}", handle, SENDER, "amqps://h/q")
    assert closing_error(conn, frame(attach("s3", 3, SENDER, "amqps://h/q"))) == (
        "amqp:resource-limit-exceeded"
    )


def test_unfinished_deliveries_past_the_byte_budget_close_the_connection() -> None:
    """Many links each holding part of a delivery: their bytes count together."""
    conn = opened(max_partial_bytes=5000)
    links = [attached(conn, f"s{h}", h, SENDER, "amqps://h/q") for h in range(6)]
    for link in links:
        conn.flow(link, 5)
    conn.data_to_send()
    for h in range(4):  # 4 x 1200 bytes held: within the budget
        assert conn.receive_data(frame(transfer(h, h, b"t", b"x" * 1200, more=True))) == []
    # a finished delivery frees its bytes
    (event,) = conn.receive_data(frame(transfer(0, None, None, b"end")))
    assert isinstance(event, TransferReceived) and len(event.payload) == 1203
    assert conn.receive_data(frame(transfer(4, 4, b"t", b"x" * 1200, more=True))) == []
    assert closing_error(conn, frame(transfer(5, 5, b"t", b"x" * 1200, more=True))) == (
        "amqp:resource-limit-exceeded"
    )


def test_bytes_of_a_detached_link_no_longer_count() -> None:
    conn = opened(max_partial_bytes=3000)
    first = attached(conn, "s0", 0, SENDER, "amqps://h/q")
    second = attached(conn, "s1", 1, SENDER, "amqps://h/q")
    conn.flow(first, 5)
    conn.flow(second, 5)
    conn.data_to_send()
    assert conn.receive_data(frame(transfer(0, 0, b"t", b"x" * 2000, more=True))) == []
    conn.receive_data(frame(pf.DetachFrame(handle=0, closed=True, error=None)))
    assert conn.receive_data(frame(transfer(1, 1, b"t", b"x" * 2000, more=True))) == []
    assert not conn.closed


def test_unattached_handle_ends_the_session() -> None:
    conn = opened()
    (event,) = conn.receive_data(frame(transfer(9, 0, b"t", b"x")))
    assert isinstance(event, SessionEnded) and not event.by_peer
    assert event.error.condition == "amqp:session:unattached-handle"
    (end,) = frames_of(conn.data_to_send(), END)
    assert end[0][0] == b"amqp:session:unattached-handle"
    assert conn.receive_data(frame(transfer(9, 1, b"t", b"x"))) == []  # discarding
    assert conn.receive_data(frame(pf.EndFrame(error=None))) == []
    assert conn.sessions == {} and not conn.closed
    assert [type(e) for e in conn.receive_data(frame(BEGIN_FRAME))] == [SessionBegun]


def test_a_late_frame_for_a_refused_link_is_dropped_not_a_session_error() -> None:
    """azure-servicebus retries a receive on a link refused with com.microsoft:timeout and
    sends a flow for its handle after the detach; the session goes on. A handle never
    attached still ends the session."""
    conn = opened()
    (event,) = conn.receive_data(frame(attach("r", 3, RECEIVER, "amqps://h/sq")))
    conn.refuse_attach(event.link, p.Error(condition="com.microsoft:timeout"))
    conn.data_to_send()
    assert conn.receive_data(frame(pf.DetachFrame(handle=3, closed=True, error=None))) == []
    assert conn.receive_data(frame(link_flow(3, 100))) == []
    assert frames_of(conn.data_to_send(), END) == []
    assert len(conn.sessions) == 1 and not conn.closed
    # attached again under the same handle, it is a link like any other
    (again,) = conn.receive_data(frame(attach("r2", 3, RECEIVER, "amqps://h/sq")))
    assert isinstance(again, LinkAttached)
    (ended,) = conn.receive_data(frame(link_flow(7, 1)))
    assert isinstance(ended, SessionEnded)
    assert ended.error.condition == "amqp:session:unattached-handle"


def test_attach_on_a_used_handle_ends_the_session() -> None:
    conn = opened()
    attached(conn, "a", 0, SENDER, "amqps://h/q")
    (event,) = conn.receive_data(frame(attach("b", 0, SENDER, "amqps://h/q")))
    assert event.error.condition == "amqp:session:handle-in-use"


def test_refused_attach_attaches_then_detaches_with_the_error() -> None:
    conn = opened()
    (event,) = conn.receive_data(
        frame(
            attach("r", 0, RECEIVER, "amqps://h/q", filters={b"com.microsoft:session-filter": None})
        )
    )
    timeout = p.Error(condition="com.microsoft:timeout", description="no session", info=None)
    conn.refuse_attach(event.link, timeout)
    out = parse(conn.data_to_send())
    assert [o[0] for o in out] == [ATTACH, DETACH]
    assert out[0][2][5][0] == b"amqps://h/q"
    assert out[1][2][2][0] == b"com.microsoft:timeout"


def test_peer_detach_end_close_are_answered() -> None:
    conn = opened()
    link = attached(conn, "r", 0, RECEIVER, "amqps://h/q")
    conn.receive_data(frame(link_flow(0, 1)))
    conn.send_transfer(link, b"lock", b"x")
    conn.data_to_send()
    (event,) = conn.receive_data(frame(pf.DetachFrame(handle=0, closed=True, error=None)))
    assert isinstance(event, LinkDetached) and event.by_peer and event.closed
    assert [d.tag for d in event.unsettled] == [b"lock"]
    (detach,) = frames_of(conn.data_to_send(), DETACH)
    assert detach[:2] == [0, True]
    (event,) = conn.receive_data(frame(pf.EndFrame(error=None)))
    assert isinstance(event, SessionEnded) and event.by_peer
    assert frames_of(conn.data_to_send(), END)
    (event,) = conn.receive_data(frame(pf.CloseFrame(error=None)))
    assert isinstance(event, Closed) and event.by_peer
    assert frames_of(conn.data_to_send(), CLOSE) and conn.closed


# --------------------------------------------------------------------------- protocol errors


def closing_error(conn: Connection, data: bytes) -> str:
    events = conn.receive_data(data)
    assert isinstance(events[-1], Closed) and not events[-1].by_peer
    (close,) = frames_of(conn.data_to_send(), CLOSE)
    assert conn.closed
    assert conn.receive_data(frame(BEGIN_FRAME)) == []
    condition: bytes = close[0][0]
    assert condition.decode() == events[-1].error.condition
    return condition.decode()


def test_garbage_frame_body_closes_with_decode_error() -> None:
    conn = opened()
    body = b"\x00\x53\x11\xc0\xff\x09"  # begin with a list that runs past the frame
    bad = struct.pack(">IBBH", 8 + len(body), 2, 0, 0) + body
    assert closing_error(conn, bad) == "amqp:decode-error"


def test_oversize_frame_closes_with_framing_error() -> None:
    conn = opened(max_frame_size=1024)
    big = frame(transfer(0, 0, b"t", b"x" * 2000))
    assert closing_error(conn, big) == "amqp:connection:framing-error"


def test_frame_before_open_is_not_allowed_and_open_is_sent_first() -> None:
    conn = Connection("n")
    conn.receive_data(AMQP_HEADER)
    conn.data_to_send()
    events = conn.receive_data(frame(BEGIN_FRAME))
    assert events[0].error.condition == "amqp:not-allowed"
    out = parse(conn.data_to_send())
    assert [o[0] for o in out] == [OPEN, CLOSE]  # a close is always preceded by an open


def test_second_open_is_not_allowed() -> None:
    assert closing_error(opened(), frame(OPEN_FRAME)) == "amqp:not-allowed"


def test_channel_above_channel_max_is_a_framing_error() -> None:
    conn = opened(channel_max=3)
    assert closing_error(conn, frame(BEGIN_FRAME, channel=4)) == "amqp:connection:framing-error"


def test_frame_on_a_channel_without_session_closes() -> None:
    conn = opened()
    assert closing_error(conn, frame(attach("x", 0, SENDER, "q"), channel=7)) == "amqp:not-allowed"


def test_begin_on_a_channel_in_use_closes() -> None:
    assert closing_error(opened(), frame(BEGIN_FRAME)) == "amqp:not-allowed"


# --------------------------------------------------------------------------- time


def test_heartbeats_at_half_the_peer_idle_timeout() -> None:
    conn = Connection("n", now=100.0)
    conn.receive_data(AMQP_HEADER + frame(OPEN_FRAME._replace(idle_timeout=4000)), now=100.0)
    conn.data_to_send()
    assert conn.tick(101.0) == 102.0
    assert conn.data_to_send() == b""
    conn.tick(102.0)
    assert parse(conn.data_to_send()) == [("heartbeat", 0)]


def test_local_idle_timeout_closes_with_resource_limit_exceeded() -> None:
    conn = Connection("n", now=0.0, idle_timeout=10.0)
    conn.receive_data(AMQP_HEADER + frame(OPEN_FRAME), now=0.0)
    conn.data_to_send()
    assert conn.tick(5.0) == 10.0
    conn.receive_data(struct.pack(">IBBH", 8, 2, 0, 0), now=6.0)  # a heartbeat from the peer
    assert conn.tick(12.0) == 16.0
    conn.tick(16.0)
    (close,) = frames_of(conn.data_to_send(), CLOSE)
    assert close[0][0] == b"amqp:resource-limit-exceeded"
    assert conn.closed
    assert isinstance(conn.events()[-1], Closed)


def test_close_without_reply_times_out() -> None:
    conn = Connection("n", now=0.0, close_timeout=5.0)
    conn.receive_data(AMQP_HEADER + frame(OPEN_FRAME))
    conn.close(p.Error(condition="amqp:internal-error", description="stop", info=None))
    assert frames_of(conn.data_to_send(), CLOSE)
    assert not conn.closed
    assert conn.tick(3.0) == 5.0
    conn.tick(5.0)
    assert conn.closed


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(min_value=0, max_value=5000),
    max_frame_size=st.integers(min_value=512, max_value=2048),
    tag=st.binary(min_size=1, max_size=32),
)
def test_split_transfers_fit_and_join(size: int, max_frame_size: int, tag: bytes) -> None:
    conn = Connection("n")
    conn.receive_data(
        AMQP_HEADER + frame(OPEN_FRAME._replace(max_frame_size=max_frame_size)) + frame(BEGIN_FRAME)
    )
    link = attached(conn, "r", 0, RECEIVER, "amqps://h/q")
    conn.receive_data(frame(link_flow(0, 1)))
    payload = bytes(i % 251 for i in range(size))
    conn.send_transfer(link, tag, payload)
    data = conn.data_to_send()
    pos = 0
    while pos < len(data):
        frame_size = struct.unpack(">I", data[pos : pos + 4])[0]
        assert frame_size <= max_frame_size
        pos += frame_size
    transfers = frames_of(data, TRANSFER)
    assert b"".join(t[-1] for t in transfers) == payload
    assert [t[5] for t in transfers][-1] is False
    assert {(t[1], t[2]) for t in transfers} == {(0, tag)}
    # and the machine joins what it split (a peer built the same way)
    server = opened()
    rlink = attached(server, "s", 0, SENDER, "amqps://h/q")
    server.flow(rlink, 1)
    events = []
    for t in transfers:
        events += server.receive_data(frame(transfer(0, t[1], t[2], bytes(t[-1]), more=bool(t[5]))))
    assert [e.payload for e in events] == [payload]


def _conversation() -> list[bytes]:
    init = pf.SASLInit(mechanism=b"ANONYMOUS", initial_response=b"", hostname="localhost")
    return [
        SASL_HEADER,
        frame(init, sasl=True),
        AMQP_HEADER,
        frame(OPEN_FRAME),
        frame(BEGIN_FRAME),
        frame(attach("s", 0, SENDER, "amqps://h/q")),
        frame(attach("r", 1, RECEIVER, "amqps://h/q", rcv=1)),
        frame(link_flow(1, 10)),
        frame(transfer(0, 0, b"t", b"hello", message_format=BATCH_FORMAT, more=True)),
        frame(transfer(0, None, None, b" world")),
        frame(disposition(RECEIVER, 0, 3, False, PyAccepted())),
        frame(pf.DetachFrame(handle=1, closed=True, error=None)),
        frame(pf.EndFrame(error=None)),
        frame(pf.CloseFrame(error=None)),
    ]


STEPS = _conversation()
CONVERSATION = b"".join(STEPS)


def cut(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def serve(conn: Connection, chunks: list[bytes]) -> list[Any]:
    """Feed ``chunks`` one by one and answer like a server would; return every event."""
    events: list[Any] = []
    for chunk in chunks:
        todo = conn.receive_data(chunk)
        while todo:
            event = todo.pop(0)
            events.append(event)
            if isinstance(event, SaslInit):
                conn.accept_sasl()
                todo += conn.receive_data(b"")
            elif isinstance(event, LinkAttached):
                conn.attach_reply(event.link)
                if not event.link.is_sender:
                    conn.flow(event.link, 5)
            elif isinstance(event, CreditChanged) and event.link.can_send:
                conn.send_transfer(event.link, b"lock", b"payload")
            elif isinstance(event, TransferReceived) and not event.settled:
                conn.settle(event.link, event.delivery_id, p.Accepted())
        conn.data_to_send()
    return events


def test_the_conversation_step_by_step_and_split_anywhere() -> None:
    kinds = [type(e).__name__ for e in serve(Connection("n"), STEPS)]
    assert kinds == [
        "SaslInit",
        "Opened",
        "SessionBegun",
        "LinkAttached",
        "LinkAttached",
        "CreditChanged",
        "TransferReceived",
        "DispositionReceived",
        "LinkDetached",
        "SessionEnded",
        "Closed",
    ]
    for step, data in enumerate(STEPS):
        for at in range(1, len(data), 5):
            chunks = [*STEPS[:step], data[:at], data[at:], *STEPS[step + 1 :]]
            assert [type(e).__name__ for e in serve(Connection("n"), chunks)] == kinds


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, len(CONVERSATION) - 1), st.integers(0, 255)), max_size=4),
    st.lists(st.integers(0, len(CONVERSATION)), max_size=5),
    st.integers(0, len(CONVERSATION)),
)
def test_corrupted_input_never_raises(
    flips: list[tuple[int, int]], cuts: list[int], truncate: int
) -> None:
    data = bytearray(CONVERSATION[: max(truncate, 16)])
    for index, value in flips:
        if index < len(data):
            data[index] = value
    conn = Connection("n")
    events = serve(conn, cut(bytes(data), cuts))
    closing = [e for e in events if isinstance(e, Closed)]
    assert len(closing) <= 1
    if closing:
        assert conn.closed or conn.state.value == "close-sent"
        assert not closing[0].by_peer or closing[0].error is None


def test_half_open_connection_gives_up_after_the_handshake_timeout() -> None:
    conn = Connection("n", now=0.0, handshake_timeout=10.0)
    conn.receive_data(SASL_HEADER[:5], now=1.0)
    assert conn.tick(5.0) == 10.0
    assert conn.tick(10.0) is None
    assert conn.closed
    (event,) = conn.events()
    assert isinstance(event, Closed) and event.error.condition == "amqp:resource-limit-exceeded"
    assert conn.data_to_send() == b""  # nothing to say to a peer that never spoke AMQP
    # after the open the handshake timeout no longer applies
    opened_conn = Connection("n", now=0.0, handshake_timeout=10.0)
    opened_conn.receive_data(AMQP_HEADER + frame(OPEN_FRAME), now=1.0)
    assert opened_conn.tick(50.0) is None and not opened_conn.closed


def test_session_window_holds_sending_until_the_peer_opens_it() -> None:
    conn = Connection("n")
    small = BEGIN_FRAME._replace(incoming_window=2)
    conn.receive_data(AMQP_HEADER + frame(OPEN_FRAME) + frame(small))
    link = attached(conn, "r", 0, RECEIVER, "amqps://h/q")
    conn.receive_data(frame(link_flow(0, 10, incoming_window=2)))
    conn.send_transfer(link, b"1", b"x")
    conn.send_transfer(link, b"2", b"x")
    assert link.credit == 8 and not link.can_send
    session_flow = link_flow(0, 0)._replace(
        next_incoming_id=2, next_outgoing_id=0, handle=None, delivery_count=None, link_credit=None
    )
    (event,) = conn.receive_data(frame(session_flow._replace(incoming_window=5)))
    assert event == CreditChanged(link, 8, False)
    assert link.can_send


def test_peer_session_window_is_topped_up() -> None:
    conn = opened(incoming_window=4)
    link = attached(conn, "s", 0, SENDER, "amqps://h/q")
    conn.flow(link, 10)
    conn.data_to_send()
    for i in range(3):
        conn.receive_data(frame(transfer(0, i, b"%d" % i, b"x", settled=True)))
    flows = frames_of(conn.data_to_send(), FLOW)
    assert flows and flows[-1][4] is None  # a session flow
    assert flows[-1][0] == 3 and flows[-1][1] == 4  # next-incoming-id, incoming-window
