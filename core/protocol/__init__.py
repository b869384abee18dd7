"""Request/response codecs on top of kio, API version table, error-code mapping."""
