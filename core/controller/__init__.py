"""QuorumController: turns admin requests into metadata records, appends them to raft, replays them."""
