"""``ClientSecurity``: how an operator tool connects to Kafka brokers, from the client properties
Kafka's tools take with ``--command-config``, and the SASL exchange it runs on a new connection
(``authenticate``)::

    security.protocol=SASL_SSL
    ssl.truststore.type=PEM
    ssl.truststore.location=/etc/kafka/ca.pem
    sasl.mechanism=SCRAM-SHA-512
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
        username="alice" password="alice-secret";

- ``security.protocol``: ``PLAINTEXT`` (Kafka's default), ``SSL``, ``SASL_PLAINTEXT``,
  ``SASL_SSL``;
- over TLS, the ``ssl.*`` keys of ``node.kafka.tls`` (the trust store checks the broker's
  certificate, the system's authorities without one; a key store is the client's own
  certificate) and ``ssl.endpoint.identification.algorithm`` (``https``, Kafka's default, checks
  the broker's name against its certificate; empty does not);
- with SASL, ``sasl.mechanism`` (``PLAIN``, ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``; Kafka's
  default, ``GSSAPI``, is not served) and ``sasl.jaas.config``, whose ``PlainLoginModule`` or
  ``ScramLoginModule`` entry names ``username`` and ``password``.

Other client keys (``client.id``, ``request.timeout.ms``, ...) are accepted and not used, as
Kafka's AdminClient only warns of a key it does not use; a ``security.``, ``ssl.`` or ``sasl.`` key
this module does not know is refused, since a misspelt security setting must not connect in the
clear. Every error is an ``InvalidConfigError`` naming the key; a password never appears in one.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from node.kafka.config import SASL_MECHANISMS, SASL_PROTOCOLS, SECURITY_PROTOCOLS, TLS_PROTOCOLS
from node.kafka.errors import SaslAuthenticationError
from node.kafka.jaas import PLAIN_LOGIN_MODULE, parse_jaas_config
from node.kafka.scram import ScramMechanism
from node.kafka.scram_client import ScramClient
from node.kafka.tls import KEYS as TLS_KEYS
from node.kafka.tls import TlsConfig
from node.kafka.versions import ApiKey
from storage.errors import InvalidConfigError

SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
ENDPOINT_KEY = "ssl.endpoint.identification.algorithm"
CLIENT_KEYS = frozenset({"security.protocol", "sasl.mechanism", "sasl.jaas.config", ENDPOINT_KEY,
                         *TLS_KEYS})
SECURITY_FAMILIES = ("security.", "ssl.", "sasl.")

Call = Callable[[int, int, Mapping[str, Any]], Any]
"""``call(api_key, version, values)``: one request on the connection being authenticated."""


@dataclass(frozen=True)
class ClientSecurity:
    """A tool's connection settings: ``protocol``, the TLS context (``SSL``, ``SASL_SSL``) and
    the SASL mechanism and credentials (``SASL_*``)."""

    protocol: str = "PLAINTEXT"
    tls: ssl.SSLContext | None = field(default=None, compare=False)
    mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> ClientSecurity:
        for key in properties:
            if key.startswith(SECURITY_FAMILIES) and key not in CLIENT_KEYS:
                raise InvalidConfigError(f"{key}: not a client security setting this tool knows "
                                         f"(security.protocol, sasl.mechanism, sasl.jaas.config, "
                                         "ssl.*)", key=key, value=None)
        protocol = properties.get("security.protocol", "PLAINTEXT").strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise InvalidConfigError(f"security.protocol={protocol!r} is not one of "
                                     f"{', '.join(SECURITY_PROTOCOLS)}", key="security.protocol",
                                     value=protocol)
        tls = None
        if protocol in TLS_PROTOCOLS:
            endpoint = properties.get(ENDPOINT_KEY, "https").strip().lower()
            if endpoint not in ("https", ""):
                raise InvalidConfigError(f"{ENDPOINT_KEY}={endpoint!r} is not https or empty",
                                         key=ENDPOINT_KEY, value=endpoint)
            tls = TlsConfig.from_properties(
                {k: v for k, v in properties.items() if k in TLS_KEYS}, protocol
            ).client_context(check_hostname=endpoint == "https")
        if protocol not in SASL_PROTOCOLS:
            return cls(protocol, tls)
        mechanism = properties.get("sasl.mechanism", "GSSAPI").strip().upper()
        if mechanism not in SASL_MECHANISMS:
            raise InvalidConfigError(f"sasl.mechanism={mechanism!r} is not served (only "
                                     f"{', '.join(SASL_MECHANISMS)})", key="sasl.mechanism",
                                     value=mechanism)
        user, password = _credentials(mechanism, properties.get("sasl.jaas.config"))
        return cls(protocol, tls, mechanism, user, password)

    def authenticate(self, call: Call, broker: str) -> None:
        """Run the SASL exchange on a new connection (SaslHandshake v1, then SaslAuthenticate
        v2 rounds); ``SaslAuthenticationError`` naming ``broker`` when the broker refuses."""
        if self.mechanism is None:
            return
        assert self.username is not None and self.password is not None
        answer = call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": self.mechanism})
        if answer.error_code != ErrorCode.none:
            raise SaslAuthenticationError(
                f"{broker}: SASL mechanism {self.mechanism} refused "
                f"({answer.error_code.name}; the broker offers "
                f"{', '.join(answer.mechanisms) or 'none'})", mechanism=self.mechanism)
        if self.mechanism == "PLAIN":
            _round(call, broker, self.mechanism,
                   f"\x00{self.username}\x00{self.password}".encode())
            return
        scram_mechanism = ScramMechanism.named(self.mechanism)
        assert scram_mechanism is not None
        client = ScramClient(scram_mechanism, self.username, self.password)
        server_first = _round(call, broker, self.mechanism, client.first())
        client.verify(_round(call, broker, self.mechanism, client.final(server_first)))


def _round(call: Call, broker: str, mechanism: str, token: bytes) -> bytes:
    answer = call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
    if answer.error_code != ErrorCode.none:
        raise SaslAuthenticationError(
            f"{broker}: {mechanism} authentication failed: "
            f"{answer.error_message or answer.error_code.name}", mechanism=mechanism)
    return bytes(answer.auth_bytes)


def _credentials(mechanism: str, jaas: str | None) -> tuple[str, str]:
    key = "sasl.jaas.config"
    module = PLAIN_LOGIN_MODULE if mechanism == "PLAIN" else SCRAM_LOGIN_MODULE
    if jaas is None:
        raise InvalidConfigError(f'{key}: {mechanism} needs {module} required username="..." '
                                 'password="...";', key=key, value=None)
    entry = parse_jaas_config(key, jaas)
    if entry.login_module != module:
        raise InvalidConfigError(f"{key}: the login module of {mechanism} is {module}, not "
                                 f"{entry.login_module}", key=key, value=None)
    user, password = entry.options.get("username"), entry.options.get("password")
    if not user or password is None:
        raise InvalidConfigError(f"{key}: the {module} entry needs username and password",
                                 key=key, value=None)
    return user, password
