"""Typed errors of the cluster layer. Like every storage error they carry structured fields and
survive pickling (``storage.errors.StorageError``), because they cross Ray process boundaries."""

from __future__ import annotations

from storage.errors import StorageError


class ActorUnavailableError(StorageError):
    """A Strata actor (``actor`` names it) could not answer: its process died, it is restarting,
    or it was never started. Raised by the handle classes in place of Ray's own actor errors.
    Unlike an error raised *by* the actor's code (a ``LogDirOfflineError``, a corrupt batch), the
    call may or may not have run: an append that fails this way may have been stored."""


class ClusterNotRunningError(StorageError):
    """``Cluster.connect`` found no Ray cluster, or no Strata coordinator in the namespace."""


class UnknownTopicError(StorageError):
    """The cluster holds no partition ``topic``-``partition`` (or no topic ``topic`` at all)."""


class PartitionPausedError(StorageError):
    """A clean was requested of a partition whose cleaning is paused (``operator_pauses`` of its
    ``pauses`` taken through ``pause_cleaning``, the others by truncation, deletion, a directory
    move or retention): no clean can start until every pause is released."""


class SparkWorkerPythonError(StorageError):
    """``cluster.spark.register``: the interpreter Spark starts its Python workers with
    (``python``) cannot import what the data sources need."""


class TopicExistsError(StorageError):
    """``create_topic`` of a topic that already has partitions in the cluster."""


class InvalidPartitionsError(StorageError):
    """``add_partitions`` asked for a count that is not an increase (Kafka's
    ``InvalidPartitionsException``): ``topic``, ``current`` and ``requested``. Nothing changed."""
