"""The cluster CA: a self-signed authority per cluster and the certificates it issues.

Built on ``cryptography``'s X.509 builder. A *member* certificate names a queue manager (the
subject's common name), carries the organizational unit ``MEMBER_OU`` and is good for both
server and client authentication, so one certificate serves a node's port and the channels it
opens. A *client* certificate (organizational unit ``CLIENT_OU``) is for applications and
administrators and can never pass as a member, even with a queue manager's name.

Pure: the time is passed in; keys and certificates are PEM bytes.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

MEMBER_OU = "qmgr-member"
CLIENT_OU = "qmgr-client"
CA_YEARS = 10
CERT_YEARS = 5


class PkiError(ValueError):
    """A certificate or key that cannot be used as asked."""


@dataclass(frozen=True)
class Issued:
    cert_pem: bytes
    key_pem: bytes


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    now: datetime,
    years: int,
) -> x509.CertificateBuilder:
    """A certificate for ``key``'s public half, valid from an hour before ``now``."""
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(now + timedelta(days=365 * years))
    )


def make_ca(cluster: str, now: datetime) -> Issued:
    """A new CA for ``cluster``, valid from an hour before ``now`` for ``CA_YEARS``."""
    key = _key()
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, cluster),
            x509.NameAttribute(NameOID.COMMON_NAME, f"qmgr cluster CA {cluster}"),
        ]
    )
    cert = (
        _builder(name, name, key, now, CA_YEARS)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .sign(key, hashes.SHA256())
    )
    return Issued(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _load_ca(ca: Issued) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    try:
        cert = x509.load_pem_x509_certificate(ca.cert_pem)
        key = serialization.load_pem_private_key(ca.key_pem, password=None)
    except ValueError as exc:
        raise PkiError(f"not a PEM certificate and key: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise PkiError("the CA key is not an EC key")
    return cert, key


def _san(hosts: tuple[str, ...]) -> list[x509.GeneralName]:
    out: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(host.strip("[]"))))
        except ValueError:
            out.append(x509.DNSName(host))
    return out


def issue(
    ca: Issued,
    name: str,
    now: datetime,
    *,
    member: bool = True,
    hosts: tuple[str, ...] = ("localhost", "127.0.0.1", "::1"),
) -> Issued:
    """A certificate for queue manager ``name`` (``member``) or for a client user ``name``.

    A member certificate lists ``hosts`` (DNS names or IP addresses) as subject alternative
    names: clients check a node's certificate against the address they dial."""
    ca_cert, ca_key = _load_ca(ca)
    key = _key()
    subject = x509.Name(
        [
            x509.NameAttribute(
                NameOID.ORGANIZATIONAL_UNIT_NAME, MEMBER_OU if member else CLIENT_OU
            ),
            x509.NameAttribute(NameOID.COMMON_NAME, name),
        ]
    )
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
    if member:
        usages.insert(0, ExtendedKeyUsageOID.SERVER_AUTH)
    builder = (
        _builder(subject, ca_cert.subject, key, now, CERT_YEARS)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
    )
    if member and hosts:
        builder = builder.add_extension(x509.SubjectAlternativeName(_san(hosts)), False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return Issued(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def self_signed(common_name: str, now: datetime, hosts: tuple[str, ...]) -> Issued:
    """A self-signed server certificate for ``hosts`` (a port that clients reach with
    verification off, or trust by this very certificate), valid ``CERT_YEARS``."""
    key = _key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        _builder(name, name, key, now, CERT_YEARS)
        .add_extension(x509.SubjectAlternativeName(_san(hosts)), False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .sign(key, hashes.SHA256())
    )
    return Issued(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _subject(cert_pem: bytes) -> tuple[str | None, str | None]:
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError:
        return None, None

    def one(oid: x509.ObjectIdentifier) -> str | None:
        values = cert.subject.get_attributes_for_oid(oid)
        return str(values[0].value) if len(values) == 1 else None

    return one(NameOID.COMMON_NAME), one(NameOID.ORGANIZATIONAL_UNIT_NAME)


def member_name(cert_pem: bytes) -> str | None:
    """The queue manager a (chain-verified) peer certificate names, or None when it is not a
    member certificate."""
    cn, ou = _subject(cert_pem)
    return cn if ou == MEMBER_OU and cn else None


def client_name(cert_pem: bytes) -> str | None:
    """The user a (chain-verified) client certificate names (member certificates name their
    queue manager), or None."""
    cn, ou = _subject(cert_pem)
    return cn if ou in (MEMBER_OU, CLIENT_OU) and cn else None
