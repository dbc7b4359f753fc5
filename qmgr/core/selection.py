"""Message selection for subscriptions (DEFINE SUB SELECTOR): which publications a subscription
receives, by the selector's SQL92 condition on their properties and JMS header fields.

The selector language is `qmgr.filters.selector` (README "MQ selectors"). A subscription with a
selector receives a publication only when the selector is TRUE for it: UNKNOWN (a missing
property), an evaluation error, or a stored selector that no longer parses select nothing, as in
JMS. Proxy subscriptions carry no selector; the selector is applied on the queue manager that
holds the subscription.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from qmgr.core.errors import MQError
from qmgr.core.message import Message
from qmgr.filters import FilterSyntaxError
from qmgr.filters.selector import Selector, compile_selector


def parse(text: str) -> Selector:
    """The compiled selector, or MQError MQRC_SELECTOR_SYNTAX_ERROR with the position."""
    try:
        return compile_selector(text)
    except FilterSyntaxError as exc:
        raise MQError("MQRC_SELECTOR_SYNTAX_ERROR", f"SELECTOR is not valid: {exc}") from None


def header_fields(msg: Message) -> dict[str, Any]:
    """The JMS header fields of a publication, as JMS/MQ selectors name them."""
    return {
        "JMSPriority": msg.priority,
        "JMSDeliveryMode": "PERSISTENT" if msg.persistent else "NON_PERSISTENT",
        "JMSMessageID": f"ID:{msg.message_id.lower()}",
        "JMSCorrelationID": f"ID:{msg.correl_id.hex()}" if msg.correl_id else None,
        "JMSTimestamp": round(msg.put_time * 1000),
        "JMSExpiration": round(msg.expiry * 1000) if msg.expiry else 0,
    }


@lru_cache(maxsize=1024)
def _compiled(text: str) -> Selector | None:
    """The compiled selector, or None for a stored selector that does not parse (remembered,
    so it is not parsed again for every publication)."""
    try:
        return compile_selector(text)
    except FilterSyntaxError:
        return None


def selects(selector_text: str, msg: Message) -> bool:
    """True if a subscription with this SELECTOR (empty: none) receives ``msg``."""
    if not selector_text:
        return True
    selector = _compiled(selector_text)
    if selector is None:
        return False
    fields = header_fields(msg) if selector.header_fields else {}
    return selector.matches(msg.properties, fields)


def seltype(selector_text: str) -> str:
    """DISPLAY SUB SELTYPE: STANDARD when there is a selector, NONE otherwise."""
    return "STANDARD" if selector_text else "NONE"
