"""``TopicMetadata``: which directory holds which partition, and each topic's overrides.

There is no metadata store besides the directories: every node lists its partitions and keeps its
topics' overrides (``topic-configs.json``), so the table is rebuilt by asking the nodes (after a
coordinator restart too). A directory that cannot be asked keeps the routes learned before.
New partitions are placed by ``cluster.placement``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cluster.errors import ActorUnavailableError, TopicExistsError, UnknownTopicError
from cluster.handles import Handle
from cluster.placement import DirRoom, place
from storage import files
from storage.config import LogConfig
from storage.errors import StorageError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: dict[int, str]          # partition -> log directory
    config: dict[str, str]              # the topic's overrides


class TopicMetadata:
    """Thread-safe. ``nodes`` maps each log directory to its node handle."""

    def __init__(self, nodes: Mapping[str, Handle], default_config: LogConfig,
                 call_timeout_s: float = 60.0) -> None:
        self._nodes = dict(nodes)
        self._default = default_config
        self._timeout = call_timeout_s
        self._lock = threading.RLock()
        self._routes: dict[str, dict[int, str]] = {}
        self._configs: dict[str, dict[str, str]] = {}

    def refresh(self) -> None:
        """Ask every node what it holds; a node that cannot answer keeps its old routes."""
        pendings = {d: (h.submit("partitions"), h.submit("topic_configs"))
                    for d, h in self._nodes.items()}
        with self._lock:
            for log_dir, (parts, configs) in pendings.items():
                try:
                    held = parts.result(self._timeout)
                    overrides = configs.result(self._timeout)
                except (ActorUnavailableError, StorageError) as err:
                    logger.warning("cannot list the partitions of %s: %s", log_dir, err)
                    continue
                for routes in self._routes.values():
                    for p in [p for p, d in routes.items() if d == log_dir]:
                        del routes[p]
                for topic, partition in held:
                    self._routes.setdefault(topic, {})[partition] = log_dir
                for topic, config in overrides.items():
                    self._configs[topic] = dict(config)
            self._routes = {t: r for t, r in self._routes.items() if r}

    def route(self, topic: str, partition: int) -> str:
        with self._lock:
            found = self._routes.get(topic, {}).get(partition)
        if found is None:
            self.refresh()
            with self._lock:
                found = self._routes.get(topic, {}).get(partition)
        if found is None:
            raise UnknownTopicError(f"the cluster has no partition {topic}-{partition}",
                                    topic=topic, partition=partition)
        return found

    def routes(self, topic: str | None = None) -> dict[str, dict[int, str]]:
        with self._lock:
            if topic is None:
                return {t: dict(r) for t, r in self._routes.items()}
            if topic not in self._routes:
                raise UnknownTopicError(f"the cluster has no topic {topic}", topic=topic)
            return {topic: dict(self._routes[topic])}

    def topics(self) -> list[TopicInfo]:
        with self._lock:
            return [TopicInfo(t, dict(sorted(r.items())), dict(self._configs.get(t, {})))
                    for t, r in sorted(self._routes.items())]

    def create_topic(self, name: str, partitions: int, config: Mapping[str, Any],
                     rooms: list[DirRoom]) -> TopicInfo:
        files.validate_topic(name)
        partitions = files.validate_partition_count(partitions, name)
        overrides = {str(k): _text(v) for k, v in config.items()}
        self._default.with_overrides(overrides)   # refuse bad settings before touching a node
        with self._lock:
            if self._routes.get(name):
                raise TopicExistsError(f"topic {name} already exists", topic=name)
            chosen = place(rooms, partitions)
            created: dict[int, str] = {}
            try:
                for partition, log_dir in enumerate(chosen):
                    self._nodes[log_dir].call("create_partition", name, partition, overrides,
                                              timeout=self._timeout)
                    created[partition] = log_dir
            finally:
                if created:
                    self._routes[name] = created
                    self._configs[name] = overrides
            return TopicInfo(name, created, overrides)

    def delete_topic(self, name: str) -> int:
        """Delete every partition of ``name``; returns how many went."""
        routes = self.routes(name)[name]
        deleted = 0
        for partition, log_dir in sorted(routes.items()):
            if self._nodes[log_dir].call("delete_partition", name, partition,
                                         timeout=self._timeout):
                deleted += 1
            with self._lock:
                self._routes.get(name, {}).pop(partition, None)
        with self._lock:
            self._routes.pop(name, None)
            self._configs.pop(name, None)
        return deleted


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
