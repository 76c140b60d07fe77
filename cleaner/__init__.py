"""Strata's log cleaner: Kafka's key compaction over ``storage`` logs.

Pure Python + numpy/numba; depends on ``storage`` only and imports neither ray nor pyspark.
"""

from cleaner.cleaner import Cleaner, CleanResult
from cleaner.config import CleanerConfig
from cleaner.manager import CleanerManager
from cleaner.offset_map import OffsetMap
from cleaner.stats import CleanerStats
from cleaner.throttler import Throttler

__all__ = ["CleanResult", "Cleaner", "CleanerConfig", "CleanerManager", "CleanerStats", "OffsetMap", "Throttler"]
