"""The group coordinator: classic and KIP-848 consumer groups and their committed offsets."""
