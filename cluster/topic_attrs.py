"""Topic object attributes: names, kinds, allowed values and SYSTEM.BASE.TOPIC defaults (pure).

Three kinds of attribute (reference docs/mq-semantics.md §3.2):

- ASPARENT-style (``INHERITED_ATTRS``): ``ASPARENT`` (the value when missing) means "take it from
  the closest administered node above".
- blank-inherits (``BLANK_INHERITED_ATTRS``: CLUSTER, COMMINFO, MDURMDL, MNDURMDL): a blank value
  (the value when missing) means the same as ASPARENT.
- explicit (``EXPLICIT_ATTRS``: CLROUTE, CUSTOM, PROXYSUB, WILDCARD): never inherited; a missing
  value means the SYSTEM.BASE.TOPIC default.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

ASPARENT = "ASPARENT"
NAME_MAX = 48
DESCR_MAX = 64
CUSTOM_MAX = 128
CAPEXPRY_MAX = 999_999_999

BASE_DEFAULTS: Mapping[str, str] = MappingProxyType(
    {
        "CAPEXPRY": "NOLIMIT",
        "CLROUTE": "DIRECT",
        "CLUSTER": "",
        "COMMINFO": "SYSTEM.DEFAULT.COMMINFO.MULTICAST",
        "CUSTOM": "",
        "DEFPRESP": "SYNC",
        "DEFPRTY": "0",
        "DEFPSIST": "NO",
        "DURSUB": "YES",
        "MCAST": "DISABLED",
        "MDURMDL": "SYSTEM.DURABLE.MODEL.QUEUE",
        "MNDURMDL": "SYSTEM.NDURABLE.MODEL.QUEUE",
        "NPMSGDLV": "ALLAVAIL",
        "PMSGDLV": "ALLDUR",
        "PROXYSUB": "FIRSTUSE",
        "PUB": "ENABLED",
        "PUBSCOPE": "ALL",
        "SUB": "ENABLED",
        "SUBSCOPE": "ALL",
        "USEDLQ": "YES",
        "WILDCARD": "PASSTHRU",
    }
)

TOPIC_ATTRS: frozenset[str] = frozenset(BASE_DEFAULTS)
"""Every key a TopicObject's ``attrs`` may hold (TOPICSTR and DESCR are separate fields)."""

INHERITED_ATTRS: frozenset[str] = frozenset(
    {
        "CAPEXPRY",
        "DEFPRESP",
        "DEFPRTY",
        "DEFPSIST",
        "DURSUB",
        "MCAST",
        "NPMSGDLV",
        "PMSGDLV",
        "PUB",
        "PUBSCOPE",
        "SUB",
        "SUBSCOPE",
        "USEDLQ",
    }
)
BLANK_INHERITED_ATTRS: frozenset[str] = frozenset({"CLUSTER", "COMMINFO", "MDURMDL", "MNDURMDL"})
EXPLICIT_ATTRS: frozenset[str] = frozenset({"CLROUTE", "CUSTOM", "PROXYSUB", "WILDCARD"})

_KEYWORDS: dict[str, frozenset[str]] = {
    "CLROUTE": frozenset({"DIRECT", "TOPICHOST"}),
    "DEFPRESP": frozenset({ASPARENT, "SYNC", "ASYNC"}),
    "DEFPSIST": frozenset({ASPARENT, "YES", "NO"}),
    "DURSUB": frozenset({ASPARENT, "YES", "NO"}),
    "MCAST": frozenset({ASPARENT, "ENABLED", "DISABLED", "ONLY"}),
    "NPMSGDLV": frozenset({ASPARENT, "ALL", "ALLAVAIL", "ALLDUR"}),
    "PMSGDLV": frozenset({ASPARENT, "ALL", "ALLAVAIL", "ALLDUR"}),
    "PROXYSUB": frozenset({"FIRSTUSE", "FORCE"}),
    "PUB": frozenset({ASPARENT, "ENABLED", "DISABLED"}),
    "PUBSCOPE": frozenset({ASPARENT, "QMGR", "ALL"}),
    "SUB": frozenset({ASPARENT, "ENABLED", "DISABLED"}),
    "SUBSCOPE": frozenset({ASPARENT, "QMGR", "ALL"}),
    "USEDLQ": frozenset({ASPARENT, "YES", "NO"}),
    "WILDCARD": frozenset({"PASSTHRU", "BLOCK"}),
}
_OBJECT_NAME = re.compile(r"[A-Za-z0-9._/%]+")


def valid_object_name(name: str) -> bool:
    """MQ object-name rule: 1-48 characters from A-Z a-z 0-9 . / _ %."""
    return 0 < len(name) <= NAME_MAX and _OBJECT_NAME.fullmatch(name) is not None


def check_attr(attr: str, value: str) -> str | None:
    """None if ``value`` is valid for ``attr``, else a message naming the problem."""
    if attr not in TOPIC_ATTRS:
        return f"unknown topic attribute {attr!r}"
    if not isinstance(value, str):
        return f"{attr} value must be a string, not {type(value).__name__}"
    allowed = _KEYWORDS.get(attr)
    if allowed is not None:
        if value not in allowed:
            return f"{attr}({value}) is not valid; expected one of {', '.join(sorted(allowed))}"
        return None
    if attr == "DEFPRTY":
        if value == ASPARENT or (value.isdigit() and len(value) == 1):
            return None
        return f"DEFPRTY({value}) is not valid; expected ASPARENT or 0-9"
    if attr == "CAPEXPRY":
        if value in (ASPARENT, "NOLIMIT"):
            return None
        if value.isdigit() and 1 <= int(value) <= CAPEXPRY_MAX:
            return None
        return f"CAPEXPRY({value}) is not valid; expected ASPARENT, NOLIMIT or 1-{CAPEXPRY_MAX}"
    if attr == "CUSTOM":
        if len(value) > CUSTOM_MAX:
            return f"CUSTOM is {len(value)} characters long; the maximum is {CUSTOM_MAX}"
        return None
    # CLUSTER, COMMINFO, MDURMDL, MNDURMDL: blank (inherit) or an object name.
    if value == "" or valid_object_name(value):
        return None
    return f"{attr}({value}) is not a valid name (1-{NAME_MAX} of A-Z a-z 0-9 . / _ %)"


def own_default(attr: str, is_base: bool) -> str:
    """The value an object has for ``attr`` when its ``attrs`` leave it out."""
    if is_base or attr in EXPLICIT_ATTRS:
        return BASE_DEFAULTS[attr]
    if attr in BLANK_INHERITED_ATTRS:
        return ""
    return ASPARENT


def inherits(attr: str, value: str) -> bool:
    """True if ``value`` for ``attr`` means "as parent" (ASPARENT, or blank where blank inherits)."""
    if attr in BLANK_INHERITED_ATTRS:
        return value == ""
    return value == ASPARENT
