"""Save modes of `df.write.format("odradek")`: the ones Spark's Kafka sink accepts.

Spark's Kafka sink accepts Append and ErrorIfExists (the default, so `df.write.format("kafka").save()`
works without `.mode(...)`) and refuses Overwrite and Ignore. Spark itself refuses ErrorIfExists
and Ignore for every Python data source before the source is asked, so `accept_kafka_save_modes`
wraps PySpark's `DataFrameWriter.save` once per process: for the `odradek` format only, ErrorIfExists
becomes Append and Overwrite / Ignore are refused with one line naming the mode; every other format
goes through untouched.

Invariant: idempotent (the wrapper is installed once). Applies to classic PySpark; under Spark
Connect write with `.mode("append")`. Callers: odradek.spark.register.
"""

from __future__ import annotations

import functools
from typing import Any

from pyspark.sql.readwriter import DataFrameWriter

from odradek.spark.options import OptionError

_MARK = "_odradek_save_modes"


def accept_kafka_save_modes() -> None:
    """Install the `save` wrapper on PySpark's DataFrameWriter (once)."""
    original = DataFrameWriter.save
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def save(
        self: DataFrameWriter,
        path: str | None = None,
        format: str | None = None,
        mode: str | None = None,
        partitionBy: Any = None,
        **options: Any,
    ) -> None:
        if format is not None:
            self.format(format)
        if mode is not None:
            self.mode(mode)
        if str(self._jwrite.source()).lower() == "odradek":
            _settle_mode(self)
        return original(self, path, None, None, partitionBy, **options)

    setattr(save, _MARK, True)
    DataFrameWriter.save = save  # type: ignore[method-assign]


def _settle_mode(writer: DataFrameWriter) -> None:
    mode = str(writer._jwrite.curmode().toString())
    if mode == "ErrorIfExists":
        writer.mode("append")
    elif mode != "Append":
        raise OptionError(
            f"save mode {mode} is not allowed for odradek: allowed save modes are Append and"
            " ErrorIfExists (default), as for Spark's Kafka sink"
        )
