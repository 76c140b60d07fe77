"""The client's data path: records encoded into v2 batches (``encode_batches``), batches sent to
the nodes (``produce_batches``), raw batches read back and decoded (``consume``) or records
decoded by the node (``consume_decoded``), and a topic's layout for the Spark data sources.

Produce packs the batches of one directory into calls, each one buffer (``_packed``): a call
leaves once it holds ``batch_bytes`` and the directory has no call running, else once it holds
``BUSY_CALL_BYTES`` (so a slow producer's batches go out as they come, and a fast one's in calls
large enough that the per-call cost does not count); up to ``window`` calls are in flight per
directory, and a call never overtakes an earlier one that holds the same partition. Batches a
node did not take because their partition moved are sent again, in order, where it lives now. An
acknowledged produce is in the log (and on disk with ``flush=True``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from cluster.errors import UnknownTopicError
from cluster.handles import Handle, RayPending
from cluster.client.routing import MOVED_RETRY_S, Routes
from storage import files
from storage.batching import encode_batches
from storage.config import LogConfig
from storage.errors import StorageError
from storage.record_format import Record

if TYPE_CHECKING:
    from cluster.metadata.topics import TopicInfo
    from storage.log import LogAppendInfo

DEFAULT_BATCH_BYTES = 1 << 20
DEFAULT_WINDOW = 4

Item = tuple[str, int, bytes]    # (topic, partition, one encoded batch)
# An actor call costs about the same (a few ms: the object store's put, pin and release) from
# 1 MiB up to several MiB of one buffer; a directory busy with a call gets the next one when this
# much is packed: 25 MB of batches to 3 nodes took 0.04 s in 4-8 MiB buffer calls, 0.07 s in
# 1 MiB buffer calls and 0.1 s in 1 MiB calls of ``bytes`` items
BUSY_CALL_BYTES = 8 << 20


@dataclass(frozen=True)
class ProduceResult:
    """What a produce stored: its offsets (-1 when nothing), records, batches and calls."""

    first_offset: int
    last_offset: int
    records: int
    batches: int
    calls: int


def produce_batches(routes: Routes, nodes: Mapping[str, Handle], items: Iterable[Item], *,
                    flush: bool, batch_bytes: int, window: int) -> ProduceResult:
    """``Cluster.produce_batches`` (its docstring states the contract)."""
    packing: dict[str, list[Item]] = {}
    sizes: dict[str, int] = {}
    flights: dict[str, list[tuple[frozenset[tuple[str, int]], RayPending]]] = {}
    infos: list[LogAppendInfo] = []
    moved: list[tuple[Item, StorageError]] = []
    sent: dict[int, list[Item]] = {}
    calls = 0
    call_bytes = max(batch_bytes, BUSY_CALL_BYTES)

    def take(pending: RayPending) -> None:
        for item, result in zip(sent.pop(id(pending)), pending.result()):
            if isinstance(result, StorageError):
                moved.append((item, result))
            else:
                infos.append(result)

    def idle(log_dir: str) -> bool:
        """No call to ``log_dir`` is running (one sent now is appended at once)."""
        return all(pending.done() for _, pending in reversed(flights.get(log_dir, ())))

    def send(log_dir: str) -> None:
        nonlocal calls
        batch = packing.pop(log_dir, [])
        sizes.pop(log_dir, None)
        if not batch:
            return
        held = frozenset((t, p) for t, p, _ in batch)
        flight = flights.setdefault(log_dir, [])
        while flight and (len(flight) >= window or any(held & h for h, _ in flight)):
            take(flight.pop(0)[1])
        spans, buffer = _packed(batch)
        pending = nodes[log_dir].submit("append_buffer_or_moved", spans, buffer, flush)
        sent[id(pending)] = batch
        flight.append((held, pending))
        calls += 1

    try:
        for topic, partition, data in items:
            log_dir = routes.partition_dir(topic, partition)
            packing.setdefault(log_dir, []).append((topic, partition, data))
            sizes[log_dir] = sizes.get(log_dir, 0) + len(data)
            size = sizes[log_dir]
            if size >= call_bytes or (size >= batch_bytes and idle(log_dir)):
                send(log_dir)
        for log_dir in list(packing):
            send(log_dir)
        for flight in flights.values():
            while flight:
                take(flight.pop(0)[1])
        if moved:
            resent = _resend_moved(routes, nodes, moved, flush=flush)
            infos.extend(resent[0])
            calls += resent[1]
    except BaseException:
        # settle every call still in flight before raising, so none is left unawaited
        for flight in flights.values():
            for _, pending in flight:
                try:
                    pending.result()
                except BaseException:   # noqa: BLE001 - the first error is the one raised
                    pass
        raise
    return _produced(infos, calls)


def produce_records(routes: Routes, nodes: Mapping[str, Handle],
                    items: Iterable[tuple[str, int, list[Record]]], *, flush: bool,
                    batch_bytes: int) -> ProduceResult:
    """``Cluster.produce_records`` (its docstring states the contract): one call per directory,
    all in flight at once; the batches a node refused because their partition moved are sent
    again, already encoded, where it lives now (``_resend_moved``)."""
    by_dir: dict[str, list[tuple[str, int, list[Record]]]] = {}
    for topic, partition, records in items:
        by_dir.setdefault(routes.partition_dir(topic, partition), []).append(
            (topic, partition, list(records)))
    pending = [nodes[log_dir].submit("append_records_or_moved", batch, flush, batch_bytes)
               for log_dir, batch in by_dir.items()]
    infos: list[LogAppendInfo] = []
    moved: list[tuple[Item, StorageError]] = []
    errors: list[BaseException] = []
    for call in pending:         # settle every call before raising the first error
        try:
            appended, refused = call.result()
        except BaseException as err:   # noqa: BLE001 - raised below, after the others settle
            errors.append(err)
            continue
        infos.extend(appended)
        moved.extend(refused)
    if errors:
        raise errors[0]
    calls = len(pending)
    if moved:
        resent, more = _resend_moved(routes, nodes, moved, flush=flush)
        infos.extend(resent)
        calls += more
    return _produced(infos, calls)


def _produced(infos: list[LogAppendInfo], calls: int) -> ProduceResult:
    if not infos:
        return ProduceResult(-1, -1, 0, 0, 0)
    return ProduceResult(min(i.first_offset for i in infos),
                         max(i.last_offset for i in infos),
                         sum(i.records_count for i in infos), len(infos), calls)


def _resend_moved(routes: Routes, nodes: Mapping[str, Handle],
                  moved: list[tuple[Item, StorageError]], *,
                  flush: bool) -> tuple[list[LogAppendInfo], int]:
    """Send again, in order, the batches nodes did not take (see ``produce_batches``), asking
    the route again between tries, until ``MOVED_RETRY_S``."""
    give_up = time.monotonic() + MOVED_RETRY_S
    backoff = 0.005
    infos: list[LogAppendInfo] = []
    calls = 0
    while moved:
        for (topic, partition, _data), err in moved:
            routes.reroute(topic, partition, err)
        if time.monotonic() > give_up:
            raise moved[0][1]
        time.sleep(backoff)
        backoff = min(backoff * 2, 0.05)
        items = [item for item, _ in moved]
        moved = []
        by_dir: dict[str, list[Item]] = {}
        for item in items:
            try:
                by_dir.setdefault(routes.partition_dir(item[0], item[1]), []).append(item)
            except UnknownTopicError as err:
                moved.append((item, err))
        for log_dir, batch in by_dir.items():
            for item, result in zip(batch, nodes[log_dir].call(
                    "append_buffer_or_moved", *_packed(batch), flush, timeout=120)):
                if isinstance(result, StorageError):
                    moved.append((item, result))
                else:
                    infos.append(result)
            calls += 1
    return infos, calls


def _packed(batch: list[Item]) -> tuple[list[tuple[str, int, int, int]], Any]:
    """The batches of one call as ``(spans, buffer)`` for ``append_buffer_or_moved``: one
    ``uint8`` array, which Ray ships through its object store as one out-of-band buffer that the
    node reads in place (a list of ``bytes`` is pickled in band and copied again on the node,
    which cost the node more than the appends)."""
    import numpy as np

    spans = []
    position = 0
    for topic, partition, data in batch:
        spans.append((topic, partition, position, position + len(data)))
        position += len(data)
    return spans, np.frombuffer(b"".join(data for _, _, data in batch), dtype=np.uint8)


def consume(routes: Routes, topic: str, partition: int, from_offset: int,
            max_offset: int | None, max_bytes: int) -> Iterator[Record]:
    """``Cluster.consume`` with ``read_uncommitted``, of offsets it has checked (its docstring
    states the contract)."""
    start, end = routes.call(topic, partition, "offsets", topic, partition)
    stop = end if max_offset is None else min(end, max_offset)
    offset = max(from_offset, start)
    while offset < stop:
        fetch = routes.call(topic, partition, "read_raw", topic, partition, offset, max_bytes)
        if fetch is None:
            return
        progressed = False
        for batch in fetch.batches():
            for record in batch.records():          # checks the batch's CRC
                if offset <= record.offset < stop and not batch.is_control:
                    yield record                    # markers are no records to a consumer
            offset = max(offset, batch.next_offset)
            progressed = True
        if not progressed:
            max_bytes *= 2


@dataclass(frozen=True)
class TopicLayout:
    """One topic as the Spark data sources see it (``Cluster.topic_layout``)."""

    name: str
    config: LogConfig                       # effective: broker defaults + topic overrides
    partitions: dict[int, str]              # partition -> log directory
    paths: dict[int, str]                   # partition -> partition directory


def topic_layout(info: TopicInfo, broker_properties: Mapping[str, str]) -> TopicLayout:
    """The layout of the topic ``info`` describes, its config the broker defaults of
    ``broker_properties`` plus its overrides."""
    from cluster.config import BrokerConfig

    base = BrokerConfig.from_properties(broker_properties).log
    paths = {p: str(Path(d) / files.partition_dir_name(info.name, p))
             for p, d in info.partitions.items()}
    return TopicLayout(info.name, base.with_overrides(info.config), dict(info.partitions), paths)


def consume_decoded(read: Callable[[int, int], list[Record]], from_offset: int,
                    chunk: int = 10_000) -> Iterator[Record]:
    """Records read ``chunk`` at a time by ``read(offset, chunk)`` (``Cluster.read_records``:
    decoded by the node) until a read returns fewer."""
    offset = from_offset
    while True:
        records = read(offset, chunk)
        yield from records
        if len(records) < chunk:
            return
        offset = records[-1].offset + 1


def skip_held(items: Iterator[tuple[str, int, bytes]], cluster: Any,
              producer_id: int) -> Iterator[tuple[str, int, bytes]]:
    """A retried idempotent producer's batches (a Spark task's retry, a ``strata produce --file``
    run again) less the records the log already holds; ``cluster`` answers ``last_sequence``.
    The log answers a retry of one of a producer's last five batches as a duplicate but one
    older than those, or one overlapping a stored batch in part, as out of order (Kafka's rule),
    so the retry asks each partition once for the producer's last sequence, drops the batches
    wholly at or below it and re-encodes a batch that straddles it with only its records after
    it."""
    from storage.records import BatchHeader, RecordBatch, build_batch

    held: dict[tuple[str, int], int] = {}
    for topic, partition, data in items:
        key = (topic, partition)
        if key not in held:
            held[key] = cluster.last_sequence(topic, partition, producer_id)
        header = BatchHeader.parse(data)
        last = held[key]
        if header.last_sequence <= last:
            continue
        if header.base_sequence <= last:
            batch = RecordBatch(data)
            data = build_batch(batch.records()[last + 1 - header.base_sequence:],
                               compression=batch.compression, producer_id=header.producer_id,
                               producer_epoch=header.producer_epoch, base_sequence=last + 1,
                               is_transactional=header.is_transactional)
        yield topic, partition, data
