"""A node's append RPCs as plain functions over its ``LogDir``: one partition's batches, several
partitions' batches in one call, the variant for a client that follows moves, and records the
node encodes itself (``append_records_or_moved``, for a client that should not load the
encoder). This module owns the rule that an append (or read) racing a move of its partition away
fails with ``PartitionMovedError`` (``served``), and reporting each append to the
``NodeObserver``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from node.errors import PartitionMovedError, UnknownPartitionError
from node.logdir import LogDir
from node.seams import NodeObserver
from storage.batching import encode_batches
from storage.errors import StorageError
from storage.log import Log, LogAppendInfo
from storage.record_format import Record

Batches = Iterable[tuple[str, int, bytes]]


@contextmanager
def served(d: LogDir | None, topic: str, partition: int) -> Iterator[None]:
    """A call that raced a move of its partition away (the log was renamed under it)
    fails with ``PartitionMovedError``, never with the closed log's error."""
    try:
        yield
    except PartitionMovedError:
        raise
    except StorageError:
        if d is not None:
            d.raise_if_moved(topic, partition)
        raise


def appended(observer: NodeObserver | None, topic: str, partition: int, size: int,
             info: LogAppendInfo) -> None:
    if observer is not None:
        observer.appended(topic, partition, size, info.records_count)


def append_batch(d: LogDir, topic: str, partition: int, data: bytes,
                 observer: NodeObserver | None) -> LogAppendInfo:
    with served(d, topic, partition):
        info = d.log(topic, partition).append_batch(data)
    appended(observer, topic, partition, len(data), info)
    return info


def append_batches(d: LogDir, items: Batches, flush: bool,
                   observer: NodeObserver | None) -> list[LogAppendInfo]:
    infos = []
    written = {}
    for topic, partition, data in items:
        with served(d, topic, partition):
            target = d.log(topic, partition)
            infos.append(target.append_batch(data))
        appended(observer, topic, partition, len(data), infos[-1])
        written[(topic, partition)] = target
    if flush:
        _flush(written.values())
    return infos


def append_buffer_or_moved(d: LogDir, spans: Iterable[tuple[str, int, int, int]],
                           buffer: object, flush: bool, observer: NodeObserver | None,
                           moving_in: Callable[[str, int], bool],
                           ) -> list[LogAppendInfo | StorageError]:
    """``append_batches_or_moved`` of batches packed in one buffer: ``spans`` are ``(topic,
    partition, start, end)``, the batch being ``buffer[start:end]``. The buffer is read in place
    (a read-only array Ray maps from its object store, not copied); nothing keeps a view of it
    after the call."""
    view = memoryview(buffer).cast("B")    # type: ignore[arg-type]
    items = ((topic, partition, view[start:end]) for topic, partition, start, end in spans)
    return append_batches_or_moved(d, items, flush, observer, moving_in)


def append_batches_or_moved(d: LogDir, items: Batches, flush: bool,
                            observer: NodeObserver | None,
                            moving_in: Callable[[str, int], bool],
                            ) -> list[LogAppendInfo | StorageError]:
    """``LogDirServer.append_batches_or_moved``; ``moving_in(topic, partition)`` says whether a
    move into ``d`` is under way for a partition it does not serve yet."""
    results: list[LogAppendInfo | StorageError] = []
    skipped: dict[tuple[str, int], StorageError] = {}
    written = {}
    for topic, partition, data in items:
        key = (topic, partition)
        if key in skipped:
            results.append(skipped[key])
            continue
        try:
            with served(d, topic, partition):
                target = d.log(topic, partition)
                info = target.append_batch(data)
            results.append(info)
            appended(observer, topic, partition, len(data), info)
            written[key] = target
        except (PartitionMovedError, UnknownPartitionError) as err:
            if isinstance(err, UnknownPartitionError) and moving_in(topic, partition):
                err = _moving_in_error(d.path, topic, partition)
            skipped[key] = err
            results.append(err)
    if flush:
        _flush(written.values())
    return results


def append_records_or_moved(d: LogDir, items: Iterable[tuple[str, int, list[Record]]],
                            flush: bool, batch_bytes: int, observer: NodeObserver | None,
                            moving_in: Callable[[str, int], bool],
                            ) -> tuple[list[LogAppendInfo], list[tuple[tuple[str, int, bytes],
                                                                     StorageError]]]:
    """``LogDirServer.append_records_or_moved``: each partition's records encoded here into
    batches of at most ``min(batch_bytes, segment.bytes, max.message.bytes)`` of its log, then
    ``append_batches_or_moved``. Returns the appends, and each batch not appended with the
    error that refused it (its partition moved or is not here), for the client to send again
    where the partition lives now."""
    batches: list[tuple[str, int, bytes]] = []
    for topic, partition, records in items:
        limit = batch_bytes
        try:
            limit = min(batch_bytes, d.log(topic, partition).config.max_batch_bytes)
        except StorageError:
            pass    # refused or raised below, as append_batches_or_moved does
        batches.extend((topic, partition, data) for data in encode_batches(records, limit))
    results = append_batches_or_moved(d, batches, flush, observer, moving_in)
    infos = [r for r in results if not isinstance(r, StorageError)]
    refused = [(item, r) for item, r in zip(batches, results) if isinstance(r, StorageError)]
    return infos, refused


def _moving_in_error(path: Path, topic: str, partition: int) -> PartitionMovedError:
    return PartitionMovedError(
        f"partition {topic}-{partition} is moving into {path} and is "
        "not served yet: try again", topic=topic, partition=partition, target_dir=str(path))


def _flush(targets: Iterable[Log]) -> None:
    for target in targets:
        target.flush()


__all__ = ["append_batch", "append_batches", "append_batches_or_moved", "append_buffer_or_moved",
           "append_records_or_moved", "served"]
