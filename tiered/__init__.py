"""Remote log manager and S3 RemoteStorageManager (later issue)."""
