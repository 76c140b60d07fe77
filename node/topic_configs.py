"""``topic-configs.json``: the topic overrides a log directory keeps for its partitions, so a node
restarted with nothing but its directory opens every log with its topic's settings.

Layout (UTF-8 JSON, written with ``storage.durable.atomic_write``: tmp + fsync + rename + dir
fsync, so a crash leaves the old or the new file)::

    {"version": 1,
     "topics": {"<topic>": {"<topic key>": "<value>", ...}, ...}}

Keys are Kafka's topic keys (``cleanup.policy``, ``segment.bytes``, ...), values strings, only the
overrides of the broker defaults. Kafka keeps these in ZooKeeper/KRaft; we keep one copy per
directory holding a partition of the topic. A missing file means no overrides. A file that cannot
be read as a whole (not UTF-8, not JSON, nested too deeply, a wrong version, no ``topics`` object)
is a ``CheckpointError`` naming the file (nothing is guessed). One topic's entry that is not an
object of scalar values is that topic's problem only: ``read`` returns it apart, as it was, and
``write`` keeps it verbatim, so a write for another topic never drops it (its partitions would then
open with the defaults).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from node.errors import InvalidTopicConfigError
from storage.config import LogConfig
from storage.durable import atomic_write
from storage.errors import CheckpointError, InvalidConfigError
from storage.files import TOPIC_CONFIGS_FILE

VERSION = 1

TopicOverrides = dict[str, dict[str, str]]


@dataclass(frozen=True)
class TopicConfigs:
    """What ``topic-configs.json`` holds: ``overrides`` of the topics whose entry is an object of
    scalar values (as text; whether Kafka accepts them is the reader's to check), and
    ``malformed``, the entries of the others as read (for ``write`` to keep as they are)."""

    overrides: TopicOverrides = field(default_factory=dict)
    malformed: dict[str, object] = field(default_factory=dict)


class TopicConfigsFile:
    """Reads and writes one directory's ``topic-configs.json``. Not thread-safe: the owner
    serialises writes."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / TOPIC_CONFIGS_FILE

    def read(self) -> TopicConfigs:
        """The topics' entries; ``CheckpointError`` naming the file when it cannot be read as a
        whole (not UTF-8, not JSON, nested too deeply, a wrong version, no ``topics`` object)
        or is no regular file (a FIFO would block the read for ever)."""
        try:
            mode = os.stat(self.path).st_mode
        except FileNotFoundError:
            return TopicConfigs()
        except OSError as err:
            raise CheckpointError(f"{self.path}: {err.strerror}", path=str(self.path)) from None
        if not stat.S_ISREG(mode):
            raise CheckpointError(f"{self.path}: not a regular file", path=str(self.path))
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return TopicConfigs()
        except UnicodeDecodeError as err:
            raise CheckpointError(f"{self.path}: not UTF-8 text (byte {err.object[err.start]:#04x} "
                                  f"at position {err.start})", path=str(self.path)) from None
        try:
            content = json.loads(text)
        except RecursionError:
            raise CheckpointError(f"{self.path}: not a topic config file (JSON nested too "
                                  f"deeply)", path=str(self.path)) from None
        except ValueError as err:
            raise CheckpointError(f"{self.path}: not JSON ({err})", path=str(self.path)) from err
        if not isinstance(content, dict) or content.get("version") != VERSION:
            found = content.get("version") if isinstance(content, dict) else None
            if not isinstance(found, (int, str, type(None))):
                found = type(found).__name__
            raise CheckpointError(f"{self.path}: version {found!r}, expected {VERSION}",
                                  path=str(self.path), version=found)
        topics = content.get("topics")
        if not isinstance(topics, dict):
            raise CheckpointError(f"{self.path}: 'topics' must map topic names to objects",
                                  path=str(self.path))
        overrides: TopicOverrides = {}
        malformed: dict[str, object] = {}
        for topic, entry in topics.items():
            if isinstance(entry, dict) and all(_is_scalar(v) for v in entry.values()):
                overrides[topic] = {str(k): _text(v) for k, v in entry.items()}
            else:
                malformed[topic] = entry
        return TopicConfigs(overrides, malformed)

    def write(self, topics: Mapping[str, Mapping[str, object]],
              malformed: Mapping[str, object] | None = None) -> None:
        """Write ``topics``' overrides, and the ``malformed`` entries as they were read."""
        entries: dict[str, object] = dict(malformed or {})
        entries.update({t: {k: _text(v) for k, v in sorted(o.items())}
                        for t, o in topics.items()})
        content = {"version": VERSION, "topics": dict(sorted(entries.items()))}
        atomic_write(self.path, json.dumps(content, indent=1).encode("utf-8"))


def invalid_topics(content: TopicConfigs, default_config: LogConfig,
                   path: Path) -> dict[str, InvalidTopicConfigError]:
    """The ``InvalidTopicConfigError`` of every topic of ``content`` (read from the file at
    ``path``) whose entry cannot be used over ``default_config``: not an object of scalar
    values, an unknown key, a value Kafka's config refuses."""
    invalid = {topic: InvalidTopicConfigError(
        f"{path}: the entry of topic {topic} is not an object of key/value pairs "
        f"({_json_excerpt(entry)}); its partitions are skipped", topic=topic, path=str(path))
        for topic, entry in content.malformed.items()}
    for topic, overrides in content.overrides.items():
        try:
            default_config.with_overrides(overrides)
        except InvalidConfigError as err:
            value = err.fields.get("value")
            invalid[topic] = InvalidTopicConfigError(
                f"{path}: topic {topic}: {err.message}; its partitions are skipped",
                topic=topic, path=str(path), key=err.fields.get("key"),
                value=None if value is None else str(value))
    return invalid


def _json_excerpt(value: object, limit: int = 80) -> str:
    try:
        text = json.dumps(value)
    except (RecursionError, ValueError):
        text = type(value).__name__
    return text if len(text) <= limit else text[:limit] + "..."


def _is_scalar(value: object) -> bool:
    return isinstance(value, (str, int, float, bool))


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
