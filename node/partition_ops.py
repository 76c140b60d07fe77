"""A node's per-partition RPCs other than appends, as plain functions over its ``LogDir``:
Kafka's DeleteRecords and ListOffsets, roll, truncation (LogManager.truncateTo), the transaction
coordinator's end markers and read_committed reads; and, for an offline directory, the partition
directories still on disk. ``LogDirServer`` documents each call; this module owns their rules.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Callable

from cleaner.checkpoints import CheckpointChange
from node.errors import PolicyViolationError
from node.logdir import LogDir
from storage import files
from storage.errors import CheckpointError, OffsetOutOfRangeError, StorageError
from storage.files import TopicPartition
from storage.log import (
    EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, READ_UNCOMMITTED, Log)
from storage.records import ControlType, Record

log = logging.getLogger(__name__)


TxnMarker = tuple[str, int, int, int, int, int]
# appends one marker to a partition's log for a topic's owner (the group coordinator for
# __consumer_offsets): (partition, log, control type, producer id, producer epoch,
# coordinator epoch)
MarkerWriter = Callable[[int, Log, ControlType, int, int, int], None]


def delete_records(d: LogDir, topic: str, partition: int, before_offset: int) -> int:
    target = d.log(topic, partition)
    offset = files.validate_offset(before_offset, "before_offset", partition=target.name,
                                   minimum=None)
    if not target.config.delete:
        raise PolicyViolationError(
            f"{target.name}: records cannot be deleted, cleanup.policy="
            f"{target.config.cleanup_policy} does not include delete", topic=topic,
            partition=partition, cleanup_policy=target.config.cleanup_policy)
    if offset == -1:
        offset = target.high_watermark
    if offset < 0:
        raise OffsetOutOfRangeError(
            f"{target.name}: cannot delete records before offset {offset} (an offset >= 0, "
            "or -1 for the high watermark)", partition=target.name, offset=offset)
    if target.maybe_increment_log_start_offset(offset):
        d.checkpoint_log_start_offsets()
    return target.log_start_offset


def list_offset(d: LogDir, topic: str, partition: int, timestamp: int,
                isolation: str = READ_UNCOMMITTED) -> tuple[int, int | None] | None:
    found = d.log(topic, partition).fetch_offset_by_timestamp(timestamp, isolation)
    if found is None:
        return None
    offset, ts = found
    return offset, None if timestamp in (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP) else ts


def roll(d: LogDir, topic: str, partition: int) -> int:
    target = d.log(topic, partition)
    if target.active_segment.size > 0:
        target.roll()
    return target.active_segment.base_offset


def truncate_to(d: LogDir, topic: str, partition: int, offset: int) -> bool:
    target = d.log(topic, partition)
    tp = TopicPartition(topic, partition)
    if offset >= target.active_segment.base_offset:
        return target.truncate_to(offset)
    with d.pause_cleaning(tp):
        changed = target.truncate_to(offset)
        try:
            d.update_cleaner_offsets(
                CheckpointChange(lower={tp: target.active_segment.base_offset}))
        except CheckpointError as err:   # unreadable: left as it is, as at load
            log.warning("could not lower the cleaner checkpoint of %s: %s", tp, err)
    return changed


def write_txn_markers(d: LogDir, markers: Iterable[TxnMarker],
                      writers: Mapping[str, MarkerWriter] | None = None
                      ) -> list[tuple[str, int]]:
    """Append each marker to its partition (``writers[topic]`` appends it for a topic that has
    one), then flush every partition written."""
    written: dict[tuple[str, int], Any] = {}
    writers = writers or {}
    for topic, partition, producer_id, epoch, control, coordinator_epoch in markers:
        target = d.get_log(topic, partition)
        if target is None:
            log.info("no partition %s-%d for a marker of producer %d: skipped", topic,
                     partition, producer_id)
            continue
        writer = writers.get(topic)
        if writer is not None:
            writer(partition, target, ControlType(control), producer_id, epoch,
                   coordinator_epoch)
        else:
            target.append_end_txn_marker(ControlType(control), producer_id=producer_id,
                                         producer_epoch=epoch,
                                         coordinator_epoch=coordinator_epoch)
        written[(topic, partition)] = target
    for target in written.values():
        target.flush()
    return sorted(written)


def read_records(d: LogDir, topic: str, partition: int, offset: int, max_offset: int | None,
                 isolation: str, max_records: int) -> list[Record]:
    target = d.log(topic, partition)
    return list(itertools.islice(target.read(max(offset, target.log_start_offset),
                                             max_offset, isolation=isolation), max_records))


def partition_dirs_on_disk(directory: Path) -> list[tuple[str, int]] | None:
    """The live partition directories (not ``-delete``/``-future``) found in ``directory``; None
    when it cannot be listed."""
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    held = []
    for name in names:
        try:
            parsed = files.parse_partition_dir(name)
        except StorageError:
            continue
        if not parsed.kind and (directory / name).is_dir():
            held.append((parsed.topic_partition.topic, parsed.topic_partition.partition))
    return sorted(held)


__all__ = ["EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "MAX_TIMESTAMP", "delete_records",
           "list_offset", "partition_dirs_on_disk", "read_records", "roll", "truncate_to", "write_txn_markers"]
