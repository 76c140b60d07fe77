"""Strata's storage core: Kafka-compatible segmented logs with indexes, checkpoints and recovery.

Pure Python + numpy/numba; imports neither ray nor pyspark.
"""

from storage.config import LogConfig
from storage.log import FetchData, Log, LogAppendInfo
from storage.records import Compression, Record, RecordBatch, build_batch, build_batch_columns

__all__ = ["Compression", "FetchData", "Log", "LogAppendInfo", "LogConfig", "Record", "RecordBatch",
           "build_batch", "build_batch_columns"]
