"""The sans-IO Kafka protocol: bytes in, objects out; no sockets, files or event loops.

Modules: `primitives` (wire types, `Reader`/`Writer`, `FileSlice`, decode/encode errors), `schema`
(message spec shapes), `messages` (generated dataclasses and specs of every Kafka 3.9 API),
`codec` (compiled encoders/decoders), `headers` (request/response headers and their versions),
`api_keys` (API keys and version ranges), `errors` (error codes, `KafkaError`), `records`
(RecordBatch v2). Import the submodule you need; this package imports nothing eagerly.
"""
