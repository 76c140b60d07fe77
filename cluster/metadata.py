"""``TopicMetadata``: which directory holds which partition, and each topic's overrides.

There is no metadata store besides the directories: every node lists its partitions and keeps its
topics' overrides (``topic-configs.json``), so the table is rebuilt by asking the nodes (after a
coordinator restart too). A directory that cannot be asked keeps the routes learned before.
New partitions are placed by ``cluster.placement``.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cluster.errors import (ActorUnavailableError, InvalidPartitionsError, TopicExistsError,
                            UnknownTopicError)
from cluster.handles import Handle
from cluster.placement import DirRoom, place
from storage import files
from storage.config import BROKER_SYNONYMS, TOPIC_KEYS, LogConfig
from storage.errors import InvalidConfigError, StorageError

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

    def set_route(self, topic: str, partition: int, log_dir: str) -> None:
        """Route ``topic``-``partition`` to ``log_dir`` (it moved there)."""
        with self._lock:
            self._routes.setdefault(topic, {})[partition] = log_dir

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

    def alter_topic_config(self, name: str, config: Mapping[str, Any],
                           delete: Iterable[str] = ()) -> TopicInfo:
        """Kafka's ``kafka-configs --alter --add-config/--delete-config`` of a topic: set the keys
        of ``config`` and remove those of ``delete`` from its overrides, then hand the new set to
        every directory holding a partition of it, which persists it and applies it to the live
        logs. Refused, naming the key and changing nothing (``InvalidConfigError``): an unknown
        key, a bad value, a key both set and deleted, the deletion of a key that is not
        overridden (Kafka's "Invalid config(s)"), a broker key (``log.retention.ms``: Kafka's
        kafka-configs takes topic keys only). ``UnknownTopicError`` for an unknown topic.
        Each directory's change is idempotent: after a directory failed half-way, running the
        same alter again completes it."""
        changes = {str(k): _text(v) for k, v in config.items()}
        deletes = [str(k) for k in delete]
        broker_keys = sorted(k for k in changes if k not in TOPIC_KEYS)
        if broker_keys and broker_keys[0] in BROKER_SYNONYMS:
            raise InvalidConfigError(
                f"topic {name}: {broker_keys[0]} is a broker key; the topic key is "
                f"{BROKER_SYNONYMS[broker_keys[0]][0]}", key=broker_keys[0], topic=name)
        both = sorted(set(changes) & set(deletes))
        if both:
            raise InvalidConfigError(f"topic {name}: {both[0]} is both set and deleted",
                                     key=both[0], topic=name)
        with self._lock:
            routes = self.routes(name)[name]
            old = dict(self._configs.get(name, {}))
            missing = [k for k in deletes if k not in old]
            if missing:
                raise InvalidConfigError(
                    f"topic {name} has no override {missing[0]} to delete (its overrides: "
                    f"{', '.join(sorted(old)) or 'none'})", key=missing[0], topic=name)
            new = {**old, **changes}
            for key in deletes:
                new.pop(key)
            self._default.with_overrides(new)   # refuses naming the key, before any node call
            for log_dir in sorted(set(routes.values())):
                self._nodes[log_dir].call("alter_topic_config", name, new, timeout=self._timeout)
            self._configs[name] = new
            return TopicInfo(name, dict(sorted(routes.items())), dict(new))

    def add_partitions(self, name: str, total: int, rooms: list[DirRoom]) -> TopicInfo:
        """Kafka's ``kafka-topics --alter --partitions``: grow ``name`` to ``total`` partitions,
        the new ones numbered after the last and placed by ``cluster.placement.place`` with the
        topic's current spread, each created with the topic's overrides.
        ``InvalidPartitionsError`` when ``total`` is not above the current count."""
        files.validate_topic(name)
        total = files.validate_partition_count(total, name)
        with self._lock:
            routes = self.routes(name)[name]
            current = max(routes) + 1
            if total <= current:
                raise InvalidPartitionsError(
                    f"topic {name} has {current} partitions; {total} would not be an increase",
                    topic=name, current=current, requested=total)
            chosen = place(rooms, total - current,
                           topic_partitions=Counter(routes.values()))
            overrides = dict(self._configs.get(name, {}))
            for partition, log_dir in enumerate(chosen, start=current):
                self._nodes[log_dir].call("create_partition", name, partition, overrides,
                                          timeout=self._timeout)
                self._routes.setdefault(name, {})[partition] = log_dir
            return TopicInfo(name, dict(sorted(self._routes[name].items())), overrides)

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
