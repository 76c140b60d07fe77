"""Fixtures of the group coordinator tests: a coordinator on a real log (``Harness``)."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from storage.clock import FakeClock


def _offsets_stand_in() -> None:
    """A private stand-in for ``node.groups.offsets`` until that module exists."""
    try:
        import node.groups.offsets  # noqa: F401
        return
    except ModuleNotFoundError:
        pass
    from kio.schema.errors import ErrorCode

    from node.groups.messages import FetchedOffset, PartitionError
    from node.groups.records import OffsetCommitKey, OffsetCommitValue, offset_commit_record

    class OffsetManager:
        def __init__(self, config: Any, clock: Any) -> None:
            self._clock = clock
            self.offsets: dict[str, dict[tuple[str, int], OffsetCommitValue]] = {}

        def replay(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
            group = self.offsets.setdefault(key.group, {})
            if value is None:
                group.pop((key.topic, key.partition), None)
            else:
                group[(key.topic, key.partition)] = value

        def commit(self, group_id: str, offsets: Any) -> Any:
            records, answers = [], []
            for o in offsets:
                key = OffsetCommitKey(group_id, o.topic, o.partition)
                value = OffsetCommitValue(o.offset, o.leader_epoch, o.metadata or "",
                                          self._clock.milliseconds())
                records.append(offset_commit_record(key, value))
                self.replay(key, value)
                answers.append(PartitionError(o.topic, o.partition, ErrorCode.none))
            return records, answers

        def fetch(self, group_id: str, partitions: Any, require_stable: bool) -> Any:
            held = self.offsets.get(group_id, {})
            wanted = sorted(held) if partitions is None else partitions
            out = []
            for topic, partition in wanted:
                value = held.get((topic, partition))
                out.append(FetchedOffset(topic, partition) if value is None else
                           FetchedOffset(topic, partition, value.offset, value.leader_epoch,
                                         value.metadata))
            return out

        def delete(self, group_id: str, partitions: Any) -> Any:
            records = []
            for topic, partition in partitions:
                if (topic, partition) in self.offsets.get(group_id, {}):
                    key = OffsetCommitKey(group_id, topic, partition)
                    records.append(offset_commit_record(key, None))
                    self.replay(key, None)
            return records

        def delete_all(self, group_id: str) -> Any:
            return self.delete(group_id, list(self.offsets.get(group_id, {})))

        def delete_group(self, group_id: str) -> None:
            self.offsets.pop(group_id, None)

        def has_offsets(self, group_id: str) -> bool:
            return bool(self.offsets.get(group_id))

        def expire(self, group_id: str, base: Any, subscribed: Any) -> Any:
            return [], not self.has_offsets(group_id)

    module = types.ModuleType("node.groups.offsets")
    module.OffsetManager = OffsetManager  # type: ignore[attr-defined]
    sys.modules["node.groups.offsets"] = module


_offsets_stand_in()

from tests.node.groups.harness import Harness  # noqa: E402


@pytest.fixture
def groups(tmp_path: Path, clock: FakeClock) -> Harness:
    """A coordinator holding the partition of ``harness.GROUP``, closed at teardown."""
    harness = Harness(tmp_path / "logs", clock)
    yield harness
    harness.coordinator.close()
