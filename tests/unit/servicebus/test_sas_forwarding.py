"""Manage on an auto-forwarding destination (as Service Bus requires for chaining; Send or
Listen there is not enough): from the request's token or the supplementary one, each verified
like any token (signature, expiry, the key's entity, the claim)."""

from __future__ import annotations

import pytest

from qmgr.servicebus.sas import (
    DLQ_SUPPLEMENTARY_HEADER,
    FORWARDING_HEADERS,
    SUPPLEMENTARY_HEADER,
    DestinationRefused,
    Resource,
    Right,
    SasError,
    SasKeys,
    authorize_destination,
    parse_keys,
)
from tests.unit.servicebus.test_sas import NOW, token

BASE = "https://h:1"


def keys() -> SasKeys:
    return parse_keys(
        """{
          "root": {"key": "r00t", "rights": ["Manage"]},
          "orders-admin": {"key": "0rders", "rights": ["Manage"], "entity": "orders"},
          "invoices-admin": {"key": "1nv-m", "rights": ["Manage"], "entity": "invoices"},
          "invoices-sender": {"key": "1nv-s", "rights": ["Send"], "entity": "invoices"},
          "invoices-user": {"key": "1nv-u", "rights": ["Send", "Listen"], "entity": "invoices"},
          "invoices-listener": {"key": "1nv-l", "rights": ["Listen"], "entity": "invoices"}
        }"""
    )


KEY_TEXT = {
    "root": "r00t",
    "orders-admin": "0rders",
    "invoices-admin": "1nv-m",
    "invoices-sender": "1nv-s",
    "invoices-user": "1nv-u",
    "invoices-listener": "1nv-l",
}


def tok(resource: str, name: str, expiry: float = NOW + 3600, key: str | None = None) -> str:
    return token(resource, key=key or KEY_TEXT[name], name=name, expiry=expiry)


def authorize(
    main: str | None, supplementary: str | None, destination: str = "invoices", prop: str = ""
) -> str:
    """The key name of the grant, or the refusal's text."""
    try:
        grant = authorize_destination(
            keys(), prop or "ForwardTo", destination, BASE, main, supplementary, NOW
        )
    except DestinationRefused as exc:
        return f"refused: {exc}"
    assert grant.rights & Right.MANAGE
    return grant.key_name


MAIN = tok("sb://h:1/orders", "orders-admin")


def test_the_headers_of_each_property() -> None:
    assert FORWARDING_HEADERS == {
        "ForwardTo": "ServiceBusSupplementaryAuthorization",
        "ForwardDeadLetteredMessagesTo": "ServiceBusDlqSupplementaryAuthorization",
    }
    assert tuple(FORWARDING_HEADERS.values()) == (SUPPLEMENTARY_HEADER, DLQ_SUPPLEMENTARY_HEADER)
    assert issubclass(DestinationRefused, SasError)


def test_the_main_token_may_grant_manage_on_the_destination() -> None:
    assert authorize(tok("https://h:1", "root"), None) == "root"  # namespace-wide
    assert authorize(MAIN, None, "orders/archive") == "orders-admin"  # under its entity
    assert authorize(MAIN, None, "Orders/Archive") == "orders-admin"  # names ignore case


def test_else_the_supplementary_token_must() -> None:
    assert authorize(MAIN, tok("sb://h:1/invoices", "invoices-admin")) == "invoices-admin"
    assert authorize(None, tok("sb://h:1/invoices", "invoices-admin")) == "invoices-admin"
    assert authorize(MAIN, tok("sb://h:1/", "root")) == "root"


@pytest.mark.parametrize(
    ("name", "rights"),
    [
        ("invoices-sender", "Send"),
        ("invoices-user", "Send, Listen"),
        ("invoices-listener", "Listen"),
    ],
)
def test_send_or_listen_on_the_destination_is_not_manage(name: str, rights: str) -> None:
    text = authorize(MAIN, tok("sb://h:1/invoices", name))
    assert text.startswith("refused: ForwardTo 'invoices' needs 'Manage' on 'invoices'")
    assert (
        f"'Manage' claim(s) are required to perform this operation; key '{name}' has {rights}"
        in text
    )
    # nor is the request's own token enough, from a key without Manage there
    assert authorize(tok("sb://h:1/invoices", name), None).startswith("refused: ")


@pytest.mark.parametrize(
    ("supplementary", "why"),
    [
        (None, f"{SUPPLEMENTARY_HEADER}: none was sent"),
        ("", f"{SUPPLEMENTARY_HEADER}: none was sent"),
        ("Bearer abc", "not a SharedAccessSignature"),
        (tok("sb://h:1/invoices", "invoices-admin", key="wrong"), "signature does not match"),
        (tok("sb://h:1/invoices", "invoices-admin", expiry=NOW - 1), "expired"),
        (tok("sb://h:1/invoices", "orders-admin"), "is defined on 'orders'"),
        (tok("sb://h:1/orders", "invoices-admin"), "is defined on 'invoices'"),
        (tok("sb://h:1/invoices", "invoices-sender"), "'Manage' claim(s) are required"),
        (tok("sb://h:1/invoices", "invoices-listener"), "'Manage' claim(s) are required"),
        (tok("sb://other:1/invoices", "invoices-admin"), "does not cover"),
        (tok("sb://h:1/invoices-old", "root"), "does not cover"),
    ],
)
def test_refusals_name_the_destination_and_why(supplementary: str | None, why: str) -> None:
    text = authorize(MAIN, supplementary)
    assert text.startswith("refused: ForwardTo 'invoices' needs 'Manage' on 'invoices'")
    assert "Authorization: the token is for 'sb://h:1/orders'" in text
    assert why in text


def test_the_dead_letter_destination_names_its_header() -> None:
    text = authorize(MAIN, None, prop="ForwardDeadLetteredMessagesTo")
    assert text.startswith("refused: ForwardDeadLetteredMessagesTo 'invoices'")
    assert f"{DLQ_SUPPLEMENTARY_HEADER}: none was sent" in text
    assert authorize(None, None).endswith(
        f"(Authorization: none was sent; {SUPPLEMENTARY_HEADER}: none was sent)"
    )


def test_an_escaped_slash_separates_segments() -> None:
    # the admin client sends queue 'orders/plain' as /orders%2Fplain; the API resolves the
    # same name, so a token for 'orders' covers it
    assert Resource.parse("https://h:1/orders%2Fplain").path == ("orders", "plain")
    assert Resource.parse("sb://h:1/orders").covers(Resource.parse("https://h:1/orders%2Fplain"))
    grant = keys().verify(MAIN, "https://h:1/orders%2Fplain", NOW)
    assert grant.key_name == "orders-admin"
    outside = Resource.parse("https://h:1/invoices%2Forders")
    assert not Resource.parse("sb://h:1/orders").covers(outside)
