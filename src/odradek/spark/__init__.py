"""odradek.spark: a PySpark (4.x) data source and sink named `odradek`, batch and streaming.

`register(spark)` makes `spark.read.format("odradek")`, `spark.readStream.format("odradek")`,
`df.write.format("odradek")` and `df.writeStream.format("odradek")` available, with the schema and the
options of Spark's Kafka source and sink (see docs/spark.md). It also
- lets `df.write.format("odradek").save()` run in the default save mode, as Spark's Kafka sink does
  (odradek.spark.save_mode);
- makes `load()` refuse what is wrong for a batch or for a stream (and a user-given schema), as
  Spark's Kafka source does when the DataFrame is created (odradek.spark.load_checks);
- with `one_line_errors` (the default), sets the session's
  `spark.sql.execution.pyspark.udf.hideTraceback.enabled`, so an error raised by the source or sink
  (a refused option, data loss) reaches the user as one line, `OptionError: option 'x' ...`, instead
  of the last line of a Python worker traceback. The setting applies to the session's Python UDFs
  too; pass `one_line_errors=False` to keep tracebacks.
pyspark and pyarrow (the `spark` extra) are imported only when `register` is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HIDE_TRACEBACK = "spark.sql.execution.pyspark.udf.hideTraceback.enabled"


def register(spark: SparkSession, *, one_line_errors: bool = True) -> None:
    """Register the `odradek` data source with `spark`."""
    from odradek.spark.load_checks import check_reads_at_load
    from odradek.spark.save_mode import accept_kafka_save_modes
    from odradek.spark.source import OdradekDataSource

    spark.dataSource.register(OdradekDataSource)
    accept_kafka_save_modes()
    check_reads_at_load()
    if one_line_errors:
        spark.conf.set(HIDE_TRACEBACK, "true")
