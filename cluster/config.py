"""``BrokerConfig``: a Strata cluster's settings from Kafka's broker keys, split into the scopes
that own them (STYLE.md P8):

* ``log.dirs`` (or ``log.dir``): the log directories, comma-separated;
* ``LogConfig`` (storage): the ``log.*`` broker synonyms of topic keys (``log.segment.bytes``,
  ``log.retention.hours``, ``log.cleaner.min.cleanable.ratio``, ``message.max.bytes``, ...), the
  defaults of every topic;
* ``CleanerConfig`` (cleaner): ``log.cleaner.*`` and ``message.max.bytes``;
* ``LogDirConfig`` (node): ``num.recovery.threads.per.data.dir`` and the periodic-task intervals;
* ``TransactionConfig`` (the transaction coordinator): ``transaction.timeout.ms`` (the default
  timeout of a transaction), ``transaction.max.timeout.ms`` and
  ``transaction.abort.timed.out.transaction.cleanup.interval.ms``.

A key that belongs to none of them is refused when it looks like ours (``log.*``) or is no key of
Kafka's broker (``cluster.kafka.keys``), and otherwise kept in ``ignored`` (a real
``server.properties`` holds ``broker.id``, ``controller.quorum.voters``, ... that a storage layer
has no use for). ``listeners`` and the other keys of ``node.kafka.config.KafkaServerConfig`` are
among them here, and are taken from ``properties`` by ``cluster.kafka.listeners`` (each
directory's Kafka listener), checked when the cluster starts. ``read_server_properties`` reads
Java's properties format.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cleaner.config import KEYS as CLEANER_KEYS
from cleaner.config import CleanerConfig
from cluster.transactions.txn_state import KEYS as TXN_KEYS
from cluster.transactions.txn_state import TransactionConfig
from node.config import KEYS as LOG_DIR_KEYS
from node.config import LogDirConfig
from storage.config import BROKER_SYNONYMS, TOPIC_KEYS, LogConfig
from storage.errors import InvalidConfigError

LOG_DIRS_KEYS = ("log.dirs", "log.dir")


@dataclass(frozen=True)
class BrokerConfig:
    """Everything a cluster start needs, parsed and validated. Frozen."""

    log_dirs: tuple[str, ...] = ()
    log: LogConfig = field(default_factory=LogConfig)
    cleaner: CleanerConfig = field(default_factory=CleanerConfig)
    log_dir: LogDirConfig = field(default_factory=LogDirConfig)
    transactions: TransactionConfig = field(default_factory=TransactionConfig)
    properties: Mapping[str, str] = field(default_factory=dict)
    """The keys that built this config, as strings (sent to actors, which rebuild it)."""
    ignored: tuple[str, ...] = ()

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> BrokerConfig:
        text = {str(k).strip(): _text(v) for k, v in properties.items()}
        log_keys: dict[str, str] = {}
        cleaner_keys: dict[str, str] = {}
        dir_keys: dict[str, str] = {}
        txn_keys: dict[str, str] = {}
        ignored: list[str] = []
        dirs: tuple[str, ...] = ()
        for key, value in text.items():
            known = False
            if key in LOG_DIRS_KEYS:
                dirs = tuple(d.strip() for d in value.split(",") if d.strip())
                known = True
            if key in BROKER_SYNONYMS or key in TOPIC_KEYS:
                log_keys[key] = value
                known = True
            if key in CLEANER_KEYS:
                cleaner_keys[key] = value
                known = True
            if key in LOG_DIR_KEYS:
                dir_keys[key] = value
                known = True
            if key in TXN_KEYS:
                txn_keys[key] = value
                known = True
            if not known:
                if key.startswith("log.") or not _known_key(key):
                    raise InvalidConfigError(f"unknown broker config key {key!r}", key=key,
                                             value=value)
                ignored.append(key)
        return cls(log_dirs=dirs, log=LogConfig.from_properties(log_keys),
                   cleaner=CleanerConfig.from_properties(cleaner_keys),
                   log_dir=LogDirConfig.from_properties(dir_keys),
                   transactions=TransactionConfig.from_properties(txn_keys), properties=text,
                   ignored=tuple(sorted(ignored)))

    def with_overrides(self, properties: Mapping[str, Any]) -> BrokerConfig:
        return BrokerConfig.from_properties({**self.properties, **properties})

    def with_log_dirs(self, log_dirs: Sequence[str | Path]) -> BrokerConfig:
        return self.with_overrides({"log.dirs": ",".join(str(d) for d in log_dirs)})

    @property
    def topic_defaults(self) -> dict[str, str]:
        """The ``LogConfig`` keys of ``properties`` (what a node needs for its defaults)."""
        return {k: v for k, v in self.properties.items() if k in BROKER_SYNONYMS or k in TOPIC_KEYS}

    @property
    def log_dir_properties(self) -> dict[str, str]:
        return {k: v for k, v in self.properties.items() if k in LOG_DIR_KEYS}

    @property
    def cleaner_properties(self) -> dict[str, str]:
        return {k: v for k, v in self.properties.items() if k in CLEANER_KEYS}


def read_server_properties(path: str | Path) -> dict[str, str]:
    """Java's ``.properties`` format as Kafka reads ``server.properties`` (``Properties.load``):
    ``key=value``, ``key: value`` and ``key value`` lines, a bare ``key`` (empty value),
    ``#``/``!`` comments, blank lines, continuations by an odd number of trailing backslashes,
    ``\\uXXXX`` and ``\\t``-style escapes. Every key must be one Kafka's broker knows (or one of
    ours): an unknown key, a malformed escape or a file that is not UTF-8 raises
    ``InvalidConfigError`` naming the file, the line and the key."""
    return {key: value for _, key, value in properties_lines(path)}


def properties_lines(path: str | Path, known: Callable[[str], bool] | None = None
                     ) -> list[tuple[int, str, str]]:
    """``(line number, key, value)`` of every entry of the file, checked as
    ``read_server_properties`` says; a key given twice keeps its last value (as Java does).
    ``known`` (a broker's keys by default) says which keys the file may hold."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise InvalidConfigError(
            f"{path} line {line}: not UTF-8 (byte 0x{data[err.start]:02x}); save the file as "
            "UTF-8", path=str(path), line=line) from None
    entries: list[tuple[int, str, str]] = []
    logical: str | None = None
    start = 0
    for number, raw in enumerate(_NEWLINES.split(text), start=1):
        line = raw.lstrip(_JAVA_BLANKS)
        if logical is None:
            if not line or line[0] in "#!":
                continue
            logical, start = "", number
        backslashes = len(line) - len(line.rstrip("\\"))
        if backslashes % 2:
            logical += line[:-1]
            continue
        entries.append(_entry(path, start, logical + line, known))
        logical = None
    if logical is not None:
        entries.append(_entry(path, start, logical, known))
    return entries


_NEWLINES = re.compile(r"\r\n|\r|\n")
_JAVA_BLANKS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _entry(path: str | Path, number: int, line: str,
           known: Callable[[str], bool] | None) -> tuple[int, str, str]:
    """Split a logical line as ``java.util.Properties.load`` does, unescape, check the key."""
    end = 0
    while end < len(line) and line[end] not in "=:" + _JAVA_BLANKS:
        end += 2 if line[end] == "\\" else 1
    end = min(end, len(line))
    rest = line[end:].lstrip(_JAVA_BLANKS)
    if rest[:1] in ("=", ":") and (end == len(line) or line[end] in _JAVA_BLANKS + "=:"):
        rest = rest[1:].lstrip(_JAVA_BLANKS)
    key, value = _unescape(path, number, line[:end]), _unescape(path, number, rest).rstrip()
    if not (known or _known_key)(key):
        scope = "broker config" if known is None else "config"
        raise InvalidConfigError(f"{path} line {number}: unknown {scope} key {key!r}",
                                 path=str(path), line=number, key=key)
    return number, key, value


def _unescape(path: str | Path, number: int, text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch if ch != "\\" else "")
            i += 1
            continue
        code = text[i + 1]
        if code == "u":
            digits = text[i + 2:i + 6]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise InvalidConfigError(f"{path} line {number}: malformed \\uxxxx escape "
                                         f"{text[i:i + 6]!r}", path=str(path), line=number)
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(code, code))
        i += 2
    return "".join(out)


def _known_key(key: str) -> bool:
    """A key of ours (any scope) or one Kafka's broker reads."""
    from cluster.kafka.keys import STRATA_BROKER_KEYS, is_kafka_broker_key

    return (key in LOG_DIRS_KEYS or key in BROKER_SYNONYMS or key in TOPIC_KEYS
            or key in CLEANER_KEYS or key in LOG_DIR_KEYS or key in TXN_KEYS
            or key in STRATA_BROKER_KEYS or is_kafka_broker_key(key))


def _text(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)
