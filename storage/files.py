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

Partition directories are ``<topic>-<partition>``; a deleted partition is renamed
``<topic>-<partition>.<32 hex uuid>-delete`` (the topic shortened so the name fits in 255 bytes),
and a partition being moved between directories is ``<topic>-<partition>.<uuid>-future``.
No other module builds one of these names by hand.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from pathlib import Path

from storage.errors import InvalidTopicError

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

MAX_TOPIC_LENGTH = 249
MAX_DIR_NAME_LENGTH = 255
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
_SUFFIXED_DIR = re.compile(r"^(\S+)-(\S+)\.([0-9a-f]{32})(-delete|-future|-stray)$")
_OFFSET_DIGITS = 20


def offset_name(offset: int) -> str:
    """The 20-digit zero-padded prefix of every segment file."""
    return f"{offset:0{_OFFSET_DIGITS}d}"


def log_file(directory: Path, base_offset: int, suffix: str = "") -> Path:
    return directory / f"{offset_name(base_offset)}{LOG_SUFFIX}{suffix}"


def index_file(directory: Path, base_offset: int, suffix: str = "") -> Path:
    return directory / f"{offset_name(base_offset)}{INDEX_SUFFIX}{suffix}"


def time_index_file(directory: Path, base_offset: int, suffix: str = "") -> Path:
    return directory / f"{offset_name(base_offset)}{TIME_INDEX_SUFFIX}{suffix}"


def txn_index_file(directory: Path, base_offset: int, suffix: str = "") -> Path:
    return directory / f"{offset_name(base_offset)}{TXN_INDEX_SUFFIX}{suffix}"


def snapshot_file(directory: Path, offset: int, suffix: str = "") -> Path:
    return directory / f"{offset_name(offset)}{SNAPSHOT_SUFFIX}{suffix}"


def offset_from_file_name(name: str) -> int:
    """The base offset encoded in a segment file name: the text before the first ``.``."""
    prefix = name.split(".", 1)[0]
    if not prefix.isdigit():
        raise ValueError(f"{name!r} is not a segment file name")
    return int(prefix)


def is_segment_file(name: str) -> bool:
    prefix = name.split(".", 1)[0]
    return len(prefix) == _OFFSET_DIGITS and prefix.isdigit()


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
    """Kafka's topic rules: 1..249 characters of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``."""
    if not topic:
        raise InvalidTopicError("topic name is empty", topic=topic)
    if topic in (".", ".."):
        raise InvalidTopicError(f"topic name {topic!r} is not allowed", topic=topic)
    if len(topic) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(
            f"topic name is {len(topic)} characters, the limit is {MAX_TOPIC_LENGTH}", topic=topic
        )
    if not _LEGAL_TOPIC.match(topic):
        raise InvalidTopicError(
            f"topic name {topic!r} has characters outside [a-zA-Z0-9._-]", topic=topic
        )


@dataclass(frozen=True, slots=True)
class TopicPartition:
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


def partition_dir_name(topic: str, partition: int) -> str:
    validate_topic(topic)
    if partition < 0:
        raise InvalidTopicError(f"partition {partition} is negative", topic=topic, partition=partition)
    return f"{topic}-{partition}"


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
    if not partition_text.isdigit():
        raise InvalidTopicError(
            f"directory {name!r} has a partition {partition_text!r} that is not a number",
            directory=name,
        )
    if not kind:
        try:
            validate_topic(topic)
        except InvalidTopicError as err:
            raise InvalidTopicError(f"directory {name!r}: {err.message}", directory=name) from err
    return PartitionDir(TopicPartition(topic, int(partition_text)), kind)


def topic_partition_of(directory: Path) -> TopicPartition:
    """The partition a log directory holds; a directory that is not ``<topic>-<partition>`` (a bare
    log opened in a test) is partition 0 of its own name."""
    try:
        return parse_partition_dir(directory.name).topic_partition
    except InvalidTopicError:
        return TopicPartition(directory.name, 0)
