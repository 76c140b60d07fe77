"""Typed errors of the Spark data sources. They reach the user inside Spark's own exception (a
``PythonException`` or ``AnalysisException`` whose message holds ours), so every message names the
topic, column, row or option at fault and says what to do.

Errors of the cluster keep their own types: ``UnknownTopicError`` (no such topic),
``ClusterNotRunningError`` (no Ray cluster at the address, or no Strata cluster in the namespace).
"""

from __future__ import annotations

from storage.errors import StorageError


class SourceOptionError(StorageError):
    """An option of ``strata`` / ``strata-stats`` that is missing or cannot be parsed (``option``
    names it). Raised while Spark plans the query, before any data moves."""


class WriteRejectedError(StorageError):
    """A DataFrame (or one of its rows) that cannot be written to the topic as it is: no ``key``
    column for a compacted topic, a null key there, a ``value`` column beside other data columns, a
    partition out of range, a record larger than ``max.message.bytes``. Unlike
    ``SourceOptionError`` the options are fine and the data is not. Raised before the offending
    batch is sent, so nothing of it is stored; batches sent before it stay stored (and are dropped
    as duplicates if the same write is run again by a Spark retry)."""


class ValueDecodeError(StorageError):
    """A stored value that the read's ``valueFormat`` cannot decode (``topic``, ``partition`` and
    ``offset`` name the record)."""


class DataLossError(StorageError):
    """A read asked for offsets of a partition that are gone: below its log start offset
    (retention or delete-records removed them), or above its log end (the partition was truncated
    or re-created). Raised with ``failOnDataLoss=true`` (the default, as in Kafka's source);
    ``failOnDataLoss=false`` reads from the log start instead and logs a warning. ``topic``,
    ``partition``, ``requested_offset``, ``log_start_offset`` and ``log_end_offset`` say where."""
