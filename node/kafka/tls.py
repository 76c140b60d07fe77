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
  (JKS or JCEKS) is refused with the ``keytool`` command that converts it (the formats and their
  reading: ``node.kafka.tls_stores``).

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

Every error is an ``InvalidConfigError`` naming the key and, for a file, its path; a password or
a key never appears in one, nor in the config's repr.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass, field
from typing import Any, Mapping

from node.kafka.tls_stores import JKS, PEM, PKCS12, load_key_store, load_trust_store
from storage.errors import InvalidConfigError

log = logging.getLogger(__name__)

STORE_TYPES = (JKS, PKCS12, PEM)
CLIENT_AUTH = ("none", "requested", "required")
PROTOCOL_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
CONTEXT_PROTOCOLS = ("TLS", "TLSv1.2", "TLSv1.3")
DEFAULT_ENABLED_PROTOCOLS = "TLSv1.2,TLSv1.3"

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
PEM_WITHOUT_STORE_PASSWORD = "a PEM key store takes no store password (ssl.key.password " \
                             "decrypts the key)"
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
                _refuse("ssl.keystore.password", PEM_WITHOUT_STORE_PASSWORD)
        elif self.keystore_certificate_chain is not None:
            _refuse("ssl.keystore.key",
                    "ssl.keystore.certificate.chain is given without its private key")
        elif path is None:
            if self.keystore_password is not None:
                _refuse("ssl.keystore.password",
                        "a key store password is given without ssl.keystore.location")
        elif kind == PEM and self.keystore_password is not None:
            _refuse("ssl.keystore.password", PEM_WITHOUT_STORE_PASSWORD)
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
            load_key_store(context, "ssl.keystore.key", PEM, None,
                           f"{self.keystore_key}\n{self.keystore_certificate_chain}\n",
                           self.key_password)
        elif self.keystore_type == PEM:
            load_key_store(context, "ssl.keystore.location", PEM, self.keystore_location, None,
                           self.key_password)
        else:
            load_key_store(context, "ssl.keystore.location", self.keystore_type,
                           self.keystore_location, None, self.keystore_password)

    def _load_truststore(self, context: ssl.SSLContext, purpose: ssl.Purpose) -> None:
        if self.truststore_certificates is not None:
            load_trust_store(context, "ssl.truststore.certificates", PEM, None,
                             self.truststore_certificates, None)
        elif self.truststore_location is None:
            context.load_default_certs(purpose)
        else:
            load_trust_store(context, "ssl.truststore.location", self.truststore_type,
                             self.truststore_location, None, self.truststore_password)


def is_tls_key(key: str) -> bool:
    """Whether ``key`` is an ``ssl.*`` key of ``KEYS``, or one prefixed for an ``SSL`` or
    ``SASL_SSL`` listener (``listener.name.ssl.ssl.keystore.location``)."""
    return unprefixed(key) in KEYS


def unprefixed(key: str) -> str:
    """``key`` without the prefix of an ``SSL`` or ``SASL_SSL`` listener."""
    for listener in ("ssl", "sasl_ssl"):
        prefix = f"{LISTENER_PREFIX}{listener}."
        if key.startswith(prefix):
            return key[len(prefix):]
    return key


def _refuse(key: str, why: str) -> None:
    raise InvalidConfigError(f"{key}: {why}", key=key, value=None)
