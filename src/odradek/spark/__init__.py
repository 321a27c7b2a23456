"""odradek.spark: a PySpark (4.x) data source and sink named `odradek`, batch and streaming.

`register(spark)` makes `spark.read.format("odradek")`, `spark.readStream.format("odradek")`,
`df.write.format("odradek")` and `df.writeStream.format("odradek")` available, with the schema and the
options of Spark's Kafka source and sink (see docs/spark.md). pyspark and pyarrow (the `spark` extra)
are imported only when `register` is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Register the `odradek` data source with `spark`."""
    from odradek.spark.source import OdradekDataSource

    spark.dataSource.register(OdradekDataSource)
