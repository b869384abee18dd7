"""strom's tiered storage (KIP-405): the remote tier behind the broker's storage-tier hook.

* :mod:`strom.tiered.object_storage` — the object stores a remote storage manager writes to:
  S3 (boto3) and a local directory, under Aiven's ``storage.backend.class`` names.
* :mod:`strom.tiered.chunk_manifest` — Aiven's chunk index and segment manifest (``.rsm-manifest``).
* :mod:`strom.tiered.chunked_rsm` — the chunked RemoteStorageManager with Aiven's keys and object
  layout; the built-in ``s3`` plugin (:mod:`strom.plugins.builtin.s3_tier`) builds it.
* :mod:`strom.tiered.remote_log_metadata_serde` — the records of ``__remote_log_metadata``, byte
  for byte Kafka's, and Kafka's partitioner of that topic.
* :mod:`strom.tiered.remote_log_metadata_cache` — one partition's remote segments and their states.
* :mod:`strom.tiered.topic_based_rlmm` — the topic-based RemoteLogMetadataManager; the built-in
  ``topic-based`` plugin (:mod:`strom.plugins.builtin.topic_based_rlmm`) builds it.
* :mod:`strom.tiered.remote_log_manager` — the copy path of Kafka's RemoteLogManager, over a
  read-only :class:`~strom.tiered.remote_log_manager.TieredLog` view of a partition.

Everything here blocks (network and file I/O): the broker calls it from worker threads.
"""
