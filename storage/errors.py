"""Typed errors of the storage layer.

Every error carries structured fields (file, position, offset, key, setting) and survives pickling,
because Ray re-raises it in another process: each class passes all of its fields to
``Exception.__init__`` through ``__reduce__``.
"""

from __future__ import annotations

from typing import Any


class StorageError(Exception):
    """Base class of every error raised by ``storage``.

    Catch this to handle any storage failure; catch a subclass to handle one kind.
    """

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields
        for name, value in fields.items():
            setattr(self, name, value)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self.fields))

    def __str__(self) -> str:
        return self.message


def _rebuild(cls: type[StorageError], message: str, fields: dict[str, Any]) -> StorageError:
    err = cls.__new__(cls)
    StorageError.__init__(err, message, **fields)
    return err


class CorruptRecordError(StorageError):
    """Bytes that should hold a record batch do not: bad CRC, impossible size, truncated record.

    Raised by decoders and by validation of appended batches. Unlike ``InvalidRecordError`` the
    bytes themselves are damaged; ``path`` and ``position`` say where when the bytes came from a file.
    """


class InvalidRecordError(StorageError):
    """A well-formed batch that this log must refuse: a keyless record for a compacted topic,
    a control batch from a client, a record that breaks an offset or timestamp rule.
    """


class OutOfOrderSequenceError(InvalidRecordError):
    """A batch whose first sequence does not follow the producer's last one (a gap)."""


class InvalidProducerEpochError(InvalidRecordError):
    """A batch or marker from an epoch older than the producer's current epoch (a fenced
    producer)."""


class InvalidTxnStateError(InvalidRecordError):
    """A non-transactional batch from a producer whose transaction is still open (Kafka's
    InvalidTxnStateException); unlike a sequence error, the sequence itself is fine."""


class TransactionCoordinatorFencedError(InvalidRecordError):
    """A commit or abort marker whose coordinator epoch is older than the last one this partition
    saw for the producer: a zombie transaction coordinator (Kafka's
    TransactionCoordinatorFencedException)."""


class RecordTooLargeError(StorageError):
    """A batch larger than ``max.message.bytes`` or than ``segment.bytes``."""


class InvalidOffsetError(StorageError):
    """An offset that breaks ordering: an index entry not above the last one, an append whose
    offsets are not above the log end, a segment that would overflow its 32-bit relative offsets.
    Also an offset argument that is not an integer offset at all (``truncate_to(0.5)``, a
    negative target): ``argument`` names it. Unlike ``OffsetOutOfRangeError`` the log's state
    does not matter: the value is refused before anything is read or changed.
    """


class SegmentOffsetOverflowError(InvalidOffsetError):
    """A valid batch of a segment whose offsets lie beyond ``base offset + 2**31 - 1`` (written by
    brokers before Kafka 0.11, or by their cleaners). Recovery splits the segment instead of
    truncating it (``storage.split``)."""


class OffsetOutOfRangeError(StorageError):
    """A read from an offset below the log start offset or above the log end offset."""


class CorruptIndexError(StorageError):
    """An offset or time index that fails its sanity check. The loader rebuilds the index from the
    segment instead of trusting it; the segment data is untouched.
    """


class CheckpointError(StorageError):
    """A checkpoint file with a wrong version, a malformed line or a count that does not match."""


class InvalidConfigError(StorageError):
    """A configuration value outside its range; ``key`` names the Kafka setting."""


class InvalidTopicError(StorageError):
    """A topic name, partition number or partition directory name that does not follow Kafka's
    rules (``storage.files.validate_topic``, ``validate_partition``): ``topic`` and
    ``partition``, or ``directory``, name it. Raised before anything is written."""


class LogDirOfflineError(StorageError):
    """The log directory went offline after an I/O error; every later call fails fast with this."""


class LogCleaningAbortedError(StorageError):
    """A clean was aborted (truncation, deletion, shutdown) before it swapped anything in."""


class InvalidSegmentFileError(StorageError):
    """An entry of a partition directory named like a segment file that the loader cannot use: a
    base offset outside int64 or a name that is not 20 digits, a directory, FIFO or socket under a
    segment name, a symlink loop, a file this process may not read and write. ``path`` names the
    entry and ``reason`` says what is wrong. A log directory skips the partition (it is reported,
    never loaded or changed) instead of failing as a whole."""


class SegmentsChangedError(LogCleaningAbortedError):
    """A swap of cleaned segments refused because a segment they were cleaned from is no longer
    the one the cleaner read: truncated (even if regrown to the same size), deleted or replaced
    since (``partition``, ``offset`` = the cleaned segment's base, ``changed`` = the base offsets
    that changed). The cleaned files are deleted and the log is untouched. Unlike its parent,
    nobody asked the clean to stop: the log's owner found out at the swap; like it, the clean is
    simply abandoned (it says nothing against the partition) and the next one starts afresh.
    """
