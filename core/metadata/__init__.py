"""MetadataImage/MetadataDelta built by replaying committed metadata records; publishers."""
