"""The four SCRAM messages (RFC 5802 section 7), parsed and written as Kafka's ``ScramMessages``
does: the client's two are matched whole against Kafka's patterns (ASCII only; ``PRINTABLE``
nonces; extensions ``,name=value``), the server's two are written.

    client-first  = "n," ["a=" saslname] "," ["m=" value ","] "n=" saslname ",r=" nonce
                    *("," alpha "=" value)
    server-first  = "r=" client-nonce server-nonce ",s=" base64(salt) ",i=" iterations
    client-final  = "c=" base64(gs2-header) ",r=" nonce *("," alpha "=" value) ",p=" base64(proof)
    server-final  = "v=" base64(server-signature)

Only gs2 flag "n" (no channel binding) is accepted, as in Kafka. The parts that enter the
AuthMessage (client-first-message-bare, client-final-message-without-proof) are kept as the
client sent them (RFC 5802; Kafka rebuilds them, which is the same text for every client that
sends no extension). A message that does not match raises ``SaslAuthenticationError`` with
Kafka's generic answer, since what a client sent wrong is no business of an unauthenticated
peer.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field

from node.kafka.errors import SaslAuthenticationError

# Kafka's AbstractScramMessage character classes, with Java's "&&[^...]" spelled out
_VALUE_SAFE = r"[\x01-\x2b\x2d-\x3c\x3e-\x7f]+"       # [\x01-\x7F] without ',' '='
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"                     # [\x01-\x7F] without ','
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"                 # [\x21-\x7E] without ','
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_BASE64_CHAR = r"[a-zA-Z0-9/+]"
_BASE64 = rf"(?:{_BASE64_CHAR}{{4}})*(?:{_BASE64_CHAR}{{3}}=|{_BASE64_CHAR}{{2}}==)?"
_RESERVED = rf"(?:m={_VALUE},)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"

_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,"
    rf"(?P<bare>{_RESERVED}n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})"
    rf"(?P<extensions>{_EXTENSIONS}))")
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),"
    rf"p=(?P<proof>{_BASE64})")
_EXTENSION = re.compile(rf"([A-Za-z]+)=({_VALUE})")
_SASLNAME_ESCAPE = re.compile(r"=2C|=3D")


def invalid_credentials(mechanism: str, reason: str) -> SaslAuthenticationError:
    """Kafka's answer to a failed SCRAM exchange (``SaslServerAuthenticator``: a
    ``SaslException`` becomes this text, never its own message): the same words for a wrong
    password, an unknown user and a malformed message."""
    return SaslAuthenticationError(
        "Authentication failed during authentication due to invalid credentials with SASL "
        f"mechanism {mechanism}", mechanism=mechanism, reason=reason)


def _text(data: bytes, mechanism: str, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise invalid_credentials(mechanism, f"the {what} is not UTF-8: {err}") from err


@dataclass(frozen=True)
class ClientFirstMessage:
    """The client's first message: the user (``sasl_name`` as sent, ``=2C``/``=3D`` escaped),
    the requested authorization id ("" when none), the client nonce, the extensions and the
    bare part that enters the AuthMessage."""

    sasl_name: str
    authorization_id: str
    nonce: str
    extensions: dict[str, str] = field(hash=False)
    bare: str

    @classmethod
    def parse(cls, data: bytes, mechanism: str) -> ClientFirstMessage:
        """The message in ``data``; ``SaslAuthenticationError`` when it does not match."""
        match = _CLIENT_FIRST.fullmatch(_text(data, mechanism, "client first message"))
        if match is None:
            raise invalid_credentials(mechanism, "invalid SCRAM client first message format")
        extensions = dict(_EXTENSION.fullmatch(part).groups()  # type: ignore[union-attr]
                          for part in match["extensions"].split(",")[1:])
        return cls(match["saslname"], match["authzid"] or "", match["nonce"], extensions,
                   match["bare"])


@dataclass(frozen=True)
class ClientFinalMessage:
    """The client's final message: the channel binding, the combined nonce, the proof and the
    part without the proof that enters the AuthMessage."""

    channel_binding: bytes
    nonce: str
    proof: bytes
    without_proof: str

    @classmethod
    def parse(cls, data: bytes, mechanism: str) -> ClientFinalMessage:
        """The message in ``data``; ``SaslAuthenticationError`` when it does not match."""
        match = _CLIENT_FINAL.fullmatch(_text(data, mechanism, "client final message"))
        if match is None:
            raise invalid_credentials(mechanism, "invalid SCRAM client final message format")
        return cls(base64.b64decode(match["channel"]), match["nonce"],
                   base64.b64decode(match["proof"]), match["without_proof"])


@dataclass(frozen=True)
class ServerFirstMessage:
    """The server's first message: the combined nonce (client's then server's), the salt and
    the iteration count."""

    nonce: str
    salt: bytes
    iterations: int

    def text(self) -> str:
        return f"r={self.nonce},s={base64.b64encode(self.salt).decode()},i={self.iterations}"


def server_final_message(server_signature: bytes) -> str:
    """The server's final message of a successful exchange."""
    return f"v={base64.b64encode(server_signature).decode()}"


def username(sasl_name: str) -> str | None:
    """The user a ``saslname`` names (``=2C`` is ``,``, ``=3D`` is ``=``), or None when it holds
    any other ``=`` (Kafka's ``ScramFormatter.username``)."""
    if "=" in _SASLNAME_ESCAPE.sub("", sasl_name):
        return None
    return _SASLNAME_ESCAPE.sub(lambda m: "," if m[0] == "=2C" else "=", sasl_name)


def sasl_name(user: str) -> str:
    """``user`` as a ``saslname`` (``=`` as ``=3D``, ``,`` as ``=2C``; Kafka's
    ``ScramFormatter.saslName``); ``username`` reverses it."""
    return user.replace("=", "=3D").replace(",", "=2C")
