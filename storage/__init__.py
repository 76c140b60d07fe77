"""Strata's storage core: Kafka-compatible segmented logs with indexes, checkpoints and recovery.

Pure Python + numpy/numba; imports neither ray nor pyspark.
"""
