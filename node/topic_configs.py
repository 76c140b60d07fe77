"""``topic-configs.json``: the topic overrides a log directory keeps for its partitions, so a node
restarted with nothing but its directory opens every log with its topic's settings.

Layout (UTF-8 JSON, written with ``storage.durable.atomic_write``: tmp + fsync + rename + dir
fsync, so a crash leaves the old or the new file)::

    {"version": 1,
     "topics": {"<topic>": {"<topic key>": "<value>", ...}, ...}}

Keys are Kafka's topic keys (``cleanup.policy``, ``segment.bytes``, ...), values strings, only the
overrides of the broker defaults. Kafka keeps these in ZooKeeper/KRaft; we keep one copy per
directory holding a partition of the topic. A missing file means no overrides; a wrong version or
malformed content is a ``CheckpointError`` naming the file (nothing is guessed).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from storage.durable import atomic_write
from storage.errors import CheckpointError
from storage.files import TOPIC_CONFIGS_FILE

VERSION = 1

TopicOverrides = dict[str, dict[str, str]]


class TopicConfigsFile:
    """Reads and writes one directory's ``topic-configs.json``. Not thread-safe: the owner
    serialises writes."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / TOPIC_CONFIGS_FILE

    def read(self) -> TopicOverrides:
        """The overrides; ``CheckpointError`` for malformed content or an entry that is no
        regular file (a FIFO would block the read for ever)."""
        try:
            mode = os.stat(self.path).st_mode
        except FileNotFoundError:
            return {}
        except OSError as err:
            raise CheckpointError(f"{self.path}: {err.strerror}", path=str(self.path)) from None
        if not stat.S_ISREG(mode):
            raise CheckpointError(f"{self.path}: not a regular file", path=str(self.path))
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        try:
            content = json.loads(text)
        except ValueError as err:
            raise CheckpointError(f"{self.path}: not JSON ({err})", path=str(self.path)) from err
        if not isinstance(content, dict) or content.get("version") != VERSION:
            found = content.get("version") if isinstance(content, dict) else None
            raise CheckpointError(f"{self.path}: version {found!r}, expected {VERSION}",
                                  path=str(self.path), version=found)
        topics = content.get("topics")
        if not isinstance(topics, dict) or not all(
                isinstance(t, str) and isinstance(o, dict) for t, o in topics.items()):
            raise CheckpointError(f"{self.path}: 'topics' must map topic names to objects",
                                  path=str(self.path))
        return {topic: {str(k): str(v) for k, v in overrides.items()}
                for topic, overrides in topics.items()}

    def write(self, topics: Mapping[str, Mapping[str, object]]) -> None:
        content = {"version": VERSION,
                   "topics": {t: {k: _text(v) for k, v in sorted(o.items())}
                              for t, o in sorted(topics.items())}}
        atomic_write(self.path, json.dumps(content, indent=1).encode("utf-8"))


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
