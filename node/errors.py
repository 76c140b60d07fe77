"""Typed errors of a log directory (node/).

They extend ``storage.errors.StorageError``, so they carry structured fields and survive pickling
through Ray like every storage error. ``LogDirOfflineError`` itself lives in ``storage.errors``
(a storage operation may be the one that finds the directory gone) and is re-exported here.
"""

from __future__ import annotations

from storage.errors import LogDirOfflineError, StorageError

__all__ = [
    "CoordinatorRecordError",
    "InvalidLogDirError",
    "InvalidMetaPropertiesError",
    "InvalidTopicConfigError",
    "LogDirClosedError",
    "LogDirLockedError",
    "LogDirNotFoundError",
    "LogDirOfflineError",
    "MoveAbortedError",
    "MoveRefusedError",
    "PartitionMovedError",
    "PartitionSkippedError",
    "PolicyViolationError",
    "UnknownPartitionError",
]


class LogDirLockedError(StorageError):
    """Another owner holds the directory's ``.lock``: another process (``pid`` is the holder's pid
    when it wrote one) or another ``LogDir`` of this process (``pid`` is our own pid).

    Raised at once by ``LogDir.open``, never after waiting. Unlike ``InvalidLogDirError`` the
    directory is fine; it is only in use. A lock left by a killed process is released by the
    kernel, so this error always means a live owner.
    """


class InvalidLogDirError(StorageError):
    """The path cannot serve as a log directory: it exists but is not a directory, or it is not
    readable and writable. Raised by ``LogDir.open`` before anything is locked or loaded.
    """


class InvalidMetaPropertiesError(StorageError):
    """A log directory's ``meta.properties`` (``file``) that cannot be read as Kafka reads it:
    not UTF-8, a line that is not ``key=value``, an unknown version, a missing or malformed
    ``key``. Unlike ``InvalidLogDirError`` the directory itself is usable; its identity is not,
    so no cluster may take it as one of its own until the file is repaired."""


class LogDirClosedError(StorageError):
    """A call on a ``LogDir`` after ``close()``. Unlike ``LogDirOfflineError`` nothing went wrong:
    the owner shut the directory down, and may open it again.
    """


class UnknownPartitionError(StorageError):
    """A call names a partition this directory does not hold (``topic``, ``partition``)."""


class PartitionSkippedError(StorageError):
    """A call to create a partition that ``LogDir.open`` skipped (``LogDir.problems`` says why):
    its directory holds data the loader could not use, so it is neither loaded nor replaced by a
    new empty log. ``topic``, ``partition``, ``directory`` and ``reason`` name it."""


class InvalidTopicConfigError(StorageError):
    """A topic's entry in the directory's ``topic-configs.json`` cannot be used: an unknown key,
    a value Kafka's config would refuse (``segment.bytes=junk``), an entry that is not an object
    of key/value pairs (``topic``, ``path`` of the file, ``key`` and ``value`` when one setting is
    at fault).

    It costs that topic only: ``LogDir.open`` skips the topic's partitions untouched (a
    ``PartitionProblem`` each, in ``problems``), never opening them with the defaults instead
    (for a compacted topic, the default ``cleanup.policy=delete`` would delete records by
    retention), and creating a partition of the topic is refused with this error. The entry is
    kept as it is in the file. Unlike a ``CheckpointError`` for the file itself (not UTF-8, not
    JSON, a wrong version), which stops the whole directory from opening, the other topics load.
    """


class PolicyViolationError(StorageError):
    """A request the partition's config forbids (Kafka's ``PolicyViolationException``): deleting
    records of a log whose ``cleanup.policy`` does not include delete (``topic``, ``partition``,
    ``cleanup_policy``). Unlike ``UnknownPartitionError`` the partition exists; nothing changed."""


class PartitionMovedError(StorageError):
    """A call names a partition this directory gave away to another log directory by a move
    (``topic``, ``partition``, ``target_dir``). Unlike ``UnknownPartitionError`` the caller's
    route is stale, not wrong: ask again where the partition lives (``target_dir`` is where it
    went) and retry; nothing was appended here."""


class MoveRefusedError(StorageError):
    """A move of ``topic``-``partition`` to ``target_dir`` refused before anything was copied
    (``reason``: ``no-room``, ``same-dir``, ``unknown-dir``, ``being-deleted``, ``already-there``,
    ``in-progress``). Unlike ``MoveAbortedError`` nothing was started; the source serves on."""


class MoveAbortedError(StorageError):
    """A move of ``topic``-``partition`` that started and was abandoned (``reason``): its
    ``-future`` copy was removed and the source still serves every record. Unlike
    ``MoveRefusedError`` work was done and thrown away; the move may be tried again."""


class LogDirNotFoundError(StorageError):
    """A call names a log directory (``log_dir``, an absolute path) that the broker asked does
    not have (Kafka's ``LogDirNotFoundException``, LOG_DIR_NOT_FOUND): a replica move to a
    directory of no broker or of another broker. Unlike ``LogDirOfflineError`` the directory is
    not known at all; unlike ``MoveRefusedError`` nothing about the partition was looked at."""


class CoordinatorRecordError(StorageError):
    """The key or value bytes of one ``__consumer_offsets`` record do not read as Kafka's
    ``GroupCoordinatorRecordSerde`` reads them, or a record cannot be written in its format
    (``part``: ``"key"`` or ``"value"``; ``version``: the record type or value version, None
    when not even the int16 prefix is there; ``reason``: what Kafka's generated reader or writer
    says, e.g. ``"non-nullable field group was serialized as null"``). The message is Kafka's
    ``Could not read record with version <v> from <part>'s buffer due to: <reason>.``

    Raised by ``node.groups.records``. Unlike ``storage.errors.CorruptRecordError`` the batch
    around the record is sound: only this record's key or value is not a coordinator record."""
