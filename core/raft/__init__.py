"""KRaft: the replicated metadata log (single voter today), epochs, quorum state, snapshots."""
