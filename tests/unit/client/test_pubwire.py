"""A stream publisher's batch encoded as it fills (``pubwire.BatchEncoder``) must give the
request the protobuf runtime makes of the same publications: the same bytes where the runtime's
are defined (no property map, or one entry), the same message otherwise, whatever mix of
direct and general publications, topics, bodies and batch ids."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qmgr.client import convert, pubwire
from qmgr.client.types import OutgoingMessage
from qmgr.core.values import PropertyValue
from qmgr.wire import messaging_pb2
from tests.unit.client.test_convert import properties

Publication = tuple[
    str, bytes | str | OutgoingMessage, dict[str, PropertyValue] | None, bool | None, bool
]

text_properties = st.dictionaries(
    st.text(min_size=1, max_size=12), st.text(max_size=300), max_size=4
)
publications = st.lists(
    st.tuples(
        st.sampled_from(["", "a/b", "prices/ü", "t" * 200]) | st.text(max_size=20),
        st.binary(max_size=300) | st.text(max_size=20),
        st.none() | text_properties | properties,
        st.none() | st.booleans(),
        st.booleans(),
    ),
    max_size=8,
)


def runtime_request(batch_id: int, pubs: list[Publication]) -> messaging_pb2.PublishRequest:
    request = messaging_pb2.PublishRequest(batch_id=batch_id)
    for topic, body, props, persistent, retain in pubs:
        message = convert.outgoing(body, props, persistent)
        convert.publication(topic, message, retain, False, request.publications.add())
    return request


@settings(max_examples=300, deadline=None)
@given(batches=st.lists(st.tuples(st.integers(0, 2**64 - 1), publications), max_size=3))
def test_a_batch_encodes_as_the_runtime_does(batches: list[tuple[int, list[Publication]]]) -> None:
    encoder = pubwire.BatchEncoder()  # one encoder for every batch: its caches carry over
    for batch_id, pubs in batches:
        for topic, body, props, persistent, retain in pubs:
            encoder.add(topic, body, props, persistent, retain)
        encoded = encoder.request(batch_id)
        expected = runtime_request(batch_id, pubs)
        assert messaging_pb2.PublishRequest.FromString(encoded) == expected
        if all(len(props or ()) <= 1 for _, _, props, _, _ in pubs):
            assert encoded == expected.SerializeToString()


def test_the_caches_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pubwire, "CACHE_SIZE", 4)
    encoder = pubwire.BatchEncoder()
    pubs: list[Publication] = [(f"t/{i}", b"x" * i, {"n": str(i)}, None, False) for i in range(40)]
    for pub in pubs:
        encoder.add(*pub)
        assert max(len(encoder._headers), len(encoder._entries), len(encoder._sets)) <= 4
    assert encoder.request(1) == runtime_request(1, pubs).SerializeToString()


def test_varint() -> None:
    assert pubwire.varint(0) == b"\x00"
    for n in (1, 127, 128, 300, 2**32, 2**64 - 1):
        field = messaging_pb2.PublishRequest(batch_id=n).SerializeToString()
        assert pubwire.varint(n) == field[1:]
