"""ReplicaManager and Partition: leader/follower state, ISR, high watermark, acks handling."""
