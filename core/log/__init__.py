"""Storage engine: LogSegment -> Log -> LogManager, indexes, checkpoints, recovery, retention, compaction."""
