"""Each log directory's Kafka listener settings, from the cluster's broker config.

A cluster serves the Kafka protocol when its config has ``listeners``: every node actor then
runs a ``KafkaServer`` over its directory, one broker per directory. A node takes the keys of
``node.kafka.config.KEYS`` but ``node.id`` (each directory's ``meta.properties`` gives it),
the group coordinator's (``node.groups.config.KEYS``: ``group.*``, ``offsets.*``) and the TLS
keys (``node.kafka.tls``: ``ssl.*`` and their ``listener.name.ssl.`` and
``listener.name.sasl_ssl.`` forms; the files they name are read on each directory's host), with
the port rule: the directory given i-th (from 0) listens on port P + i of ``listeners`` and
advertises port Q + i of ``advertised.listeners``; a port 0 stays 0 (an ephemeral port each).
An empty ``advertised.listeners`` is the same as none (the bound address is advertised).

    directory_properties({"listeners": "PLAINTEXT://127.0.0.1:9092"}, 2)
    # {"listeners": "PLAINTEXT://127.0.0.1:9094"}
"""

from __future__ import annotations

from collections.abc import Mapping

from storage.errors import InvalidConfigError

LISTENERS = "listeners"
ADVERTISED_LISTENERS = "advertised.listeners"
NODE_ID = "node.id"
MAX_PORT = 65535


def serves_kafka(properties: Mapping[str, str]) -> bool:
    """Whether a cluster with these broker keys runs a Kafka listener per directory."""
    return bool(str(properties.get(LISTENERS, "")).strip())


def security_protocol(properties: Mapping[str, str]) -> str | None:
    """The security protocol of the brokers' listener (``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT``
    or ``SASL_SSL``: what clients set as ``security.protocol``), None without listeners."""
    if not serves_kafka(properties):
        return None
    name, _, _ = str(properties[LISTENERS]).strip().partition("://")
    return name.strip().upper()


def directory_properties(properties: Mapping[str, str], index: int) -> dict[str, str]:
    """The ``KafkaServerConfig`` keys of the directory given ``index``-th (see the module
    docstring); empty when the cluster serves no Kafka listener. A malformed listener, or a
    port pushed above 65535 by the rule, raises ``InvalidConfigError`` naming the key.
    Without listeners it imports nothing: the Kafka config pulls in the protocol's schemas
    (kio, a quarter of a second), and every cluster start asks this before its first actor."""
    if not serves_kafka(properties):
        return {}
    from node.groups.config import KEYS as GROUP_KEYS
    from node.kafka.config import KEYS, KafkaServerConfig
    from node.kafka.tls import is_tls_key

    chosen = {key: str(value) for key, value in properties.items()
              if (key in KEYS or key in GROUP_KEYS or is_tls_key(key)) and key != NODE_ID}
    if not chosen.get(ADVERTISED_LISTENERS, "").strip():
        chosen.pop(ADVERTISED_LISTENERS, None)
    for key in (LISTENERS, ADVERTISED_LISTENERS):
        if key in chosen:
            chosen[key] = _shifted(key, chosen[key], index)
    KafkaServerConfig.from_properties(chosen)
    return chosen


def _shifted(key: str, text: str, index: int) -> str:
    """``NAME://host:port`` with ``index`` added to a non-zero port; anything else as it is
    (``KafkaServerConfig`` refuses it, naming the key)."""
    head, colon, port = text.strip().rpartition(":")
    if not colon or not port.isdigit() or int(port) == 0:
        return text
    shifted = int(port) + index
    if shifted > MAX_PORT:
        raise InvalidConfigError(
            f"{key}={text!r}: log directory {index} would use port {shifted} (port + its "
            f"position among the log directories), above {MAX_PORT}", key=key, value=text)
    return f"{head}:{shifted}"
