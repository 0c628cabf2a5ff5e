"""A private CA and its certificates, made at test time with ``cryptography``: a good
server certificate (127.0.0.1, ::1 and localhost), one for another name, an expired one, a
self-signed one, and a client certificate for mutual TLS. Nothing is checked in; every
run makes new keys (P-256: fast to generate)."""

from __future__ import annotations

import datetime as dt
import ipaddress
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Pair:
    cert: str
    key: str

    def server_options(self, client_ca: str | None = None) -> dict[str, str]:
        """Options of the test servers (``tls_cert``, ``tls_key``, ``tls_client_ca``)."""
        options = {"tls_cert": self.cert, "tls_key": self.key}
        if client_ca is not None:
            options["tls_client_ca"] = client_ca
        return options


@dataclass(frozen=True)
class Certificates:
    ca: str  # the private CA's certificate (PEM)
    folder: str  # a folder holding only the CA's certificate
    good: Pair
    wrong_name: Pair
    expired: Pair
    self_signed: Pair
    client: Pair  # issued by the CA, for client authentication
    stranger: Pair  # a client certificate from another CA


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write(
    folder: Path, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey
) -> Pair:
    cert_path, key_path = folder / f"{stem}.pem", folder / f"{stem}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return Pair(str(cert_path), str(key_path))


def _ca(cn: str, now: dt.datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def make_certificates(folder: Path) -> Certificates:
    folder.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    ca, ca_key = _ca("conduit-mcp test CA", now)
    other_ca, other_key = _ca("another CA", now)
    ca_pair = _write(folder, "ca", ca, ca_key)
    loopback: list[x509.GeneralName] = [
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
        x509.DNSName("localhost"),
    ]

    def leaf(
        stem: str,
        names: list[x509.GeneralName],
        *,
        expired: bool = False,
        client: bool = False,
        issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None = (ca, ca_key),
    ) -> Pair:
        key = ec.generate_private_key(ec.SECP256R1())
        signer_cert, signer_key = issuer if issuer is not None else (None, key)
        start, end = (
            (now - dt.timedelta(days=10), now - dt.timedelta(days=1))
            if expired
            else (now - dt.timedelta(days=1), now + dt.timedelta(days=30))
        )
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(stem))
            .issuer_name(signer_cert.subject if signer_cert is not None else _name(stem))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return _write(folder, stem, builder.sign(signer_key, hashes.SHA256()), key)

    return Certificates(
        ca=ca_pair.cert,
        folder=str(folder / "cas"),
        good=leaf("good", loopback),
        wrong_name=leaf("wrong-name", [x509.DNSName("mcp.other.example")]),
        expired=leaf("expired", loopback, expired=True),
        self_signed=leaf("self-signed", loopback, issuer=None),
        client=leaf("client", [], client=True),
        stranger=leaf("stranger", [], client=True, issuer=(other_ca, other_key)),
    )


def hashed_folder(certs: Certificates) -> str | None:
    """An OpenSSL CA folder holding the CA under its subject hash (what ``openssl rehash``
    makes), or None when no ``openssl`` command is at hand to compute the hash."""
    openssl = shutil.which("openssl")
    if openssl is None:
        return None
    digest = subprocess.run(
        [openssl, "x509", "-hash", "-noout", "-in", certs.ca],
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    ).stdout.strip()
    folder = Path(certs.folder)
    folder.mkdir(exist_ok=True)
    shutil.copy(certs.ca, folder / f"{digest}.0")
    return str(folder)
