"""The keys of ``LogDir.logs()``: ``(topic, partition)`` tuples, so ``logs[("t", 0)]`` works, with
``storage.files.TopicPartition`` accepted as a lookup key too."""

from __future__ import annotations

from typing import Any, NamedTuple

from storage.files import TopicPartition
from storage.log import Log


class PartitionId(NamedTuple):
    """The key of ``LogDir.logs()``: equal to, and hashed as, the plain tuple
    ``(topic, partition)``."""

    topic: str
    partition: int


class LogMap(dict):  # type: ignore[type-arg] - dict[PartitionId, Log]
    """A snapshot of a directory's logs keyed by ``PartitionId``; ``[]``, ``in`` and ``get`` also
    take a ``TopicPartition``."""

    def __getitem__(self, key: Any) -> Log:
        return super().__getitem__(_key(key))

    def __contains__(self, key: object) -> bool:
        return super().__contains__(_key(key))

    def get(self, key: Any, default: Any = None) -> Any:
        return super().get(_key(key), default)


def _key(key: Any) -> Any:
    if isinstance(key, TopicPartition):
        return PartitionId(key.topic, key.partition)
    return key
