"""odradek.pipeline: the demo data pipeline on Spark (`python -m odradek.pipeline --bootstrap-server ...`).

`generator` produces web-activity events keyed by user id; `load` is the exactly-once offline load
into a Parquet warehouse table partitioned by date (offsets stored with the data); `feed` is the
streaming job deriving page views per user per minute into another topic. Needs the `spark` extra.
"""
