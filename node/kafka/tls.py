"""``TlsConfig``: the TLS side of an ``SSL`` or ``SASL_SSL`` listener, from Kafka's ``ssl.*`` broker
keys read as Kafka's ``DefaultSslEngineFactory`` reads them, and the ``ssl.SSLContext`` made from
them (``server_context``). The same keys of a client's properties (``strata groups
--command-config``) make a client's context (``client_context``): its key store, then optional,
is its own certificate; its trust store checks the broker's.

The broker's key store (its private key and certificate chain), one of:

- ``ssl.keystore.type=PEM`` with ``ssl.keystore.location``: one file holding the private key
  (PKCS#8; encrypted with ``ssl.key.password``, or not) and the certificate chain;
- ``ssl.keystore.type=PEM`` with ``ssl.keystore.key`` and ``ssl.keystore.certificate.chain``: the
  same two, inline;
- ``ssl.keystore.type=PKCS12`` with ``ssl.keystore.location`` and ``ssl.keystore.password``; the
  default type ``JKS`` takes a PKCS#12 file too, as Java's key store does. A Java key store file
  (JKS or JCEKS) is refused with the ``keytool`` command that converts it.

As Kafka: a PEM store takes no store password, inline PEM no location, a file of another type
needs its password (``InvalidConfigError`` otherwise, naming the key).

The trust store (what a client's certificate is checked against when ``ssl.client.auth`` is
``requested`` or ``required``): ``ssl.truststore.location`` (PEM, or PKCS#12 under ``PKCS12``
or ``JKS``, with ``ssl.truststore.password``) or ``ssl.truststore.certificates`` (inline PEM);
without either, the system's certificate authorities. ``ssl.client.auth``: ``none`` (Kafka's
default), ``requested`` or ``required``. ``ssl.enabled.protocols``: ``TLSv1.2`` and ``TLSv1.3``
(Kafka's default is both; older versions are refused). ``ssl.protocol`` (Java's context
algorithm) is checked and has no further effect. ``ssl.cipher.suites`` is refused when set: the
listener offers OpenSSL's default suites of the enabled versions.

Python's ``ssl`` reads keys and certificates from files only: inline PEM and the contents of a
PKCS#12 file are written, for the load only, to a file in a private temporary directory (mode
0700) that is removed at once. Every error is an ``InvalidConfigError`` naming the key and, for a
file, its path; a password or a key never appears in one, nor in the config's repr.
"""

from __future__ import annotations

import logging
import os
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from storage.errors import InvalidConfigError

log = logging.getLogger(__name__)

PEM, PKCS12, JKS = "PEM", "PKCS12", "JKS"
STORE_TYPES = (JKS, PKCS12, PEM)
CLIENT_AUTH = ("none", "requested", "required")
PROTOCOL_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
CONTEXT_PROTOCOLS = ("TLS", "TLSv1.2", "TLSv1.3")
DEFAULT_ENABLED_PROTOCOLS = "TLSv1.2,TLSv1.3"
JAVA_STORE_MAGICS = (b"\xfe\xed\xfe\xed", b"\xce\xce\xce\xce")   # JKS, JCEKS

KEYS: dict[str, str] = {
    "ssl.keystore.type": "keystore_type",
    "ssl.keystore.location": "keystore_location",
    "ssl.keystore.password": "keystore_password",
    "ssl.key.password": "key_password",
    "ssl.keystore.key": "keystore_key",
    "ssl.keystore.certificate.chain": "keystore_certificate_chain",
    "ssl.truststore.type": "truststore_type",
    "ssl.truststore.location": "truststore_location",
    "ssl.truststore.password": "truststore_password",
    "ssl.truststore.certificates": "truststore_certificates",
    "ssl.client.auth": "client_auth",
    "ssl.enabled.protocols": "enabled_protocols",
    "ssl.protocol": "protocol",
    "ssl.cipher.suites": "cipher_suites",
}
SENSITIVE_KEYS = frozenset({"ssl.keystore.password", "ssl.key.password", "ssl.keystore.key",
                            "ssl.truststore.password"})
CLIENT_AUTH_KEY = "ssl.client.auth"
LISTENER_PREFIX = "listener.name."


@dataclass(frozen=True)
class TlsConfig:
    """The ``ssl.*`` settings of one listener (the listener-prefixed ones already applied, see
    ``from_properties``). Checked at creation, without reading a file: the files are read where
    the listener runs (``server_context``), which may be another host than the one that made
    the config."""

    keystore_type: str = JKS
    keystore_location: str | None = None
    keystore_password: str | None = field(default=None, repr=False)
    key_password: str | None = field(default=None, repr=False)
    keystore_key: str | None = field(default=None, repr=False)
    keystore_certificate_chain: str | None = None
    truststore_type: str = JKS
    truststore_location: str | None = None
    truststore_password: str | None = field(default=None, repr=False)
    truststore_certificates: str | None = None
    client_auth: str = "none"
    enabled_protocols: str = DEFAULT_ENABLED_PROTOCOLS
    protocol: str = "TLSv1.3"
    cipher_suites: str | None = None

    def __post_init__(self) -> None:
        for key, value, allowed in (("ssl.keystore.type", self.keystore_type, STORE_TYPES),
                                    ("ssl.truststore.type", self.truststore_type, STORE_TYPES),
                                    (CLIENT_AUTH_KEY, self.client_auth, CLIENT_AUTH),
                                    ("ssl.protocol", self.protocol, CONTEXT_PROTOCOLS)):
            if value not in allowed:
                raise InvalidConfigError(f"{key}={value!r} is not one of {', '.join(allowed)}",
                                         key=key, value=value)
        self.protocol_range()
        if self.cipher_suites:
            raise InvalidConfigError(
                f"ssl.cipher.suites={self.cipher_suites!r}: not served; the listener offers "
                "OpenSSL's default suites of the versions in ssl.enabled.protocols",
                key="ssl.cipher.suites", value=self.cipher_suites)
        self._check_keystore()
        self._check_truststore()

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any], listener: str) -> TlsConfig:
        """The settings of the ``listener`` (``SSL`` or ``SASL_SSL``) from Kafka's keys: each
        ``ssl.*`` key of ``KEYS``, overridden by ``listener.name.<listener>.ssl.*`` (Kafka's
        per-listener prefix, in lower case). As Kafka, a ``SASL_SSL`` listener asks for client
        certificates only by its prefixed ``ssl.client.auth``: the unprefixed key applies to
        ``SSL`` listeners alone. Keys prefixed for another listener are left alone."""
        prefix = f"{LISTENER_PREFIX}{listener.lower()}."
        values: dict[str, Any] = {}
        for key, raw in properties.items():
            if key == CLIENT_AUTH_KEY and listener == "SASL_SSL":
                if str(raw).strip() != "none":
                    log.warning("%s=%s applies to SSL listeners only (Kafka's rule): a SASL_SSL "
                                "listener asks for client certificates by %s%s", key, raw,
                                prefix, key)
            elif key in KEYS:
                values.setdefault(KEYS[key], str(raw).strip())
        for key, raw in properties.items():
            if key.startswith(prefix) and key[len(prefix):] in KEYS:
                values[KEYS[key[len(prefix):]]] = str(raw).strip()
        values = {name: value for name, value in values.items() if value}   # empty: unset
        for name in ("keystore_type", "truststore_type"):
            if name in values:
                values[name] = values[name].upper()
        return cls(**values)

    def protocol_range(self) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
        """The lowest and highest TLS version of ``ssl.enabled.protocols``."""
        key, text = "ssl.enabled.protocols", self.enabled_protocols
        names = [part.strip() for part in text.split(",") if part.strip()]
        if not names:
            raise InvalidConfigError(f"{key}={text!r}: no protocol", key=key, value=text)
        for name in names:
            if name not in PROTOCOL_VERSIONS:
                raise InvalidConfigError(
                    f"{key}={text!r}: {name} is not served (only "
                    f"{', '.join(PROTOCOL_VERSIONS)})", key=key, value=text)
        versions = sorted(PROTOCOL_VERSIONS[name] for name in names)
        return versions[0], versions[-1]

    def _check_keystore(self) -> None:
        """Kafka's ``createKeystore`` rules, in its order."""
        kind, path = self.keystore_type, self.keystore_location
        if self.keystore_key is not None:
            if kind != PEM:
                _refuse("ssl.keystore.key", f"a private key can be given inline only with "
                        f"ssl.keystore.type=PEM, not {kind}")
            if self.keystore_certificate_chain is None:
                _refuse("ssl.keystore.certificate.chain",
                        "ssl.keystore.key is given without its certificate chain")
            if path is not None:
                _refuse("ssl.keystore.location",
                        "both a key store file and an inline ssl.keystore.key are given")
            if self.keystore_password is not None:
                _refuse("ssl.keystore.password", "a PEM key store takes no store password "
                        "(ssl.key.password decrypts the key)")
        elif self.keystore_certificate_chain is not None:
            _refuse("ssl.keystore.key",
                    "ssl.keystore.certificate.chain is given without its private key")
        elif path is None:
            if self.keystore_password is not None:
                _refuse("ssl.keystore.password",
                        "a key store password is given without ssl.keystore.location")
        elif kind == PEM and self.keystore_password is not None:
            _refuse("ssl.keystore.password", "a PEM key store takes no store password "
                    "(ssl.key.password decrypts the key)")
        elif kind != PEM and self.keystore_password is None:
            _refuse("ssl.keystore.password",
                    f"the key store {path} is given without its password")

    def _check_truststore(self) -> None:
        """Kafka's ``createTruststore`` rules."""
        if self.truststore_certificates is not None:
            if self.truststore_type != PEM:
                _refuse("ssl.truststore.certificates", "trusted certificates can be given "
                        f"inline only with ssl.truststore.type=PEM, not {self.truststore_type}")
            if self.truststore_location is not None:
                _refuse("ssl.truststore.location", "both a trust store file and inline "
                        "ssl.truststore.certificates are given")
        if self.truststore_password is not None:
            if self.truststore_type == PEM:
                _refuse("ssl.truststore.password", "a PEM trust store takes no password")
            if self.truststore_location is None:
                _refuse("ssl.truststore.password",
                        "a trust store password is given without ssl.truststore.location")

    @property
    def has_keystore(self) -> bool:
        return self.keystore_location is not None or self.keystore_key is not None

    def require_keystore(self) -> None:
        """A listener's check: ``InvalidConfigError`` naming ``ssl.keystore.location`` when no
        key store is given (a client may go without one)."""
        if not self.has_keystore:
            _refuse("ssl.keystore.location", "an SSL listener needs its key store: "
                    "ssl.keystore.location, or ssl.keystore.key and "
                    "ssl.keystore.certificate.chain with ssl.keystore.type=PEM")

    # ---- the contexts, where they are used ----------------------------------------------------
    def server_context(self) -> ssl.SSLContext:
        """The server side TLS context; ``InvalidConfigError`` naming the key and the file when a
        store cannot be read (missing, wrong password, not a key store of its type, a key that
        does not match its certificate)."""
        self.require_keystore()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.options |= ssl.OP_NO_RENEGOTIATION     # no client-started renegotiation (TLS 1.2)
        context.minimum_version, context.maximum_version = self.protocol_range()
        self._load_keystore(context)
        context.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                               "required": ssl.CERT_REQUIRED}[self.client_auth]
        if self.client_auth != "none":
            self._load_truststore(context, ssl.Purpose.CLIENT_AUTH)
        return context

    def client_context(self, *, check_hostname: bool = True) -> ssl.SSLContext:
        """A client's TLS context (an operator tool's): the broker's certificate checked against
        the trust store (the system's authorities without one) and, with ``check_hostname``
        (Kafka's ``ssl.endpoint.identification.algorithm=https``), against the broker's name;
        the key store, when given, is the client's own certificate."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version, context.maximum_version = self.protocol_range()
        context.check_hostname = check_hostname
        context.verify_mode = ssl.CERT_REQUIRED
        if self.has_keystore:
            self._load_keystore(context)
        self._load_truststore(context, ssl.Purpose.SERVER_AUTH)
        return context

    def _load_keystore(self, context: ssl.SSLContext) -> None:
        if self.keystore_key is not None:
            assert self.keystore_certificate_chain is not None
            _load_chain(context, "ssl.keystore.key", "the inline key and certificate chain",
                        f"{self.keystore_key}\n{self.keystore_certificate_chain}\n",
                        self.key_password)
            return
        assert self.keystore_location is not None
        path = self.keystore_location
        if self.keystore_type == PEM:
            _read("ssl.keystore.location", path)
            try:
                context.load_cert_chain(path, password=self.key_password or "")
            except (ssl.SSLError, ValueError) as err:
                raise _unreadable("ssl.keystore.location", path, "a PEM key store", err) from None
            return
        data = _java_checked("ssl.keystore.location", path, self.keystore_type)
        pem = _pkcs12_pem("ssl.keystore.location", path, data, self.keystore_password,
                          with_key=True)
        _load_chain(context, "ssl.keystore.location", path, pem, None)

    def _load_truststore(self, context: ssl.SSLContext, purpose: ssl.Purpose) -> None:
        key = "ssl.truststore.location"
        try:
            if self.truststore_certificates is not None:
                key = "ssl.truststore.certificates"
                context.load_verify_locations(cadata=self.truststore_certificates)
            elif self.truststore_location is None:
                context.load_default_certs(purpose)
            elif self.truststore_type == PEM:
                _read(key, self.truststore_location)
                context.load_verify_locations(cafile=self.truststore_location)
            else:
                path = self.truststore_location
                data = _java_checked(key, path, self.truststore_type)
                context.load_verify_locations(cadata=_pkcs12_pem(
                    key, path, data, self.truststore_password, with_key=False))
        except (ssl.SSLError, ValueError) as err:
            where = self.truststore_location or "the inline certificates"
            raise _unreadable(key, where, "a trust store", err) from None


def is_tls_key(key: str) -> bool:
    """Whether ``key`` is an ``ssl.*`` key of ``KEYS``, or one prefixed for an ``SSL`` or
    ``SASL_SSL`` listener (``listener.name.ssl.ssl.keystore.location``)."""
    return unprefixed(key) in KEYS


def is_sensitive(key: str) -> bool:
    """Whether ``key`` (prefixed or not) holds a password or a private key."""
    return unprefixed(key) in SENSITIVE_KEYS


def unprefixed(key: str) -> str:
    """``key`` without the prefix of an ``SSL`` or ``SASL_SSL`` listener."""
    for listener in ("ssl", "sasl_ssl"):
        prefix = f"{LISTENER_PREFIX}{listener}."
        if key.startswith(prefix):
            return key[len(prefix):]
    return key


def _refuse(key: str, why: str) -> None:
    raise InvalidConfigError(f"{key}: {why}", key=key, value=None)


def _read(key: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as err:
        raise InvalidConfigError(f"{key}={path}: cannot read it: {err.strerror or err}",
                                 key=key, value=path) from None


def _unreadable(key: str, where: str, what: str, err: BaseException) -> InvalidConfigError:
    reason = getattr(err, "reason", None) or str(err) or type(err).__name__
    return InvalidConfigError(f"{key}={where}: not {what} this listener can use ({reason}); a "
                              "wrong password, a key that does not match its certificate, or "
                              "the wrong ssl.*.type", key=key, value=where)


def _java_checked(key: str, path: str, kind: str) -> bytes:
    """The file's bytes; a Java key store (which only Java reads) is refused with its fix."""
    data = _read(key, path)
    if data[:4] in JAVA_STORE_MAGICS:
        raise InvalidConfigError(
            f"{key}={path}: a Java key store (JKS), which only Java reads; convert it to "
            f"PKCS#12 (keytool -importkeystore -srckeystore {path} -destkeystore "
            f"{Path(path).with_suffix('.p12')} -deststoretype PKCS12) and set "
            f"{key.rsplit('.', 1)[0]}.type=PKCS12", key=key, value=path)
    return data


def _pkcs12_pem(key: str, path: str, data: bytes, password: str | None, *,
                with_key: bool) -> str:
    """The private key (``with_key``) and certificates of a PKCS#12 file, as PEM text."""
    from cryptography.hazmat.primitives.serialization import (Encoding, NoEncryption,
                                                              PrivateFormat, pkcs12)

    try:
        store = pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError as err:
        raise _unreadable(key, path, "a PKCS#12 store", err) from None
    certificates = ([store.cert.certificate] if store.cert is not None else []) + \
        [c.certificate for c in store.additional_certs]
    if with_key and (store.key is None or store.cert is None):
        raise InvalidConfigError(f"{key}={path}: the PKCS#12 store holds no private key with "
                                 "its certificate", key=key, value=path)
    if not certificates:
        raise InvalidConfigError(f"{key}={path}: the PKCS#12 store holds no certificate",
                                 key=key, value=path)
    text = "".join(c.public_bytes(Encoding.PEM).decode() for c in certificates)
    if with_key:
        assert store.key is not None
        text = store.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8,
                                       NoEncryption()).decode() + text
    return text


def _load_chain(context: ssl.SSLContext, key: str, where: str, pem: str,
                password: str | None) -> None:
    """``load_cert_chain`` of PEM text (a private key and its chain): written to a file of a
    private temporary directory for the load, removed at once."""
    with tempfile.TemporaryDirectory(prefix="strata-tls-") as private:
        path = os.path.join(private, "keystore.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(pem)
        try:
            context.load_cert_chain(path, password=password or "")
        except (ssl.SSLError, ValueError) as err:
            raise _unreadable(key, where, "a key store", err) from None
