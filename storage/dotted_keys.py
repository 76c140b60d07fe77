"""Kafka's dotted config keys (``segment.bytes``, ``log.cleaner.threads``,
``log.retention.check.interval.ms``): the one helper the three config parsers share
(``storage.config.LogConfig``, ``cleaner.config.CleanerConfig``, ``node.config.LogDirConfig``).

- ``convert``: a key's value from text (as Kafka's ``ConfigDef`` parses it) or an already typed
  value, to ``int``, ``float``, ``bool`` or ``str``;
- ``check_integer``: Kafka's range check of an ``INT`` or ``LONG`` setting;
- ``unknown_key``: the error for a key the scope does not know, naming the key;
- ``to_properties``: a config back to dotted keys.

Every error is an ``InvalidConfigError`` whose message and fields name the key and the value.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from storage.errors import InvalidConfigError

INT_MIN, INT_MAX = -(2**31), 2**31 - 1      # Kafka's ConfigDef.Type.INT (a Java int)
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1    # Kafka's ConfigDef.Type.LONG (a Java long)
INT, LONG = "int", "long"

_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")   # what Integer.parseInt/Long.parseLong accept


def check_integer(key: str, value: object, kind: str = LONG, at_least: int | None = None) -> None:
    """Kafka's ConfigDef check of an ``INT`` or ``LONG`` setting: ``value`` is an integer (never
    ``bool`` or ``float``) in the Java type's range and, with ``at_least``, not below it.
    Raises ``InvalidConfigError`` naming ``key`` and ``value``. Every config of storage, cleaner
    and node checks its integer settings here."""
    low, high = (INT_MIN, INT_MAX) if kind == INT else (LONG_MIN, LONG_MAX)
    minimum = low if at_least is None else max(at_least, low)
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidConfigError(f"{key}={value!r} is not an integer", key=key, value=value)
    if value < minimum:
        raise InvalidConfigError(f"{key}={value} is below the minimum {minimum}", key=key,
                                 value=value)
    if value > high:
        raise InvalidConfigError(f"{key}={value} is above the maximum {high} (Kafka's type of "
                                 f"{key} is a Java {kind})", key=key, value=value)


def parse_integer(key: str, raw: object) -> int:
    """A dotted key's integer value, from text as Java's ``parseLong`` reads it (ASCII digits
    with an optional sign; no ``1_000``, no other scripts' digits) or from an integer."""
    text = None if isinstance(raw, (bool, float)) else str(raw).strip()
    if text is None or not _JAVA_INTEGER.fullmatch(text):
        raise InvalidConfigError(f"{key}={raw!r} is not an integer", key=key, value=raw)
    return int(text)


def convert(key: str, kind: Any, raw: Any) -> Any:
    """The value of ``key`` as ``kind`` (``int``, ``float``, ``bool`` or ``str``, or their names
    as a dataclass annotation gives them). Text is stripped; integers as ``parse_integer`` reads
    them; booleans are ``true``/``false`` in any case; an ``int`` is taken for a ``float``, and a
    value already of the kind passes as it is."""
    name = kind if isinstance(kind, str) else kind.__name__
    if name == "int":
        return parse_integer(key, raw)
    if name == "float" and isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return float(raw)
    if name == "bool" and isinstance(raw, bool):
        return raw
    text = str(raw).strip()
    try:
        if name == "float":
            return float(text)
        if name == "bool":
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
        return text
    except ValueError as err:
        raise InvalidConfigError(f"{key}={raw!r} is not a valid {kind}", key=key,
                                 value=raw) from err


def unknown_key(scope: str, key: str, raw: object) -> InvalidConfigError:
    """The error for a dotted key ``scope`` (``log``, ``log cleaner``, ``log directory``) does not
    know."""
    return InvalidConfigError(f"unknown {scope} config key {key!r}", key=key, value=raw)


def to_properties(config: object, keys: Mapping[str, str]) -> dict[str, str]:
    """``config``'s fields back as dotted keys (``keys``: dotted key -> field name); booleans in
    Kafka's lower case."""
    out = {}
    for key, name in keys.items():
        value = getattr(config, name)
        out[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return out
