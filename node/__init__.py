"""One log directory: ``LogDir`` (a plain class, usable and tested without Ray) and
``LogDirServer``, the plain class the node actor wraps (``ray.remote`` is applied in cluster/).

Depends on storage only; imports neither ray nor pyspark. The names below load on first use, so
importing one small module (``node.errors``, ``node.stats``) does not load the whole directory
code and numba with it (a client unpickling a node's answer imports only what that answer is).
"""

from __future__ import annotations

from storage.lazy_exports import lazy_exports

_EXPORTS = {
    "LogDirConfig": "node.config",
    "InvalidLogDirError": "node.errors", "InvalidTopicConfigError": "node.errors",
    "LogDirClosedError": "node.errors",
    "LogDirLockedError": "node.errors", "LogDirOfflineError": "node.errors",
    "PartitionSkippedError": "node.errors", "UnknownPartitionError": "node.errors",
    "LogMap": "node.keys", "PartitionId": "node.keys",
    "LogDir": "node.logdir",
    "InvalidDir": "node.stats", "LoadProgress": "node.stats", "LogDirStats": "node.stats",
    "PartitionProblem": "node.stats", "PartitionStats": "node.stats",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
