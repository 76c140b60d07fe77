"""Strata's log cleaner: Kafka's key compaction over ``storage`` logs.

Pure Python + numpy/numba; depends on ``storage`` only and imports neither ray nor pyspark. The
names below load on first use, so importing one small module (``cleaner.explain``,
``cleaner.config``) does not compile or load the cleaning kernels.
"""

from __future__ import annotations

from storage.lazy_exports import lazy_exports

_EXPORTS = {
    "Cleaner": "cleaner.cleaner", "CleanResult": "cleaner.cleaner",
    "CleanerConfig": "cleaner.config", "CleanerManager": "cleaner.manager",
    "OffsetMap": "cleaner.offset_map", "CleanerStats": "cleaner.stats",
    "Throttler": "cleaner.throttler",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
