"""Group and transaction coordinators (later issue)."""
