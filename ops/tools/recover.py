"""``strata recover DIR [--dry-run] [--json] [--report FILE]``: offline check-and-repair of one log
directory, for when a node will not start or its data is suspect. The node must be stopped.
``strata recover DIR --list-quarantine`` lists the bytes recoveries kept in the partitions'
``quarantine/`` folders and ``--export-quarantine DEST`` copies them to ``DEST/<partition>/``.

Every partition is checked with its topic's settings (``max.message.bytes`` above all): the
overrides the node keeps in ``DIR/topic-configs.json`` (``node.topic_configs``) over Kafka's
defaults, so a legal 10 MiB batch of a topic that allows it is not taken for damage.

Check (both modes; one progress step per segment). For every partition directory it runs the
loader itself (``storage.loader.LogLoader``) as a dry run at an unclean start, with the topic's
config, and reports the actions it would take (deletions, swaps, truncations, quarantines,
splits); it adds what the loader does not judge (index contents, records that do not decode,
producer snapshots, checkpoints). It finds:

    kind                      action          what happens on repair
    temp-file                 delete          *.deleted, *.cleaned, an unfinished *.swap: removed
    swap                      complete-swap   a finished *.log.swap is renamed over its originals
    swapped-original          delete          a segment file replaced by such a swap
    invalid-swap              quarantine      a *.log.swap not fit to complete (garbage, a bad
                                              CRC): the loader moves it to quarantine/ and keeps
                                              the live segments
    orphan-index              delete          an index without its .log
    corrupt-batch, torn-tail  truncate        the segment is cut at the first bad byte; the
                                              loader keeps the cut bytes in quarantine/
    after-truncation          quarantine      a segment after a truncated one: recovery moves
                                              it whole to quarantine/ (Kafka deletes it)
    offset-overflow           split           an old broker's segment whose offsets overflow its
                                              base: split into segments that fit (nothing lost)
    missing-index, corrupt-index, untrimmed-index, missing-time-index, corrupt-time-index
                              rebuild         indexes rebuilt from the segment
    corrupt-checkpoint, corrupt-snapshot
                              quarantine      the file is renamed <name>.corrupt.<ms>
    stale-snapshot            quarantine      producer state above the log end after recovery
                                              (Kafka deletes it): renamed <name>.stale.<ms>
    invalid-dir, not-loaded   none            reported only; the node does not load it either
    unusable-entry            manual          an entry named like a segment file that is no
                                              usable file (a directory, FIFO, symlink loop, an
                                              offset beyond int64, a name not of 20 digits, no
                                              permission): the node skips the partition; nothing
                                              in it is read or changed, a person must fix it
    unreadable-batch          manual          a batch that passes its CRC but whose records do
                                              not decode (readers fail on it); left in place

Repair (without ``--dry-run``), per partition that needs it and has no ``manual`` finding:
quarantine first, then open the partition with ``storage.log.Log.open`` as after an unclean
shutdown (no recovery point, so every segment is re-validated and every index rebuilt), close it,
and check it again. Quarantine never deletes. The loader itself keeps what it cuts in
``<partition>/quarantine/`` (``storage.quarantine``: the truncated tail of a segment from the
position the report names, every segment after it whole); unreadable checkpoints and snapshots
become ``<name>.corrupt.<ms>``. The loader ignores all of these names (and the
``<segment>.log.<ms>.truncated`` copies of earlier versions of this tool).

Every ``manual`` finding, and every failure to read or write the directory (a read-only file
system, a ``.lock`` that is no file), is one line on stderr, never a traceback; the exit code says
which (``ops.tools``).
``<DIR>/recovery-report.json`` (and ``--report FILE``) records what was found and done.
``--dry-run`` changes nothing on disk: it takes a shared ``flock`` on an existing ``.lock``
instead of the node's exclusive lock, and writes only ``--report FILE``.

Exit codes: 0 healthy or repaired; 1 repairs needed (``--dry-run``), a repair failed or damage
recover cannot repair (``manual``); 2 usage errors, a directory that cannot be listed or locked
(a ``.lock`` that is a directory, a read-only file system when repairing), or one locked by a
running node.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import shutil
import sys
from contextlib import contextmanager
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from ops.tools import EXIT_OK, EXIT_PROBLEMS, UsageError
from ops.tools.output import human_bytes, json_line, printable

if TYPE_CHECKING:
    from ops.tools.dump_log import LogCheck
    from storage.clock import Clock
    from storage.config import LogConfig

REPORT_NAME = "recovery-report.json"
REPORT_VERSION = 1
TRUNCATE, DELETE, COMPLETE_SWAP, REBUILD, SPLIT, QUARANTINE, NONE, MANUAL = (
    "truncate", "delete", "complete-swap", "rebuild", "split", "quarantine", "none", "manual")
_QUARANTINED = re.compile(r"(\.\d+\.truncated|\.(corrupt|stale)\.\d+)$")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "recover", help="check and repair a log directory offline (the node must be stopped)",
        description="Check every partition of a log directory (temp files, batch CRCs and "
                    "offsets, indexes, checkpoints) and repair it the way the loader recovers "
                    "after a crash, moving every byte it drops to quarantine first.")
    parser.add_argument("directory", metavar="DIR", type=Path, help="the log directory")
    parser.add_argument("--dry-run", action="store_true",
                        help="only report what would be repaired; change nothing")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--report", type=Path, metavar="FILE",
                        help=f"also write the report to FILE (besides DIR/{REPORT_NAME})")
    parser.add_argument("--list-quarantine", action="store_true",
                        help="list the bytes recoveries kept in the partitions' quarantine/ "
                             "folders; change nothing")
    parser.add_argument("--export-quarantine", type=Path, metavar="DEST",
                        help="copy every quarantined file to DEST/<partition>/; change nothing "
                             "in DIR")
    parser.set_defaults(handler=run)


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
                    topic_configs: Mapping[str, LogConfig] | None = None) -> DirCheck:
    """Check the directory's checkpoints and every partition (``advance`` per segment), each
    with its topic's ``max.message.bytes`` from ``topic_configs``, else ``max_message_bytes``."""
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


# ---- repairing ---------------------------------------------------------------------------------
def repair_partition(directory: Path, check: PartitionCheck, clock: Clock,
                     max_message_bytes: int, config: LogConfig | None = None) -> None:
    """Quarantine, recover with the storage loader, check again; fills ``check.repair``.
    ``config`` is the partition's topic config (default: Kafka's with ``max_message_bytes``)."""
    from storage.config import LogConfig
    from storage.durable import fsync_dir
    from storage.log import Log

    config = config or LogConfig(max_message_bytes=max_message_bytes)
    stamp = clock.milliseconds()
    quarantined: list[dict[str, Any]] = []
    for finding in check.findings:
        if finding.action == QUARANTINE and finding.kind not in ("after-truncation",
                                                                 "invalid-swap"):
            source = directory / finding.file
            reason = "stale" if finding.kind == "stale-snapshot" else "corrupt"
            target = source.with_name(f"{source.name}.{reason}.{stamp}")
            os.replace(source, target)
            quarantined.append({"file": finding.file, "position": finding.position,
                                "movedTo": str(target.relative_to(directory)),
                                "bytes": target.stat().st_size})
    fsync_dir(check.path)
    segment_work = any(f.action in (TRUNCATE, DELETE, COMPLETE_SWAP, REBUILD, SPLIT)
                       or f.kind in ("after-truncation", "invalid-swap") for f in check.findings)
    loaded: dict[str, Any] = {}
    if segment_work:
        # log_start_offset=0: a checkpointed start above the new end must not empty the log here
        log = Log.open(check.path, config, log_start_offset=0)
        try:
            result = log.load_result
            loaded = {"truncatedBytes": result.truncated_bytes,
                      "recoveredSegments": result.recovered_segments,
                      "rebuiltIndexes": result.rebuilt_indexes,
                      "loaderDeletedFiles": result.deleted_temp_files,   # temp files, orphans
                      "completedSwaps": result.completed_swaps,
                      "logEndOffset": result.log_end_offset}
        finally:
            log.close()
        # what the loader cut, it kept in <partition>/quarantine/ (storage.quarantine)
        quarantined.extend({"file": str((check.path / kept.original).relative_to(directory)),
                            "position": kept.position,
                            "movedTo": str(Path(kept.path).relative_to(directory)),
                            "bytes": kept.bytes} for kept in result.quarantined)
    after = check_partition(directory, check.path, lambda _name: None, config, clock)
    check.repair = {
        **loaded, "truncatedRecords": sum(f.records for f in check.findings
                                          if f.action == TRUNCATE or f.kind == "after-truncation"),
        "quarantined": quarantined, "verified": not after.needs_repair,
        "remaining": [f.to_json() for f in after.findings if f.action != NONE]}


# ---- the subcommand ----------------------------------------------------------------------------
@contextmanager
def _exclusive(directory: Path) -> Iterator[None]:
    """The node's own lock (node.lock): a running node, or another recover, makes this fail."""
    from node.errors import InvalidLogDirError, LogDirLockedError
    from node.lock import DirLock

    try:
        held = DirLock.acquire(directory)
    except LogDirLockedError as error:
        raise UsageError(f"{error}; stop the node before running recover") from None
    except InvalidLogDirError as error:       # a read-only file system, no permission
        raise UsageError(str(error)) from None
    try:
        yield
    finally:
        held.release()


@contextmanager
def _shared(directory: Path) -> Iterator[None]:
    """A shared ``flock`` on an existing ``.lock``, which writes nothing: it fails while a node
    (an exclusive ``flock``, even one in this process) holds the directory, and keeps a node from
    starting meanwhile. Without a ``.lock`` no node ever ran here."""
    from node.lock import read_holder_pid
    from storage.files import LOCK_FILE

    try:
        fd = os.open(directory / LOCK_FILE, os.O_RDONLY)
    except FileNotFoundError:
        yield
        return
    except OSError as error:
        raise UsageError(f"cannot read {directory / LOCK_FILE}: {error.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = read_holder_pid(directory)
            holder = f"process {pid}" if pid is not None else "another process"
            raise UsageError(f"log directory {directory} is locked by {holder}; stop the node "
                             "before running recover") from None
        yield
    finally:
        os.close(fd)


def run(args: argparse.Namespace, clock: Clock | None = None) -> int:
    clock = clock or _system_clock()
    directory = Path(os.path.abspath(args.directory))
    try:
        _check_usable(directory, args.directory)
        if args.list_quarantine or args.export_quarantine is not None:
            with _shared(directory):
                return _quarantine_command(directory, args)
        return _check_and_repair(directory, args, clock)
    except BrokenPipeError:
        raise                    # the reader went away: ops.cli.main stops quietly
    except OSError as error:     # a failing or read-only disk, no permission: one line
        raise UsageError(_os_error(error)) from None


def _system_clock() -> Clock:
    from storage.clock import SYSTEM_CLOCK

    return SYSTEM_CLOCK


def _os_error(error: OSError) -> str:
    where = f"{error.filename}: " if error.filename else ""
    return f"{where}{error.strerror or error}"


def _check_usable(directory: Path, given: Path) -> None:
    """Refuse (``UsageError``) what is no log directory this tool can work on."""
    from storage.files import LOCK_FILE

    if not directory.is_dir():
        raise UsageError(f"{given} is not a directory")
    if any(n.endswith(".log") for n in os.listdir(directory)):
        raise UsageError(f"{given} holds segment files: it is a partition directory; "
                         "pass the log directory that contains it")
    _check_log_directory(directory, given)
    lock = directory / LOCK_FILE
    if os.path.lexists(lock) and not stat.S_ISREG(os.stat(lock).st_mode):
        raise UsageError(f"{lock} is not a regular file: no node can lock this directory; "
                         "move it aside by hand")


def _check_log_directory(directory: Path, given: Path) -> None:
    """Refuse a directory that holds entries but nothing of a log directory: no partition
    directory, no checkpoint file, no ``.lock``/``.kafka_cleanshutdown``/``meta.properties``
    (a parent folder of log directories, a home directory). An empty directory is a new, healthy
    log directory."""
    from storage import files
    from storage.errors import InvalidTopicError

    names = os.listdir(directory)
    markers = {files.RECOVERY_POINT_CHECKPOINT, files.LOG_START_OFFSET_CHECKPOINT,
               files.CLEANER_OFFSET_CHECKPOINT, files.REPLICATION_OFFSET_CHECKPOINT,
               files.CLEAN_SHUTDOWN_FILE, files.LOCK_FILE, files.META_PROPERTIES}
    if not names or markers & set(names):
        return
    for name in names:
        try:
            files.parse_partition_dir(name)
        except InvalidTopicError:
            continue
        if (directory / name).is_dir():
            return
    raise UsageError(f"{given} is not a log directory: no partition directories, no checkpoint "
                     f"files, no {files.META_PROPERTIES} (pass the log directory itself)")


def _topic_configs(directory: Path) -> dict[str, LogConfig]:
    """Each topic's config from the overrides the node keeps in ``DIR/topic-configs.json``."""
    from node.topic_configs import TopicConfigsFile
    from storage.config import LogConfig
    from storage.errors import StorageError

    try:
        overrides = TopicConfigsFile(directory).read()
        return {topic: LogConfig().with_overrides(o) for topic, o in overrides.items()}
    except StorageError as error:
        raise UsageError(f"{error}; the node would not start with it either") from None


def _check_and_repair(directory: Path, args: argparse.Namespace, clock: Clock) -> int:
    from ops.tools.output import progress_bar
    from storage.config import LogConfig

    max_message_bytes = LogConfig().max_message_bytes
    configs = _topic_configs(directory)
    started = clock.milliseconds()
    with (_shared if args.dry_run else _exclusive)(directory):
        partitions = [p for p in sorted(directory.iterdir()) if p.is_dir()]
        total = sum(count_segments(p) for p in partitions if not p.name.endswith("-delete"))
        with progress_bar(total, f"checking {directory.name}") as steps:
            result = check_directory(directory, lambda name: steps.advance(name),
                                     max_message_bytes, configs)
        if not args.dry_run:
            todo = [p for p in result.partitions if p.needs_repair]
            _repair_dir_files(directory, result, clock)
            with progress_bar(len(todo), "repairing") as steps:
                for partition in todo:
                    _repair_one(directory, partition, clock, max_message_bytes, configs)
                    steps.advance(partition.name)
        report = build_report(result, dry_run=args.dry_run, started_ms=started,
                              finished_ms=clock.milliseconds())
        if not args.dry_run:
            _write_report(directory / REPORT_NAME, report)
    if args.report is not None:
        _write_report(Path(args.report), report)
    if args.json:
        sys.stdout.write(json_line(report) + "\n")
    else:
        print_report(report)
    for partition, finding in result.all_findings():
        if finding.action == MANUAL:
            print(printable(f"strata recover: {finding.file}: {finding.kind}: "
                            f"{finding.message}"), file=sys.stderr)
    status = report["status"]
    return EXIT_OK if status in ("healthy", "repaired") else EXIT_PROBLEMS


def _repair_one(directory: Path, partition: PartitionCheck, clock: Clock, max_message_bytes: int,
                configs: Mapping[str, LogConfig]) -> None:
    """Repair one partition; a failure (or an entry only a person can fix) is reported in its
    ``repair`` and never stops the others."""
    from storage.files import parse_partition_dir

    unusable = [f for f in partition.findings if f.kind == "unusable-entry"]
    if unusable:
        partition.repair = {"verified": False, "error": unusable[0].message,
                            "remaining": [f.to_json() for f in unusable]}
        return
    config = configs.get(parse_partition_dir(partition.name).topic_partition.topic)
    try:
        repair_partition(directory, partition, clock, max_message_bytes, config)
    except Exception as error:  # noqa: BLE001 - one bad partition never stops the others
        partition.repair = {"verified": False, "error": f"{type(error).__name__}: {error}",
                            "remaining": []}


def _quarantine_command(directory: Path, args: argparse.Namespace) -> int:
    """``--list-quarantine`` / ``--export-quarantine DEST``: read-only on ``directory``."""
    from storage.quarantine import list_quarantine

    kept = [(p.name, q) for p in sorted(directory.iterdir()) if p.is_dir()
            for q in list_quarantine(p)]
    if args.export_quarantine is not None:
        dest = Path(args.export_quarantine)
        for partition, q in kept:
            target = dest / partition / Path(q.path).name
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(q.path, "rb") as src, open(target, "xb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            shutil.copystat(q.path, target)
    rows = [{"partition": partition, "file": str(Path(q.path).relative_to(directory)),
             "original": q.original, "position": q.position, "bytes": q.bytes}
            for partition, q in kept]
    if args.json:
        sys.stdout.write(json_line({"logDir": str(directory), "quarantined": rows}) + "\n")
    else:
        from ops.tools.output import console, print_table

        out = console()
        print_table(out, f"{directory}: {len(rows)} quarantined files",
                    ("partition", "file", "from", "position", "bytes"),
                    [(r["partition"], r["file"], r["original"], r["position"], r["bytes"])
                     for r in rows])
        if args.export_quarantine is not None:
            out.print(f"copied {len(rows)} files to {args.export_quarantine}", markup=False)
    return EXIT_OK


def _repair_dir_files(directory: Path, result: DirCheck, clock: Clock) -> None:
    """Move the directory's unreadable checkpoints aside (the node then reads them as empty)."""
    from storage.durable import fsync_dir

    stamp = clock.milliseconds()
    for i, finding in enumerate(result.findings):
        if finding.action == QUARANTINE:
            source = directory / finding.file
            target = source.with_name(f"{source.name}.corrupt.{stamp}")
            os.replace(source, target)
            result.findings[i] = Finding(finding.kind, finding.file,
                                         f"{finding.message}; moved to {target.name}",
                                         finding.action, finding.position)
    fsync_dir(directory)


def build_report(result: DirCheck, *, dry_run: bool, started_ms: int,
                 finished_ms: int) -> dict[str, Any]:
    """The report document (also ``recovery-report.json``)."""
    partitions = result.partitions
    findings = [f for _, f in result.all_findings()]
    if dry_run or not result.needs_repair:
        status = "needs-repair" if result.needs_repair else "healthy"
    else:
        status = "repaired" if all(p.status != "failed" for p in partitions) else "failed"
    return {
        "version": REPORT_VERSION, "logDir": str(result.directory), "dryRun": dry_run,
        "status": status, "startedMs": started_ms, "finishedMs": finished_ms,
        "summary": {
            "partitions": len(partitions),
            "partitionsNeedingRepair": sum(p.needs_repair for p in partitions),
            "segments": sum(p.segments for p in partitions),
            "bytes": sum(p.bytes for p in partitions),
            "truncatedBytes": sum(f.bytes for f in findings if f.action == TRUNCATE)
            + sum(f.bytes for f in findings if f.kind == "after-truncation"),
            "truncatedRecords": sum(f.records for f in findings if f.action == TRUNCATE)
            + sum(f.records for f in findings if f.kind == "after-truncation"),
            "indexesToRebuild": sum(f.action == REBUILD for f in findings),
            "tempFiles": sum(f.kind == "temp-file" for f in findings),
            "quarantine": sum(f.action in (TRUNCATE, QUARANTINE) for f in findings)},
        "findings": [f.to_json() for f in result.findings],
        "skipped": result.skipped,
        "partitions": [p.to_json() for p in partitions]}


def _write_report(path: Path, report: dict[str, Any]) -> None:
    from storage.durable import atomic_write

    atomic_write(path, (json_line(report) + "\n").encode("utf-8"))


def print_report(report: dict[str, Any]) -> None:
    from ops.tools.output import console, print_table

    out = console()
    rows = [(p["partition"], f["file"], f["position"], f["message"], f["action"])
            for p in [{"partition": "", "findings": report["findings"]}, *report["partitions"]]
            for f in p["findings"]]
    if rows:
        state = "dry run: nothing changed" if report["dryRun"] else "repaired"
        print_table(out, f"{report['logDir']}: {len(rows)} findings ({state})",
                    ("partition", "file", "position", "problem", "action"), rows,
                    wrap=("problem",))
    s = report["summary"]
    out.print(f"{report['logDir']}: {report['status']}: {s['partitions']} partitions, "
              f"{s['segments']} segments, {human_bytes(s['bytes'])} checked", markup=False)
    if s["truncatedBytes"] or s["indexesToRebuild"] or s["tempFiles"] or s["quarantine"]:
        words = (("would truncate", "rebuild", "remove", "quarantine") if report["dryRun"]
                 else ("truncated", "rebuilt", "removed", "quarantined"))
        out.print(f"{words[0]} {s['truncatedBytes']} bytes ({s['truncatedRecords']} records), "
                  f"{words[1]} {s['indexesToRebuild']} damaged or missing indexes, {words[2]} "
                  f"{s['tempFiles']} temporary files, {words[3]} {s['quarantine']} files",
                  markup=False)
    for skipped in report["skipped"]:
        out.print(f"skipped {skipped['directory']}: {skipped['reason']}", markup=False)
    for partition in report["partitions"]:
        for moved in (partition["repair"] or {}).get("quarantined", []):
            out.print(f"kept {moved['file']} from position {moved['position']} in "
                      f"{moved['movedTo']}", markup=False)
        if partition["status"] == "failed":
            repair = partition["repair"]
            why = repair.get("error") or json_line(repair["remaining"])
            out.print(f"{partition['partition']}: not repaired: {why}", markup=False,
                      style="bold red")
    if not report["dryRun"]:
        out.print(f"report: {Path(report['logDir']) / REPORT_NAME}", markup=False)
