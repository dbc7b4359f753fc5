"""The cluster CA and the certificates it issues (``qmgr.security.pki``)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from qmgr.security.pki import Issued, PkiError, client_name, issue, make_ca, member_name

NOW = datetime(2026, 11, 23, tzinfo=UTC)


def test_a_member_certificate_is_signed_by_the_ca_and_names_its_queue_manager() -> None:
    ca = make_ca("DEMO", NOW)
    node = issue(ca, "PUB1", NOW, hosts=("127.0.0.1", "fr1.example"))
    cert = x509.load_pem_x509_certificate(node.cert_pem)
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    cert.verify_directly_issued_by(ca_cert)
    assert member_name(node.cert_pem) == "PUB1"
    assert client_name(node.cert_pem) == "PUB1"
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "fr1.example" in san.get_values_for_type(x509.DNSName)
    assert [str(a) for a in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert cert.not_valid_before_utc < NOW < cert.not_valid_after_utc


def test_a_client_certificate_never_passes_as_a_member() -> None:
    ca = make_ca("DEMO", NOW)
    app = issue(ca, "PUB1", NOW, member=False)
    assert member_name(app.cert_pem) is None
    assert client_name(app.cert_pem) == "PUB1"


def test_a_ca_is_a_ca_and_signs_with_its_own_key() -> None:
    ca = make_ca("DEMO", NOW)
    cert = x509.load_pem_x509_certificate(ca.cert_pem)
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
    assert member_name(ca.cert_pem) is None


def test_garbage_is_refused_with_a_typed_error() -> None:
    with pytest.raises(PkiError):
        issue(Issued(b"junk", b"junk"), "PUB1", NOW)
    assert member_name(b"not a certificate") is None
