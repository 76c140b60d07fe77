"""The ``strata`` data source: write a DataFrame into a topic, read a topic back, stream from it.

    df.write.format("strata").option("topic", "orders").mode("append").save()
    spark.read.format("strata").option("topic", "orders").load()      # cluster.spark.reader
    spark.readStream.format("strata").option("topic", "orders").load()   # cluster.spark.stream

``StrataDataSource`` is the entry Spark sees; it hands a batch write to ``cluster.spark.writer``,
a batch read to ``cluster.spark.reader``, a stream read to ``cluster.spark.stream`` and a
streaming write to ``cluster.spark.sink``. Options: ``cluster.spark.options``; every option given
is checked against its table, so none is ignored.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
)
from pyspark.sql.types import StructType

from cluster.spark import options as opts
from cluster.spark.connection import settle_heap
from cluster.spark.errors import SourceOptionError
from cluster.spark.reader import StrataReader, check_read_schema
from cluster.spark.writer import StrataWriter, plan_write

# The reader's and the writer's heavy parts (numba, the storage engine, the encoders) are loaded
# where they are used: this module is imported by every planner process that unpickles the data
# source (a streaming query starts one per query, and waits for it), and only tasks need them.


class StrataDataSource(DataSource):
    """``format("strata")``: a topic of a running Strata cluster as a Spark table.

    Contract: every option is checked against ``cluster.spark.options.KNOWN_OPTIONS`` before any
    work (an unknown, unsupported or misplaced option raises ``SourceOptionError`` naming it).
    Reads (batch and stream) are ``read_committed`` by default and end at the last stable offset;
    a batch write is one transaction per job (all of its rows visible, or none); a streaming
    write is exactly once per micro-batch. The schema is ``READ_DDL`` (or the msgpack columns of
    ``valueSchema``); a schema given with ``.schema(...)`` picks columns of it, and only those
    are decoded (``check_read_schema``).
    """

    spark_parallelism: int | None = None
    """Spark's default parallelism when ``register`` ran (``for_session``): the number of tasks a
    read groups its topic partitions into (``cluster.spark.read_tasks``). None: one task per topic
    partition."""

    @classmethod
    def name(cls) -> str:
        return "strata"

    @classmethod
    def for_session(cls, parallelism: int | None) -> type[StrataDataSource]:
        """This data source as ``register`` hands it to a session whose default parallelism is
        ``parallelism``. The subclass is pickled by value (it is no module's attribute), so the
        Python processes that plan a read see the number."""
        return type(cls.__name__, (cls,), {"__module__": cls.__module__,
                                           "__qualname__": f"{cls.__qualname__}.for_session",
                                           "spark_parallelism": parallelism})

    def schema(self) -> str:
        from cluster.spark.decoding import READ_DDL

        settle_heap()          # the planner process that asks has just imported this module
        if opts.value_format(self.options) == "msgpack":
            fixed = READ_DDL.replace(", value BINARY", "")
            head, tail = fixed.split(", headers ")
            return f"{head}, {opts.value_schema(self.options)}, headers {tail}"
        return READ_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        reader = StrataReader(dict(self.options), schema, self.spark_parallelism)
        check_read_schema(schema, reader.settings.value_format, reader.topic)
        return reader

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from cluster.spark.stream import StrataStreamReader

        reader = StrataStreamReader(dict(self.options), schema, self.spark_parallelism)
        check_read_schema(schema, reader.settings.value_format, reader.topic)
        return reader

    def writer(self, schema: StructType, overwrite: bool) -> StrataWriter:
        if overwrite:
            raise SourceOptionError("a topic is an append-only log: use .mode('append'), not "
                                    "overwrite", option="mode")
        return StrataWriter(plan_write(dict(self.options), schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from cluster.spark.sink import stream_writer

        return stream_writer(dict(self.options), schema, overwrite)
