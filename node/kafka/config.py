"""``KafkaServerConfig``: the broker settings of the Kafka protocol front end, named after
Kafka's keys (``from_properties({"listeners": "PLAINTEXT://127.0.0.1:0"})``).

The one listener is ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL``. A SASL listener
needs ``sasl.enabled.mechanisms`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and users for each
mechanism: PLAIN's from ``listener.name.sasl_plaintext.plain.sasl.jaas.config`` (on a
``SASL_SSL`` listener ``listener.name.sasl_ssl.plain.sasl.jaas.config``; Kafka's JAAS text with
``user_NAME="password"`` options), SCRAM's from ``strata.sasl.scram.users``
(``alice:secret,bob:pw``; Kafka keeps SCRAM credentials in its metadata instead), see ``jaas``.
An ``SSL`` or ``SASL_SSL`` listener takes Kafka's ``ssl.*`` keys (and their
``listener.name.ssl.`` / ``listener.name.sasl_ssl.`` forms) into ``tls``, a ``TlsConfig``; they
are ignored for a listener without TLS, as Kafka ignores them.
The fields holding passwords are left out of the config's repr.
``connection.failed.authentication.delay.ms`` bounds how long a connection whose authentication
failed stays open after its answer (it closes sooner when the client closes it).

The group coordinator's keys (``group.*``, ``offsets.*``: ``node.groups.config.KEYS``) are taken
into ``group_coordinator``, a ``GroupCoordinatorConfig``.

Unlike Kafka, the listener binds loopback unless told otherwise, and ``auto.create.topics.enable``
is off by default (a typo in a producer's topic should not create a topic). Port 0 picks an
ephemeral port; the server reports the bound one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from node.groups.config import KEYS as GROUP_KEYS
from node.groups.config import GroupCoordinatorConfig
from node.kafka.framing import DEFAULT_SOCKET_REQUEST_MAX_BYTES
from node.kafka.jaas import plain_users, scram_users
from node.kafka.tls import TlsConfig, is_tls_key
from storage.dotted_keys import check_integer, convert, unknown_key
from storage.errors import InvalidConfigError

KEYS: dict[str, str] = {
    "listeners": "listeners",
    "advertised.listeners": "advertised_listeners",
    "node.id": "node_id",
    "socket.request.max.bytes": "socket_request_max_bytes",
    "auto.create.topics.enable": "auto_create_topics_enable",
    "num.partitions": "num_partitions",
    "fetch.max.bytes": "fetch_max_bytes",
    "num.io.threads": "num_io_threads",
    "connections.max.idle.ms": "connections_max_idle_ms",
    "max.connections": "max_connections",
    "sasl.enabled.mechanisms": "sasl_enabled_mechanisms",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config":
        "listener_name_sasl_plaintext_plain_sasl_jaas_config",
    "listener.name.sasl_ssl.plain.sasl.jaas.config":
        "listener_name_sasl_ssl_plain_sasl_jaas_config",
    "strata.sasl.scram.users": "strata_sasl_scram_users",
    "sasl.server.max.receive.size": "sasl_server_max_receive_size",
    "connection.failed.authentication.delay.ms": "connection_failed_authentication_delay_ms",
}
PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL = "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"
SECURITY_PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
SASL_PROTOCOLS = frozenset({SASL_PLAINTEXT, SASL_SSL})
TLS_PROTOCOLS = frozenset({SSL, SASL_SSL})
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PLAIN_JAAS_KEY = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
PLAIN_JAAS_KEYS = {SASL_PLAINTEXT: PLAIN_JAAS_KEY,
                   SASL_SSL: "listener.name.sasl_ssl.plain.sasl.jaas.config"}
SCRAM_USERS_KEY = "strata.sasl.scram.users"
# keys holding passwords: DescribeConfigs reports them as sensitive, without their value (Kafka's
# PASSWORD config type)
SENSITIVE_KEYS = frozenset({*PLAIN_JAAS_KEYS.values(), SCRAM_USERS_KEY})
DEFAULT_SASL_SERVER_MAX_RECEIVE_SIZE = 524288  # Kafka's sasl.server.max.receive.size (512 KiB)
DEFAULT_FAILED_AUTHENTICATION_DELAY_MS = 100   # Kafka's connection.failed.authentication.delay.ms
DEFAULT_LISTENERS = "PLAINTEXT://127.0.0.1:9092"
DEFAULT_FETCH_MAX_BYTES = 57671680          # Kafka's fetch.max.bytes (55 MiB)
DEFAULT_NUM_IO_THREADS = 8
DEFAULT_CONNECTIONS_MAX_IDLE_MS = 600000     # Kafka's connections.max.idle.ms (10 min)
DEFAULT_MAX_CONNECTIONS = 2**31 - 1


@dataclass(frozen=True)
class Listener:
    """One ``NAME://host:port`` entry of ``listeners``."""

    name: str
    host: str
    port: int


@dataclass(frozen=True)
class KafkaServerConfig:
    """The protocol front end's settings (one per served directory). Validated at creation;
    every error names the Kafka key."""

    listeners: str = DEFAULT_LISTENERS
    advertised_listeners: str | None = None
    node_id: int = 0
    socket_request_max_bytes: int = DEFAULT_SOCKET_REQUEST_MAX_BYTES
    auto_create_topics_enable: bool = False
    num_partitions: int = 1
    fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES
    num_io_threads: int = DEFAULT_NUM_IO_THREADS
    connections_max_idle_ms: int = DEFAULT_CONNECTIONS_MAX_IDLE_MS
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    sasl_enabled_mechanisms: str | None = None
    listener_name_sasl_plaintext_plain_sasl_jaas_config: str | None = field(default=None,
                                                                             repr=False)
    listener_name_sasl_ssl_plain_sasl_jaas_config: str | None = field(default=None, repr=False)
    strata_sasl_scram_users: str | None = field(default=None, repr=False)
    sasl_server_max_receive_size: int = DEFAULT_SASL_SERVER_MAX_RECEIVE_SIZE
    connection_failed_authentication_delay_ms: int = DEFAULT_FAILED_AUTHENTICATION_DELAY_MS
    group_coordinator: GroupCoordinatorConfig = field(default_factory=GroupCoordinatorConfig)
    tls: TlsConfig | None = None

    def __post_init__(self) -> None:
        listener = self.listener()
        advertised = self.advertised_listener()
        if advertised is not None and advertised.name != listener.name:
            raise InvalidConfigError(
                f"advertised.listeners={self.advertised_listeners!r}: listener "
                f"{advertised.name} is not in listeners={self.listeners!r}",
                key="advertised.listeners", value=self.advertised_listeners)
        check_integer("sasl.server.max.receive.size", self.sasl_server_max_receive_size, "int",
                      at_least=1)
        check_integer("connection.failed.authentication.delay.ms",
                      self.connection_failed_authentication_delay_ms, "int", at_least=0)
        if listener.name in SASL_PROTOCOLS:
            self.plain_users()
            self.scram_users()
        if listener.name in TLS_PROTOCOLS:
            (self.tls or TlsConfig()).require_keystore()
        check_integer("node.id", self.node_id, "int", at_least=0)
        check_integer("socket.request.max.bytes", self.socket_request_max_bytes, "int",
                      at_least=1)
        check_integer("num.partitions", self.num_partitions, "int", at_least=1)
        check_integer("fetch.max.bytes", self.fetch_max_bytes, "int", at_least=0)
        check_integer("num.io.threads", self.num_io_threads, "int", at_least=1)
        check_integer("connections.max.idle.ms", self.connections_max_idle_ms, at_least=1)
        check_integer("max.connections", self.max_connections, "int", at_least=0)

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> KafkaServerConfig:
        """Build from Kafka's dotted keys (the group coordinator's and the ``ssl.*`` ones among
        them); an unknown key raises ``InvalidConfigError``."""
        # the annotations are strings here ("int", "str | None"): the kind is the first name
        kinds = {f.name: str(f.type).split("|")[0].strip() for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        groups = {key: raw for key, raw in properties.items() if key in GROUP_KEYS}
        for key, raw in properties.items():
            if key in GROUP_KEYS or is_tls_key(key):
                continue
            if key not in KEYS:
                raise unknown_key("kafka server", key, raw)
            values[KEYS[key]] = convert(key, kinds[KEYS[key]], raw)
        listener = _one_listener("listeners", values.get("listeners", DEFAULT_LISTENERS))
        tls = (TlsConfig.from_properties(properties, listener.name)
               if listener.name in TLS_PROTOCOLS else None)
        return cls(**values, group_coordinator=GroupCoordinatorConfig.from_properties(groups),
                   tls=tls)

    def listener(self) -> Listener:
        """The one listener of ``listeners`` (several come with the cluster wiring)."""
        return _one_listener("listeners", self.listeners)

    def is_sasl(self) -> bool:
        """Whether the listener authenticates its connections (``SASL_PLAINTEXT``,
        ``SASL_SSL``)."""
        return self.listener().name in SASL_PROTOCOLS

    def enabled_mechanisms(self) -> tuple[str, ...]:
        """The mechanisms of ``sasl.enabled.mechanisms``, in its order; a SASL listener needs one
        at least, each PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (``InvalidConfigError``)."""
        key, text = "sasl.enabled.mechanisms", self.sasl_enabled_mechanisms or ""
        names = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
        if not names:
            raise InvalidConfigError(
                f"{key}={self.sasl_enabled_mechanisms!r}: a {self.listener().name} listener "
                f"needs at least one of {', '.join(SASL_MECHANISMS)}", key=key,
                value=self.sasl_enabled_mechanisms)
        for name in names:
            if name not in SASL_MECHANISMS:
                raise InvalidConfigError(
                    f"{key}={text!r}: {name} is not served (only {', '.join(SASL_MECHANISMS)})",
                    key=key, value=text)
        return names

    def plain_users(self) -> dict[str, str]:
        """PLAIN's users and passwords ({} when PLAIN is not enabled); ``InvalidConfigError``
        naming the listener's ``listener.name.<listener>.plain.sasl.jaas.config`` when PLAIN is
        enabled without a user."""
        if "PLAIN" not in self.enabled_mechanisms():
            return {}
        key = PLAIN_JAAS_KEYS[self.listener().name]
        text = getattr(self, KEYS[key])
        if text is None:
            raise InvalidConfigError(f"{key}: PLAIN is enabled without users", key=key,
                                     value=None)
        return plain_users(key, text)

    def scram_users(self) -> dict[str, str]:
        """The SCRAM users and passwords ({} when no SCRAM mechanism is enabled);
        ``InvalidConfigError`` naming ``strata.sasl.scram.users`` when one is enabled without a
        user."""
        if not any(name.startswith("SCRAM-") for name in self.enabled_mechanisms()):
            return {}
        text = self.strata_sasl_scram_users
        if text is None:
            raise InvalidConfigError(f"{SCRAM_USERS_KEY}: SCRAM is enabled without users",
                                     key=SCRAM_USERS_KEY, value=None)
        return scram_users(SCRAM_USERS_KEY, text)

    def advertised_listener(self) -> Listener | None:
        """The listener of ``advertised.listeners``, or None to advertise the bound address."""
        if self.advertised_listeners is None:
            return None
        return _one_listener("advertised.listeners", self.advertised_listeners)


def _one_listener(key: str, text: str) -> Listener:
    entries = [part.strip() for part in text.split(",") if part.strip()]
    if len(entries) != 1:
        raise InvalidConfigError(f"{key}={text!r}: expected exactly one NAME://host:port",
                                 key=key, value=text)
    name, sep, address = entries[0].partition("://")
    host, colon, port = address.rpartition(":")
    if not sep or not colon or not port.isdigit() or int(port) > 65535:
        raise InvalidConfigError(f"{key}={text!r}: expected NAME://host:port", key=key,
                                 value=text)
    if name.upper() not in SECURITY_PROTOCOLS:
        raise InvalidConfigError(f"{key}={text!r}: only {', '.join(SECURITY_PROTOCOLS)} "
                                 "listeners are served", key=key, value=text)
    return Listener(name.upper(), host.strip("[]"), int(port))
