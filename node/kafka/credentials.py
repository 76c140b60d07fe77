"""``CredentialCache``: what a SASL listener checks clients against, built once at start from
the config (Kafka's ``CredentialCache`` with the JAAS options of PLAIN's callback handler), and
the mechanism server of each exchange.

PLAIN keeps the passwords (Kafka's JAAS options hold them too); SCRAM keeps only salted
credentials, derived here with a fresh random salt and 4096 iterations per user and mechanism.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Protocol

from node.kafka.config import KafkaServerConfig
from node.kafka.plain import PLAIN, PlainServer
from node.kafka.scram import ScramCredential, ScramMechanism, ScramServer, generate_credential


class SaslServer(Protocol):
    """The server side of one exchange of one mechanism (``PlainServer``, ``ScramServer``)."""

    mechanism_name: str

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str: ...

    def evaluate(self, token: bytes) -> bytes: ...


@dataclass(frozen=True)
class CredentialCache:
    """The enabled mechanisms (in the configured order, which SaslHandshake reports), PLAIN's
    passwords and SCRAM's credentials per mechanism and user. Immutable; shared by every
    connection of a listener."""

    mechanisms: tuple[str, ...]
    plain: Mapping[str, str] = field(repr=False)
    scram: Mapping[ScramMechanism, Mapping[str, ScramCredential]] = field(repr=False)

    @classmethod
    def from_config(cls, config: KafkaServerConfig) -> CredentialCache:
        """The credentials of ``config``'s SASL settings (``InvalidConfigError`` when they are
        missing or malformed; the config checked them already)."""
        mechanisms = config.enabled_mechanisms()
        users = config.scram_users()
        scram = {}
        for name in mechanisms:
            mechanism = ScramMechanism.named(name)
            if mechanism is not None:
                scram[mechanism] = {user: generate_credential(mechanism, password)
                                    for user, password in users.items()}
        return cls(mechanisms, config.plain_users(), scram)

    def server(self, mechanism: str) -> SaslServer | None:
        """A fresh server for one exchange of ``mechanism``, or None when it is not enabled."""
        if mechanism not in self.mechanisms:
            return None
        if mechanism == PLAIN:
            return PlainServer(self.plain)
        scram = ScramMechanism.named(mechanism)
        assert scram is not None   # the config admits only PLAIN and SCRAM mechanisms
        return ScramServer(scram, self.scram[scram])
