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
    temp-file                 delete          *.cleaned, an unfinished *.swap: removed
    scheduled-delete          none            *.deleted: scheduled for deletion by the node
                                              (file.delete.delay.ms not over when it stopped);
                                              its next load deletes it (no damage)
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
    corrupt-txn-index         rebuild         a .txnindex (maybe missing) that does not match the
                                              segment's markers: an abort marker without its
                                              entry, an entry naming a commit or no marker;
                                              rebuilt from the log by recovery
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
    invalid-topic-config      manual          the partition's topic has an entry in
                                              topic-configs.json the node cannot use (an
                                              unknown key, a bad value): the node skips the
                                              topic's partitions rather than open them with the
                                              defaults; recover neither checks nor changes them
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
import shutil
import sys
from contextlib import contextmanager
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from ops.tools import EXIT_OK, EXIT_PROBLEMS, UsageError
from ops.tools.output import json_line, printable
from ops.tools.recover_check import (
    COMPLETE_SWAP,
    DELETE,
    DirCheck,
    Finding,
    MANUAL,
    NONE,
    PartitionCheck,
    QUARANTINE,
    REBUILD,
    SPLIT,
    TRUNCATE,
    _system_clock,
    check_directory,
    check_partition,
    count_segments,
)
from ops.tools.recover_report import REPORT_NAME, _write_report, build_report, print_report

if TYPE_CHECKING:
    from storage.clock import Clock
    from storage.config import LogConfig


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
               files.CLEAN_SHUTDOWN_FILE, files.LOCK_FILE, files.META_PROPERTIES,
               files.CLUSTER_LOG_DIRS_FILE}
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


def _topic_configs(directory: Path) -> tuple[dict[str, LogConfig], dict[str, str]]:
    """Each topic's config from the overrides the node keeps in ``DIR/topic-configs.json``, and
    why each topic whose entry the node cannot use is skipped (the node skips its partitions
    too). A file that cannot be read as a whole is a ``UsageError`` naming it."""
    from node.topic_configs import TopicConfigsFile, invalid_topics
    from storage.config import LogConfig
    from storage.errors import StorageError

    file = TopicConfigsFile(directory)
    try:
        content = file.read()
    except StorageError as error:
        raise UsageError(f"{error}; the node would not start with it either") from None
    invalid = invalid_topics(content, LogConfig(), file.path)
    return ({topic: LogConfig().with_overrides(o) for topic, o in content.overrides.items()
             if topic not in invalid}, {topic: err.message for topic, err in invalid.items()})


def _check_and_repair(directory: Path, args: argparse.Namespace, clock: Clock) -> int:
    from ops.tools.output import progress_bar
    from storage.config import LogConfig

    max_message_bytes = LogConfig().max_message_bytes
    configs, invalid_topics = _topic_configs(directory)
    started = clock.milliseconds()
    with (_shared if args.dry_run else _exclusive)(directory):
        partitions = [p for p in sorted(directory.iterdir()) if p.is_dir()]
        total = sum(count_segments(p) for p in partitions if not p.name.endswith("-delete"))
        with progress_bar(total, f"checking {directory.name}") as steps:
            result = check_directory(directory, lambda name: steps.advance(name),
                                     max_message_bytes, configs, invalid_topics)
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

    unusable = [f for f in partition.findings
                if f.kind in ("unusable-entry", "invalid-topic-config")]
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


