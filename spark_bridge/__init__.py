"""PySpark Python data source for Kafka topics (later issue)."""
