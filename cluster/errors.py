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


class MissingLogDirError(StorageError):
    """A start that does not give every log directory the cluster knows (``missing``: path ->
    node id, from the directories' ``cluster-log-dirs``), refused unless told to go on; or,
    after such a start, the creation of a partition, refused because it might live in a missing
    directory (a second copy would be created beside the real one). Unlike
    ``ForeignLogDirError`` nothing is wrong with the directories given, one is absent."""


class ForeignLogDirError(StorageError):
    """A start whose directories do not all belong to one cluster: their ``meta.properties``
    name different ``cluster.id``s (``clusters``: cluster id -> directories), or two of them
    carry the same ``directory.id`` (one is a copy of the other). Always refused, as Kafka
    refuses an "Invalid cluster.id" or a "Duplicate directory ID"."""


class DuplicatePartitionError(StorageError):
    """One partition (``topic``, ``partition``) held by two or more log directories (``dirs``):
    a crash between a move's commit and the removal of its source, or a directory of a start
    without it that was given again. Refused at start, as Kafka's ``LogManager.loadLog``
    refuses "Duplicate log directories"; the partition is routed to none of them until one copy
    is removed."""


class UnknownLogDirError(StorageError):
    """A call named a log directory (``log_dir``) that is not one of the cluster's
    (``log_dirs``): nothing was done."""


class NodeRestartError(StorageError):
    """``Cluster.restart_node``: the node of ``log_dir`` did not come back serving within
    ``timeout_s`` (its process did not restart, or its directory did not finish loading).
    Unlike a directory that loaded and is still offline (a restart's result, not an error),
    nothing is known of the new process."""


class ListenerBindError(StorageError):
    """A node actor could not start the Kafka listener of its directory (``directory``; ``key``
    and ``value``: the ``listeners`` setting it was given, after the port rule, or the ``ssl.*``
    key naming a TLS store): the port is taken, the host is not this machine's, or the TLS key
    store cannot be read on the directory's host. The cluster start that asked for it is undone.
    Unlike ``InvalidConfigError`` the setting is well formed; the machine refused it."""
