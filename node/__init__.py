"""One log directory: ``LogDir`` (a plain class, usable and tested without Ray) and
``LogDirServer``, the plain class the node actor wraps (``ray.remote`` is applied in cluster/).

Depends on storage only; imports neither ray nor pyspark.
"""

from node.config import LogDirConfig
from node.errors import (
    InvalidLogDirError,
    LogDirClosedError,
    LogDirLockedError,
    LogDirOfflineError,
    PartitionSkippedError,
    UnknownPartitionError,
)
from node.keys import LogMap, PartitionId
from node.logdir import LogDir
from node.stats import InvalidDir, LoadProgress, LogDirStats, PartitionProblem, PartitionStats

__all__ = [
    "InvalidDir",
    "InvalidLogDirError",
    "LoadProgress",
    "LogDir",
    "LogDirClosedError",
    "LogDirConfig",
    "LogDirLockedError",
    "LogDirOfflineError",
    "LogDirStats",
    "LogMap",
    "PartitionId",
    "PartitionProblem",
    "PartitionSkippedError",
    "PartitionStats",
    "UnknownPartitionError",
]
