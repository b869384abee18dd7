"""The share-group data path (KIP-932): share sessions, the share-partition manager, ShareFetch waits."""
