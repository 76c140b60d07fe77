"""The drill's own record of what producers were told, and the check of a log against it.

A drill never trusts the cluster's word about what it stored. Every producer writes down each
record it was *told* was acknowledged (the append returned, after a flush) with the offset it was
given; a batch whose fate is unknown (the call failed in a way that may or may not have stored it,
and no retry settled it) is written down as *in doubt*. Every value a drill writes is unique, so
a record in the log is found in the ledger by its value alone.

``verify`` reads every partition back and sorts what it finds:

* lost: an acknowledged record that is not in the log, where the log's rules say it must be: in a
  partition of a topic without compaction, every acknowledged record; in a compacted one, the
  latest acknowledged record of each key (unless a later in-doubt record of that key is present,
  which the cleaner may legitimately keep instead);
* misplaced: an acknowledged record found at an offset other than the one it was given;
* duplicated: a value found more than once (acknowledged or in doubt);
* phantom: a value the drill never sent (bytes that came from nowhere);
* the in-doubt records present and absent are counted, and are neither loss nor duplication.

Producers may run while ``verify`` reads. What was acknowledged before the read began must be
there; a record acknowledged during the read counts as in doubt for that check; and a value is a
phantom only when the ledger, asked after the read, has never heard of it (a producer writes a
batch down as in doubt before it sends it, so whatever the read found was written down by then).

Pure: no Ray; ``verify`` takes a reader function, so unit tests feed it lists.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

EXAMPLES = 10


@dataclass(frozen=True, slots=True)
class LedgerRecord:
    topic: str
    partition: int
    offset: int            # -1 while in doubt
    key: bytes
    value: bytes


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One record as read back from the cluster."""

    offset: int
    key: bytes | None
    value: bytes | None


class Ledger:
    """Thread-safe: every producer thread of a drill writes into one ledger."""

    def __init__(self, compacted_topics: Iterable[str] = ()) -> None:
        self.compacted = set(compacted_topics)
        self._lock = threading.Lock()
        self._acked: dict[bytes, LedgerRecord] = {}
        self._doubt: dict[bytes, LedgerRecord] = {}
        self.acked_batches = 0

    def acknowledge(self, topic: str, partition: int, first_offset: int,
                    records: list[tuple[bytes, bytes]]) -> None:
        """A batch of ``records`` (key, value) was acknowledged at ``first_offset`` onwards."""
        with self._lock:
            self.acked_batches += 1
            for i, (key, value) in enumerate(records):
                self._doubt.pop(value, None)
                self._acked[value] = LedgerRecord(topic, partition, first_offset + i, key, value)

    def in_doubt(self, topic: str, partition: int, records: list[tuple[bytes, bytes]]) -> None:
        """A batch may or may not be stored (until ``acknowledge`` settles it)."""
        with self._lock:
            for key, value in records:
                if value not in self._acked:
                    self._doubt[value] = LedgerRecord(topic, partition, -1, key, value)

    def settle(self, records: list[tuple[bytes, bytes]]) -> None:
        """The batch was refused outright (a typed error raised before anything was stored)."""
        with self._lock:
            for _, value in records:
                self._doubt.pop(value, None)

    def acknowledged(self, topic: str | None = None, partition: int | None = None
                     ) -> list[LedgerRecord]:
        with self._lock:
            records = list(self._acked.values())
        return [r for r in records if (topic is None or r.topic == topic)
                and (partition is None or r.partition == partition)]

    def doubtful(self) -> list[LedgerRecord]:
        with self._lock:
            return list(self._doubt.values())

    def sent(self) -> dict[bytes, LedgerRecord]:
        """Every record sent and not refused, acknowledged or in doubt, by value: one snapshot
        (a batch moves from in doubt to acknowledged under the lock, so it is never missed)."""
        with self._lock:
            return {**self._doubt, **self._acked}

    def count(self, topic: str | None = None, partition: int | None = None) -> int:
        if topic is None and partition is None:
            with self._lock:
                return len(self._acked)
        return len(self.acknowledged(topic, partition))

    def partitions(self) -> list[tuple[str, int]]:
        with self._lock:
            found = {(r.topic, r.partition) for r in self._acked.values()}
            found |= {(r.topic, r.partition) for r in self._doubt.values()}
        return sorted(found)

    def summary(self) -> dict[str, Any]:
        with self._lock:
            return {"acknowledged_records": len(self._acked),
                    "acknowledged_batches": self.acked_batches,
                    "in_doubt_records": len(self._doubt),
                    "partitions": len({(r.topic, r.partition) for r in self._acked.values()}),
                    "compacted_topics": sorted(self.compacted)}


@dataclass
class Verification:
    """What ``verify`` found. ``ok`` is False when anything was lost, misplaced, duplicated or
    invented; ``examples`` holds up to ``EXAMPLES`` of each kind."""

    partitions: int = 0
    log_records: int = 0
    acknowledged: int = 0
    lost: int = 0
    misplaced: int = 0
    duplicated: int = 0
    phantom: int = 0
    in_doubt_present: int = 0
    in_doubt_absent: int = 0
    excused: int = 0
    examples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.misplaced or self.duplicated or self.phantom)

    def _example(self, kind: str, **item: Any) -> None:
        bucket = self.examples.setdefault(kind, [])
        if len(bucket) < EXAMPLES:
            bucket.append(item)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "partitions": self.partitions, "log_records": self.log_records,
                "acknowledged": self.acknowledged, "lost": self.lost,
                "misplaced": self.misplaced, "duplicated": self.duplicated,
                "phantom": self.phantom, "in_doubt_present": self.in_doubt_present,
                "in_doubt_absent": self.in_doubt_absent, "excused": self.excused,
                "examples": self.examples}


Reader = Callable[[str, int], Iterable[LogRecord]]


def verify(ledger: Ledger, read: Reader, partitions: Iterable[tuple[str, int]] | None = None,
           excuse: Callable[[LedgerRecord], bool] | None = None) -> Verification:
    """Read every partition (those of the ledger unless given) and compare (module docstring).
    ``excuse`` names acknowledged records the drill destroyed on purpose (``corrupt``): they are
    counted as excused instead of lost."""
    result = Verification()
    targets = sorted(set(partitions) if partitions is not None else set(ledger.partitions()))
    acked = ledger.acknowledged()                 # before the read: these must be there
    by_value = {r.value: r for r in acked}
    found: list[tuple[str, int, list[LogRecord]]] = [
        (topic, partition, list(read(topic, partition))) for topic, partition in targets]
    # after the read: every value a producer sent by then (module docstring); what was not
    # acknowledged before the read is in doubt for this check
    doubt = {v: r for v, r in ledger.sent().items() if v not in by_value}
    for topic, partition, records in found:
        result.partitions += 1
        seen: dict[bytes, list[int]] = {}
        keys_at: dict[bytes, int] = {}          # highest offset present per key
        for record in records:
            result.log_records += 1
            value = record.value if record.value is not None else b""
            seen.setdefault(value, []).append(record.offset)
            if record.key is not None:
                keys_at[record.key] = max(keys_at.get(record.key, -1), record.offset)
        mine = [r for r in acked if r.topic == topic and r.partition == partition]
        result.acknowledged += len(mine)
        latest: dict[bytes, LedgerRecord] = {}
        for r in mine:
            if r.key not in latest or r.offset > latest[r.key].offset:
                latest[r.key] = r
        compacted = topic in ledger.compacted
        for r in mine:
            where = seen.get(r.value)
            if where is None:
                required = not compacted or latest[r.key] is r
                if required and compacted and keys_at.get(r.key, -1) > r.offset:
                    required = not _later_in_doubt_present(r, doubt, seen)
                if not required:
                    continue
                if excuse is not None and excuse(r):
                    result.excused += 1
                    continue
                result.lost += 1
                result._example("lost", topic=topic, partition=partition, offset=r.offset,
                                key=_text(r.key), value=_text(r.value))
            elif r.offset not in where:
                result.misplaced += 1
                result._example("misplaced", topic=topic, partition=partition,
                                offset=r.offset, found_at=where[:5], value=_text(r.value))
        for value, offsets in seen.items():
            if len(offsets) > 1 and (value in by_value or value in doubt):
                result.duplicated += 1
                result._example("duplicated", topic=topic, partition=partition,
                                offsets=offsets[:5], value=_text(value))
            elif value not in by_value and value not in doubt:
                result.phantom += 1
                result._example("phantom", topic=topic, partition=partition,
                                offsets=offsets[:5], value=_text(value))
        for value, r in doubt.items():
            if r.topic == topic and r.partition == partition:
                if value in seen:
                    result.in_doubt_present += 1
                else:
                    result.in_doubt_absent += 1
    return result


def _later_in_doubt_present(r: LedgerRecord, doubt: dict[bytes, LedgerRecord],
                            seen: dict[bytes, list[int]]) -> bool:
    """A record of ``r``'s key, in doubt, present in the log at a higher offset: the cleaner may
    have removed ``r`` in its favour."""
    return any(d.key == r.key and d.topic == r.topic and d.partition == r.partition
               and max(seen.get(v, [-1])) > r.offset for v, d in doubt.items())


def _text(raw: bytes | None) -> str | None:
    if raw is None:
        return None
    return raw.decode("utf-8", "backslashreplace")
