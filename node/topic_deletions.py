"""``topic-deletions.json``: the topics whose deletion a log directory has accepted but not finished,
so a topic delete interrupted by a crash or a stop is completed after the restart (Kafka keeps
its topics being deleted in ZooKeeper's ``/admin/delete_topics`` or in the KRaft metadata log).

Layout (UTF-8 JSON, written with ``storage.durable.atomic_write``: tmp + fsync + rename + dir
fsync, so a crash leaves the old or the new file)::

    {"version": 1, "topics": ["<topic>", ...]}

A topic enters before the first of its partitions here is deleted and leaves once this directory
holds none of them. A missing file means no deletion pending; a wrong version or malformed
content is a ``CheckpointError`` naming the file.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from storage.durable import atomic_write, fsync_dir
from storage.errors import CheckpointError

TOPIC_DELETIONS_FILE = "topic-deletions.json"
VERSION = 1


class TopicDeletionsFile:
    """Reads and writes one directory's ``topic-deletions.json``. Not thread-safe: the owner
    serialises writes."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / TOPIC_DELETIONS_FILE

    def read(self) -> set[str]:
        try:
            mode = os.stat(self.path).st_mode
        except FileNotFoundError:
            return set()
        except OSError as err:
            raise CheckpointError(f"{self.path}: {err.strerror}", path=str(self.path)) from None
        if not stat.S_ISREG(mode):
            raise CheckpointError(f"{self.path}: not a regular file", path=str(self.path))
        try:
            content = json.loads(self.path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as err:
            raise CheckpointError(f"{self.path}: not JSON ({err})", path=str(self.path)) from None
        topics = content.get("topics") if isinstance(content, dict) else None
        if (not isinstance(content, dict) or content.get("version") != VERSION
                or not isinstance(topics, list) or not all(isinstance(t, str) for t in topics)):
            raise CheckpointError(f"{self.path}: expected version {VERSION} and a list of "
                                  "topics", path=str(self.path))
        return set(topics)

    def write(self, topics: Iterable[str]) -> None:
        """The new set; an empty set removes the file."""
        names = sorted(set(topics))
        if not names:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                return
            fsync_dir(self.path.parent)
            return
        atomic_write(self.path, json.dumps({"version": VERSION, "topics": names}).encode())
