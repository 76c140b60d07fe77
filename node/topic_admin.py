"""A node's topic bookkeeping: the topic overrides its directory keeps (``topic-configs.json``,
``node.topic_configs``) and the topic deletions it accepted and has not finished
(``topic-deletions.json``, ``node.topic_deletions``). ``TopicAdmin`` owns both files and the one
lock that serialises their writes; ``LogDirServer`` delegates its topic admin RPCs to it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from node.errors import InvalidTopicConfigError, UnknownPartitionError
from node.logdir import LogDir
from node.stats import PartitionDescription, describe_partition
from node.topic_configs import TopicConfigsFile, invalid_topics
from node.topic_deletions import TopicDeletionsFile
from storage import files
from storage.config import LogConfig
from storage.errors import StorageError


class TopicAdmin:
    """The overrides and pending deletions of the directory at ``path``. Thread-safe: every
    change is made under one lock, file first, then memory, then the live logs."""

    def __init__(self, path: Path, default_config: LogConfig) -> None:
        self.path = path
        self._default_config = default_config
        self._lock = threading.Lock()
        self._overrides: dict[str, dict[str, str]] = {}
        self._malformed: dict[str, object] = {}
        self._invalid: dict[str, InvalidTopicConfigError] = {}

    def load(self) -> tuple[dict[str, dict[str, str]], dict[str, InvalidTopicConfigError]]:
        """Read ``topic-configs.json`` (before the directory loads): the overrides of every
        topic whose entry is valid, and the ``InvalidTopicConfigError`` of each other topic
        (for ``LogDir.open``'s ``invalid_topics``: their partitions are skipped). A file that
        cannot be read as a whole raises ``CheckpointError`` naming it. Every entry, bad ones
        too, is kept as it is for the writes of this directory's file."""
        file = TopicConfigsFile(self.path)
        content = file.read()
        self._overrides, self._malformed = content.overrides, content.malformed
        invalid = invalid_topics(content, self._default_config, file.path)
        self._invalid = invalid
        return ({t: dict(o) for t, o in self._overrides.items() if t not in invalid},
                dict(invalid))

    def set(self, d: LogDir, topic: str, config: Mapping[str, Any]) -> None:
        """Keep ``config`` as the overrides of ``topic`` and use them for its new logs; they
        must equal the overrides already kept when the directory holds a partition of it."""
        overrides = {str(k): _text(v) for k, v in config.items()}
        resolved = self._default_config.with_overrides(overrides)   # validates before writing
        with self._lock:
            if topic in self._invalid:
                raise self._invalid[topic]
            if self._overrides.get(topic, {}) == overrides:
                d.set_topic_config(topic, resolved)
                return
            if any(tp.topic == topic for tp in d.logs()):
                raise StorageError(f"topic {topic} already exists in {self.path} with other "
                                   f"settings {self._overrides.get(topic, {})}", topic=topic)
            updated = {**self._overrides, topic: overrides}
            TopicConfigsFile(self.path).write(updated, self._malformed)
            self._overrides = updated
            d.set_topic_config(topic, resolved)

    def all(self) -> dict[str, dict[str, str]]:
        with self._lock:
            return {t: dict(o) for t, o in self._overrides.items()}

    def of(self, topic: str) -> dict[str, str]:
        with self._lock:
            return dict(self._overrides.get(topic, {}))

    def alter(self, d: LogDir, topic: str, overrides: Mapping[str, Any]) -> dict[str, str]:
        """``LogDirServer.alter_topic_config``."""
        files.validate_topic(topic)
        new = {str(k): _text(v) for k, v in overrides.items()}
        resolved = self._default_config.with_overrides(new)   # validates before writing
        with self._lock:
            if not any(tp.topic == topic for tp in d.logs()):
                raise UnknownPartitionError(f"log directory {self.path} holds no partition of "
                                            f"topic {topic}", topic=topic, partition=None)
            updated = {**self._overrides, topic: new}
            TopicConfigsFile(self.path).write(updated, self._malformed)
            self._overrides = updated
            d.update_topic_config(topic, resolved)
        return new

    def describe(self, d: LogDir, topic: str | None) -> list[PartitionDescription]:
        overrides = self.all()
        return [describe_partition(lg, str(self.path), overrides.get(t, {}))
                for (t, _p), lg in sorted(d.logs().items())
                if topic is None or t == topic]

    def forget_if_gone(self, d: LogDir, topic: str) -> None:
        """After partitions of ``topic`` were deleted: once ``d`` holds none of them, drop the
        topic's overrides and its entry in ``topic-deletions.json``."""
        with self._lock:
            if any(tp.topic == topic for tp in d.logs()) or topic in self._invalid:
                return          # a topic whose entry is unusable keeps it: its partitions wait
            if topic in self._overrides:
                updated = {t: o for t, o in self._overrides.items() if t != topic}
                TopicConfigsFile(self.path).write(updated, self._malformed)
                self._overrides = updated
                d.drop_topic_config(topic)
            deletions = TopicDeletionsFile(self.path)
            pending = deletions.read()
            if topic in pending:
                deletions.write(pending - {topic})

    def mark_deleting(self, topic: str) -> None:
        """``LogDirServer.mark_topic_deleting``."""
        files.validate_topic(topic)
        with self._lock:
            deletions = TopicDeletionsFile(self.path)
            pending = deletions.read()
            if topic not in pending:
                deletions.write(pending | {topic})

    def deletions(self) -> list[str]:
        with self._lock:
            return sorted(TopicDeletionsFile(self.path).read())


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


__all__ = ["TopicAdmin"]
