"""The bundled Kafka-wire-compatible broker (KRaft combined mode)."""
