"""``BrokerConfig``: a Strata cluster's settings from Kafka's broker keys, split into the scopes
that own them (STYLE.md P8):

* ``log.dirs`` (or ``log.dir``): the log directories, comma-separated;
* ``LogConfig`` (storage): the ``log.*`` broker synonyms of topic keys (``log.segment.bytes``,
  ``log.retention.hours``, ``log.cleaner.min.cleanable.ratio``, ``message.max.bytes``, ...), the
  defaults of every topic;
* ``CleanerConfig`` (cleaner): ``log.cleaner.*`` and ``message.max.bytes``;
* ``LogDirConfig`` (node): ``num.recovery.threads.per.data.dir`` and the periodic-task intervals.

A key that belongs to none of them is refused when it looks like ours (``log.*``), and otherwise
kept in ``ignored`` (a real ``server.properties`` holds ``broker.id``, ``listeners``, ... that a
storage layer has no use for). ``read_server_properties`` reads Java's properties format.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cleaner.config import KEYS as CLEANER_KEYS
from cleaner.config import CleanerConfig
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
    properties: Mapping[str, str] = field(default_factory=dict)
    """The keys that built this config, as strings (sent to actors, which rebuild it)."""
    ignored: tuple[str, ...] = ()

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> BrokerConfig:
        text = {str(k).strip(): _text(v) for k, v in properties.items()}
        log_keys: dict[str, str] = {}
        cleaner_keys: dict[str, str] = {}
        dir_keys: dict[str, str] = {}
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
            if not known:
                if key.startswith("log."):
                    raise InvalidConfigError(f"unknown broker config key {key!r}", key=key,
                                             value=value)
                ignored.append(key)
        return cls(log_dirs=dirs, log=LogConfig.from_properties(log_keys),
                   cleaner=CleanerConfig.from_properties(cleaner_keys),
                   log_dir=LogDirConfig.from_properties(dir_keys), properties=text,
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
    """Java's ``.properties`` format as Kafka's ``server.properties`` uses it: ``key=value`` or
    ``key: value`` lines, ``#``/``!`` comments, blank lines, trailing-backslash continuations."""
    entries: dict[str, str] = {}
    logical = ""
    for raw in Path(path).read_text(encoding="utf-8").splitlines():
        line = raw.strip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        match = re.match(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$", logical)
        if match:
            entries[match.group(1)] = match.group(2).strip()
        elif logical:
            entries[logical] = ""
        logical = ""
    return entries


def _text(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)
