"""Strata's storage core: Kafka-compatible segmented logs with indexes, checkpoints and recovery.

Pure Python + numpy/numba; imports neither ray nor pyspark. The names below load on first use, so
importing one small module (``storage.files``) does not pull in numba.
"""

from __future__ import annotations

from storage.lazy_exports import lazy_exports

_EXPORTS = {
    "LogConfig": "storage.config",
    "FetchData": "storage.log", "Log": "storage.log", "LogAppendInfo": "storage.log",
    "Compression": "storage.records", "ControlType": "storage.records", "Record": "storage.records",
    "RecordBatch": "storage.records", "build_batch": "storage.records",
    "build_batch_columns": "storage.records",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
