"""Offsets of a ``strata`` read, batch or stream: the partitions' bounds as the nodes report them,
the start and end of a read resolved from its options (``cluster.spark.options``), the data-loss
rule of ``failOnDataLoss``, and the split of a micro-batch's ``maxOffsetsPerTrigger`` over the
partitions.

Offsets follow Kafka's: a read of partition p covers ``[start, end)``; "latest" is the last stable
offset for ``read_committed`` (Kafka's ListOffsets with isolation level READ_COMMITTED) and the
log end offset for ``read_uncommitted``; "earliest" is the log start offset.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cluster.spark import options as opts
from cluster.spark.errors import DataLossError, SourceOptionError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Bounds:
    """One partition's offsets at the moment the nodes were asked."""

    log_start: int
    log_end: int
    last_stable: int

    def latest(self, isolation: str) -> int:
        return self.last_stable if isolation == opts.READ_COMMITTED else self.log_end


def partition_bounds(cluster: Any, topic: str) -> dict[int, Bounds]:
    """{partition: Bounds} of every partition of ``topic`` (``Cluster.describe_topic``)."""
    return {d.partition: Bounds(d.log_start_offset, d.log_end_offset, d.last_stable_offset)
            for d in cluster.describe_topic(topic)}


def checked_start(topic: str, partition: int, wanted: int, bounds: Bounds,
                  fail_on_data_loss: bool) -> int:
    """``wanted`` when the partition still holds it; otherwise data loss (Kafka's
    ``reportDataLoss``): ``DataLossError`` with ``fail_on_data_loss``, else a warning and the
    nearest offset the partition has (its log start, or its log end after a truncation)."""
    if bounds.log_start <= wanted <= bounds.log_end:
        return wanted
    if wanted < bounds.log_start:
        what = (f"{topic}-{partition}: offset {wanted} is gone, the partition's log start offset "
                f"is {bounds.log_start} (retention or delete-records removed offsets {wanted} to "
                f"{bounds.log_start - 1})")
        instead = bounds.log_start
    else:
        what = (f"{topic}-{partition}: offset {wanted} lies beyond the partition's log end offset "
                f"{bounds.log_end} (the partition was truncated, or deleted and created again)")
        instead = bounds.log_end
    if fail_on_data_loss:
        raise DataLossError(f"{what}; some data may have been lost. Set the option "
                            f"failOnDataLoss=false to read from offset {instead} instead",
                            topic=topic, partition=partition, requested_offset=wanted,
                            log_start_offset=bounds.log_start, log_end_offset=bounds.log_end)
    log.warning("%s; reading from offset %d instead (failOnDataLoss=false)", what, instead)
    return instead


def resolve_start(cluster: Any, topic: str, position: opts.StartingPosition,
                  bounds: Mapping[int, Bounds], isolation: str,
                  fail_on_data_loss: bool) -> dict[int, int]:
    """The first offset to read of every partition in ``bounds``, from the starting options."""
    named = set(position.offsets) | set(position.timestamps)
    unknown = named - set(bounds)
    if unknown:
        raise SourceOptionError(f"option {position.option} names partitions {sorted(unknown)} "
                                f"that topic {topic} does not have (it has "
                                f"{len(bounds)})", option=position.option)
    missing = set(bounds) - named
    if named and missing:
        # Kafka's source asserts it too (KafkaOffsetReader.fetchSpecificOffsets, and the
        # timestamp variant): a partition left out must not silently read from earliest
        what = ("-2 for earliest, -1 for latest" if position.offsets
                else "a timestamp for each")
        raise SourceOptionError(f"option {position.option} must name every partition of topic "
                                f"{topic} ({what}); missing: {sorted(missing)}",
                                option=position.option, missing=sorted(missing))
    out = {}
    for partition, b in sorted(bounds.items()):
        stamp = position.timestamps.get(partition, position.timestamp)
        if stamp is not None:
            found = cluster.offset_for_time(topic, partition, stamp)
            if found is None:
                if not position.no_match_latest:
                    raise SourceOptionError(
                        f"option {position.option}: no record of {topic}-{partition} has a "
                        f"timestamp at or after {stamp} (startingOffsetsByTimestampStrategy="
                        f"error, Kafka's default; set it to latest to start such partitions at "
                        f"the latest offset)", option=position.option, partition=partition)
                found = b.latest(isolation)
            out[partition] = found
            continue
        wanted = position.offsets.get(partition, position.default)
        if wanted == opts.EARLIEST:
            out[partition] = b.log_start
        elif wanted == opts.LATEST:
            out[partition] = b.latest(isolation)
        elif wanted > b.log_end:
            raise SourceOptionError(f"option {position.option} asks offset {wanted} of "
                                    f"{topic}-{partition}, beyond its log end offset {b.log_end}",
                                    option=position.option, partition=partition)
        else:
            out[partition] = checked_start(topic, partition, wanted, b, fail_on_data_loss)
    return out


def resolve_end(topic: str, ends: Mapping[int, int], bounds: Mapping[int, Bounds],
                isolation: str) -> dict[int, int]:
    """The end (exclusive) of a batch read of every partition in ``bounds`` (``endingOffsets``):
    never past the last stable offset under ``read_committed``."""
    unknown = set(ends) - set(bounds)
    if unknown:
        raise SourceOptionError(f"option endingOffsets names partitions {sorted(unknown)} that "
                                f"topic {topic} does not have", option="endingOffsets")
    out = {}
    for partition, b in sorted(bounds.items()):
        wanted = ends.get(partition, opts.LATEST)
        latest = b.latest(isolation)
        if wanted == opts.EARLIEST:
            raise SourceOptionError(f"option endingOffsets cannot be earliest (-2), as for "
                                    f"{topic}-{partition}", option="endingOffsets")
        if wanted == opts.LATEST:
            out[partition] = latest
            continue
        if wanted > b.log_end:
            raise SourceOptionError(f"option endingOffsets asks offset {wanted} of "
                                    f"{topic}-{partition}, beyond its log end offset {b.log_end}",
                                    option="endingOffsets", partition=partition)
        if wanted > latest:
            log.warning("%s-%d: endingOffsets %d lies above the last stable offset %d (an open "
                        "transaction): a read_committed read ends there", topic, partition,
                        wanted, latest)
        out[partition] = min(wanted, latest)
    return out


def limit_ends(starts: Mapping[int, int], ends: Mapping[int, int],
               budget: int) -> dict[int, int]:
    """Ends that hold at most ``budget`` offsets in all, split over the partitions in proportion
    to what each has to read (Kafka's ``maxOffsetsPerTrigger`` rate limit); the rounding remainder
    goes to the partitions with the largest fractions, so the total is exactly
    ``min(budget, available)`` and every partition with data moves when the budget allows. A
    partition missing from ``starts`` (new to the stream) starts at 0."""
    available = {p: max(ends[p] - starts.get(p, 0), 0) for p in ends}
    total = sum(available.values())
    if total <= budget:
        return dict(ends)
    shares = {p: budget * a // total for p, a in available.items()}
    left = budget - sum(shares.values())
    by_fraction = sorted(available, key=lambda p: (-(budget * available[p] % total), p))
    for p in by_fraction[:left]:
        shares[p] += 1
    return {p: starts.get(p, 0) + shares[p] if available[p] else ends[p] for p in ends}
