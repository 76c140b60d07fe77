"""``strata dump-log --verify`` and the checks ``strata recover`` also uses: every batch's CRC and
offsets (``check_log``), every index entry against its segment (``check_offset_index``,
``check_time_index``), snapshots, transaction indexes and checkpoints. Each problem names its file
and byte position."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TextIO

from ops.tools.output import json_line
from ops.tools.dump_log_common import (
    DumpOptions,
    INT32_MAX,
    MAX_PROBLEMS_PER_FILE,
    Trailers,
    _segment_base,
    _sibling,
    file_kind,
    read_only,
)
from ops.tools.dump_log_files import (
    _index_base,
    parse_producer_snapshot,
    parse_txn_index,
    read_checkpoint,
)
# the layouts are storage's, one definition per format (index entries are read where needed:
# storage.index imports numpy, which the CLI does not load to start)

if TYPE_CHECKING:
    import numpy as np


# ---- checks (--verify and recover) -------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Problem:
    """One piece of damage: the file, the byte position in that file, and what is wrong."""

    path: str
    position: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}: position {self.position}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {"file": self.path, "position": self.position, "message": self.message}


@dataclass(frozen=True, eq=False)
class LogCheck:
    """A segment file re-validated by the rules of ``LogSegment.recover``: every batch's CRC, base
    offsets above the previous batch's last offset (and the segment's base offset).
    ``valid_bytes`` is where recovery truncates (``problem`` says why); the arrays describe the
    batches before it. ``dropped_*`` count the batches after it whose headers still read (their
    records are lost by the truncation). ``overflow`` names the first valid batch whose last
    offset is more than 2^31 - 1 above the segment's base: recovery splits the segment there
    (``storage.split``) and loses nothing."""

    path: str
    size: int
    valid_bytes: int
    problem: Problem | None
    positions: np.ndarray
    base_offsets: np.ndarray
    last_offsets: np.ndarray
    max_timestamps: np.ndarray
    records: int
    dropped_batches: int
    dropped_records: int
    overflow: Problem | None = None

    @property
    def truncated_bytes(self) -> int:
        return self.size - self.valid_bytes

    @property
    def batches(self) -> int:
        return len(self.positions)

    @property
    def last_offset(self) -> int | None:
        return int(self.last_offsets[-1]) if len(self.last_offsets) else None

    def summary(self) -> str:
        span = "" if self.last_offset is None else \
            f", offsets {int(self.base_offsets[0])}..{self.last_offset}"
        return f"{self.batches} batches, {self.records} records{span}, {self.valid_bytes} bytes"


def check_log(path: Path | str, data: bytes | memoryview, base_offset: int | None, *,
              max_message_bytes: int | None = None, name: str | None = None) -> LogCheck:
    """Re-validate the batches of ``data`` (the bytes of segment ``path``). With
    ``max_message_bytes``, a batch over it and over the recovery read chunk also stops the
    check, as it stops ``LogSegment.recover``."""
    import numpy as np

    from storage.records import scan_batches
    from storage.segment import RECOVERY_CHUNK_BYTES

    label = name or str(path)
    size = len(data)
    scan = scan_batches(data, check_crc=True)
    base, last, sizes = scan.base_offsets, scan.last_offsets, scan.sizes
    floor = np.iinfo(np.int64).min if base_offset is None else base_offset - 1
    previous = np.concatenate(([floor], last[:-1])) if len(last) else last
    bad = (base <= previous) | (last < base)
    if max_message_bytes is not None:
        bad |= sizes > max(max_message_bytes, RECOVERY_CHUNK_BYTES)
    kept = int(np.argmax(bad)) if bad.any() else len(base)
    valid = int(scan.positions[kept - 1] + sizes[kept - 1]) if kept else 0
    problem = None
    if kept < len(base):
        b, lo = int(base[kept]), int(last[kept])
        if lo < b:
            why = f"its last offset {lo} is below its base offset {b}"
        elif b <= int(previous[kept]):
            why = (f"its base offset {b} is not above "
                   + ("the previous batch's last offset" if kept else "the segment's base "
                      "offset - 1") + f" {int(previous[kept])}")
        else:
            why = f"its {int(sizes[kept])} bytes exceed max.message.bytes={max_message_bytes}"
        problem = Problem(label, valid, f"batch at offsets {b}..{lo} is out of order: {why}")
    elif scan.error is not None and scan.error.startswith("CRC"):
        problem = Problem(label, valid, _crc_problem(data, valid))
    elif scan.error is not None:
        problem = Problem(label, valid, scan.error.split(" at position ")[0])
    elif valid < size:
        problem = Problem(label, valid, f"{size - valid} bytes at the end are not a complete "
                                        f"batch (a torn write)")
    dropped_batches = dropped_records = 0
    if valid < size:
        rest = scan_batches(data, start=valid)
        dropped_batches = len(rest)
        dropped_records = int(np.clip(rest.records_counts, 0, None).sum())
    overflow = None
    if base_offset is not None:
        beyond = np.flatnonzero(last[:kept] - base_offset > INT32_MAX)
        if len(beyond):
            at = int(beyond[0])
            overflow = Problem(label, int(scan.positions[at]), (
                f"batch at offsets {int(base[at])}..{int(last[at])} overflows the segment base "
                f"{base_offset} by more than 2^31 - 1 (an old broker's segment): recovery splits "
                f"the segment there"))
    counts = scan.records_counts[:kept]
    return LogCheck(label, size, valid, problem, scan.positions[:kept], base[:kept],
                    last[:kept], scan.max_timestamps[:kept],
                    int(np.clip(counts, 0, None).sum()), dropped_batches, dropped_records,
                    overflow)


def _crc_problem(data: bytes | memoryview, position: int) -> str:
    from storage.records import RecordBatch

    batch = RecordBatch(data[position:], position)     # complete: the scan read all of it
    first = batch.header.base_offset if batch.magic >= 2 else batch.last_offset
    return (f"batch at offsets {first}..{batch.last_offset} fails its CRC (stored crc "
            f"{batch.stored_crc()}, computed crc {batch.compute_crc()})")


def _zero_tail(keys: np.ndarray, values: np.ndarray) -> int:
    """Entries before the zeroed, preallocated tail of an index never trimmed (after a crash,
    or the active segment's): Kafka stops at the first entry after the first whose relative
    offset is 0. Returns the entry count when the rest is not all zero."""
    import numpy as np

    zero = (keys == 0) & (values == 0)
    zero[:1] = False
    first = int(np.argmax(zero)) if zero.any() else len(keys)
    return first if zero[first:].all() else len(keys)


def _entries(label: str, data: bytes | memoryview, dtype: Any, key: str,
             value: str) -> tuple[np.ndarray, np.ndarray, list[Problem], list[str]]:
    """The two columns of an index file up to its zeroed tail, and the problems and warnings
    of its length and that tail."""
    import numpy as np

    width = np.dtype(dtype).itemsize
    count = len(data) // width
    problems, warnings = [], []
    if len(data) % width:
        problems.append(Problem(label, count * width, f"{len(data) % width} bytes at the end "
                                                      f"are not a whole {width}-byte entry"))
    table = np.frombuffer(data, dtype=dtype, count=count)
    keys, values = table[key].astype(np.int64), table[value].astype(np.int64)
    used = _zero_tail(keys, values)
    if used < count:
        warnings.append(f"{count - used} zeroed entries after entry {used - 1}: preallocated and "
                        f"not trimmed (an active segment, or an unclean shutdown)")
    return keys[:used], values[:used], problems, warnings


def _previous(column: np.ndarray, first: int) -> np.ndarray:
    import numpy as np

    return np.concatenate(([first], column[:-1])) if len(column) else column


def check_offset_index(path: Path | str, data: bytes | memoryview, base_offset: int,
                       log: LogCheck) -> tuple[list[Problem], list[str]]:
    """Problems and warnings of an offset index checked against its segment: whole 8-byte
    entries, offsets increasing, positions not decreasing, every position a batch boundary of the
    valid part of the log, no batch before it reaching the entry's offset, the offset within
    the log. (One append of several batches gets one entry: its last offset at the position of
    its first batch, so the offset may sit in a later batch than the one at the position.)"""
    import numpy as np

    label = str(path)
    from storage.index import OFFSET_ENTRY_DTYPE as dtype

    relative, positions, problems, warnings = _entries(label, data, dtype, "relative_offset",
                                                       "position")
    offsets = base_offset + relative
    starts, lasts = log.positions, log.last_offsets
    k = np.searchsorted(starts, positions)
    inside = np.minimum(k, max(len(starts) - 1, 0))
    boundary = (k < len(starts)) & (starts[inside] == positions) if len(starts) else k < 0
    before = np.where(k > 0, lasts[np.maximum(k - 1, 0)], -1) if len(lasts) else offsets * 0 - 1
    last_offset = log.last_offset
    checks = [
        (relative < 0, lambda i: "the offset is below the base offset"),
        (offsets > (last_offset if last_offset is not None else np.iinfo(np.int64).max),
         lambda i: f"the offset is beyond the last offset {last_offset} of the log"),
        (relative <= _previous(relative, -1),
         lambda i: f"the offset is not above the previous entry's {offsets[i - 1]}"),
        (positions < _previous(positions, np.iinfo(np.int64).min),
         lambda i: f"the position is below the previous entry's {positions[i - 1]}"),
        ((positions < 0) | (positions >= log.valid_bytes),
         lambda i: f"the position is outside the valid batches of the log (0..{log.valid_bytes})"),
        (~boundary,
         lambda i: f"the position is inside the batch at position {starts[k[i] - 1]} (offsets "
                   f"{log.base_offsets[k[i] - 1]}..{lasts[k[i] - 1]}), not at a batch boundary"),
        (before >= offsets,
         lambda i: f"the batch before the position already reaches offset {before[i]}: a lookup "
                   f"would skip records"),
    ]
    problems += _first_failures(checks, lambda i, why: Problem(
        label, i * dtype.itemsize, f"entry {i}: offset {offsets[i]} -> position "
                                   f"{positions[i]}: {why}"))
    return problems, warnings


def check_time_index(path: Path | str, data: bytes | memoryview, base_offset: int,
                     log: LogCheck) -> tuple[list[Problem], list[str]]:
    """Problems and warnings of a time index checked against its segment: whole 12-byte
    entries, timestamps increasing, offsets not decreasing, each offset held by a valid batch
    whose max timestamp is at or above the entry's timestamp."""
    import numpy as np

    label = str(path)
    from storage.index import TIME_ENTRY_DTYPE as dtype

    timestamps, relative, problems, warnings = _entries(label, data, dtype, "timestamp",
                                                        "relative_offset")
    offsets = base_offset + relative
    k = np.searchsorted(log.last_offsets, offsets)
    at = np.minimum(k, max(len(log.last_offsets) - 1, 0))
    held = ((k < len(log.last_offsets)) & (log.base_offsets[at] <= offsets)
            if len(log.last_offsets) else k < 0)
    below = held & (log.max_timestamps[at] < timestamps) if len(log.last_offsets) else held
    checks = [
        (relative < 0, lambda i: "the offset is below the base offset"),
        (timestamps <= _previous(timestamps, np.iinfo(np.int64).min),
         lambda i: f"the timestamp is not above the previous entry's {timestamps[i - 1]}"),
        (relative < _previous(relative, -1),
         lambda i: f"the offset is below the previous entry's {offsets[i - 1]}"),
        (~held, lambda i: "no valid batch of the log holds the offset"),
        (below, lambda i: f"the batch holding the offset (position {log.positions[at[i]]}) has "
                          f"max timestamp {log.max_timestamps[at[i]]}, below the entry"),
    ]
    problems += _first_failures(checks, lambda i, why: Problem(
        label, i * dtype.itemsize, f"entry {i}: timestamp {timestamps[i]} -> offset "
                                   f"{offsets[i]}: {why}"))
    return problems, warnings


def _first_failures(checks: list[tuple[np.ndarray, Callable[[int], str]]],
                    problem: Callable[[int, str], Problem]) -> list[Problem]:
    """One problem per failing entry, saying why by the first check it fails (checks are
    vectorised; messages are built only for the first MAX_PROBLEMS_PER_FILE failures)."""
    import numpy as np

    if not checks or not len(checks[0][0]):
        return []
    failed = np.zeros(len(checks[0][0]), dtype=bool)
    for mask, _ in checks:
        failed |= mask
    entries = np.flatnonzero(failed)
    found = []
    for i in entries[:MAX_PROBLEMS_PER_FILE].tolist():
        why = next(explain(i) for mask, explain in checks if mask[i])
        found.append(problem(i, why))
    if len(entries) > MAX_PROBLEMS_PER_FILE:
        first = int(entries[MAX_PROBLEMS_PER_FILE])
        found.append(problem(first, f"... and {len(entries) - MAX_PROBLEMS_PER_FILE} more "
                                    "entries with problems from here on"))
    return found


def _capped(problems: list[Problem]) -> list[Problem]:
    if len(problems) <= MAX_PROBLEMS_PER_FILE:
        return problems
    rest = len(problems) - MAX_PROBLEMS_PER_FILE
    last = problems[MAX_PROBLEMS_PER_FILE]
    return [*problems[:MAX_PROBLEMS_PER_FILE],
            Problem(last.path, last.position, f"... and {rest} more problems from here on")]


# ---- verifying ---------------------------------------------------------------------------------
def verify_file(path: Path, name: str, opts: DumpOptions, trailers: Trailers,
                out: TextIO) -> None:
    kind = file_kind(path)
    problems: list[Problem] = []
    warnings: list[str] = []
    doc: dict[str, Any] = {}
    if kind in ("log", "kraft-snapshot"):
        base = _segment_base(path) if kind == "log" else None
        check = check_log(path, read_only(path), base, name=name)
        problems += [p for p in (check.overflow, check.problem) if p is not None]
        if opts.deep_iteration:
            problems += _deep_problems(path, name, check)
        if kind == "log" and base is not None:
            problems += _txn_index_problems(_sibling(path, ".txnindex"), path, name)
        doc = _log_check_json(check)
        summary = check.summary()
    elif kind in ("offset-index", "time-index"):
        base = _index_base(path)
        log_path = _sibling(path, ".log")
        data = read_only(path)
        if not log_path.is_file():
            problems.append(Problem(name, 0, f"no {log_path.name} beside it (the loader "
                                              f"deletes an index without a log)"))
        else:
            check = check_log(log_path, read_only(log_path), base)
            checker = check_offset_index if kind == "offset-index" else check_time_index
            found, warnings = checker(name, data, base, check)
            problems += found
            if check.problem is not None:
                warnings.append(f"{log_path.name} is damaged from position "
                                f"{check.problem.position}; entries were checked against the "
                                f"batches before it")
        from storage.index import OFFSET_ENTRY, TIME_ENTRY

        width = OFFSET_ENTRY.size if kind == "offset-index" else TIME_ENTRY.size
        summary = f"{len(data) // width} entries"
    else:
        summary = _verify_other(path, name, kind, problems)
    ok = not problems
    if not ok:
        trailers.damaged_files.append(name)
    if opts.json:
        out.write(json_line({"file": name, "type": kind, "ok": ok,
                             "problems": [p.to_json() for p in problems],
                             "warnings": warnings, **doc}) + "\n")
        return
    out.write(f"Verifying {name}\n")
    out.writelines(f"{p}\n" for p in problems)
    out.writelines(f"{name}: warning: {w}\n" for w in warnings)
    out.write(f"{name}: ok: {summary}\n" if ok else
              f"{name}: damaged: {len(problems)} problem{'s' * (len(problems) != 1)}\n")


def _verify_other(path: Path, name: str, kind: str, problems: list[Problem]) -> str:
    from storage.errors import CheckpointError
    from storage.txn_index import ENTRY as TXN_ENTRY

    data = bytes(read_only(path))
    if kind == "producer-snapshot":
        try:
            return f"{len(parse_producer_snapshot(data))} producers"
        except ValueError as error:
            problems.append(Problem(name, 0, str(error)))
    elif kind == "txn-index":
        log_path = _sibling(path, ".log")
        if log_path.is_file():
            problems += _txn_index_problems(path, log_path, name)
        if len(data) % TXN_ENTRY.size:
            problems.append(Problem(name, len(data) - len(data) % TXN_ENTRY.size,
                                    f"{len(data) % TXN_ENTRY.size} bytes at the end are not a "
                                    f"whole {TXN_ENTRY.size}-byte entry"))
        entries = parse_txn_index(data)
        for i in range(1, len(entries)):
            if entries[i][3] <= entries[i - 1][3]:
                problems.append(Problem(name, i * TXN_ENTRY.size, f"entry {i}: last offset "
                                        f"{entries[i][3]} is not above the previous entry's"))
        return f"{len(entries)} entries"
    elif kind in ("offset-checkpoint", "epoch-checkpoint"):
        try:
            return f"{len(read_checkpoint(path))} entries"
        except CheckpointError as error:
            line = int(getattr(error, "line_number", 1) or 1)
            position = sum(len(x) for x in data.splitlines(keepends=True)[:line - 1])
            problems.append(Problem(name, position, str(error)))      # it names the line
    else:
        return "not a file dump-log knows; not checked"
    return "damaged"


def _txn_index_problems(index: Path, log_path: Path, name: str) -> list[Problem]:
    """The ``.txnindex`` beside a segment (``index``, maybe missing) against the segment's
    markers (``storage.txn_markers``, with the producer snapshot at its base when there is one):
    an abort marker without its entry, an entry whose marker is a commit or absent. Reported
    under ``name``, the file being verified."""
    from storage.txn_markers import open_transactions_in_snapshot, txn_index_mismatch_in

    mismatch = txn_index_mismatch_in(read_only(log_path),
                                     read_only(index) if index.is_file() else None,
                                     open_transactions_in_snapshot(_sibling(log_path,
                                                                            ".snapshot")))
    if mismatch is None:
        return []
    return [Problem(name, 0, f"{mismatch} ({index.name} is rebuilt from {log_path.name} by "
                             f"recovery)")]


def _deep_problems(path: Path, name: str, check: LogCheck) -> list[Problem]:
    """Decode the records of every valid batch (``--verify --deep-iteration``)."""
    from storage.errors import CorruptRecordError
    from storage.records import RecordBatch

    data = read_only(path)
    problems = []
    for position in check.positions.tolist():
        try:
            RecordBatch(data[position:], position, path).records(check_crc=False)  # checked
        except CorruptRecordError as error:
            problems.append(Problem(name, position, f"records do not decode: {error}"))
    return _capped(problems)


def _log_check_json(check: LogCheck) -> dict[str, Any]:
    return {"size": check.size, "batches": check.batches, "records": check.records,
            "firstOffset": int(check.base_offsets[0]) if check.batches else None,
            "lastOffset": check.last_offset, "validBytes": check.valid_bytes,
            "truncatedBytes": check.truncated_bytes, "droppedBatches": check.dropped_batches,
            "droppedRecords": check.dropped_records}
