"""The client's data path: records encoded into v2 batches (``encode_batches``), batches sent to
the nodes (``produce_batches``), raw batches read back and decoded (``consume``) or records
decoded by the node (``consume_decoded``), and a topic's layout for the Spark data sources.

Produce packs the batches of one directory into calls of about ``batch_bytes`` (64 KiB - 1 MiB is
where an actor call costs least per byte) and pipelines them, ``window`` calls in flight per
directory, never letting a call overtake an earlier one that holds the same partition. Batches a
node did not take because their partition moved are sent again, in order, where it lives now. An
acknowledged produce is in the log (and on disk with ``flush=True``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from cluster.errors import UnknownTopicError
from cluster.handles import Handle, RayPending
from cluster.routing import MOVED_RETRY_S, Routes
from storage import files
from storage.batching import encode_batches
from storage.config import LogConfig
from storage.errors import StorageError
from storage.record_format import Record

if TYPE_CHECKING:
    from cluster.metadata import TopicInfo
    from storage.log import LogAppendInfo

DEFAULT_BATCH_BYTES = 1 << 20
DEFAULT_WINDOW = 4

Item = tuple[str, int, bytes]    # (topic, partition, one encoded batch)


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

    def take(pending: RayPending) -> None:
        for item, result in zip(sent.pop(id(pending)), pending.result()):
            if isinstance(result, StorageError):
                moved.append((item, result))
            else:
                infos.append(result)

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
        pending = nodes[log_dir].submit("append_batches_or_moved", batch, flush)
        sent[id(pending)] = batch
        flight.append((held, pending))
        calls += 1

    try:
        for topic, partition, data in items:
            log_dir = routes.partition_dir(topic, partition)
            packing.setdefault(log_dir, []).append((topic, partition, data))
            sizes[log_dir] = sizes.get(log_dir, 0) + len(data)
            if sizes[log_dir] >= batch_bytes:
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
                    "append_batches_or_moved", batch, flush, timeout=120)):
                if isinstance(result, StorageError):
                    moved.append((item, result))
                else:
                    infos.append(result)
            calls += 1
    return infos, calls


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
