"""The wire layer on top of kio: request framing and schema checks (``codec``, ``frame_check``),
version-independent response building (``messages``), hand-written Produce/Fetch response
encoders, the request fuzzer, and the schema-driven codec of the messages strom keeps on disk
(``message_codec``: raft control records, metadata and coordinator records). The supported API
versions are not a table here: ApiVersions advertises the handler registry
(:mod:`strom.core.server.handlers`). Kafka's error codes are
exception classes in :mod:`strom.core.errors`."""
