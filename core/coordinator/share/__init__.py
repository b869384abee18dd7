"""Share groups (KIP-932): the share-partition state machine and the share coordinator's state.

``share_partition`` is Kafka's ``SharePartition`` without I/O: which records of one
topic-partition a share group has in flight, who holds them and until when, how often each was
delivered. ``state_records`` is the durable form of that state (``__share_group_state``'s
ShareSnapshot / ShareUpdate records, keyed as Kafka keys them).
"""
