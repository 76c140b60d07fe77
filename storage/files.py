"""Every file-name rule of a log directory, in one place (Kafka's LogFileUtils and LocalLog).

Segment files are named after their base offset, zero-padded to 20 digits::

    00000000000000023423.log         record batches
    00000000000000023423.index       offset index
    00000000000000023423.timeindex   time index
    00000000000000023423.txnindex    aborted transactions (storage.txn_index), created lazily
    00000000000000023423.snapshot    producer state, named by the offset it covers (exclusive)
    00000000000000023423.log.cleaned cleaner output under construction   (temporary suffixes are
    00000000000000023423.log.swap    ready to replace the old segments     appended after the
    00000000000000023423.log.deleted waiting for the async delete          normal suffix)

A recovery that cuts bytes (the damaged tail of a segment, every segment after it) keeps them in
``<partition>/quarantine/``, named ``<ms>-<original name>.<position>`` (the time of the cut, the
file the bytes came from, the position in it where they started); the loader never looks inside.

Partition directories are ``<topic>-<partition>``; a deleted partition is renamed
``<topic>-<partition>.<32 hex uuid>-delete`` (the topic shortened so the name fits in 255 bytes),
and a partition being moved between directories is ``<topic>-<partition>.<uuid>-future``.
No other module builds one of these names by hand.
"""

from __future__ import annotations

import errno
import operator
import os
import re
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path

from storage.errors import InvalidOffsetError, InvalidSegmentFileError, InvalidTopicError

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
TEMP_SUFFIXES = (CLEANED_SUFFIX, SWAP_SUFFIX, DELETED_SUFFIX)
INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
TOPIC_CONFIGS_FILE = "topic-configs.json"   # ours: the topic overrides a node keeps (node.topic_configs)
LOCK_FILE = ".lock"
META_PROPERTIES = "meta.properties"
CLUSTER_LOG_DIRS_FILE = "cluster-log-dirs"   # ours: every log directory of the cluster (node.cluster_dirs)
QUARANTINE_DIR = "quarantine"   # ours: bytes a recovery cut (storage.quarantine)
MOVE_STATE_FILE = "move-state.json"   # ours: a -future directory's record of its move (node.move)
MOVE_LOCK_FILE = "move.lock"          # ours: flock taken by both ends of a move (node.move)

MAX_TOPIC_LENGTH = 249
MAX_DIR_NAME_LENGTH = 255
PARTITION_LIMIT = 2**31          # Kafka's partition is an int32: 0 <= partition < 2**31
OFFSET_LIMIT = 2**63             # Kafka's offset is an int64: offset < 2**63
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")   # always fullmatch: `$` would let "t\n" through
_DECIMAL = re.compile(r"[0-9]+")                 # ASCII digits only: str.isdigit takes "²" and "٣"
_SUFFIXED_DIR = re.compile(r"^(\S+)-(\S+)\.([0-9a-f]{32})(-delete|-future|-stray)$")
_OFFSET_DIGITS = 20
MAX_OFFSET = 2**63 - 1          # offsets are int64
_QUARANTINED = re.compile(r"^(\d+)-(.+)\.(\d+)$")


def offset_name(offset: int) -> str:
    """The 20-digit zero-padded prefix of every segment file."""
    return "%020d" % offset     # _OFFSET_DIGITS; the %-form formats twice as fast (every load)


def log_file(directory: Path, base_offset: int, suffix: str = "") -> Path:
    return directory / f"{offset_name(base_offset)}{LOG_SUFFIX}{suffix}"


def index_file(directory: Path, base_offset: int, suffix: str = "", *,
               stem: str | None = None) -> Path:
    """(``stem``: ``offset_name(base_offset)``, when the caller has it already.)"""
    return directory / f"{stem or offset_name(base_offset)}{INDEX_SUFFIX}{suffix}"


def time_index_file(directory: Path, base_offset: int, suffix: str = "", *,
                    stem: str | None = None) -> Path:
    """(``stem``: ``offset_name(base_offset)``, when the caller has it already.)"""
    return directory / f"{stem or offset_name(base_offset)}{TIME_INDEX_SUFFIX}{suffix}"


def txn_index_file(directory: Path, base_offset: int, suffix: str = "") -> Path:
    return directory / f"{offset_name(base_offset)}{TXN_INDEX_SUFFIX}{suffix}"


def snapshot_file(directory: Path, offset: int, suffix: str = "") -> Path:
    return directory / f"{offset_name(offset)}{SNAPSHOT_SUFFIX}{suffix}"


def offset_from_file_name(name: str) -> int:
    """The base offset encoded in a segment file name: the text before the first ``.``."""
    prefix = name.split(".", 1)[0]
    if not _DECIMAL.fullmatch(prefix):
        raise ValueError(f"{name!r} is not a segment file name")
    return int(prefix)


def is_segment_file(name: str) -> bool:
    prefix = name.split(".", 1)[0]
    return len(prefix) == _OFFSET_DIGITS and _DECIMAL.fullmatch(prefix) is not None


def parse_base_offset(directory: Path, name: str) -> int:
    """The base offset of segment file ``name`` in ``directory``, checked: 20 digits, at most
    ``MAX_OFFSET`` (so every offset of the segment fits int64). ``InvalidSegmentFileError``
    otherwise (a name that is no segment file at all is one too)."""
    prefix = name.split(".", 1)[0]
    path = str(directory / name)
    if not _DECIMAL.fullmatch(prefix):
        raise InvalidSegmentFileError(f"{path}: {name!r} is not a segment file name", path=path,
                                      reason="not a segment file name")
    if len(prefix) != _OFFSET_DIGITS:
        raise InvalidSegmentFileError(
            f"{path}: the offset in the name has {len(prefix)} digits, segment files have "
            f"{_OFFSET_DIGITS}; the loader would ignore it", path=path,
            reason=f"{len(prefix)}-digit offset in the name")
    offset = int(prefix)
    if offset > MAX_OFFSET:
        raise InvalidSegmentFileError(
            f"{path}: base offset {offset} does not fit int64 (at most {MAX_OFFSET})",
            path=path, reason="base offset beyond int64")
    return offset


def check_partition_entries(directory: Path, *, writable: bool = True) -> None:
    """Raise ``InvalidSegmentFileError`` for the first entry of partition directory ``directory``
    (in name order) named like a segment file (a name of digits, then a ``.``) that the loader
    cannot use: see ``parse_base_offset``; not a regular file after following symlinks (a
    directory, FIFO, socket, device, dangling link or symlink loop); a file this process may not
    read (and write, unless ``writable=False``: a read-only check). An unlistable directory, and a
    ``quarantine`` entry that is no directory, raise it too. Opens nothing, so a FIFO cannot block.
    """
    try:
        names = sorted(os.listdir(directory))
    except OSError as err:
        raise InvalidSegmentFileError(
            f"{directory}: cannot list the partition directory: {err.strerror}",
            path=str(directory), reason=f"unlistable ({errno.errorcode.get(err.errno, err.errno)})"
        ) from None
    for name in names:
        if name == QUARANTINE_DIR and not os.path.isdir(directory / name):
            path = str(directory / name)
            raise InvalidSegmentFileError(
                f"{path}: not a directory, so recovery could not keep what it cuts there",
                path=path, reason="quarantine is not a directory")
        prefix, dot, _ = name.partition(".")
        if not dot or not prefix.isdigit():   # any digits, so "0²" is refused below, not ignored
            continue
        parse_base_offset(directory, name)
        path = directory / name
        try:
            mode = os.stat(path).st_mode
        except OSError as err:
            raise InvalidSegmentFileError(
                f"{path}: cannot stat it: {err.strerror}", path=str(path),
                reason=f"unreadable ({errno.errorcode.get(err.errno, err.errno)})") from None
        if not stat.S_ISREG(mode):
            kind = file_kind(mode)
            raise InvalidSegmentFileError(f"{path}: a {kind} named like a segment file",
                                          path=str(path), reason=f"a {kind}")
        if not os.access(path, os.R_OK | (os.W_OK if writable else 0)):
            needed = "readable and writable" if writable else "readable"
            raise InvalidSegmentFileError(f"{path}: not {needed} by this process",
                                          path=str(path), reason="permission denied")


def file_kind(mode: int) -> str:
    """``directory``, ``FIFO``, ``socket``, ``device`` or ``regular file`` for a ``st_mode``."""
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "regular file" if stat.S_ISREG(mode) else "special file"


def quarantine_file(directory: Path, stamp_ms: int, original: str, position: int) -> Path:
    """Where recovery keeps the bytes it cut from ``original`` (a file of partition directory
    ``directory``) from ``position`` on, at time ``stamp_ms``."""
    return directory / QUARANTINE_DIR / f"{stamp_ms}-{original}.{position}"


def parse_quarantine_name(name: str) -> tuple[int, str, int] | None:
    """``(stamp_ms, original name, position)`` of a ``quarantine_file`` name; None for others."""
    match = _QUARANTINED.match(name)
    if match is None:
        return None
    return int(match.group(1)), match.group(2), int(match.group(3))


def strip_temp_suffix(path: Path) -> Path:
    """``…0.log.swap`` -> ``…0.log``; other names are returned unchanged."""
    for suffix in TEMP_SUFFIXES:
        if path.name.endswith(suffix):
            return path.with_name(path.name[: -len(suffix)])
    return path


def with_temp_suffix(path: Path, suffix: str) -> Path:
    """``…0.log`` -> ``…0.log.deleted`` (replacing any temporary suffix already there)."""
    return strip_temp_suffix(path).with_name(strip_temp_suffix(path).name + suffix)


def validate_topic(topic: str) -> None:
    """Kafka's topic rules: 1..249 characters of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``.

    The whole name must match: a name with a newline, a space or a non-ASCII letter would
    break the checkpoint files (``topic partition offset`` lines) and the directory listing.
    """
    if not isinstance(topic, str):
        raise InvalidTopicError(f"topic name {topic!r} is not a string", topic=topic)
    if not topic:
        raise InvalidTopicError("topic name is empty", topic=topic)
    if topic in (".", ".."):
        raise InvalidTopicError(f"topic name {topic!r} is not allowed", topic=topic)
    if len(topic) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(
            f"topic name is {len(topic)} characters, the limit is {MAX_TOPIC_LENGTH}", topic=topic
        )
    if not _LEGAL_TOPIC.fullmatch(topic):
        raise InvalidTopicError(
            f"topic name {topic!r} has characters outside [a-zA-Z0-9._-]", topic=topic
        )


def validate_partition(partition: object, topic: str | None = None) -> int:
    """``partition`` as an ``int`` when it is a partition number Kafka can hold: an integer
    (``int`` or a numpy integer, never ``bool``, ``float`` or text) in ``[0, 2**31)``.

    Anything else raises ``InvalidTopicError`` naming the topic and the value: a partition
    ``1.5``, ``True`` or ``2**31`` would otherwise be written to disk under a directory name that
    no restart can map back to the partition. Every layer that takes a partition number from a
    caller checks it here (storage, node, cluster client, CLI, Spark options).
    """
    number = _integer(partition)
    if number is None or not 0 <= number < PARTITION_LIMIT:
        raise InvalidTopicError(
            f"partition {partition!r}{_of(topic)} is not an integer in [0, {PARTITION_LIMIT})",
            topic=topic, partition=partition)
    return number


def partition_from_text(text: str, topic: str | None = None) -> int:
    """The partition number written in ``text`` (a directory name's tail, a CLI argument, a JSON
    key): ASCII decimal digits only (no sign, space, ``_`` or other scripts' digits) of a
    partition number ``validate_partition`` accepts, else ``InvalidTopicError``."""
    if not isinstance(text, str) or not _DECIMAL.fullmatch(text):
        raise InvalidTopicError(f"partition {text!r}{_of(topic)} is not a decimal number",
                                topic=topic, partition=text)
    return validate_partition(int(text), topic)


def validate_partition_count(count: object, topic: str | None = None) -> int:
    """``count`` as an ``int`` when a topic can have that many partitions: an integer in
    ``[1, 2**31)`` (its partitions are then ``0 .. count - 1``, every one an int32), else
    ``InvalidTopicError`` naming the topic and the count."""
    number = _integer(count)
    if number is None or not 1 <= number < PARTITION_LIMIT:
        raise InvalidTopicError(
            f"a topic{_of(topic, '')} cannot have {count!r} partitions: the count is an integer "
            f"in [1, {PARTITION_LIMIT})", topic=topic, partitions=count)
    return number


def validate_offset(offset: object, argument: str, *, partition: str | None = None,
                    minimum: int | None = 0) -> int:
    """``offset`` as an ``int`` when it is an integer (never ``bool`` or ``float``) below
    ``2**63`` and, unless ``minimum`` is None, at least ``minimum``.

    Anything else raises ``InvalidOffsetError`` naming the partition, the ``argument`` and the
    value: ``truncate_to(0.5)`` must not empty a log. Pass ``minimum=None`` where a negative
    offset has a meaning of its own (a read below the log start is ``OffsetOutOfRangeError``).
    """
    number = _integer(offset)
    low = -OFFSET_LIMIT if minimum is None else minimum
    if number is None or not low <= number < OFFSET_LIMIT:
        where = f"{partition}: " if partition else ""
        raise InvalidOffsetError(
            f"{where}{argument}={offset!r} is not an integer offset in [{low}, {OFFSET_LIMIT})",
            partition=partition, argument=argument, offset=offset)
    return number


def _of(topic: str | None, prefix: str = " of topic") -> str:
    return "" if topic is None else f"{prefix} {topic!r}"


def _integer(value: object) -> int | None:
    """``value`` as an int if it is an integer type other than bool (numpy's included; numpy's
    bool has no ``__index__``)."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)   # type: ignore[arg-type]
    except TypeError:
        return None


@dataclass(frozen=True, slots=True)
class TopicPartition:
    """A partition's name: hashable, ordered by nothing, printed ``<topic>-<partition>`` as in
    Kafka's file and directory names. It does not validate: names from outside (a client, a file
    name, a checkpoint line) are checked where they enter (``validate_topic``,
    ``validate_partition``, ``parse_partition_dir``) before one is built."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class PartitionDir:
    """A parsed partition directory name. ``kind`` is ``""`` for a live log, else the suffix."""

    topic_partition: TopicPartition
    kind: str = ""

    @property
    def is_delete(self) -> bool:
        return self.kind == DELETE_DIR_SUFFIX

    @property
    def is_future(self) -> bool:
        return self.kind == FUTURE_DIR_SUFFIX


def partition_dir_name(topic: str, partition: int) -> str:
    validate_topic(topic)
    return f"{topic}-{validate_partition(partition, topic)}"


def delete_dir_name(topic: str, partition: int, unique: str | None = None) -> str:
    """``<topic>-<partition>.<uuid>-delete``, the topic cut so the whole name fits in 255 bytes."""
    return _suffixed_dir_name(topic, partition, DELETE_DIR_SUFFIX, unique)


def future_dir_name(topic: str, partition: int, unique: str | None = None) -> str:
    return _suffixed_dir_name(topic, partition, FUTURE_DIR_SUFFIX, unique)


def _suffixed_dir_name(topic: str, partition: int, suffix: str, unique: str | None) -> str:
    tag = unique or uuid.uuid4().hex
    tail = f"-{partition}.{tag}{suffix}"
    return topic[: MAX_DIR_NAME_LENGTH - len(tail)] + tail


def parse_partition_dir(name: str) -> PartitionDir:
    """Parse ``<topic>-<partition>`` or a ``-delete``/``-future``/``-stray`` form.

    Raises ``InvalidTopicError`` naming the directory when the name does not parse.
    """
    match = _SUFFIXED_DIR.match(name)
    kind = ""
    base = name
    if match:
        kind = match.group(4)
        base = name[: name.rindex(".")]
    elif name.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
        raise InvalidTopicError(f"directory {name!r} has a malformed suffix", directory=name)
    topic, sep, partition_text = base.rpartition("-")
    if not sep or not topic:
        raise InvalidTopicError(
            f"directory {name!r} is not <topic>-<partition>", directory=name
        )
    try:
        partition = partition_from_text(partition_text, topic)
    except InvalidTopicError as err:
        raise InvalidTopicError(f"directory {name!r}: {err.message}", directory=name) from err
    if not kind:
        try:
            validate_topic(topic)
        except InvalidTopicError as err:
            raise InvalidTopicError(f"directory {name!r}: {err.message}", directory=name) from err
    return PartitionDir(TopicPartition(topic, partition), kind)


def topic_partition_of(directory: Path) -> TopicPartition:
    """The partition a log directory holds; a directory that is not ``<topic>-<partition>`` (a bare
    log opened in a test) is partition 0 of its own name."""
    try:
        return parse_partition_dir(directory.name).topic_partition
    except InvalidTopicError:
        return TopicPartition(directory.name, 0)
