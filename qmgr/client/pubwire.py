"""A stream publisher's batch, encoded as the bytes of a ``PublishRequest`` while it fills.

The protobuf runtime builds a message object for every publication, sets its fields one call
at a time and walks them all again to serialize the request: about half of what publishing a
message cost the client. The usual publication (a bytes body, no retained mark, text
properties or none) is laid out here directly instead: everything in front of its body depends
only on the topic, the persistence, the body's length and the properties, so that header is
made once and kept, and a publication costs a lookup and three appended pieces. Anything else
(a text body, an :class:`OutgoingMessage`, a retained publication, properties of other kinds)
is made by the general path of :mod:`qmgr.client.convert` and serialized by the runtime. The
bytes are those the runtime makes of the same request (property map entries aside, which no
encoder orders the same way twice); the unit tests compare both.
"""

from __future__ import annotations

from qmgr.client import convert
from qmgr.client.types import OutgoingMessage
from qmgr.core.values import PropertyValue
from qmgr.wire import messages_pb2, messaging_pb2

CACHE_SIZE = 1024  # headers and property entries kept (each cache starts again when full)

# field keys (number << 3 | wire type) of the fields laid out here
_REQUEST_BATCH_ID = b"\x08"  # PublishRequest.batch_id, varint
_REQUEST_PUBLICATION = b"\x12"  # PublishRequest.publications, length-delimited
_PUBLICATION_TOPIC = b"\x0a"  # Publication.topic
_PUBLICATION_MESSAGE = b"\x12"  # Publication.message
_MESSAGE_BODY = b"\x12"  # Message.body
_MESSAGE_PROPERTY = b"\x1a"  # Message.properties (one map entry)
_ENTRY_KEY, _ENTRY_VALUE = b"\x0a", b"\x12"  # a map entry's key and value
_VALUE_STRING = b"\x0a"  # Value.string_value
_PRIORITY_DEFAULT = b"\x28" + b"\xff" * 9 + b"\x01"  # Message.priority = -1 (as DEFPRTY)
# what follows the body and properties: persistence (when given), then the priority
_TAILS = {
    None: _PRIORITY_DEFAULT,
    True: b"\x20" + bytes([messages_pb2.PERSISTENT]) + _PRIORITY_DEFAULT,
    False: b"\x20" + bytes([messages_pb2.NOT_PERSISTENT]) + _PRIORITY_DEFAULT,
}


def varint(n: int) -> bytes:
    """``n`` (not negative) as a protobuf varint."""
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(key: bytes, data: bytes) -> bytes:
    return key + varint(len(data)) + data


def _text_entry(key: str, value: str) -> bytes:
    """A property map entry with a text value, as a field of its message."""
    entry = _field(_ENTRY_KEY, key.encode()) + _field(
        _ENTRY_VALUE, _field(_VALUE_STRING, value.encode())
    )
    return _field(_MESSAGE_PROPERTY, entry)


class BatchEncoder:
    """The publications of one batch as wire bytes, and the request that carries them.

    :meth:`add` either appends a whole publication or raises, leaving the batch as it was
    (``ValueError`` for a property that cannot be carried, as the general path)."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        # (topic, persistent, body length, properties length) -> the bytes before the body
        self._headers: dict[tuple[str, bool | None, int, int], bytes] = {}
        self._entries: dict[tuple[str, str], bytes] = {}
        self._sets: dict[tuple[tuple[str, PropertyValue], ...], bytes | None] = {}

    def add(
        self,
        topic: str,
        body: bytes | str | OutgoingMessage,
        properties: dict[str, PropertyValue] | None,
        persistent: bool | None,
        retain: bool,
    ) -> None:
        props = self._properties(properties) if properties else b""
        if type(body) is not bytes or retain or props is None or type(topic) is not str:
            self._parts.append(_general(topic, body, properties, persistent, retain))
        else:
            key = (topic, persistent, len(body), len(props))
            header = self._headers.get(key)
            if header is None:
                header = self._header(*key)
            self._parts += (header, body, props + _TAILS[persistent])

    def _properties(self, properties: dict[str, PropertyValue]) -> bytes | None:
        """See :meth:`_text_properties`; an application's messages mostly carry the same
        properties, so what was made of the same (name, value) pairs is taken again."""
        pairs = tuple(properties.items())
        try:
            return self._sets[pairs]
        except KeyError:
            pass
        except TypeError:  # a value that cannot be hashed: not text
            return None
        props = self._text_properties(properties)
        if len(self._sets) >= CACHE_SIZE:
            self._sets.clear()
        self._sets[pairs] = props
        return props

    def _text_properties(self, properties: dict[str, PropertyValue]) -> bytes | None:
        """The map entries of properties that are all text under non-empty text names; None
        when one is not (the general path checks and encodes those)."""
        entries = self._entries
        out = b""
        for k, v in properties.items():
            if type(v) is not str:
                return None
            entry = entries.get((k, v))
            if entry is None:
                if not (type(k) is str and k):
                    return None
                entry = _text_entry(k, v)
                if len(entries) >= CACHE_SIZE:
                    entries.clear()
                entries[k, v] = entry
            out += entry
        return out

    def _header(self, topic: str, persistent: bool | None, size: int, props: int) -> bytes:
        """Everything of a publication in front of its body (see :meth:`add`)."""
        body = _MESSAGE_BODY + varint(size) if size else b""
        message = len(body) + size + props + len(_TAILS[persistent])
        front = (_field(_PUBLICATION_TOPIC, topic.encode()) if topic else b"") + (
            _PUBLICATION_MESSAGE + varint(message)
        )
        header = _REQUEST_PUBLICATION + varint(len(front) + message) + front + body
        if len(self._headers) >= CACHE_SIZE:
            self._headers.clear()
        self._headers[topic, persistent, size, props] = header
        return header

    def request(self, batch_id: int) -> bytes:
        """The ``PublishRequest`` of the publications added since the last call, with
        ``batch_id``; the batch is empty again afterwards."""
        parts, self._parts = self._parts, []
        if batch_id:
            parts.insert(0, _REQUEST_BATCH_ID + varint(batch_id))
        return b"".join(parts)


def _general(
    topic: str,
    body: bytes | str | OutgoingMessage,
    properties: dict[str, PropertyValue] | None,
    persistent: bool | None,
    retain: bool,
) -> bytes:
    """One publication the general way, as a field of its request."""
    out = messaging_pb2.Publication()
    convert.publication(topic, convert.outgoing(body, properties, persistent), retain, False, out)
    return _field(_REQUEST_PUBLICATION, out.SerializeToString())
