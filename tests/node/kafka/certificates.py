"""Test certificates made at run time (``cryptography``): a certificate authority, a broker
certificate for 127.0.0.1 and localhost, and a client certificate, written as the stores Kafka's
``ssl.*`` keys name (PEM, encrypted PEM, PKCS#12, inline PEM) and as a Java key store header for
the refusal test. Every certificate is valid from yesterday for two days."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import (BestAvailableEncryption, Encoding,
                                                          NoEncryption, PrivateFormat, pkcs12)
from cryptography.x509.oid import NameOID

KEY_PASSWORD = "key-secret"
STORE_PASSWORD = "store-secret"


@dataclass(frozen=True)
class Certificates:
    """Paths and texts of one test PKI under ``root``."""

    root: Path
    ca: Path                    # the authority's certificate (PEM): the clients' trust
    server_pem: Path            # the broker's key (PKCS#8) and chain in one file
    server_key: str             # the same key, inline
    server_chain: str           # the broker's certificate and the authority's, inline
    server_encrypted_pem: Path  # the key encrypted with KEY_PASSWORD, and the chain
    server_encrypted_key: str   # the encrypted key alone, inline
    server_p12: Path            # PKCS#12 with STORE_PASSWORD
    client_cert: Path
    client_key: Path
    other_ca: Path              # an authority that signed nothing here


def make_certificates(root: Path) -> Certificates:
    root.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = _authority("strata test CA")
    _other_key, other_cert = _authority("another CA")
    server_key, server_cert = _leaf("localhost", ca_key, ca_cert, server=True)
    client_key, client_cert = _leaf("client", ca_key, ca_cert, server=False)

    def pem(cert: x509.Certificate) -> str:
        return cert.public_bytes(Encoding.PEM).decode()

    key_text = server_key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8,
                                        NoEncryption()).decode()
    chain = pem(server_cert) + pem(ca_cert)
    encrypted = server_key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8,
                                         BestAvailableEncryption(KEY_PASSWORD.encode())).decode()
    paths = {
        "ca.pem": pem(ca_cert), "server.pem": key_text + chain,
        "server-encrypted.pem": encrypted + chain, "client.pem": pem(client_cert),
        "client.key": client_key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8,
                                               NoEncryption()).decode(),
        "other-ca.pem": pem(other_cert),
    }
    for name, text in paths.items():
        (root / name).write_text(text)
    (root / "server.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        b"kafka", server_key, server_cert, [ca_cert],
        BestAvailableEncryption(STORE_PASSWORD.encode())))
    return Certificates(root, root / "ca.pem", root / "server.pem", key_text, chain,
                        root / "server-encrypted.pem", encrypted, root / "server.p12",
                        root / "client.pem", root / "client.key", root / "other-ca.pem")


def _authority(name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (_builder(subject, subject, key)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                         False), critical=True)
            .sign(key, hashes.SHA256()))
    return key, cert


def _leaf(name: str, ca_key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate, *,
          server: bool) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    builder = _builder(subject, ca_cert.subject, key)
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def _builder(subject: x509.Name, issuer: x509.Name,
             key: ec.EllipticCurvePrivateKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2)))
