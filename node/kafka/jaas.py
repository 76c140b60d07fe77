"""The SASL credentials of a listener, from the text Kafka's keys take.

- ``listener.name.sasl_plaintext.plain.sasl.jaas.config``: Kafka's JAAS text, one login module
  entry, whose ``user_NAME="password"`` options are the PLAIN users (Kafka's
  ``PlainServerCallbackHandler``)::

      org.apache.kafka.common.security.plain.PlainLoginModule required
          user_alice="alice-secret" user_bob="bob-secret";

  Read as Kafka's ``JaasConfig`` reads it (a ``StreamTokenizer``): ``//`` and ``/* */``
  comments, option values quoted (``\\"`` and ``\\\\`` escapes) or bare words, ``;`` at the end.
- ``strata.sasl.scram.users``: ``alice:secret,bob:pw``, the SCRAM users and their passwords (a
  user holds no ``:``, a password no ``,``); the server derives their SCRAM-SHA-256/512
  credentials at start, as ``kafka-configs --add-config 'SCRAM-SHA-256=[password=...]'`` does.

Every error is an ``InvalidConfigError`` naming the key; the value in it is hidden, since it
holds passwords.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from storage.errors import InvalidConfigError

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
USER_PREFIX = "user_"
HIDDEN = "[hidden]"

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | "(?P<quoted>(?:[^"\\]|\\.)*)"
  | (?P<word>[A-Za-z0-9_.$\-\u0080-\U0010ffff]+)
  | (?P<symbol>[=;])
""", re.VERBOSE | re.DOTALL)
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


@dataclass(frozen=True)
class JaasEntry:
    """One login module entry: the module class, its control flag and its options."""

    login_module: str
    control_flag: str
    options: dict[str, str] = field(repr=False, hash=False)


def _error(key: str, problem: str) -> InvalidConfigError:
    return InvalidConfigError(f"{key}: {problem}", key=key, value=HIDDEN)


def _tokens(key: str, text: str) -> list[tuple[str, str]]:
    """(kind, text) of every token: ``word`` (bare or quoted) or ``symbol``."""
    out, position = [], 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise _error(key, f"unexpected character {text[position]!r} at {position} in the "
                              "JAAS config")
        position = match.end()
        if match["quoted"] is not None:
            out.append(("word", _ESCAPE.sub(r"\1", match["quoted"])))
        elif match["word"] is not None:
            out.append(("word", match["word"]))
        elif match["symbol"] is not None:
            out.append(("symbol", match["symbol"]))
    return out


def parse_jaas_config(key: str, text: str) -> JaasEntry:
    """The one login module entry of the JAAS ``text`` (``key`` names the setting in errors):
    ``<class> <flag> *(<name>=<value>) ;``. Kafka allows exactly one entry per listener and
    mechanism."""
    tokens = _tokens(key, text)
    entries: list[JaasEntry] = []
    i = 0
    while i < len(tokens):
        kind, module = tokens[i]
        if kind != "word":
            raise _error(key, f"expected a login module class, found {module!r}")
        if i + 1 >= len(tokens) or tokens[i + 1][0] != "word":
            raise _error(key, "login module control flag not specified in JAAS config")
        flag = tokens[i + 1][1]
        if flag.lower() not in CONTROL_FLAGS:
            raise _error(key, f"invalid login module control flag {flag!r} in JAAS config")
        i += 2
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i] != ("symbol", ";"):
            name = tokens[i][1]
            if (tokens[i][0] != "word" or i + 2 >= len(tokens)
                    or tokens[i + 1] != ("symbol", "=") or tokens[i + 2][0] != "word"):
                raise _error(key, f"value not specified for key {name!r} in JAAS config")
            options[name] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise _error(key, "JAAS config entry not terminated by semi-colon")
        i += 1
        entries.append(JaasEntry(module, flag.lower(), options))
    if len(entries) != 1:
        raise _error(key, f"JAAS config property contains {len(entries)} login modules, "
                          "should be 1 module")
    return entries[0]


def plain_users(key: str, text: str) -> dict[str, str]:
    """The PLAIN users and passwords of the JAAS ``text`` of ``key``: the ``user_NAME`` options
    of a ``PlainLoginModule`` entry; at least one."""
    entry = parse_jaas_config(key, text)
    if entry.login_module != PLAIN_LOGIN_MODULE:
        raise _error(key, f"the login module of PLAIN is {PLAIN_LOGIN_MODULE}, not "
                          f"{entry.login_module}")
    users = {name[len(USER_PREFIX):]: password for name, password in entry.options.items()
             if name.startswith(USER_PREFIX) and len(name) > len(USER_PREFIX)}
    if not users:
        raise _error(key, 'no user_NAME="password" option: PLAIN has no user')
    return users


def scram_users(key: str, text: str) -> dict[str, str]:
    """The users and passwords of ``user:password,user:password`` (``key`` names the setting);
    at least one, each with a non-empty name and password, no name twice."""
    users: dict[str, str] = {}
    for number, entry in enumerate(part.strip() for part in text.split(",")):
        if not entry:
            continue
        name, colon, password = entry.partition(":")
        if not colon or not name or not password:
            raise _error(key, f"entry {number} is not user:password")
        if name in users:
            raise _error(key, f"user {name!r} is given twice")
        users[name] = password
    if not users:
        raise _error(key, "no user:password entry: SCRAM has no user")
    return users
