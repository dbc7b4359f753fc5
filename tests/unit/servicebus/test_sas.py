"""SAS tokens: parsing, HMAC-SHA256 verification against known vectors (computed here with
hmac, independently of the module), expiry, scope and rights, and the keys file."""

from __future__ import annotations

import base64
import hashlib
import hmac
from pathlib import Path
from urllib.parse import quote_plus, urlencode

import pytest

from qmgr.node.config import ConfigError, read_keys_file
from qmgr.servicebus.sas import (
    Claims,
    InvalidSignature,
    KeysFileError,
    MalformedToken,
    MissingRight,
    OutOfScope,
    Right,
    SasKey,
    SasKeys,
    TokenExpired,
    UnknownKey,
    parse_keys,
    parse_token,
)

NOW = 1_800_000_000.0
KEY = "SAS_KEY_VALUE"


def token(resource: str, key: str = KEY, name: str = "root", expiry: float = NOW + 3600) -> str:
    """A token as azure-servicebus makes one (``_pyamqp/utils.py`` generate_sas_token)."""
    se = int(expiry)
    text = f"{quote_plus(resource)}\n{se}".encode()
    sig = base64.b64encode(hmac.new(key.encode(), text, hashlib.sha256).digest())
    return "SharedAccessSignature " + urlencode({"sr": resource, "sig": sig, "se": se, "skn": name})


def keys() -> SasKeys:
    return parse_keys(
        """{
          "root": {"key": "SAS_KEY_VALUE", "rights": ["Manage"]},
          "sender": {"key": "s3nd", "secondaryKey": "s3nd-2", "rights": ["Send"]},
          "listener": {"key": "l1sten", "rights": ["listen"]},
          "orders-only": {"key": "0rders", "rights": ["Send", "Listen"], "entity": "orders"}
        }"""
    )


def test_known_vector() -> None:
    # HMAC-SHA256("SAS_KEY_VALUE", "sb%3A%2F%2Flocalhost%3A5672%2Forders\n1800003600"), base64
    text = token("sb://localhost:5672/orders")
    expected = base64.b64encode(
        hmac.new(
            b"SAS_KEY_VALUE", b"sb%3A%2F%2Flocalhost%3A5672%2Forders\n1800003600", hashlib.sha256
        ).digest()
    ).decode()
    assert quote_plus(expected) in text
    parsed = parse_token(text)
    assert parsed.resource == "sb://localhost:5672/orders"
    assert parsed.resource_text == "sb%3A%2F%2Flocalhost%3A5672%2Forders"
    assert parsed.expiry == 1_800_003_600
    assert parsed.key_name == "root"
    assert base64.b64encode(parsed.signature).decode() == expected
    grant = keys().verify(text, "sb://localhost:5672/orders", NOW)
    assert grant.rights == Right.MANAGE | Right.SEND | Right.LISTEN
    assert grant.key_name == "root"


def test_secondary_key_and_key_name_case() -> None:
    grant = keys().verify(token("sb://h/q", key="s3nd-2", name="SENDER"), "sb://h/q", NOW)
    assert grant.rights == Right.SEND


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", MalformedToken),
        ("Bearer eyJ0eXAiOiJKV1Qi", MalformedToken),
        ("SharedAccessSignature sr=x&se=1", MalformedToken),
        ("SharedAccessSignature sr=x&sig=AAAA&se=soon&skn=root", MalformedToken),
        ("SharedAccessSignature sr=x&sig=!!!&se=1&skn=root", MalformedToken),
        ("SharedAccessSignature sr=x&sig=AAAA&se=1&skn=root", MalformedToken),  # too short
        ("SharedAccessSignature sr=x&sr=y&sig=AAAA&se=1&skn=root", MalformedToken),
        ("SharedAccessSignature garbage", MalformedToken),
        ("SharedAccessSignature " + "a=b&" * 4000, MalformedToken),
    ],
)
def test_malformed_tokens(text: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        keys().verify(text, "sb://h/q", NOW)


def test_wrong_key_unknown_key_expired() -> None:
    k = keys()
    with pytest.raises(InvalidSignature, match="does not match key 'root'"):
        k.verify(token("sb://h/q", key="wrong"), "sb://h/q", NOW)
    with pytest.raises(UnknownKey, match="nobody"):
        k.verify(token("sb://h/q", name="nobody"), "sb://h/q", NOW)
    with pytest.raises(TokenExpired, match="2027-01-15T08:00:00Z"):
        k.verify(token("sb://h/q", expiry=NOW), "sb://h/q", NOW)
    k.verify(token("sb://h/q", expiry=NOW + 1), "sb://h/q", NOW)
    # a token whose signed resource was altered
    forged = token("sb://h/q").replace("sr=sb%3A%2F%2Fh%2Fq", "sr=sb%3A%2F%2Fh%2Fother")
    with pytest.raises(InvalidSignature):
        k.verify(forged, "sb://h/other", NOW)
    # a token whose expiry was pushed later
    stretched = token("sb://h/q").replace(f"se={int(NOW) + 3600}", f"se={int(NOW) + 7200}")
    with pytest.raises(InvalidSignature):
        k.verify(stretched, "sb://h/q", NOW)


def test_scope_rules() -> None:
    k = keys()
    # the namespace covers everything; an entity covers itself and below, by whole segments
    k.verify(token("sb://h/"), "sb://h/orders", NOW)
    k.verify(token("https://h:5672"), "https://h:5672/orders/subscriptions/x", NOW)
    k.verify(token("sb://h/Events"), "sb://h/events/Subscriptions/audit", NOW)
    k.verify(token("sb://h/orders"), "sb://H/ORDERS/$DeadLetterQueue", NOW)
    with pytest.raises(OutOfScope, match="does not cover"):
        k.verify(token("sb://h/orders"), "sb://h/orders2", NOW)
    with pytest.raises(OutOfScope):
        k.verify(token("sb://h/orders"), "sb://h/", NOW)
    with pytest.raises(OutOfScope):
        k.verify(token("sb://other-host/orders"), "sb://h/orders", NOW)
    # a key defined on an entity signs tokens for that entity only
    k.verify(token("sb://h/orders", key="0rders", name="orders-only"), "sb://h/orders", NOW)
    with pytest.raises(OutOfScope, match="defined on 'orders'"):
        k.verify(token("sb://h/", key="0rders", name="orders-only"), "sb://h/invoices", NOW)


def test_claims_of_a_connection() -> None:
    claims = Claims(keys())
    claims.put_token(token("sb://h/orders", key="s3nd", name="sender"), "sb://h/orders", NOW)
    assert claims.check("orders", Right.SEND, NOW).key_name == "sender"
    with pytest.raises(MissingRight, match="'Listen' claim"):
        claims.check("orders", Right.LISTEN, NOW)
    with pytest.raises(OutOfScope, match="no token for 'invoices'"):
        claims.check("invoices", Right.SEND, NOW)
    with pytest.raises(TokenExpired):
        claims.check("orders", Right.SEND, NOW + 3600)
    # a refreshed token for the same audience replaces the first
    claims.put_token(
        token("sb://h/orders", key="l1sten", name="listener", expiry=NOW + 7200),
        "sb://h/orders",
        NOW + 3000,
    )
    claims.check("Orders/$DeadLetterQueue", Right.LISTEN, NOW + 3600)
    assert claims.expired(NOW + 3600) == []
    assert [str(r) for r in claims.expired(NOW + 7200)] == ["/orders"]
    with pytest.raises(OutOfScope):
        claims.check("orders", Right.LISTEN, NOW + 7200)
    # a failed put changes nothing
    with pytest.raises(InvalidSignature):
        claims.put_token(token("sb://h/", key="bad"), "sb://h/", NOW)
    with pytest.raises(OutOfScope):
        claims.check("orders", Right.NONE, NOW)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[]", "$"),
        ("{}", "defines no key"),
        ("not json", "not JSON"),
        ('{"a b": {"key": "k", "rights": ["Send"]}}', "$.a b"),
        ('{"k": "secret"}', "$.k"),
        ('{"k": {"key": "", "rights": ["Send"]}}', "$.k.key"),
        ('{"k": {"key": "x", "rights": []}}', "$.k.rights"),
        ('{"k": {"key": "x", "rights": ["Write"]}}', "$.k.rights[0]"),
        ('{"k": {"key": "x", "rights": ["Send"], "scope": "q"}}', "unknown field 'scope'"),
        ('{"k": {"key": "x", "rights": ["Send"], "secondaryKey": 5}}', "$.k.secondaryKey"),
        ('{"k": {"key": "x", "rights": ["Send"], "entity": "/"}}', "$.k.entity"),
        ('{"k": {"key": "x", "rights": ["Send"]}, "K": {"key": "y", "rights": ["Send"]}}', "twice"),
    ],
)
def test_bad_keys_files(text: str, where: str) -> None:
    with pytest.raises(KeysFileError, match=r".*" + where.replace("$", r"\$").replace("[", r"\[")):
        parse_keys(text)


def test_keys_file_rights() -> None:
    k = keys()
    assert len(k) == 4
    root = k.get("ROOT")
    assert root is not None and root.rights == Right.MANAGE | Right.SEND | Right.LISTEN
    assert "SAS_KEY_VALUE" not in repr(root)
    assert SasKey("x", "y", Right.SEND).entity is None


def test_keys_file_on_disk_must_be_private(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    path.write_text('{"root": {"key": "k", "rights": ["Send"]}}')
    path.chmod(0o644)
    with pytest.raises(ConfigError, match="can be read by other users"):
        read_keys_file(path)
    path.chmod(0o600)
    assert read_keys_file(path).get("root") is not None
    path.write_text('{"root": {"key": "k"}}')
    with pytest.raises(ConfigError, match=r"keys.json: \$.root.rights"):
        read_keys_file(path)
    with pytest.raises(ConfigError, match="cannot read"):
        read_keys_file(tmp_path / "missing.json")
