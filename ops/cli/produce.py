"""``strata produce TOPIC``: records from stdin or a file, one per line.

A line is ``key<TAB>value`` (``--separator`` changes the tab) or, with ``--value-only``, a value.
``--null-marker X`` makes a value equal to ``X`` a null (a tombstone on a compacted topic). Records
go to ``--partition`` or, like Kafka's default partitioner, to ``murmur2(key) % partitions``;
keyless records go to one partition per chunk of input, round robin (Kafka's sticky partitioner,
roughly). Lines are read in chunks of about ``--batch-bytes``, encoded here into v2 batches and
sent in pipelined calls (``Cluster.produce_batches``). A chunk under ``NODE_ENCODES_BELOW`` bytes
(a small input, or the tail of a large one) is routed with the interpreted murmur2 and sent as
records for the nodes to encode (``Cluster.produce_records``), so a small produce does not load
numba and the encoder, which cost more than the whole command otherwise. Exit 1 when the cluster
refuses a batch (earlier chunks stay stored).

Input from ``--file`` is sent as one idempotent producer (Kafka's ``enable.idempotence``): its id
is derived from the topic, the options and the file (path, size, modification time), its
sequences count the records of each partition from 0, and the command encodes every batch
itself. A run that stops half-way (Ctrl-C, SIGTERM from ``timeout``, a directory that went
offline) says per partition what it had stored (records acknowledged, log end offset) and exits
non-zero; running the same command again on the unchanged file resumes: it asks each partition
for the producer's last stored sequence and sends only the records after it
(``cluster.client.data_path.skip_held``), so nothing is stored twice. Input from stdin cannot be
read again and is sent as before (without a producer id).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import signal
import sys
import threading
import time
from typing import IO, Any, Iterator

from ops.cli import add_common_args, connect, disconnect, partition_number, write
from ops.tools import EXIT_OK, EXIT_PROBLEMS, UsageError

EXIT_INTERRUPTED = 130

DEFAULT_BATCH_BYTES = 1 << 20
NODE_ENCODES_BELOW = 64 << 10    # bytes of input lines in a chunk


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "produce", help="append records read from stdin or a file",
        description="Append records to a topic: one per line, key<TAB>value (or the value only "
                    "with --value-only), read from --file or stdin.")
    add_common_args(parser, json_help="print the summary as one JSON document")
    parser.add_argument("topic", help="the topic to write to")
    parser.add_argument("--partition", type=partition_number, default=None,
                        help="the partition (default: by key, as Kafka's default partitioner)")
    parser.add_argument("--file", default=None, help="read this file instead of stdin")
    parser.add_argument("--value-only", action="store_true",
                        help="every line is a value (records without key)")
    parser.add_argument("--separator", default="\t", help="between key and value (default TAB)")
    parser.add_argument("--null-marker", default=None,
                        help="a value equal to this is stored as null (a tombstone)")
    parser.add_argument("--flush", action="store_true",
                        help="flush before acknowledging (the records are on disk on return)")
    parser.add_argument("--batch-bytes", type=int, default=DEFAULT_BATCH_BYTES,
                        help=f"bytes per record batch and per call (default {DEFAULT_BATCH_BYTES})")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from storage.errors import StorageError

    if args.separator == "":
        raise UsageError("--separator must not be empty")
    source: IO[bytes]
    producer: _Producer | None = None
    if args.file:
        try:
            source = open(args.file, "rb")
            producer = _Producer(_producer_id(args, os.fstat(source.fileno())))
        except OSError as err:
            raise UsageError(f"cannot read {args.file}: {err}") from None
    else:
        source = sys.stdin.buffer
    cluster = connect(args)
    totals: dict[str, Any] = {"topic": args.topic, "records": 0, "batches": 0, "calls": 0,
                              "partitions": {}}
    if producer is not None:
        totals["producer_id"] = producer.producer_id
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _interrupt)   # `timeout` sends it: as Ctrl-C
    try:
        count = _partition_count(cluster, args.topic)
        if args.partition is not None and not 0 <= args.partition < count:
            raise UsageError(f"topic {args.topic} has partitions 0..{count - 1}, "
                             f"not {args.partition}")
        sep = args.separator.encode()
        null = None if args.null_marker is None else args.null_marker.encode()
        for index, (chunk, size) in enumerate(_chunks(source, args.batch_bytes)):
            records = _parse(chunk, sep, null, args.value_only)
            small = size < NODE_ENCODES_BELOW
            by_partition = _route(records, args.partition, count, index, compiled=not small)
            _send(cluster, args.topic, by_partition, args, totals,
                  node_encodes=small and producer is None, producer=producer)
    except StorageError as err:
        stored = _stored(cluster, args.topic, totals, producer)
        print(f"strata produce: {type(err).__name__}: {err}; {stored}", file=sys.stderr)
        if args.json:
            write({**totals, "error": f"{type(err).__name__}: {err}"})
        return EXIT_PROBLEMS
    except KeyboardInterrupt:
        stored = _stored(cluster, args.topic, totals, producer)
        print(f"strata produce: interrupted; {stored}", file=sys.stderr)
        if args.json:
            write({**totals, "error": "interrupted"})
        return EXIT_INTERRUPTED
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if source is not sys.stdin.buffer:
            source.close()
        disconnect()
    if args.json:
        write(totals)
    else:
        print(f"produced {totals['records']} records to {args.topic} in {totals['batches']} "
              f"batches ({totals['calls']} calls)", file=sys.stderr)
    return EXIT_OK


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


class _Producer:
    """The idempotent producer of a ``--file`` run: its id, epoch 0, and the next sequence of
    each partition (counting the file's records routed there from 0)."""

    def __init__(self, producer_id: int) -> None:
        self.producer_id = producer_id
        self.sequences: dict[int, int] = {}
        self._held: dict[tuple[str, int], int] = {}

    def last_sequence(self, cluster: Any, topic: str, partition: int) -> int:
        """The last sequence ``topic``-``partition`` held of this producer when the run began
        (asked once per partition: everything sent afterwards is new)."""
        key = (topic, partition)
        if key not in self._held:
            self._held[key] = cluster.last_sequence(topic, partition, self.producer_id)
        return self._held[key]

    def build(self, partition: int, records: list[Any]) -> bytes:
        from storage.record_builder import build_batch

        base = self.sequences.get(partition, 0)
        self.sequences[partition] = base + len(records)
        return build_batch(records, producer_id=self.producer_id, producer_epoch=0,
                           base_sequence=base)


class _HeldAtStart:
    """``skip_held``'s view of the cluster: each partition's last sequence as the run began."""

    def __init__(self, cluster: Any, producer: _Producer) -> None:
        self._cluster = cluster
        self._producer = producer

    def last_sequence(self, topic: str, partition: int, producer_id: int) -> int:
        return self._producer.last_sequence(self._cluster, topic, partition)


def _producer_id(args: argparse.Namespace, stat: os.stat_result) -> int:
    """The producer id of a ``--file`` run: the same for the same topic, options and unchanged
    file (so a run again resumes), another for anything else. 62 bits, as
    ``cluster.client.txn_client.new_producer_id``'s random ones."""
    what = "\0".join(str(v) for v in (
        args.topic, args.partition, os.path.abspath(args.file), stat.st_size, stat.st_mtime_ns,
        stat.st_ino, args.value_only, args.separator, args.null_marker, args.batch_bytes))
    return int.from_bytes(hashlib.blake2b(what.encode(), digest_size=8).digest(), "big") >> 2


def _stored(cluster: Any, topic: str, totals: dict[str, Any],
            producer: _Producer | None) -> str:
    """What a run that stopped had stored, per partition it wrote to: the records acknowledged
    (with a producer: the ones the log holds of it, asked now) and the partition's log end
    offset, or why it is not known (its directory is offline)."""
    from storage.errors import StorageError

    parts = []
    written = sorted(set(map(int, totals["partitions"])) | set(
        producer.sequences if producer is not None else ()))
    for p in written:
        acknowledged = totals["partitions"].get(str(p), 0)
        try:
            if producer is not None:
                acknowledged = cluster.last_sequence(topic, p, producer.producer_id) + 1
            end = cluster.offsets(topic, p)[1]
            parts.append(f"{topic}-{p}: {acknowledged} records stored, log end offset {end}")
        except StorageError as err:
            parts.append(f"{topic}-{p}: {acknowledged} records acknowledged, log end not known "
                         f"({type(err).__name__})")
    said = "; ".join(parts) if parts else "nothing was stored"
    how = ("run the same command again to store the rest: the records already stored are "
           "skipped" if producer is not None else
           "input from stdin cannot be resumed: give it with --file to make a run again skip "
           "what is stored")
    return f"stored before it stopped: {said}; {how}"


def _partition_count(cluster: Any, topic: str) -> int:
    for info in cluster.list_topics(include_internal=True):
        if info.name == topic:
            return max(info.partitions) + 1
    raise UsageError(f"the cluster has no topic {topic} (create it with `strata topic create`)")


def _chunks(source: IO[bytes], size: int) -> Iterator[tuple[list[tuple[int, bytes]], int]]:
    """Chunks of about ``size`` bytes of (line number, line without its newline), each with
    the bytes of its lines."""
    chunk: list[tuple[int, bytes]] = []
    held = 0
    for number, line in enumerate(source, 1):
        line = line.rstrip(b"\r\n") if line.endswith(b"\n") else line
        chunk.append((number, line))
        held += len(line)
        if held >= size:
            yield chunk, held
            chunk, held = [], 0
    if chunk:
        yield chunk, held


def _parse(chunk: list[tuple[int, bytes]], sep: bytes, null: bytes | None,
           value_only: bool) -> list[Any]:
    from storage.record_format import Record

    now = int(time.time() * 1000)
    records = []
    for number, line in chunk:
        if value_only:
            key, value = None, line
        else:
            key, found, value = line.partition(sep)
            if not found:
                raise UsageError(f"line {number}: no separator {sep!r} between key and value "
                                 "(use --value-only for lines without key)")
        records.append(Record(key=key, value=None if null is not None and value == null
                              else value, timestamp=now))
    return records


def _route(records: list[Any], partition: int | None, count: int, chunk_index: int, *,
           compiled: bool) -> dict[int, list[Any]]:
    """Records by partition; keys hashed by the numba kernel when ``compiled``, else by the
    same function interpreted (a few keys: no numba to load)."""
    if partition is not None:
        return {partition: records}
    keyed = [r for r in records if r.key is not None]
    out: dict[int, list[Any]] = {}
    if keyed:
        if compiled:
            from cluster.client.partitioner import partitions_for_keys as hash_keys
        else:
            from cluster.client.murmur import partitions_of as hash_keys

        for record, p in zip(keyed, hash_keys([r.key for r in keyed], count)):
            out.setdefault(int(p), []).append(record)
    keyless = [r for r in records if r.key is None]
    if keyless:
        out.setdefault(chunk_index % count, []).extend(keyless)
    return out


def _send(cluster: Any, topic: str, by_partition: dict[int, list[Any]],
          args: argparse.Namespace, totals: dict[str, Any], *, node_encodes: bool,
          producer: _Producer | None = None) -> None:
    if node_encodes:
        result = cluster.produce_records(
            [(topic, p, records) for p, records in sorted(by_partition.items())],
            flush=args.flush, batch_bytes=args.batch_bytes)
    else:
        from cluster.client.data_path import encode_batches, skip_held

        limit = min(args.batch_bytes, cluster.batch_limit(topic))
        if producer is None:
            items: Iterator[tuple[str, int, bytes]] = iter(
                [(topic, p, batch) for p, records in sorted(by_partition.items())
                 for batch in encode_batches(records, limit)])
        else:
            items = skip_held(iter(
                [(topic, p, batch) for p, records in sorted(by_partition.items())
                 for batch in encode_batches(
                     records, limit, build=lambda chunk, p=p: producer.build(p, chunk))]),
                _HeldAtStart(cluster, producer), producer.producer_id)
        result = cluster.produce_batches(items, flush=args.flush, batch_bytes=args.batch_bytes)
    totals["records"] += result.records
    totals["batches"] += result.batches
    totals["calls"] += result.calls
    for p, records in by_partition.items():
        totals["partitions"][str(p)] = totals["partitions"].get(str(p), 0) + len(records)
