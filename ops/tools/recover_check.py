"""The read-only check of ``strata recover``: what the storage loader would do to each partition
(its dry run, with the topic's config) as findings, plus what the loader does not judge (index
contents, records that do not decode, producer snapshots, checkpoints). See ``ops.tools.recover``
for the kinds of findings and their actions."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

if TYPE_CHECKING:
    from ops.tools.dump_log import LogCheck
    from storage.clock import Clock
    from storage.config import LogConfig


TRUNCATE, DELETE, COMPLETE_SWAP, REBUILD, SPLIT, QUARANTINE, NONE, MANUAL = (
    "truncate", "delete", "complete-swap", "rebuild", "split", "quarantine", "none", "manual")
_QUARANTINED = re.compile(r"(\.\d+\.truncated|\.(corrupt|stale)\.\d+)$")


# ---- findings ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Finding:
    """One thing found: ``file`` relative to the log directory, ``position`` a byte in it."""

    kind: str
    file: str
    message: str
    action: str
    position: int | None = None
    bytes: int = 0
    records: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "file": self.file, "position": self.position,
                "message": self.message, "action": self.action, "bytes": self.bytes,
                "records": self.records}


@dataclass
class PartitionCheck:
    """What checking one partition directory found, and (after a repair) what was done."""

    name: str
    path: Path
    segments: int = 0
    bytes: int = 0
    records: int = 0
    findings: list[Finding] = field(default_factory=list)
    repair: dict[str, Any] | None = None

    @property
    def needs_repair(self) -> bool:
        return any(f.action != NONE for f in self.findings)

    @property
    def status(self) -> str:
        if self.repair is not None:
            return "repaired" if self.repair.get("verified") else "failed"
        return "needs-repair" if self.needs_repair else "healthy"

    def to_json(self) -> dict[str, Any]:
        return {"partition": self.name, "status": self.status, "segments": self.segments,
                "bytes": self.bytes, "records": self.records,
                "findings": [f.to_json() for f in self.findings], "repair": self.repair}


@dataclass
class DirCheck:
    directory: Path
    partitions: list[PartitionCheck] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)     # the directory's own files
    skipped: list[dict[str, str]] = field(default_factory=list)

    @property
    def needs_repair(self) -> bool:
        return (any(f.action != NONE for f in self.findings)
                or any(p.needs_repair for p in self.partitions))

    def all_findings(self) -> Iterator[tuple[str, Finding]]:
        yield from (("", f) for f in self.findings)
        for partition in self.partitions:
            yield from ((partition.name, f) for f in partition.findings)


# ---- checking ----------------------------------------------------------------------------------
def count_segments(path: Path) -> int:
    from storage import files

    try:
        names = os.listdir(path)
    except OSError:
        return 0          # reported by check_directory
    return sum(1 for n in names if files.is_segment_file(n)
               and files.strip_temp_suffix(Path(n)).suffix == files.LOG_SUFFIX
               and not n.endswith((files.CLEANED_SUFFIX, files.DELETED_SUFFIX)))


def check_directory(directory: Path, advance: Callable[[str], None],
                    max_message_bytes: int,
                    topic_configs: Mapping[str, LogConfig] | None = None,
                    invalid_topics: Mapping[str, str] | None = None) -> DirCheck:
    """Check the directory's checkpoints and every partition (``advance`` per segment), each
    with its topic's ``max.message.bytes`` from ``topic_configs``, else ``max_message_bytes``.
    A partition of a topic of ``invalid_topics`` (topic -> why its kept overrides cannot be
    used) is not checked: it gets one ``invalid-topic-config`` finding (manual), as the node
    skips it rather than judge it by the defaults."""
    from storage import files
    from storage.config import LogConfig
    from storage.errors import InvalidSegmentFileError, InvalidTopicError

    result = DirCheck(directory)
    for name in (files.RECOVERY_POINT_CHECKPOINT, files.LOG_START_OFFSET_CHECKPOINT,
                 files.CLEANER_OFFSET_CHECKPOINT, files.REPLICATION_OFFSET_CHECKPOINT):
        _check_checkpoint(directory, directory / name, result.findings)
    for entry in sorted(p for p in directory.iterdir() if p.is_dir()):
        try:
            parsed = files.parse_partition_dir(entry.name)
        except InvalidTopicError as error:
            result.findings.append(Finding("invalid-dir", entry.name, f"{error}; the node does "
                                           "not load it, recover leaves it alone", NONE))
            continue
        if parsed.is_delete:
            result.skipped.append({"directory": entry.name, "reason": "queued for deletion"})
        elif parsed.kind or entry.name != str(parsed.topic_partition):
            why = (f"a {parsed.kind} directory" if parsed.kind
                   else f"not the canonical name {parsed.topic_partition}")
            result.findings.append(Finding("not-loaded", entry.name, f"{why}; the node does not "
                                           "load it, recover leaves it alone", NONE))
        elif parsed.topic_partition.topic in (invalid_topics or {}):
            unusable = PartitionCheck(entry.name, entry)
            unusable.findings.append(Finding(
                "invalid-topic-config", files.TOPIC_CONFIGS_FILE,
                f"{(invalid_topics or {})[parsed.topic_partition.topic]}; the node skips this "
                "partition and recover neither checks nor repairs it: fix the topic's entry",
                MANUAL))
            result.partitions.append(unusable)
        else:
            config = (topic_configs or {}).get(parsed.topic_partition.topic) \
                or LogConfig(max_message_bytes=max_message_bytes)
            try:
                files.check_partition_entries(entry, writable=False)
            except InvalidSegmentFileError as error:
                unusable = PartitionCheck(entry.name, entry)
                where = Path(str(error.fields.get("path", entry)))
                unusable.findings.append(Finding(
                    "unusable-entry", _relative(directory, where), f"{error}; the node skips "
                    "this partition and recover cannot repair it: fix or move the entry by hand",
                    MANUAL))
                result.partitions.append(unusable)
                continue
            result.partitions.append(check_partition(directory, entry, advance, config))
    return result


def _relative(directory: Path, path: Path) -> str:
    try:
        return str(path.relative_to(directory))
    except ValueError:
        return str(path)


def _check_checkpoint(directory: Path, path: Path, findings: list[Finding]) -> None:
    from ops.tools.dump_log import read_checkpoint
    from storage.errors import CheckpointError

    if not path.is_file():
        return
    try:
        read_checkpoint(path)
    except CheckpointError as error:
        line = int(getattr(error, "line_number", 1) or 1)
        lines = path.read_bytes().splitlines(keepends=True)
        findings.append(Finding("corrupt-checkpoint", str(path.relative_to(directory)),
                                f"{error}; the node would read it as empty", QUARANTINE,
                                position=sum(len(x) for x in lines[:line - 1])))


def check_partition(directory: Path, path: Path, advance: Callable[[str], None],
                    config: LogConfig | int, clock: Clock | None = None) -> PartitionCheck:
    """Check ``path`` read-only: what the storage loader would do to it at an unclean start (a dry
    run of ``storage.loader.LogLoader`` with the topic's ``config``; an int is a
    ``max.message.bytes`` over Kafka's defaults, for old callers), plus what it does not judge
    (index contents, undecodable records, producer snapshots, checkpoints). See the module
    docstring for the findings."""
    from storage import files
    from storage import loader as L
    from storage.config import LogConfig

    if isinstance(config, int):
        config = LogConfig(max_message_bytes=config)
    check = PartitionCheck(path.name, path)
    rel = lambda p: str(Path(p).relative_to(directory))            # noqa: E731
    names = sorted(n for n in os.listdir(path) if files.is_segment_file(n))
    findings = check.findings
    for n in names:
        if _QUARANTINED.search(n):
            findings.append(Finding("quarantined", rel(path / n), "kept aside by an earlier "
                                    "recover; the loader ignores it", NONE))
    plan = L.LogLoader(path, config, recovery_point=0, log_start_offset=0,
                       had_clean_shutdown=False, clock=clock or _system_clock(),
                       dry_run=True).load()
    gone: set[str] = set()
    logs: dict[int, Path] = {}
    swapped: set[int] = set()
    cut: dict[str, L.LoadAction] = {}          # segment file -> its truncation
    dropped: set[str] = set()
    overflow: dict[str, L.LoadAction] = {}
    for action in plan.actions:
        name = rel(action.path)
        if action.kind in (L.DELETE_TEMP, L.DELETE_SWAPPED, L.DELETE_ORPHAN_INDEX):
            gone.add(action.path.name)
            kind = {L.DELETE_TEMP: "temp-file", L.DELETE_SWAPPED: "swapped-original",
                    L.DELETE_ORPHAN_INDEX: "orphan-index"}[action.kind]
            if kind == "orphan-index":
                message = "an index without its .log; the loader deletes it"
            else:
                message = action.reason
            if kind == "temp-file" and action.path.name.endswith(files.DELETED_SUFFIX):
                # a file the node had scheduled for deletion (retention, a clean's swap,
                # file.delete.delay.ms not over when it stopped): the load deletes it, as
                # Kafka's does; what a clean shutdown leaves, no damage
                findings.append(Finding("scheduled-delete", name, "scheduled for deletion "
                                        "before the node stopped; the next load deletes it",
                                        NONE, bytes=action.bytes))
                continue
            findings.append(Finding(kind, name, message, DELETE,
                                    bytes=action.bytes if kind == "temp-file" else 0))
        elif action.kind == L.QUARANTINE_SWAP:
            gone.add(action.path.name)
            findings.append(Finding("invalid-swap", name, f"{action.reason}; the loader moves it "
                                    "to quarantine/", QUARANTINE, position=0,
                                    bytes=action.bytes))
        elif action.kind == L.COMPLETE_SWAP:
            findings.append(Finding("swap", name, action.reason, COMPLETE_SWAP))
            base = files.offset_from_file_name(action.path.name)
            logs[base] = action.path
            swapped.add(base)
        elif action.kind == L.TRUNCATE:
            cut[action.path.name] = action
        elif action.kind == L.QUARANTINE_SEGMENT:
            dropped.add(action.path.name)
        elif action.kind == L.SPLIT:
            overflow[action.path.name] = action
    for n in names:
        if n.endswith(files.LOG_SUFFIX) and n not in gone and not _QUARANTINED.search(n):
            logs.setdefault(files.offset_from_file_name(n), path / n)
    for base in sorted(logs):
        segment = logs[base]
        result = _check_segment(directory, path, base, segment, base in swapped, findings,
                                cut.get(segment.name), overflow.get(segment.name),
                                segment.name in dropped)
        check.segments += 1
        check.bytes += result.size
        check.records += result.records
        advance(f"{path.name}/{segment.name}")
    log_end = plan.log_end_offset if logs else None
    for n in names:
        if n.endswith(files.SNAPSHOT_SUFFIX):
            offset = files.offset_from_file_name(n)
            problem = _snapshot_problem(path / n)
            if problem is not None:
                findings.append(Finding("corrupt-snapshot", rel(path / n), problem,
                                        QUARANTINE, position=0))
                continue
            if log_end is not None and offset > log_end:
                findings.append(Finding("stale-snapshot", rel(path / n), f"producer state as of "
                                        f"offset {offset}, above the log end {log_end} after "
                                        "recovery: it describes records that are gone",
                                        QUARANTINE))
    _check_checkpoint(directory, path / "leader-epoch-checkpoint", findings)
    return check


def _snapshot_problem(path: Path) -> str | None:
    """Why the producer snapshot ``path`` is unreadable, or None."""
    from ops.tools.dump_log import parse_producer_snapshot, read_only

    try:
        parse_producer_snapshot(bytes(read_only(path)))
    except ValueError as error:
        return str(error)
    return None


def _check_segment(directory: Path, path: Path, base: int, segment: Path, swapped: bool,
                   findings: list[Finding], cut: Any, overflow: Any,
                   after_truncation: bool) -> LogCheck:
    """Report what the loader decided for ``segment`` (``cut``: its truncation, ``overflow``:
    its split, ``after_truncation``: moved to quarantine), described with ``check_log``'s reading
    of the bytes there; then check its indexes and records, which the loader does not judge."""
    from ops.tools.dump_log import (check_log, check_offset_index, check_time_index,
                                        read_only)
    from storage import files
    from storage.txn_markers import open_transactions_in_snapshot, txn_index_mismatch_in

    name = str(segment.relative_to(directory))
    data = read_only(segment)
    result = check_log(segment, data, base, max_message_bytes=None, name=name)
    if after_truncation:
        findings.append(Finding("after-truncation", name, "follows a truncated segment: "
                                "recovery moves it to quarantine/", QUARANTINE, position=0,
                                bytes=result.size,
                                records=result.records + result.dropped_records))
        return result
    if overflow is not None:
        findings.append(Finding("offset-overflow", name, result.overflow.message
                                if result.overflow is not None else overflow.reason, SPLIT,
                                position=overflow.position))
    unreadable = _first_undecodable(segment, data, result)
    if unreadable is not None:
        position, why = unreadable
        findings.append(Finding("unreadable-batch", name, f"{why}; the batch passes its CRC so "
                                "recovery keeps it, but readers fail on it", MANUAL,
                                position=position))
    if cut is not None:
        findings.append(_truncation(name, data, result, cut.position, cut.bytes))
    if swapped or cut is not None or overflow is not None:
        return result          # its indexes are rebuilt anyway
    for index_path, label, checker in (
            (files.index_file(path, base), "index", check_offset_index),
            (files.time_index_file(path, base), "time-index", check_time_index)):
        index_name = str(index_path.relative_to(directory))
        if not index_path.is_file() and result.size == 0:
            continue           # an empty segment's indexes are created when it is first used
        if not index_path.is_file():
            findings.append(Finding(f"missing-{label}", index_name, "missing; rebuilt from the "
                                    "segment", REBUILD))
            continue
        problems, warnings = checker(index_name, read_only(index_path), base, result)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            findings.append(Finding(f"corrupt-{label}", index_name,
                                    problems[0].message + more, REBUILD,
                                    position=problems[0].position))
        elif warnings and label == "index":
            findings.append(Finding("untrimmed-index", index_name, warnings[0], REBUILD))
    txn_index = files.txn_index_file(path, base)
    mismatch = txn_index_mismatch_in(
        data, read_only(txn_index) if txn_index.is_file() else None,
        open_transactions_in_snapshot(files.snapshot_file(path, base)))
    if mismatch is not None:
        findings.append(Finding("corrupt-txn-index", str(txn_index.relative_to(directory)),
                                f"{mismatch}; rebuilt from the segment", REBUILD))
    return result


def _truncation(name: str, data: Any, result: LogCheck, position: int, size: int) -> Finding:
    """The finding for the loader's cut of ``size`` bytes at ``position``: described by
    ``check_log``'s problem when it names the same byte, else by the loader's rule (offsets out
    of place; ``LogSegment.recover``)."""
    import numpy as np

    from storage.records import scan_batches

    rest = scan_batches(data, start=position)
    batches, records = len(rest), int(np.clip(rest.records_counts, 0, None).sum())
    if result.problem is not None and result.problem.position == position:
        why = result.problem.message
    else:
        why = (f"the batch at position {position} has offsets out of place against its "
               "neighbours or the next segment")
    torn = "torn write" in why
    return Finding("torn-tail" if torn else "corrupt-batch", name,
                   f"{why}; recovery truncates {size} bytes ({batches} batches, {records} "
                   f"records with readable headers)", TRUNCATE, position=position, bytes=size,
                   records=records)


def _first_undecodable(segment: Path, data: Any, result: LogCheck) -> tuple[int, str] | None:
    """Decode the records of every batch ``check_log`` kept (decompressing them as a reader
    does): the position and error of the first that fails, or None."""
    from storage.errors import StorageError
    from storage.records import RecordBatch

    starts = result.positions.tolist()
    for position, end in zip(starts, [*starts[1:], result.valid_bytes]):
        try:
            RecordBatch(data[position:end], position, segment).check_records()
        except (StorageError, ValueError) as error:
            return position, str(error)
    return None


def _system_clock() -> Clock:
    from storage.clock import SYSTEM_CLOCK

    return SYSTEM_CLOCK
