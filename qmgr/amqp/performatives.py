"""AMQP 1.0 performatives, SASL frames, link terminus, errors and delivery states as dataclasses.

Field names are the specification's in snake_case, in the specification's order, with its
defaults. ``encode_described(p)`` always writes **every** field, trailing nulls included: clients
that read fields by position (azure-servicebus <= 7.14) crash on trimmed lists, and nothing
requires trimming. ``decode_described(value)`` turns a decoded ``Described`` into the dataclass
(unknown descriptors stay ``Described``), filling absent and null fields with the defaults and
refusing fields of the wrong type with ``DecodeError``.

Why by hand: see ``qmgr.amqp`` (Proton trims trailing fields and hides ``message-format``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from qmgr.amqp.types import (
    Array,
    DecodeError,
    Described,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
)

# Settle modes (Attach snd-settle-mode / rcv-settle-mode).
SND_UNSETTLED, SND_SETTLED, SND_MIXED = 0, 1, 2
RCV_FIRST, RCV_SECOND = 0, 1
# Link roles (Attach.role, Disposition.role).
SENDER, RECEIVER = False, True
# SASL outcome codes.
SASL_OK, SASL_AUTH, SASL_SYS, SASL_SYS_PERM, SASL_SYS_TEMP = 0, 1, 2, 3, 4

UINT_MAX = 0xFFFFFFFF


class Kind:
    """How one field is written (``enc``: Python value → typed AMQP value) and checked on read."""

    __slots__ = ("name", "enc", "dec")

    def __init__(self, name: str, enc: Callable[[Any], Any], dec: Callable[[Any], Any]) -> None:
        self.name = name
        self.enc = enc
        self.dec = dec


def _typed(cls: type, *accept: type) -> Kind:
    ok = accept or (cls,)

    def dec(v: Any) -> Any:
        if not isinstance(v, ok) or isinstance(v, bool) and bool not in ok:
            raise DecodeError(f"expected {cls.__name__}, got {type(v).__name__}")
        return cls(v)

    return Kind(cls.__name__, cls, dec)


def _ident_checked(name: str, *accept: type) -> Kind:
    def dec(v: Any) -> Any:
        if not isinstance(v, accept):
            raise DecodeError(f"expected {name}, got {type(v).__name__}")
        return v

    return Kind(name, lambda v: v, dec)


def _enc_symbols(v: Any) -> Any:
    if isinstance(v, str):
        return Symbol(v)
    return Array([Symbol(s) for s in v], Symbol)


def _dec_symbols(v: Any) -> list[Symbol]:
    if isinstance(v, Symbol):
        return [v]
    if isinstance(v, list) and all(isinstance(s, Symbol) for s in v):
        return [Symbol(s) for s in v]
    raise DecodeError("expected a symbol or an array of symbols")


def _enc_fields(v: dict[Any, Any]) -> dict[Any, Any]:
    return {Symbol(k) if isinstance(k, str) else k: val for k, val in v.items()}


def _dec_map(v: Any) -> Any:
    if not isinstance(v, dict):
        raise DecodeError(f"expected a map, got {type(v).__name__}")
    return v


def _enc_composite(v: Any) -> Any:
    return encode_described(v) if isinstance(v, Composite) else v


def _dec_composite(v: Any) -> Any:
    return decode_described(v) if isinstance(v, Described) else v


UINT = _typed(UInt, int)
USHORT = _typed(UShort, int)
UBYTE = _typed(UByte, int)
ULONG = _typed(ULong, int)
BOOL = _ident_checked("boolean", bool)
STRING = _ident_checked("string", str)
BINARY = _ident_checked("binary", bytes)
SYMBOL = _typed(Symbol, str)
SYMBOLS = Kind("symbol multiple", _enc_symbols, _dec_symbols)
FIELDS = Kind("fields", _enc_fields, _dec_map)
MAP = Kind("map", lambda v: v, _dec_map)
ANY = Kind("*", _enc_composite, _dec_composite)
TIMESTAMP = _typed(Timestamp, int)
MESSAGE_ID = Kind(
    "message-id",  # string, uuid, binary or ulong (a plain int is a message-id-ulong)
    lambda v: ULong(v) if type(v) is int else v,
    _ident_checked("message-id", str, bytes, uuid.UUID, ULong).dec,
)


class Composite:
    """Base of every described list type here: ``DESCRIPTOR`` code, ``FIELDS`` kinds in order."""

    DESCRIPTOR: ClassVar[int]
    NAME: ClassVar[str]
    KINDS: ClassVar[tuple[Kind, ...]]
    MANDATORY: ClassVar[frozenset[str]] = frozenset()


# --- terminus, errors, delivery states ------------------------------------------------------


@dataclass(slots=True)
class Error(Composite):
    DESCRIPTOR: ClassVar[int] = 0x1D
    MANDATORY: ClassVar[frozenset[str]] = frozenset({"condition"})
    NAME: ClassVar[str] = "amqp:error:list"
    KINDS: ClassVar[tuple[Kind, ...]] = (SYMBOL, STRING, FIELDS)
    condition: str = ""
    description: str | None = None
    info: dict[Any, Any] | None = None


@dataclass(slots=True)
class Source(Composite):
    DESCRIPTOR: ClassVar[int] = 0x28
    NAME: ClassVar[str] = "amqp:source:list"
    KINDS: ClassVar[tuple[Kind, ...]] = (
        ANY,
        UINT,
        SYMBOL,
        UINT,
        BOOL,
        FIELDS,
        SYMBOL,
        MAP,
        ANY,
        SYMBOLS,
        SYMBOLS,
    )
    address: Any = None
    durable: int = 0
    expiry_policy: str = "session-end"
    timeout: int = 0
    dynamic: bool = False
    dynamic_node_properties: dict[Any, Any] | None = None
    distribution_mode: str | None = None
    filter: dict[Any, Any] | None = None
    default_outcome: Any = None
    outcomes: list[Symbol] | None = None
    capabilities: list[Symbol] | None = None


@dataclass(slots=True)
class Target(Composite):
    DESCRIPTOR: ClassVar[int] = 0x29
    NAME: ClassVar[str] = "amqp:target:list"
    KINDS: ClassVar[tuple[Kind, ...]] = (ANY, UINT, SYMBOL, UINT, BOOL, FIELDS, SYMBOLS)
    address: Any = None
    durable: int = 0
    expiry_policy: str = "session-end"
    timeout: int = 0
    dynamic: bool = False
    dynamic_node_properties: dict[Any, Any] | None = None
    capabilities: list[Symbol] | None = None


@dataclass(slots=True)
class Received(Composite):
    DESCRIPTOR: ClassVar[int] = 0x23
    MANDATORY: ClassVar[frozenset[str]] = frozenset({"section_number", "section_offset"})
    NAME: ClassVar[str] = "amqp:received:list"
    KINDS: ClassVar[tuple[Kind, ...]] = (UINT, ULONG)
    section_number: int = 0
    section_offset: int = 0


@dataclass(slots=True)
class Accepted(Composite):
    DESCRIPTOR: ClassVar[int] = 0x24
    NAME: ClassVar[str] = "amqp:accepted:list"
    KINDS: ClassVar[tuple[Kind, ...]] = ()


@dataclass(slots=True)
class Rejected(Composite):
    DESCRIPTOR: ClassVar[int] = 0x25
    NAME: ClassVar[str] = "amqp:rejected:list"
    KINDS: ClassVar[tuple[Kind, ...]] = (ANY,)
    error: Error | None = None


@dataclass(slots=True)
class Released(Composite):
    DESCRIPTOR: ClassVar[int] = 0x26
    NAME: ClassVar[str] = "amqp:released:list"
    KINDS: ClassVar[tuple[Kind, ...]] = ()


@dataclass(slots=True)
class Modified(Composite):
    DESCRIPTOR: ClassVar[int] = 0x27
    NAME: ClassVar[str] = "amqp:modified:list"
    KINDS: ClassVar[tuple[Kind, ...]] = (BOOL, BOOL, FIELDS)
    delivery_failed: bool = False
    undeliverable_here: bool = False
    message_annotations: dict[Any, Any] | None = None


Outcome = Accepted | Rejected | Released | Modified
DeliveryState = Outcome | Received


# --- performatives --------------------------------------------------------------------------


@dataclass(slots=True)
class Open(Composite):
    DESCRIPTOR: ClassVar[int] = 0x10
    MANDATORY: ClassVar[frozenset[str]] = frozenset({"container_id"})
    NAME: ClassVar[str] = "amqp:open:list"
    KINDS: ClassVar[tuple[Kind, ...]] = (
        STRING,
        STRING,
        UINT,
        USHORT,
        UINT,
        SYMBOLS,
        SYMBOLS,
        SYMBOLS,
        SYMBOLS,
        FIELDS,
    )
    container_id: str = ""
    hostname: str | None = None
    max_frame_size: int = UINT_MAX
    channel_max: int = 0xFFFF
    idle_time_out: int | None = None
    outgoing_locales: list[Symbol] | None = None
    incoming_locales: list[Symbol] | None = None
    offered_capabilities: list[Symbol] | None = None
    desired_capabilities: list[Symbol] | None = None
    properties: dict[Any, Any] | None = None


@dataclass(slots=True)
class Begin(Composite):
    DESCRIPTOR: ClassVar[int] = 0x11
    MANDATORY: ClassVar[frozenset[str]] = frozenset(
        {"next_outgoing_id", "incoming_window", "outgoing_window"}
    )
    NAME: ClassVar[str] = "amqp:begin:list"
    KINDS: ClassVar[tuple[Kind, ...]] = (USHORT, UINT, UINT, UINT, UINT, SYMBOLS, SYMBOLS, FIELDS)
    remote_channel: int | None = None
    next_outgoing_id: int = 0
    incoming_window: int = 0
    outgoing_window: int = 0
    handle_max: int = UINT_MAX
    offered_capabilities: list[Symbol] | None = None
    desired_capabilities: list[Symbol] | None = None
    properties: dict[Any, Any] | None = None


@dataclass(slots=True)
class Attach(Composite):
    DESCRIPTOR: ClassVar[int] = 0x12
    MANDATORY: ClassVar[frozenset[str]] = frozenset({"name", "handle", "role"})
    NAME: ClassVar[str] = "amqp:attach:list"
    KINDS: ClassVar[tuple[Kind, ...]] = (
        STRING, UINT, BOOL, UBYTE, UBYTE, ANY, ANY, MAP, BOOL, UINT, ULONG, SYMBOLS, SYMBOLS, FIELDS,
    )  # fmt: skip
    name: str = ""
    handle: int = 0
    role: bool = SENDER
    snd_settle_mode: int = SND_MIXED
    rcv_settle_mode: int = RCV_FIRST
    source: Source | None = None
    target: Target | None = None
    unsettled: dict[Any, Any] | None = None
    incomplete_unsettled: bool = False
    initial_delivery_count: int | None = None
    max_message_size: int | None = None
    offered_capabilities: list[Symbol] | None = None
    desired_capabilities: list[Symbol] | None = None
    properties: dict[Any, Any] | None = None


@dataclass(slots=True)
class Flow(Composite):
    DESCRIPTOR: ClassVar[int] = 0x13
    MANDATORY: ClassVar[frozenset[str]] = frozenset(
        {"incoming_window", "next_outgoing_id", "outgoing_window"}
    )
    NAME: ClassVar[str] = "amqp:flow:list"
    KINDS: ClassVar[tuple[Kind, ...]] = (
        UINT,
        UINT,
        UINT,
        UINT,
        UINT,
        UINT,
        UINT,
        UINT,
        BOOL,
        BOOL,
        FIELDS,
    )
    next_incoming_id: int | None = None
    incoming_window: int = 0
    next_outgoing_id: int = 0
    outgoing_window: int = 0
    handle: int | None = None
    delivery_count: int | None = None
    link_credit: int | None = None
    available: int | None = None
    drain: bool = False
    echo: bool = False
    properties: dict[Any, Any] | None = None


@dataclass(slots=True)
class Transfer(Composite):
    DESCRIPTOR: ClassVar[int] = 0x14
    MANDATORY: ClassVar[frozenset[str]] = frozenset({"handle"})
    NAME: ClassVar[str] = "amqp:transfer:list"
    KINDS: ClassVar[tuple[Kind, ...]] = (
        UINT,
        UINT,
        BINARY,
        UINT,
        BOOL,
        BOOL,
        UBYTE,
        ANY,
        BOOL,
        BOOL,
        BOOL,
    )
    handle: int = 0
    delivery_id: int | None = None
    delivery_tag: bytes | None = None
    message_format: int | None = None
    settled: bool | None = None
    more: bool = False
    rcv_settle_mode: int | None = None
    state: Any = None
    resume: bool = False
    aborted: bool = False
    batchable: bool = False


@dataclass(slots=True)
class Disposition(Composite):
    DESCRIPTOR: ClassVar[int] = 0x15
    MANDATORY: ClassVar[frozenset[str]] = frozenset({"role", "first"})
    NAME: ClassVar[str] = "amqp:disposition:list"
    KINDS: ClassVar[tuple[Kind, ...]] = (BOOL, UINT, UINT, BOOL, ANY, BOOL)
    role: bool = RECEIVER
    first: int = 0
    last: int | None = None
    settled: bool = False
    state: Any = None
    batchable: bool = False


@dataclass(slots=True)
class Detach(Composite):
    DESCRIPTOR: ClassVar[int] = 0x16
    MANDATORY: ClassVar[frozenset[str]] = frozenset({"handle"})
    NAME: ClassVar[str] = "amqp:detach:list"
    KINDS: ClassVar[tuple[Kind, ...]] = (UINT, BOOL, ANY)
    handle: int = 0
    closed: bool = False
    error: Error | None = None


@dataclass(slots=True)
class End(Composite):
    DESCRIPTOR: ClassVar[int] = 0x17
    NAME: ClassVar[str] = "amqp:end:list"
    KINDS: ClassVar[tuple[Kind, ...]] = (ANY,)
    error: Error | None = None


@dataclass(slots=True)
class Close(Composite):
    DESCRIPTOR: ClassVar[int] = 0x18
    NAME: ClassVar[str] = "amqp:close:list"
    KINDS: ClassVar[tuple[Kind, ...]] = (ANY,)
    error: Error | None = None


# --- SASL -----------------------------------------------------------------------------------


@dataclass(slots=True)
class SaslMechanisms(Composite):
    DESCRIPTOR: ClassVar[int] = 0x40
    MANDATORY: ClassVar[frozenset[str]] = frozenset({"sasl_server_mechanisms"})
    NAME: ClassVar[str] = "amqp:sasl-mechanisms:list"
    KINDS: ClassVar[tuple[Kind, ...]] = (SYMBOLS,)
    sasl_server_mechanisms: list[Symbol] = field(default_factory=list)


@dataclass(slots=True)
class SaslInit(Composite):
    DESCRIPTOR: ClassVar[int] = 0x41
    MANDATORY: ClassVar[frozenset[str]] = frozenset({"mechanism"})
    NAME: ClassVar[str] = "amqp:sasl-init:list"
    KINDS: ClassVar[tuple[Kind, ...]] = (SYMBOL, BINARY, STRING)
    mechanism: str = ""
    initial_response: bytes | None = None
    hostname: str | None = None


@dataclass(slots=True)
class SaslChallenge(Composite):
    DESCRIPTOR: ClassVar[int] = 0x42
    MANDATORY: ClassVar[frozenset[str]] = frozenset({"challenge"})
    NAME: ClassVar[str] = "amqp:sasl-challenge:list"
    KINDS: ClassVar[tuple[Kind, ...]] = (BINARY,)
    challenge: bytes = b""


@dataclass(slots=True)
class SaslResponse(Composite):
    DESCRIPTOR: ClassVar[int] = 0x43
    MANDATORY: ClassVar[frozenset[str]] = frozenset({"response"})
    NAME: ClassVar[str] = "amqp:sasl-response:list"
    KINDS: ClassVar[tuple[Kind, ...]] = (BINARY,)
    response: bytes = b""


@dataclass(slots=True)
class SaslOutcome(Composite):
    DESCRIPTOR: ClassVar[int] = 0x44
    MANDATORY: ClassVar[frozenset[str]] = frozenset({"code"})
    NAME: ClassVar[str] = "amqp:sasl-outcome:list"
    KINDS: ClassVar[tuple[Kind, ...]] = (UBYTE, BINARY)
    code: int = SASL_OK
    additional_data: bytes | None = None


Performative = Open | Begin | Attach | Flow | Transfer | Disposition | Detach | End | Close
SaslFrame = SaslMechanisms | SaslInit | SaslChallenge | SaslResponse | SaslOutcome

_ALL: tuple[type[Composite], ...] = (
    Error, Source, Target, Received, Accepted, Rejected, Released, Modified,
    Open, Begin, Attach, Flow, Transfer, Disposition, Detach, End, Close,
    SaslMechanisms, SaslInit, SaslChallenge, SaslResponse, SaslOutcome,
)  # fmt: skip
BY_CODE: dict[int, type[Composite]] = {c.DESCRIPTOR: c for c in _ALL}
BY_NAME: dict[str, type[Composite]] = {c.NAME: c for c in _ALL}
PERFORMATIVES = frozenset(c for c in _ALL if 0x10 <= c.DESCRIPTOR <= 0x18)
SASL_FRAMES = frozenset(c for c in _ALL if 0x40 <= c.DESCRIPTOR <= 0x44)
_FIELD_NAMES: dict[type[Composite], tuple[str, ...]] = {}


def field_names(cls: type[Composite]) -> tuple[str, ...]:
    """The dataclass field names of ``cls``, in the specification's order."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = tuple(f.name for f in fields(cls))  # type: ignore[arg-type]
        if len(names) != len(cls.KINDS):
            raise TypeError(f"{cls.__name__}: {len(names)} fields, {len(cls.KINDS)} kinds")
        _FIELD_NAMES[cls] = names
    return names


def encode_described(value: Composite) -> Described:
    """The described list of ``value`` with every field written (nulls included)."""
    cls = type(value)
    items = []
    for name, kind in zip(field_names(cls), cls.KINDS, strict=True):
        v = getattr(value, name)
        items.append(None if v is None else kind.enc(v))
    return Described(ULong(cls.DESCRIPTOR), items)


def decode_described(value: Described) -> Any:
    """The dataclass for a known descriptor (code or symbolic name); other values unchanged."""
    d = value.descriptor
    cls = BY_CODE.get(d) if isinstance(d, ULong) else BY_NAME.get(d)
    if cls is None:
        return value
    return decode_as(cls, value)


def decode_as(cls: type[Composite], value: Described) -> Any:
    """``value``'s list read as the fields of ``cls`` (the descriptor is not checked)."""
    items = value.value
    if not isinstance(items, list):
        raise DecodeError(f"{cls.__name__} is a list, got {type(items).__name__}")
    names = field_names(cls)
    if len(items) > len(names):
        # Fields a later version may add: ignored, as the spec's extension rules allow.
        items = items[: len(names)]
    kwargs = {}
    for name, kind, v in zip(names, cls.KINDS, items, strict=False):
        if v is not None:
            try:
                kwargs[name] = kind.dec(v)
            except DecodeError as e:
                raise DecodeError(f"{cls.__name__}.{name}: {e}") from e
            except (ValueError, TypeError) as e:
                raise DecodeError(f"{cls.__name__}.{name}: {e}") from e
    missing = cls.MANDATORY.difference(kwargs)
    if missing:
        raise DecodeError(f"{cls.__name__} without its mandatory {', '.join(sorted(missing))}")
    return cls(**kwargs)
