"""The transaction coordinator: transactional ids, two-phase commit over ``__transaction_state``."""
